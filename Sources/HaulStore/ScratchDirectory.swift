import Glibc
import HaulFileSystem

/// A private directory outside any root, for what `haul add` downloads until it is measured and thrown away or put
/// in place: mode 0700 under `$TMPDIR`, so nobody else reads the bytes meanwhile.
package struct ScratchDirectory: Sendable {
    package let path: String
    /// The folder, held open from the moment it was made.
    package let folder: DirectoryHandle

    /// `$TMPDIR/<prefix>.XXXXXX` (`/tmp` when TMPDIR is unset or empty).
    package static func make(prefix: String) throws(StoreError) -> ScratchDirectory {
        var base = getenv("TMPDIR").map { String(cString: $0) } ?? ""
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        if base.isEmpty { base = "/tmp" }
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } != nil }
        guard made else { throw StoreError(operation: "create a temporary directory in", path: base, errno: errno) }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch DirectoryHandle.open(path) {
        case .success(let folder): return ScratchDirectory(path: path, folder: folder)
        case .failure(let failure):
            _ = rmdir(path)
            throw StoreError(operation: "open", path: path, errno: failure.errno)
        }
    }

    /// Whatever was left in it (a measured file, a partial one after a failure, folders of kept files), then the
    /// directory.
    package func remove() {
        Self.empty(folder)
        _ = rmdir(path)
    }

    private static func empty(_ folder: DirectoryHandle) {
        for name in folder.names() ?? [] {
            if case .success(let info) = folder.status(of: name), info.st_mode & S_IFMT == S_IFDIR,
               case .success(let inner) = folder.subdirectory(name) {
                empty(inner)
                _ = name.withCString { unlinkat(folder.descriptor, $0, AT_REMOVEDIR) }
            } else {
                folder.remove(name)
            }
        }
    }
}
