import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem

/// Hashes files already on disk, for the observer (is the destination already right?) and for callers that
/// verify a file after the fact.
package enum FileDigester {
    /// Large enough that a big file costs few syscalls, small enough to stay in L2 next to the hash state.
    static let chunkSize = 1 << 20

    /// Opens with O_NOFOLLOW so that a destination swapped for a symlink after it was observed is never read
    /// through, and reports the number of bytes actually hashed (the file may have changed since any stat).
    package static func digest(
        path: String, algorithm: DigestAlgorithm
    ) throws(StoreError) -> (size: Int64, digest: Digest) {
        guard let buffer = ReadBuffer.allocate(chunkSize) else {
            throw StoreError(operation: .read, path: path, errno: ENOMEM)
        }
        defer { ReadBuffer.free(buffer) }
        return try digest(path: path, algorithm: algorithm, buffer: buffer, displayPath: path)
    }

    /// The observer's entry point: one reused buffer per worker thread instead of a 1 MiB allocation per file,
    /// and errors that name the destination as the user wrote it.
    static func digest(
        path: String, algorithm: DigestAlgorithm, buffer: UnsafeMutableRawBufferPointer,
        displayPath: @autoclosure () -> String
    ) throws(StoreError) -> (size: Int64, digest: Digest) {
        // O_NONBLOCK: a FIFO swapped in after lstat must not hang the observer in open(2); no effect on files.
        let fd = path.withCString { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) }
        guard fd >= 0 else { throw StoreError(operation: .open, path: displayPath(), errno: errno) }
        defer { close(fd) }

        var info = stat()
        guard fstat(fd, &info) == 0 else { throw StoreError(operation: .inspect, path: displayPath(), errno: errno) }
        let kind = FileKind(info)
        guard kind == .regular else {
            throw StoreError(
                operation: .read, path: displayPath(), errno: kind == .directory ? EISDIR : EINVAL,
                problem: .notARegularFile)
        }
        // One more syscall per file is pure cost when a single read covers it (the common small-file case).
        if info.st_size > Int64(buffer.count) { _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL) }

        guard let hasher = StreamingHasher(algorithm) else {
            throw StoreError(operation: .hash, path: displayPath(), errno: ENOMEM)
        }
        var total: Int64 = 0
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count > 0 {
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                total += Int64(count)
            } else if count == 0 {
                break
            } else {
                let code = errno
                if code == EINTR { continue }
                throw StoreError(operation: .read, path: displayPath(), errno: code)
            }
        }
        return (total, hasher.finalize())
    }
}
