import Glibc
import HaulDigest
import HaulFileSystem
import HaulThreads
import Synchronization

/// Hashes a file while it is being written, on a thread of its own, so that the hash and the receive run on two
/// cores: hashing in libcurl's write callback caps one stream at the speed of SHA-256 on one core, serially with
/// the receive.
///
/// The writer hands over a copy of what it writes, a block at a time: reading the bytes back from the page cache
/// instead cost a second trip through the kernel for every byte (about 0.2 CPU-seconds per GiB, measured over
/// HTTP/2 + TLS, where the client's CPU is what limits). Memory stays bounded: once `budget` bytes wait to be
/// hashed, further bytes are not copied, and the hasher reads them back from the file, which is then the buffer
/// between the two. The bytes a file already held (a resumed partial) are always read back.
final class TrailingHasher {
    private let shared: Shared

    /// A block handed over once it is this large.
    private static let blockSize = 1 << 20
    /// At most this many bytes copied and waiting for the hasher.
    private static let budget = 4 << 20
    /// While bytes are left in the file for the hasher, it is woken once this many have been written.
    private static let wakeStep: Int64 = 4 << 20

    /// - Parameter file: the file the writer is writing; opened here for reading. Nil when it cannot be, or no
    ///   thread can be started.
    init?(file: StagedFile, algorithm: DigestAlgorithm) {
        guard case .success(let descriptor) = file.open(O_RDONLY) else { return nil }
        shared = Shared(descriptor: descriptor, algorithm: algorithm)
        guard startDetachedThread({ [shared] in shared.run() }) else {
            close(descriptor)
            return nil
        }
    }

    /// The hash is not wanted any more (the attempt ended otherwise): the thread ends.
    deinit {
        shared.update { state in
            state.abandoned = true
            state.wake = true
        }
    }

    /// Called by the writer right after it wrote `bytes` into the file at `offset`.
    func written(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        shared.update { state in
            let end = offset + Int64(bytes.count)
            defer { state.written = max(state.written, end) }
            if state.pending.isEmpty { state.pendingOffset = offset }
            let contiguous = state.pendingOffset + Int64(state.pending.count) == offset
            guard contiguous, state.queued + state.pending.count + bytes.count <= Self.budget else {
                // Left in the file: the hasher reads these back, woken now and then.
                state.handOverPending()
                if end - state.lastWake >= Self.wakeStep {
                    state.lastWake = end
                    state.wake = true
                }
                return
            }
            // A block goes when the next bytes would not fit: grown past its capacity, it would be copied.
            if state.pending.count + bytes.count > Self.blockSize { state.handOverPending() }
            if state.pending.isEmpty { state.pendingOffset = offset }
            if state.pending.capacity == 0 {
                // A block the hasher is done with: fresh memory would cost a page fault per 4 KiB on first touch.
                state.pending = state.spare.popLast() ?? []
                state.pending.reserveCapacity(Self.blockSize)
            }
            state.pending.append(contentsOf: bytes)
        }
    }

    /// Hashes whatever remains up to `end` and hands the digest (or the read error's errno) to `completion`, on
    /// the hasher's thread.
    func finish(at end: Int64, completion: @escaping @Sendable (Result<Digest, ReadFailure>) -> Void) {
        shared.update { state in
            state.handOverPending()
            state.end = end
            state.completion = completion
            state.wake = true
        }
    }

    struct ReadFailure: Error { var errno: Int32 }

    /// What the writer and the hashing thread share.
    private final class Shared: Sendable {
        let state: Mutex<State>
        let signal = Semaphore()

        init(descriptor: Int32, algorithm: DigestAlgorithm) {
            state = Mutex(State(descriptor: descriptor, algorithm: algorithm))
        }

        func update(_ change: (inout State) -> Void) {
            let wake = state.withLock { state in
                change(&state)
                defer { state.wake = false }
                return state.wake
            }
            if wake { signal.signal() }
        }

        /// The hashing thread: blocks from memory where they continue the hash, bytes from the file where none do,
        /// until the end is reached (or the hash is abandoned).
        func run() {
            var hasher: StreamingHasher?
            var hashed: Int64 = 0
            var readBuffer: [UInt8] = []
            let descriptor = state.withLock { $0.descriptor }
            defer { close(descriptor) }
            while true {
                let next = state.withLock { $0.next(after: hashed) }
                switch next {
                case .wait:
                    signal.wait()
                case .abandon:
                    return
                case .block(var bytes):
                    if hasher == nil { hasher = StreamingHasher(state.withLock { $0.algorithm }) }
                    bytes.withUnsafeBytes { hasher?.update($0) }
                    hashed += Int64(bytes.count)
                    bytes.removeAll(keepingCapacity: true)
                    state.withLock { $0.spare.append(bytes) }
                case .readBack(let upTo):
                    if hasher == nil { hasher = StreamingHasher(state.withLock { $0.algorithm }) }
                    if readBuffer.isEmpty { readBuffer = [UInt8](repeating: 0, count: TrailingHasher.blockSize) }
                    let wanted = Int(min(Int64(readBuffer.count), upTo - hashed))
                    let count = readBuffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, off_t(hashed)) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { return finish(.failure(ReadFailure(errno: count < 0 ? errno : EIO))) }
                    readBuffer.withUnsafeBytes { hasher?.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                    hashed += Int64(count)
                case .done:
                    let digest = (hasher ?? StreamingHasher(state.withLock { $0.algorithm })).finalize()
                    return finish(.success(digest))
                }
            }
        }

        private func finish(_ result: Result<Digest, ReadFailure>) {
            state.withLock { $0.completion }?(result)
        }
    }

    private struct State {
        let descriptor: Int32
        let algorithm: DigestAlgorithm
        /// The block the writer is filling, and where it starts in the file.
        var pending: [UInt8] = []
        var pendingOffset: Int64 = 0
        /// Blocks handed over, in file order, and their bytes.
        var blocks: [(offset: Int64, bytes: [UInt8])] = []
        /// Blocks hashed, emptied, for the writer to fill again.
        var spare: [[UInt8]] = []
        var queued = 0
        /// Bytes in the file so far.
        var written: Int64 = 0
        var lastWake: Int64 = 0
        var wake = false
        var end: Int64?
        var completion: (@Sendable (Result<Digest, ReadFailure>) -> Void)?
        var abandoned = false

        mutating func handOverPending() {
            guard !pending.isEmpty else { return }
            blocks.append((pendingOffset, pending))
            queued += pending.count
            pending = []
            wake = true
        }

        enum Next {
            case wait, abandon, done
            case block([UInt8])
            case readBack(upTo: Int64)
        }

        /// What the hasher does next, having hashed the first `hashed` bytes: the block that continues them, else
        /// the file's bytes up to the first one copied (or the end), else wait.
        mutating func next(after hashed: Int64) -> Next {
            if abandoned { return .abandon }
            if let first = blocks.first, first.offset == hashed {
                blocks.removeFirst()
                queued -= first.bytes.count
                return .block(first.bytes)
            }
            // Once the end is known, every byte up to it is in the file (a partial verified as it lies holds them
            // all before any is written).
            let inFile = end ?? written
            let readable = min(blocks.first?.offset ?? (pending.isEmpty ? inFile : pendingOffset), inFile)
            if hashed < readable { return .readBack(upTo: readable) }
            if let end, hashed >= end, completion != nil { return .done }
            return .wait
        }
    }
}
