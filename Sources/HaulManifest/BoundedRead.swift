#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A whole file's bytes, but never more than a bound: the manifest and the config file are read this way, and
/// `/dev/zero` (or a hostile file) must not make haul read and hold without end.
package enum BoundedRead {
    package enum Failure: Error {
        /// A system call failed; its errno.
        case system(Int32)
        /// There was more than the bound: reading stopped there.
        case tooLarge

        /// The file does not exist (a folder on its path neither).
        package var isMissing: Bool {
            guard case .system(let code) = self else { return false }
            return code == ENOENT || code == ENOTDIR
        }

        /// The errno to report: EFBIG for more bytes than the bound.
        package var errno: Int32 {
            switch self {
            case .system(let code): code
            case .tooLarge: EFBIG
            }
        }
    }

    /// Everything up to end of file, or `.tooLarge` as soon as there is more than `limit`. `sizeHint` (a regular
    /// file's size) reserves room once.
    package static func all(_ descriptor: Int32, limit: Int, sizeHint: Int = 0) -> Result<[UInt8], Failure> {
        var bytes: [UInt8] = []
        if sizeHint > 0 { bytes.reserveCapacity(min(sizeHint, limit + 1)) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return .success(bytes) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(.system(errno))
            }
            guard bytes.count + count <= limit else { return .failure(.tooLarge) }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// A whole file by path (opened read-only, never more than `limit` bytes). `.system(ENOENT or ENOTDIR)`:
    /// there is no such file, which `isMissing` says.
    package static func file(_ path: String, limit: Int) -> Result<[UInt8], Failure> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(.system(errno)) }
        defer { close(descriptor) }
        return all(descriptor, limit: limit)
    }
}
