import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Reading and writing haul's own files in `<root>/.haul` (the state, the journal, the key) whole, by name relative
/// to the private folder's descriptor. Reading never takes more than a bound: these files are haul's, but anyone
/// who can write `.haul` (a CI cache restored from elsewhere) can make one a sparse 64 GiB file, which must cost a
/// warning, not the memory to hold it.
enum PrivateFile {
    /// What reading one of them gave.
    enum Contents {
        /// There is no such file.
        case missing
        /// Its bytes, and its identity when they were read (the state's mtime is when its records were recorded).
        case bytes([UInt8], FileIdentity?)
        /// More than the bound: not read (`size`: what `fstat` said, or the bound plus one for a file that grew).
        case tooLarge(size: Int64)
        case unreadable(SystemError)
    }

    /// The whole of `name` in `folder`, if it is at most `limit` bytes. Its size is looked at before anything is
    /// read, and reading stops past the bound however the file grows meanwhile.
    static func read(_ name: String, in folder: DirectoryHandle, limit: Int) -> Contents {
        let descriptor: Int32
        switch folder.openRegularFileForReading(name) {
        case .success(let opened): descriptor = opened
        case .failure(let failure) where failure.errno == ENOENT: return .missing
        case .failure(let failure): return .unreadable(failure)
        }
        defer { close(descriptor) }
        var info = stat()
        let identity = fstat(descriptor, &info) == 0 ? FileIdentity(info) : nil
        if let size = identity?.size, size > limit { return .tooLarge(size: size) }
        // Room for the whole file at once: grown by doubling, an 18 MB state would be reallocated and copied a
        // dozen times.
        switch BoundedRead.all(descriptor, limit: limit, sizeHint: Int(identity?.size ?? 0)) {
        case .success(let bytes): return .bytes(bytes, identity)
        case .failure(.tooLarge): return .tooLarge(size: Int64(limit) + 1)
        case .failure(.system(let code)):
            return .unreadable(SystemError(errno: code, path: folder.displayPath(of: name)))
        }
    }

    /// Writes all of `bytes` at the descriptor's offset; the errno of a failed write (EIO for one that wrote
    /// nothing without saying why), nil once every byte is written.
    static func write(_ bytes: [UInt8], to descriptor: Int32) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return written == 0 ? EIO : errno }
            offset += written
        }
        return nil
    }
}
