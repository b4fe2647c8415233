import Dispatch
import Glibc
import HaulFileSystem
import HaulDigest
import Synchronization

/// Hashes a file while it is being written, on its own queue, by reading back what the writer has already put
/// in the page cache.
///
/// Hashing in libcurl's write callback caps one stream at the speed of SHA-256 on one core, serially with the
/// receive. Trailing the writer instead lets the two run on two cores, and the file itself is the buffer between
/// them: memory use does not grow with the file, and the writer never waits for the hash.
final class TrailingHasher: Sendable {
    private let queue = DispatchQueue(label: "haul.hash")
    private let descriptor: Int32
    private let state: Mutex<State>

    private struct State {
        var hasher: StreamingHasher
        var hashed: Int64 = 0
        var buffer: [UInt8]
        var failure: Int32?
    }

    /// Below this many bytes ahead of the hash, the writer does not bother waking the worker.
    private static let wakeStep: Int64 = 4 << 20
    private static let chunk = 1 << 20

    /// - Parameter file: the file the writer is writing; opened here for reading.
    init?(file: StagedFile, algorithm: DigestAlgorithm) {
        guard case .success(let descriptor) = file.open(O_RDONLY) else { return nil }
        self.descriptor = descriptor
        self.state = Mutex(State(hasher: StreamingHasher(algorithm), buffer: [UInt8](repeating: 0, count: Self.chunk)))
    }

    deinit { close(descriptor) }

    /// Called by the writer after each write; cheap unless the hash has fallen `wakeStep` behind.
    func written(upTo end: Int64, lastWake: inout Int64) {
        guard end - lastWake >= Self.wakeStep else { return }
        lastWake = end
        queue.async { self.hash(upTo: end) }
    }

    /// Hashes whatever remains up to `end` and hands the digest (or the read error's errno) to `completion`,
    /// on the hasher's queue.
    func finish(at end: Int64, completion: @escaping @Sendable (Result<Digest, ReadFailure>) -> Void) {
        queue.async {
            self.hash(upTo: end)
            let result: Result<Digest, ReadFailure> = self.state.withLock { state in
                if let code = state.failure { return .failure(ReadFailure(errno: code)) }
                guard state.hashed == end else { return .failure(ReadFailure(errno: EIO)) }
                return .success(state.hasher.finalize())
            }
            completion(result)
        }
    }

    struct ReadFailure: Error { var errno: Int32 }

    private func hash(upTo end: Int64) {
        state.withLock { state in
            while state.failure == nil && state.hashed < end {
                let wanted = Int(min(Int64(Self.chunk), end - state.hashed))
                let offset = state.hashed
                let count = state.buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, off_t(offset)) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    state.failure = count < 0 ? errno : EIO
                    return
                }
                state.buffer.withUnsafeBytes { state.hasher.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                state.hashed += Int64(count)
            }
        }
    }
}
