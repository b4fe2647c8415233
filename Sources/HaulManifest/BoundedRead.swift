#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A whole file's bytes, but never more than a bound: the manifest and the config file are read this way, and
/// `/dev/zero` (or a hostile file) must not make haul read and hold without end.
enum BoundedRead {
    enum Failure: Error {
        /// A system call failed; its errno.
        case system(Int32)
        /// There was more than the bound: reading stopped there.
        case tooLarge
    }

    /// Everything up to end of file, or `.tooLarge` as soon as there is more than `limit`. `sizeHint` (a regular
    /// file's size) reserves room once.
    static func all(_ descriptor: Int32, limit: Int, sizeHint: Int = 0) -> Result<[UInt8], Failure> {
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

    /// `strerror`'s text for `code`.
    static func errorText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}
