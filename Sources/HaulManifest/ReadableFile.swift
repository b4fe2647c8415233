import Glibc
import HaulFileSystem

/// Whether a file haul hands to libcurl by name (a client certificate or key, from the manifest or the command
/// line) can be read, checked before any request: libcurl would say only "could not load client certificate" at
/// the first handshake, naming no file.
package enum ReadableFile {
    /// Why `path` cannot be read (missing, a folder, no permission, empty), or nil.
    package static func problem(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return describe(errno) }
        defer { close(descriptor) }
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count < 0, errno == EINTR { continue }
            if count < 0 { return describe(errno) }
            return count == 0 ? "the file is empty" : nil
        }
    }

    /// Why a file could not be opened or read: "no such file", or the system's words.
    package static func describe(_ code: Int32) -> String {
        code == ENOENT ? "no such file" : Errno(code).description
    }
}
