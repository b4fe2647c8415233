import CCurl
import Glibc
import HaulDigest

/// One request in the engine: its decisions (`state`) and what carries them out: the file, the running hash, the easy
/// handle of the attempt in flight, libcurl's callbacks. Confined to one loop's thread; the callbacks reach it through
/// an unretained pointer that the loop's table keeps alive.
///
/// A transfer holds an easy handle and an open file only while an attempt runs: one that waits for a retry (or
/// for a slot) holds neither, so any number of them can wait without running out of descriptors.
final class Transfer {
    var state: TransferStateMachine
    /// Set by the first attempt and kept: a random name for unpinned files; for pinned ones, the partial named by
    /// the expected digest.
    private(set) var file: StagedFile?
    private var descriptor: Int32 = -1
    /// The file was created with the request's `fileMode`.
    private(set) var hasFileMode = false
    /// The handle of the attempt running in libcurl; nil while the transfer waits.
    var easy: EasyHandle?
    /// The HTTP version of the last answer, read as the attempt ends (the handle is reused afterwards).
    var httpVersion: String?
    /// Hosts of the sources as `BadHosts` keys, computed the first time a bad host makes them matter.
    var hostKeys: [String]?
    /// The run's `--limit-rate` budget, if any.
    private let rateLimiter: RateLimiter?
    /// The write callback found the run's rate budget spent and paused the transfer; the loop resumes it.
    private(set) var isPausedForRate = false
    /// The errno of a socket(2) that failed for this attempt (see `transferOpenSocketCallback`); 0 when none did.
    var socketError: Int32 = 0
    private var attempt = Attempt()
    private let bodyLimit: Int64
    private let partials: PartialStore?
    private let reportsProgress: Bool
    /// Large bodies are written back to disk while they arrive (by their `TrailingHasher`).
    private let startsWriteback: Bool
    private let clock: LoopClock
    /// The attempt's low-speed floor (`EngineConfiguration.lowSpeedLimit` over the request's stall window).
    private var speedFloor: SpeedFloor
    private let report: (TransferEvent) -> Void

    /// What the write path keeps of the attempt in flight: its own copy of what the machine decided with the first
    /// body byte, so that a chunk costs a few compares, the write and the hash.
    private struct Attempt {
        var body = Body.unseen
        /// Where the body starts in the file, and its bytes written so far (until the machine is told).
        var bodyOffset: Int64 = 0
        var bytesWritten: Int64 = 0
        var discardedBytes = 0
        /// The first bytes of an error body (`ClientCertificatePage.sniffedBytes`), which may say why.
        var discardedStart: [UInt8] = []
        /// Hashes in the callback what no `TrailingHasher` (large or resumed bodies, on another core) hashes.
        var hasher: StreamingHasher?
        var trailingHasher: TrailingHasher?
        var trailingWake: Int64 = 0
        var expectedTotal: Int64?
        var lastProgressAt: Double = 0
        var unreportedBytes = 0
        /// When bytes last arrived (or the attempt began): the stall clock.
        var lastActivityAt: Double = 0
    }

    private enum Body { case unseen, written, discarded }

    init(
        _ state: TransferStateMachine, partials: PartialStore?, reportsProgress: Bool, startsWriteback: Bool = false,
        rateLimiter: RateLimiter? = nil, lowSpeedLimit: Int, clock: LoopClock, report: @escaping (TransferEvent) -> Void
    ) {
        self.state = state
        speedFloor = SpeedFloor(window: state.request.stallTimeout, bytesPerSecond: lowSpeedLimit)
        self.rateLimiter = rateLimiter
        self.bodyLimit = state.bodyLimit
        self.partials = partials
        self.reportsProgress = reportsProgress
        self.startsWriteback = startsWriteback
        self.clock = clock
        self.report = report
    }

    /// Takes the file the engine opened for the first attempt (`resume`: what of a partial may be resumed); the
    /// machine says what comes next.
    func adopt(
        _ file: StagedFile, descriptor: Int32, hasFileMode: Bool = false, isPartial: Bool = false,
        resume: (offset: Int64, validator: ResumeValidator)? = nil
    ) -> TransferStateMachine.Action {
        self.file = file
        self.descriptor = descriptor
        self.hasFileMode = hasFileMode
        return state.fileOpened(isPartial: isPartial, resume: resume)
    }

    /// For messages.
    var temporaryPath: String { file?.path ?? "" }
    var bytesWritten: Int64 { attempt.bytesWritten }
    var discardedStart: [UInt8] { attempt.discardedStart }
    var trailingHasher: TrailingHasher? { attempt.trailingHasher }

    /// Opens the file again after a wait (`closeFile`); the errno on failure.
    func reopenFile() -> Int32? {
        guard descriptor < 0, let file else { return nil }
        switch file.open(O_WRONLY) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return failure.errno
        }
        return nil
    }

    func closeFile() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    /// Removes the file, and a partial's metadata with it.
    func removeFile() {
        guard let file else { return }
        file.remove()
        if state.isResumable { partials?.removeMetadata(forPartial: file) }
    }

    /// What a retry does to the bytes in the file before the next attempt; the reason when they cannot be dropped.
    func prepare(_ bytes: TransferStateMachine.Bytes) -> FailureReason? {
        if case .resume = bytes { return nil }
        if case .dropWithMetadata = bytes, state.isResumable, let file { partials?.removeMetadata(forPartial: file) }
        return emptyFile()
    }

    /// The file back to zero bytes (it is open whenever bytes are dropped): old bytes past the new end would be
    /// committed without having been hashed.
    private func emptyFile() -> FailureReason? {
        guard descriptor >= 0, ftruncate(descriptor, 0) != 0 else { return nil }
        return .local(operation: .truncate, path: temporaryPath, errno: errno)
    }

    /// The attempt (or a redirect hop) goes to libcurl: nothing of it received yet.
    func beginAttempt() {
        attempt = Attempt(lastActivityAt: clock.now)
        speedFloor.restart(at: clock.now, bytes: 0)
        socketError = 0
        isPausedForRate = false
    }

    /// This attempt's body bytes, handed to the machine once (`attemptEnded`, or `stop` mid-attempt).
    func takeBytesWritten() -> Int64 {
        defer { attempt.bytesWritten = 0 }
        return attempt.bytesWritten
    }

    /// libcurl's transfer-info callback runs at least once a second, even when nothing arrives: the place to
    /// notice that nothing has arrived for the whole stall window, or too little (`SpeedFloor`). Returns false to
    /// abort.
    func checkProgress() -> Bool {
        let now = clock.now
        let received = attempt.bytesWritten + Int64(attempt.discardedBytes)
        // Waiting for the rate budget is neither a stall nor slow: the window starts again when the transfer goes on.
        if isPausedForRate {
            attempt.lastActivityAt = now
            speedFloor.restart(at: now, bytes: received)
        }
        let window = state.request.stallTimeout
        let seconds = window == window.rounded() ? "\(Int(window))" : "\(window)"
        // Nothing at all first: the floor would say the same of a silent server, less plainly.
        if now - attempt.lastActivityAt >= window {
            state.abort(.network(code: .operationTimedOut, message: "no data for \(seconds) s"))
            return false
        }
        guard speedFloor.allows(now: now, bytes: received) else {
            state.abort(
                .network(
                    code: .operationTimedOut, message: "under \(Self.rate(speedFloor.bytesPerSecond)) for \(seconds) s")
            )
            return false
        }
        return true
    }

    /// `1 KiB/s`, `512 B/s`: the low-speed floor as messages say it.
    private static func rate(_ bytesPerSecond: Int) -> String {
        bytesPerSecond % 1024 == 0 ? "\(bytesPerSecond / 1024) KiB/s" : "\(bytesPerSecond) B/s"
    }

    /// The digest of exactly the bytes written, for bodies hashed in the callback (an empty one had no hasher).
    func finishInlineHash() -> Result<Digest, FailureReason> {
        guard let hasher = attempt.hasher ?? StreamingHasher(state.request.hashAlgorithm) else {
            return .failure(outOfMemory)
        }
        return .success(hasher.finalize())
    }

    /// No memory for a hash's state.
    private var outOfMemory: FailureReason { .local(operation: .hash, path: temporaryPath, errno: ENOMEM) }

    /// Starts hashing the whole file from byte 0 on another thread (resumed or large bodies).
    func startTrailingHash() -> TrailingHasher? {
        if attempt.trailingHasher == nil, let file {
            // A body that is read as well (an archive) is not what is put in place: writing it to disk early is work
            // for nothing (it doubled what a journaled ext4 wrote for an archive unpacked as it arrived).
            let reader = state.request.bodyReading?.makeReader(expectedSize: attempt.expectedTotal)
            attempt.trailingHasher = TrailingHasher(
                file: file, algorithm: state.request.hashAlgorithm,
                startsWriteback: startsWriteback && state.request.bodyReading == nil, reader: reader)
        }
        return attempt.trailingHasher
    }

    /// The first body byte: the machine says what the response is, and the file is made ready for it. False aborts.
    private func beginBody() -> Bool {
        switch state.bodyBegins() {
        case .refuse:
            return false
        case .discard:
            attempt.body = .discarded
        case .write(let offset, let truncates, let metadata, let hashesTrailing, let expectedTotal):
            attempt.body = .written
            attempt.bodyOffset = offset
            attempt.expectedTotal = expectedTotal
            attempt.lastProgressAt = clock.now
            if truncates, let failure = emptyFile() {
                state.abort(failure)
                return false
            }
            if let file, let partials {
                switch metadata {
                case .save(let metadata): partials.save(metadata, forPartial: file)
                case .remove: partials.removeMetadata(forPartial: file)
                case .unchanged: break
                }
            }
            if hashesTrailing { _ = startTrailingHash() }
            if attempt.trailingHasher == nil {
                guard let hasher = StreamingHasher(state.request.hashAlgorithm) else {
                    state.abort(outOfMemory)
                    return false
                }
                attempt.hasher = hasher
            }
        }
        return true
    }

    /// libcurl's write callback: a chunk is taken when the run's rate budget allows it, else the transfer pauses and
    /// libcurl keeps the chunk until `resume`.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard let rateLimiter, !bytes.isEmpty else { return take(bytes) }
        let now = clock.now
        guard rateLimiter.allows(now: now) else {
            isPausedForRate = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        let taken = take(bytes)
        rateLimiter.spend(taken, now: now)
        return taken
    }

    /// A transfer paused for the rate budget goes on (libcurl delivers the kept chunk from within this call).
    func resume() {
        guard isPausedForRate, let easy else { return }
        isPausedForRate = false
        easy.resumeReceiving()
    }

    /// The write path: every body byte goes through here once, into the file and the hash together.
    /// Returning fewer bytes than offered makes libcurl abort the transfer.
    private func take(_ bytes: UnsafeRawBufferPointer) -> Int {
        if bytes.isEmpty { return 0 }
        if attempt.body == .unseen, !beginBody() { return 0 }
        if attempt.body == .discarded {
            attempt.lastActivityAt = clock.now
            // Redirect and error bodies are read so the connection can be reused, but only a little of them.
            if attempt.discardedStart.count < ClientCertificatePage.sniffedBytes {
                attempt.discardedStart += bytes.prefix(
                    ClientCertificatePage.sniffedBytes - attempt.discardedStart.count)
            }
            attempt.discardedBytes += bytes.count
            return attempt.discardedBytes > 1 << 16 ? 0 : bytes.count
        }
        let end = attempt.bodyOffset + attempt.bytesWritten
        if end + Int64(bytes.count) > bodyLimit {
            state.abort(.tooLarge(limit: bodyLimit))
            return 0
        }
        guard let base = bytes.baseAddress else { return 0 }
        var offset = 0
        while offset < bytes.count {
            let written = pwrite(descriptor, base + offset, bytes.count - offset, off_t(end) + off_t(offset))
            if written < 0 {
                if errno == EINTR { continue }
                state.abort(.local(operation: .write, path: temporaryPath, errno: errno))
                return 0
            }
            offset += written
        }
        attempt.bytesWritten += Int64(bytes.count)
        let now = clock.now
        attempt.lastActivityAt = now
        if let trailingHasher = attempt.trailingHasher {
            trailingHasher.written(upTo: end + Int64(bytes.count), lastWake: &attempt.trailingWake)
        } else {
            attempt.hasher?.update(bytes)
        }
        if reportsProgress { reportProgress(chunk: bytes.count, now: now) }
        return bytes.count
    }

    /// One header line of the response, for the machine to judge.
    func receiveHeader(_ line: UnsafeRawBufferPointer) -> Int {
        attempt.lastActivityAt = clock.now
        return state.headerLine(line) ? line.count : 0
    }

    /// At most every tenth of a second, and not before the body has been arriving for that long: a file that
    /// comes whole within it is told by its end alone (for 100,000 small files, a report each was most of what
    /// showing progress cost).
    private func reportProgress(chunk: Int, now: Double) {
        attempt.unreportedBytes += chunk
        guard now - attempt.lastProgressAt >= 0.1 else { return }
        attempt.lastProgressAt = now
        report(
            .progress(
                TransferProgress(
                    bytesWritten: attempt.unreportedBytes, totalBytesWritten: attempt.bodyOffset + attempt.bytesWritten,
                    totalBytesExpected: attempt.expectedTotal)))
        attempt.unreportedBytes = 0
    }
}

/// A loop's idea of now, read once per turn of the loop rather than by each of libcurl's callbacks (a dozen
/// per small transfer: headers, body, transfer info): every callback runs inside `perform`, right after the
/// loop has read the clock, and stall windows are counted in seconds. Confined to its loop's thread.
final class LoopClock {
    private(set) var now: Double = MonotonicClock.seconds()
    func tick() { now = MonotonicClock.seconds() }
}

/// Seconds on CLOCK_MONOTONIC: for durations, immune to wall-clock jumps.
package enum MonotonicClock {
    package static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// libcurl's open-socket callback: the socket libcurl would open, made here so that a socket(2) that fails for want
/// of descriptors (EMFILE, ENFILE) is known for what it is; libcurl 7.88 reports it as a failed connect, with no
/// errno, like a server that refuses.
let transferOpenSocketCallback: TransferCallbacks.OpenSocket = { context, _, address in
    guard let address else { return CURL_SOCKET_BAD }
    let opened = socket(
        address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
    if opened < 0, let context { Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().socketError = errno }
    return opened
}

/// libcurl's transfer-info callback: only used to detect stalls and the low-speed floor.
let transferInfoCallback: TransferCallbacks.Progress = { context, _, _, _, _ in
    guard let context else { return 0 }
    return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().checkProgress() ? 0 : 1
}

/// libcurl's header callback.
let transferHeaderCallback: TransferCallbacks.Data = { data, size, count, context in
    guard let data, let context else { return 0 }
    return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().receiveHeader(
        UnsafeRawBufferPointer(start: data, count: size * count))
}

/// libcurl's write callback: a C function, so it finds its `Transfer` through the user pointer.
let transferWriteCallback: TransferCallbacks.Data = { data, size, count, context in
    guard let data, let context else { return 0 }
    return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().receive(
        UnsafeRawBufferPointer(start: data, count: size * count))
}
