import Glibc
import HaulDigest
import HaulFileSystem
import HaulThreads
import Synchronization

/// Hashes a file while it is being written, on a thread of its own, by reading back what the writer has already
/// put in the page cache.
///
/// Hashing in libcurl's write callback caps one stream at the speed of SHA-256 on one core, serially with the
/// receive. Trailing the writer instead lets the two run on two cores, and the file itself is the buffer between
/// them: memory use does not grow with the file, and the writer never waits for the hash. (Handing the hasher
/// copies of the written bytes instead, to spare it the read back, saved under 5% of the client's CPU over
/// HTTP/2 + TLS, where CPU is what limits, for 8 MiB of buffers per transfer.)
final class TrailingHasher {
    private let shared: Shared

    /// Below this many bytes ahead of the hash, the writer does not bother waking the hasher.
    private static let wakeStep: Int64 = 4 << 20
    private static let chunk = 1 << 20

    /// - Parameters:
    ///   - file: the file the writer is writing; opened here for reading. Nil when it cannot be, or no thread can
    ///     be started.
    ///   - startsWriteback: also start writing what has been hashed to disk (`WritebackHint`): the hasher trails
    ///     the writer, so this is the place that is a step behind it without costing the writer anything.
    ///   - reader: also reads the body, from byte 0, as it is hashed (`BodyReader`), before the digest is reported.
    init?(file: StagedFile, algorithm: DigestAlgorithm, startsWriteback: Bool = false, reader: (any BodyReader)? = nil)
    {
        guard case .success(let descriptor) = file.open(O_RDONLY) else { return nil }
        shared = Shared(descriptor: descriptor, algorithm: algorithm, startsWriteback: startsWriteback, reader: reader)
        guard startDetachedThread({ [shared] in shared.run() }) else {
            close(descriptor)
            return nil
        }
    }

    /// The hash is not wanted any more (the attempt ended otherwise): the thread ends.
    deinit { shared.update { $0.abandoned = true } }

    /// Called by the writer after each write; cheap unless the hash has fallen `wakeStep` behind.
    func written(upTo end: Int64, lastWake: inout Int64) {
        guard end - lastWake >= Self.wakeStep else { return }
        lastWake = end
        shared.update { $0.written = max($0.written, end) }
    }

    /// Hashes whatever remains up to `end` and hands the digest (or the read error's errno) to `completion`, on
    /// the hasher's thread.
    func finish(at end: Int64, completion: @escaping @Sendable (Result<Digest, Errno>) -> Void) {
        shared.update { state in
            state.end = end
            state.completion = completion
        }
    }

    /// What the writer and the hashing thread share.
    private final class Shared: Sendable {
        private let state: Mutex<State>
        private let wake = Semaphore()
        /// Wakes the reader's thread when more is hashed, or the hash ended.
        private let readerWake = Semaphore()
        /// Signalled once by the reader's thread when it has read all it wants.
        private let readerDone = Semaphore()

        private let reader: (any BodyReader)?

        init(descriptor: Int32, algorithm: DigestAlgorithm, startsWriteback: Bool, reader: (any BodyReader)?) {
            state = Mutex(State(descriptor: descriptor, algorithm: algorithm, startsWriteback: startsWriteback))
            self.reader = reader
        }

        /// Changes the state and wakes the hasher to look at it.
        func update(_ change: (inout State) -> Void) {
            state.withLock { change(&$0) }
            wake.signal()
        }

        /// The hashing thread: reads and hashes what is written, until the end (or until the hash is abandoned). A
        /// `reader` reads the body on a thread of its own, trailing the hash (`follow`), and the digest is told only
        /// once it has read all it wants; where that thread cannot be had, it reads the same chunks here first.
        ///
        /// Why a thread of its own: unpacking an archive (decompressing, hashing and writing each member) costs
        /// about twice what hashing the archive does, and in one thread the two add up. Apart, they run on two
        /// cores: a 1 GiB `.tar.zst` unpacked on tmpfs took 2.10 s instead of 3.25 s (`benchmarks/archives.sh`).
        func run() {
            let (descriptor, algorithm, startsWriteback) = state.withLock {
                ($0.descriptor, $0.algorithm, $0.startsWriteback)
            }
            defer { close(descriptor) }
            let buffer = ReadBuffer.allocate(TrailingHasher.chunk)
            defer { ReadBuffer.free(buffer) }
            guard let buffer, let hasher = StreamingHasher(algorithm) else { return fail(Errno(ENOMEM)) }
            var pass = Pass(
                descriptor: descriptor, buffer: buffer, hasher: hasher,
                writeback: startsWriteback ? WritebackHint() : nil)
            let followed = reader.map { startFollowing($0, descriptor: descriptor) } ?? false
            if !followed { reader?.read { next(&pass) } }
            while next(&pass) != nil {
                if followed {
                    state.withLock { $0.hashed = pass.hashed }
                    readerWake.signal()
                }
            }
            if followed {
                let finished = if case .finished = pass.outcome { true } else { false }
                state.withLock { $0.hashEnded = finished ? .finished : .stopped }
                readerWake.signal()
                // The reader has read what it wanted before the body it read is verified.
                if finished { readerDone.wait() }
            }
            switch pass.outcome {
            case .finished: finish(.success(hasher.finalize()))
            case .failed(let failure): fail(failure)
            case .abandoned, .reading: return
            }
        }

        /// Starts `reader` on a thread of its own, reading its own descriptor of the file; false when it cannot be
        /// (no descriptor, memory or thread to spare): the hashing thread feeds it then.
        private func startFollowing(_ reader: any BodyReader, descriptor: Int32) -> Bool {
            let own = dup(descriptor)
            guard own >= 0 else { return false }
            guard let allocated = ReadBuffer.allocate(TrailingHasher.chunk) else {
                close(own)
                return false
            }
            // Handed to the thread, which alone uses and frees it from then on.
            nonisolated(unsafe) let buffer = allocated
            let started = startDetachedThread { [self] in
                follow(reader, descriptor: own, buffer: buffer)
                close(own)
                ReadBuffer.free(buffer)
                readerDone.signal()
            }
            if !started {
                close(own)
                ReadBuffer.free(buffer)
            }
            return started
        }

        /// The reader's thread: hands it what is hashed, in order from byte 0; nil once the hash ended and all is
        /// read, or as soon as the hash stopped (abandoned, or a read failed: the hash tells that failure).
        private func follow(_ reader: any BodyReader, descriptor: Int32, buffer: UnsafeMutableRawBufferPointer) {
            var position: Int64 = 0
            reader.read {
                while true {
                    let (hashed, ended) = state.withLock { ($0.hashed, $0.hashEnded) }
                    if ended == .stopped { return nil }
                    guard position < hashed else {
                        if ended == .finished { return nil }
                        readerWake.wait()
                        continue
                    }
                    let count = pread(
                        descriptor, buffer.baseAddress, Int(min(Int64(buffer.count), hashed - position)),
                        off_t(position))
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { return nil }
                    position += Int64(count)
                    return UnsafeRawBufferPointer(rebasing: buffer[..<count])
                }
            }
        }

        /// One pass over the body: how far it has been read and hashed, and how it ended.
        private struct Pass {
            let descriptor: Int32
            let buffer: UnsafeMutableRawBufferPointer
            let hasher: StreamingHasher
            var writeback: WritebackHint?
            var hashed: Int64 = 0
            var outcome = Outcome.reading

            enum Outcome { case reading, finished, abandoned, failed(Errno) }
        }

        /// The next chunk the writer has put in the file, hashed; nil at the end of the body (the pass's `outcome`
        /// then says why), waiting for the writer while it is ahead of nothing.
        private func next(_ pass: inout Pass) -> UnsafeRawBufferPointer? {
            guard case .reading = pass.outcome else { return nil }
            while true {
                let (target, ended, abandoned) = state.withLock { ($0.end ?? $0.written, $0.end != nil, $0.abandoned) }
                if abandoned {
                    pass.outcome = .abandoned
                    return nil
                }
                guard pass.hashed < target else {
                    if ended {
                        pass.outcome = .finished
                        return nil
                    }
                    wake.wait()
                    continue
                }
                let wanted = Int(min(Int64(pass.buffer.count), target - pass.hashed))
                let count = pread(pass.descriptor, pass.buffer.baseAddress, wanted, off_t(pass.hashed))
                if count < 0 && errno == EINTR { continue }
                // A file shorter than what was written to it is not one whose digest means anything.
                guard count > 0 else {
                    pass.outcome = .failed(Errno(count < 0 ? errno : EIO))
                    return nil
                }
                let chunk = UnsafeRawBufferPointer(rebasing: pass.buffer[..<count])
                pass.hasher.update(chunk)
                pass.hashed += Int64(count)
                pass.writeback?.written(upTo: pass.hashed, of: pass.descriptor)
                return chunk
            }
        }

        /// A failure met before the writer is done is told once it is: only then is there a completion to tell it to.
        private func fail(_ failure: Errno) {
            while true {
                let (ended, abandoned) = state.withLock { ($0.end != nil, $0.abandoned) }
                if abandoned { return }
                if ended { return finish(.failure(failure)) }
                wake.wait()
            }
        }

        private func finish(_ result: Result<Digest, Errno>) {
            state.withLock { $0.completion }?(result)
        }
    }

    private struct State {
        let descriptor: Int32
        let algorithm: DigestAlgorithm
        let startsWriteback: Bool
        /// Bytes the writer has put in the file, as far as it has said.
        var written: Int64 = 0
        var end: Int64?
        var completion: (@Sendable (Result<Digest, Errno>) -> Void)?
        var abandoned = false
        /// For a reader on a thread of its own: how far the body is hashed (what it may read), and how the hash
        /// ended (read to the end, or stopped), nil while it goes on.
        var hashed: Int64 = 0
        var hashEnded: HashEnd?
    }

    private enum HashEnd { case finished, stopped }
}
