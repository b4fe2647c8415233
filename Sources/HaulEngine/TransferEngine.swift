import CCurl
import Glibc
import HaulDigest
import HaulThreads
import Synchronization

/// Runs transfers concurrently over libcurl multi handles: one per loop, each loop on its own thread.
///
/// Like a URLSession download task, each transfer writes to a temporary file, reports progress, tells a
/// client-side error from a server's answer, and hands the finished file to its owner, who moves it into place.
/// Unlike one, a file is finished only when its size and digest match what was pinned: verification happens while
/// the bytes stream in, and a source that serves the wrong bytes hands over to the next.
///
/// `run` blocks the calling thread, which must not be one of Swift's cooperative pool: libcurl's loop would starve
/// every other task there.
public final class TransferEngine: Sendable {
    private let configuration: EngineConfiguration
    private let redirects: RedirectPolicy
    fileprivate let partials: PartialStore?
    /// The process's umask (nil if unknown), read once: what `open(2)` leaves out of a new file's mode.
    fileprivate let umask: UInt32? = ProcessUmask.read()

    public init(configuration: EngineConfiguration) {
        self.configuration = configuration
        self.redirects = RedirectPolicy(maxRedirects: configuration.maxRedirects)
        self.partials = configuration.partialDirectory.map(PartialStore.init(directory:))
    }

    public static var libcurlVersion: String { Curl.version }

    /// Fetches every request and returns when all have finished. Events reach `delegate` on the loops' threads:
    /// this one, and with `configuration.loops` above one, others at the same time.
    public func run(_ requests: [TransferRequest], delegate: TransferDelegate, reportsProgress: Bool = false,
                    cancellation: Cancellation? = nil) {
        run(count: requests.count, request: { requests[$0] }, delegate: delegate, reportsProgress: reportsProgress,
            cancellation: cancellation)
    }

    /// The same for `count` requests made on demand, in order, by the loop about to start each: the first
    /// transfer does not wait for 100,000 requests to be built, and building them is shared between the loops.
    public func run(count: Int, request: @escaping @Sendable (Int) -> TransferRequest, delegate: TransferDelegate,
                    reportsProgress: Bool = false, cancellation: Cancellation? = nil) {
        let queue = RequestQueue(count: count, make: request)
        let claims = PartialClaims()
        let shares = configuration.loopShares
        let others = shares.dropFirst().compactMap { share in
            // A loop whose thread cannot start leaves its share unused; the others take every request.
            startThread { [self] in
                runLoop(share, queue: queue, claims: claims, delegate: delegate, reportsProgress: reportsProgress,
                        cancellation: cancellation)
            }
        }
        runLoop(shares[0], queue: queue, claims: claims, delegate: delegate, reportsProgress: reportsProgress,
                cancellation: cancellation)
        for thread in others { pthread_join(thread, nil) }
        // Left only if no loop could start (libcurl out of memory): every request still ends with an event.
        for request in queue.takeAll() {
            delegate.transfer(request.id, didProduce: .finished(.failure(TransferFailure(attempts: [
                AttemptFailure(sourceDisplayURL: request.sources.first?.displayURL ?? "",
                               reason: .local(operation: "initialize libcurl for", path: "transfers", errno: ENOMEM)),
            ]))))
        }
    }

    private func runLoop(_ share: EngineConfiguration.LoopShare, queue: RequestQueue, claims: PartialClaims,
                         delegate: TransferDelegate, reportsProgress: Bool, cancellation: Cancellation?) {
        guard let multi = MultiHandle() else { return }
        var loop = Loop(engine: self, multi: multi, share: share, queue: queue, claims: claims, delegate: delegate,
                        reportsProgress: reportsProgress)
        let wakeUp = multi.wakeUpHandle
        cancellation?.attach(wakeUp)
        defer { cancellation?.detach(wakeUp) }
        loop.run(cancellation: cancellation)
    }

    /// The mutable state of one loop of a `run`: transfers in libcurl, transfers waiting to retry, and transfers
    /// whose body is complete but whose trailing hash is still being computed. Requests come from the queue the
    /// loops share.
    private struct Loop {
        let engine: TransferEngine
        let multi: MultiHandle
        /// This loop's part of the run's limits.
        let share: EngineConfiguration.LoopShare
        let queue: RequestQueue
        /// Partial files held by a transfer of this run (any loop): a second entry with the same digest gets its
        /// own file.
        let claims: PartialClaims
        let delegate: TransferDelegate
        let reportsProgress: Bool
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        var waiting: [Transfer] = []
        var verifying: [ObjectIdentifier: Transfer] = [:]
        let trailingDigests = TrailingDigests()
        let clock = LoopClock()
        var idleHandles: [EasyHandle] = []
        let namePrefix: String = {
            var generator = SystemRandomNumberGenerator()
            return String(generator.next() as UInt64, radix: 16) + "-"
        }()
        var temporaryCount = 0

        init(engine: TransferEngine, multi: MultiHandle, share: EngineConfiguration.LoopShare, queue: RequestQueue,
             claims: PartialClaims, delegate: TransferDelegate, reportsProgress: Bool) {
            self.engine = engine
            self.multi = multi
            self.share = share
            self.queue = queue
            self.claims = claims
            self.delegate = delegate
            self.reportsProgress = reportsProgress
            multi.set(CURLMOPT_MAX_TOTAL_CONNECTIONS, share.transfers)
            multi.set(CURLMOPT_MAX_HOST_CONNECTIONS, share.connectionsPerHost)
            multi.set(CURLMOPT_MAXCONNECTS, share.transfers * 2)
        }

        mutating func run(cancellation: Cancellation?) {
            let limit = share.transfers
            while queue.hasMore || !active.isEmpty || !waiting.isEmpty || !verifying.isEmpty {
                if cancellation?.isCancelled == true { return stopAll() }
                // Refill before polling: curl_multi_poll sleeps its whole timeout when it holds no transfers.
                clock.tick()
                let now = clock.now
                if !waiting.isEmpty {
                    let due = waiting.filter { $0.retryAt <= now }
                    waiting.removeAll { $0.retryAt <= now }
                    for transfer in due { attach(transfer) }
                }
                // Transfers still being hashed hold a file and a hashing thread: they count against --jobs.
                while active.count + waiting.count + verifying.count < limit, let request = queue.next() {
                    start(request)
                }
                multi.perform()
                let finished = multi.completed()
                for (easy, result) in finished { complete(easy, result) }
                let digests = trailingDigests.take()
                for (key, digest) in digests {
                    guard let transfer = verifying.removeValue(forKey: key) else { continue }
                    judge(transfer, digest: digest)
                }
                if finished.isEmpty && digests.isEmpty && (!active.isEmpty || !waiting.isEmpty || !verifying.isEmpty) {
                    multi.poll(milliseconds: pollTimeout(now: now))
                }
            }
        }

        /// Interrupted: every transfer ends now as `.interrupted`. Partials of pinned files are kept (with their
        /// validator) for the next run; other temporary files are removed. Queued requests never start (whichever
        /// loop stops first takes them all).
        private mutating func stopAll() {
            // Hashes still running report to nobody, and wake nothing: the multi handle is about to go.
            trailingDigests.close()
            let inFlight = Array(active.values) + waiting + Array(verifying.values)
            for transfer in active.values { multi.remove(transfer.easy) }
            active = [:]
            waiting = []
            verifying = [:]
            for transfer in inFlight { giveUp(transfer, .interrupted) }
            for request in queue.takeAll() {
                delegate.transfer(request.id, didProduce: .finished(.failure(TransferFailure(attempts: [
                    AttemptFailure(sourceDisplayURL: request.sources.first?.displayURL ?? "", reason: .interrupted),
                ]))))
            }
        }

        private func pollTimeout(now: Double) -> Int32 {
            guard let soonest = waiting.map(\.retryAt).min() else { return 1000 }
            return Int32(max(0, min(1000, (soonest - now) * 1000)))
        }

        private mutating func start(_ request: TransferRequest) {
            guard !request.sources.isEmpty else {
                return delegate.transfer(request.id, didProduce: .finished(.failure(TransferFailure(attempts: []))))
            }
            let file: TemporaryFile
            switch openFile(for: request) {
            case .success(let opened): file = opened
            case .failure(let reason): return refuse(request, reason)
            }
            guard let easy = idleHandles.popLast() ?? EasyHandle() else {
                close(file.descriptor)
                if file.isPartial { claims.release(file.path) }
                return refuse(request, .local(operation: "initialize libcurl for", path: file.path, errno: ENOMEM))
            }
            let delegate = self.delegate
            let id = request.id
            let transfer = Transfer(request: request, file: file, easy: easy, maxBodyBytes: engine.configuration.maxBodyBytes,
                                    partials: engine.partials, reportsProgress: reportsProgress, clock: clock) {
                delegate.transfer(id, didProduce: $0)
            }
            delegate.transfer(id, didProduce: .started(sourceDisplayURL: request.sources[0].displayURL))
            if transfer.partialLooksComplete {
                // Everything is already here (a run ended between download and commit): only the hash is left.
                verify(transfer)
            } else {
                attach(transfer)
            }
        }

        /// A request that fails before any attempt could start.
        private func refuse(_ request: TransferRequest, _ reason: FailureReason) {  // sources is non-empty here
            delegate.transfer(request.id, didProduce: .finished(.failure(TransferFailure(attempts: [
                AttemptFailure(sourceDisplayURL: request.sources[0].displayURL, reason: reason),
            ]))))
        }

        /// A pinned file gets the partial named by its digest (resuming it when its metadata says how); anything
        /// else, or a second entry wanting the same partial in this run, gets a fresh random name.
        private mutating func openFile(for request: TransferRequest) -> Result<TemporaryFile, FailureReason> {
            if let digest = request.expectedDigest, let partials = engine.partials,
               (request.expectedSize ?? .max) >= Self.resumableSize {
                let path = partials.path(for: digest)
                if claims.claim(path) {
                    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                    guard descriptor >= 0 else {
                        claims.release(path)
                        return .failure(.local(operation: "open partial file", path: path, errno: errno))
                    }
                    var info = stat()
                    let size = fstat(descriptor, &info) == 0 ? Int64(info.st_size) : 0
                    let metadata = partials.metadata(forPartial: path)
                    let resumable = size > 0 && metadata?.sourceKey == request.sources[0].key
                        && size <= (request.expectedSize ?? .max)
                    if let metadata, resumable {
                        return .success(TemporaryFile(path: path, descriptor: descriptor, isPartial: true,
                                                      resume: (size, metadata.validator)))
                    }
                    if ftruncate(descriptor, 0) != 0 {
                        let code = errno
                        close(descriptor)
                        claims.release(path)
                        return .failure(.local(operation: "truncate", path: path, errno: code))
                    }
                    partials.removeMetadata(forPartial: path)
                    return .success(TemporaryFile(path: path, descriptor: descriptor, isPartial: true, resume: nil))
                }
            }
            let path = engine.configuration.temporaryDirectory + "/" + temporaryName()
            let mode = request.fileMode ?? 0o600
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_t(mode & 0o777))
            guard descriptor >= 0 else { return .failure(.local(operation: "create temporary file", path: path, errno: errno)) }
            // open(2) leaves out what the umask masks (and special bits): then the mode is set exactly, by descriptor.
            var hasFileMode = request.fileMode != nil
            if hasFileMode, mode & ~0o777 != 0 || engine.umask.map({ mode & $0 != 0 }) ?? true {
                hasFileMode = fchmod(descriptor, mode_t(mode & 0o7777)) == 0
            }
            return .success(TemporaryFile(path: path, descriptor: descriptor, hasFileMode: hasFileMode, isPartial: false,
                                          resume: nil))
        }

        /// Configures the transfer's handle for its current URL and hands it to libcurl.
        private mutating func attach(_ transfer: Transfer) {
            let easy = transfer.easy
            let configuration = engine.configuration
            easy.reset()
            easy.set(CURLOPT_URL, transfer.currentURL)
            easy.set(CURLOPT_NOSIGNAL, true)
            // Only http and https, for the request and (belt and braces) for redirects, which haul follows itself.
            easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
            easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            easy.set(CURLOPT_FOLLOWLOCATION, false)
            easy.set(CURLOPT_USERAGENT, configuration.userAgent)
            easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(easy.errorBuffer))
            easy.set(CURLOPT_BUFFERSIZE, 256 * 1024)
            // Stalls (no byte for the whole window) are caught by the transfer-info callback; libcurl's
            // low-speed check adds the floor: less than `lowSpeedLimit` bytes/s averaged over the window.
            let window = max(1, Int(transfer.request.stallTimeout.rounded(.up)))
            easy.set(CURLOPT_CONNECTTIMEOUT, window)
            easy.set(CURLOPT_LOW_SPEED_LIMIT, configuration.lowSpeedLimit)
            easy.set(CURLOPT_LOW_SPEED_TIME, window)
            if transfer.currentURL.lowercased().hasPrefix("https:") { easy.set(CURLOPT_PIPEWAIT, true) }
            if let caFile = configuration.caFile { easy.set(CURLOPT_CAINFO, caFile) }
            var headers = transfer.sendsHeaders ? transfer.source.headers.map { "\($0.name): \($0.value)" } : []
            if let conditional = transfer.source.conditional { headers += conditional.requestHeaders }
            if transfer.requestsRange, let validator = transfer.validator {
                headers.append("Range: bytes=\(transfer.resumeOffset)-")
                headers.append("If-Range: \(validator.ifRangeValue)")
            }
            easy.setHeaders(headers)
            // No Accept-Encoding: the bytes hashed are the bytes stored.
            _ = haul_easy_setopt_write_callback(easy.raw, transferWriteCallback)
            easy.set(CURLOPT_WRITEDATA, pointer: Unmanaged.passUnretained(transfer).toOpaque())
            _ = haul_easy_setopt_header_callback(easy.raw, transferHeaderCallback)
            easy.set(CURLOPT_HEADERDATA, pointer: Unmanaged.passUnretained(transfer).toOpaque())
            _ = haul_easy_setopt_xferinfo_callback(easy.raw, transferInfoCallback)
            easy.set(CURLOPT_XFERINFODATA, pointer: Unmanaged.passUnretained(transfer).toOpaque())
            easy.set(CURLOPT_NOPROGRESS, false)
            transfer.recordVisit()
            active[easy.raw] = transfer
            multi.add(easy)
        }

        private mutating func complete(_ raw: UnsafeMutableRawPointer, _ result: CURLcode) {
            guard let transfer = active.removeValue(forKey: raw) else { return }
            multi.remove(transfer.easy)
            switch response(of: transfer, result) {
            case .redirect(let url, let sendHeaders):
                transfer.beginRedirect(to: url, sendHeaders: sendHeaders)
                attach(transfer)
            case .failed(let reason):
                fail(transfer, reason)
            case .bodyComplete:
                verify(transfer)
            case .notModified:
                transfer.closeFile()
                release(transfer)
                if !transfer.isResumable { unlink(transfer.temporaryPath) }
                delegate.transfer(transfer.request.id, didProduce: .notModified(sourceDisplayURL: transfer.source.displayURL))
            }
        }

        /// Every byte is in: the digest decides. Inline-hashed bodies are judged now; trailing hashes report back
        /// through `trailingDigests` and a wake-up, so the loop never waits for a hash.
        private mutating func verify(_ transfer: Transfer) {
            guard transfer.trailingHasher != nil || transfer.holdsResumedBytes, let trailing = transfer.startTrailingHash() else {
                return judge(transfer, digest: .success(transfer.finishInlineHash()))
            }
            let key = ObjectIdentifier(transfer)
            verifying[key] = transfer
            let digests = trailingDigests
            let wakeUp = multi.wakeUpHandle
            let path = transfer.temporaryPath
            trailing.finish(at: transfer.totalBytes) { result in
                digests.add(key, result.mapError { .local(operation: "read back", path: path, errno: $0.errno) }, waking: wakeUp)
            }
        }

        private enum Response {
            case bodyComplete
            case notModified
            case redirect(String, sendHeaders: Bool)
            case failed(FailureReason)
        }

        /// What a finished attempt was: a 2xx body to verify, a redirect to follow, or a failure.
        private func response(of transfer: Transfer, _ result: CURLcode) -> Response {
            if let reason = transfer.abortReason { return .failed(reason) }
            // An error body is read only so far; cutting it short is not a network failure.
            guard result == CURLE_OK || transfer.discarding && result == CURLE_WRITE_ERROR else {
                let detail = transfer.easy.errorMessage
                let message = Self.scrub(detail.isEmpty ? result.message : detail, of: transfer.source.secrets)
                return .failed(.network(code: Int(result.rawValue), message: message))
            }
            let status = transfer.easy.responseCode
            if (300..<400).contains(status),
               let target = transfer.easy.redirectURL ?? transfer.responseHeaders.location.flatMap({
                   resolveRedirect($0, against: transfer.currentURL)
               }) {
                switch engine.redirects.decide(current: transfer.currentURL, target: target,
                                               source: transfer.source.url, visited: transfer.visited) {
                case .follow(let url, let sendHeaders): return .redirect(url, sendHeaders: sendHeaders && transfer.sendsHeaders)
                case .refuse(let why): return .failed(.redirectRefused(why))
                }
            }
            if status == 304 && transfer.source.conditional != nil { return .notModified }
            guard (200..<300).contains(status) else { return .failed(.httpStatus(status)) }
            return .bodyComplete
        }

        /// The bytes are all in: they are a file only if size and digest are what was pinned.
        private mutating func judge(_ transfer: Transfer, digest: Result<Digest, FailureReason>) {
            let size = transfer.totalBytes
            let reason: FailureReason? = switch digest {
            case .failure(let reason): reason
            case .success(let digest):
                if let expected = transfer.request.expectedSize, expected != size {
                    .sizeMismatch(expected: expected, actual: size)
                } else if let expected = transfer.request.expectedDigest, expected != digest {
                    .digestMismatch(expected: expected, actual: digest)
                } else {
                    nil
                }
            }
            if let reason {
                if transfer.holdsResumedBytes && !transfer.didFullRefetch && !reason.isLocal {
                    // The splice may be what went wrong: the final hash is the judge, so fetch once in full.
                    let failure = AttemptFailure(sourceDisplayURL: transfer.source.displayURL, reason: reason)
                    transfer.failures.append(failure)
                    delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, retryIn: 0))
                    transfer.beginFullRefetch()
                    engine.partials?.removeMetadata(forPartial: transfer.temporaryPath)
                    return attach(transfer)
                }
                return fail(transfer, reason)
            }
            guard case .success(let digest) = digest else { return }
            var path = transfer.temporaryPath
            if transfer.isResumable {
                // The digest-named slot is shared by every entry with this content: the verified file leaves it
                // for a name of its own before its owner (who commits later) gets it.
                let owned = engine.configuration.temporaryDirectory + "/" + temporaryName()
                guard rename(path, owned) == 0 else {
                    return fail(transfer, .local(operation: "move verified file to", path: owned, errno: errno))
                }
                path = owned
                engine.partials?.removeMetadata(forPartial: transfer.temporaryPath)
            }
            transfer.closeFile()
            release(transfer)
            delegate.transfer(transfer.request.id, didProduce: .finished(.success(DownloadedFile(
                temporaryPath: path, size: size, digest: digest, sourceDisplayURL: transfer.source.displayURL,
                sourceIndex: transfer.sourceIndex,
                validators: transfer.request.expectedDigest != nil ? nil
                    : HTTPValidators(etag: transfer.responseHeaders.etag, lastModified: transfer.responseHeaders.lastModified),
                hasFileMode: transfer.hasFileMode && !transfer.isResumable))))
        }

        /// The transfer is leaving the engine: its handle goes back to the pool and its partial name is free
        /// again. Whoever ends the transfer decides what becomes of the partial and its metadata.
        private mutating func release(_ transfer: Transfer) {
            idleHandles.append(transfer.easy)
            if transfer.isResumable { claims.release(transfer.temporaryPath) }
        }

        /// Retries the same source for a transient failure, else moves to the next source, else gives up.
        private mutating func fail(_ transfer: Transfer, _ reason: FailureReason) {
            let failure = AttemptFailure(sourceDisplayURL: transfer.source.displayURL, reason: reason)
            transfer.failures.append(failure)
            if reason.isTransient && transfer.canRetry {
                let retryAfter = if case .httpStatus = reason { transfer.responseHeaders.retryAfter } else { RetryAfter?.none }
                let delay = engine.configuration.retryPolicy.delay(beforeRetry: transfer.retriesUsed + 1, retryAfter: retryAfter)
                delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, retryIn: delay))
                transfer.beginRetry(keepingBytes: reason.keepsPartial)
                transfer.retryAt = clock.now + delay
                waiting.append(transfer)
            } else if transfer.hasAnotherSource, !reason.isLocal {
                delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, retryIn: nil))
                transfer.beginNextSource()
                attach(transfer)
            } else {
                delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, retryIn: nil))
                giveUp(transfer, nil)
            }
        }

        /// The transfer ends in failure: keep a resumable partial for the next run, drop anything else.
        /// `extra` is a last failure to record (an interruption) on top of those already listed.
        private mutating func giveUp(_ transfer: Transfer, _ extra: FailureReason?) {
            if let extra {
                transfer.failures.append(AttemptFailure(sourceDisplayURL: transfer.source.displayURL, reason: extra))
            }
            let reason = transfer.failures.last?.reason ?? .interrupted
            transfer.closeFile()
            // The metadata was written when the response was accepted (`Transfer.acceptResponse`): a partial with
            // a validator is already resumable as it stands, so keeping it is leaving both in place.
            let keepsPartial = transfer.isResumable && transfer.totalBytes > 0 && reason.keepsPartial
                && transfer.validator != nil && engine.partials != nil
            release(transfer)
            if !keepsPartial {
                unlink(transfer.temporaryPath)
                if transfer.isResumable { engine.partials?.removeMetadata(forPartial: transfer.temporaryPath) }
            }
            delegate.transfer(transfer.request.id,
                              didProduce: .finished(.failure(TransferFailure(attempts: transfer.failures))))
        }

        /// libcurl's messages may quote the host or URL it was given; none of the source's secrets survive.
        static func scrub(_ message: String, of secrets: [String]) -> String {
            var message = message
            for secret in secrets.sorted(by: { $0.count > $1.count }) where !secret.isEmpty {
                message = message.replacingAll(secret, with: "***")
            }
            return message
        }

        /// Below this, a pinned file is fetched again whole rather than resumed: the partial's bookkeeping
        /// would cost more than the bytes.
        static let resumableSize: Int64 = 256 << 10

        /// Unique within the run (a random prefix per run, then a counter) without a getrandom call per file;
        /// files are created with O_EXCL all the same.
        private mutating func temporaryName() -> String {
            temporaryCount += 1
            return namePrefix + String(temporaryCount, radix: 16) + ".part"
        }
    }
}

/// The requests of a run not yet started, shared by its loops: each takes the next one when it has room, so a loop
/// slowed by a large file leaves the small ones to the others. A request is made when it is taken.
private final class RequestQueue: Sendable {
    private let count: Int
    private let make: @Sendable (Int) -> TransferRequest
    private let taken = Atomic<Int>(0)

    init(count: Int, make: @escaping @Sendable (Int) -> TransferRequest) {
        self.count = count
        self.make = make
    }

    var hasMore: Bool { taken.load(ordering: .relaxed) < count }

    func next() -> TransferRequest? {
        let index = taken.wrappingAdd(1, ordering: .relaxed).oldValue
        return index < count ? make(index) : nil
    }

    func takeAll() -> [TransferRequest] {
        var rest: [TransferRequest] = []
        while let request = next() { rest.append(request) }
        return rest
    }
}

/// Which digest-named partial files a transfer of this run holds, across loops.
private final class PartialClaims: Sendable {
    private let held = Mutex<Set<String>>([])

    /// False when another transfer holds it.
    func claim(_ path: String) -> Bool { held.withLock { $0.insert(path).inserted } }
    func release(_ path: String) { _ = held.withLock { $0.remove(path) } }
}

/// Digests finished by trailing hashers on their queues, waiting for the loop to pick them up.
private final class TrailingDigests: Sendable {
    private let finished = Mutex<(list: [(ObjectIdentifier, Result<Digest, FailureReason>)], closed: Bool)>(([], false))

    /// The wake-up happens under the lock that `take` needs: the loop cannot see the last digest, finish, and
    /// free the multi handle while this thread is still about to wake it.
    func add(_ key: ObjectIdentifier, _ digest: Result<Digest, FailureReason>, waking wakeUp: MultiHandle.WakeUp) {
        finished.withLock { state in
            guard !state.closed else { return }
            state.list.append((key, digest))
            wakeUp.wake()
        }
    }

    /// After this, `add` neither records nor wakes.
    func close() { finished.withLock { $0.closed = true } }

    func take() -> [(ObjectIdentifier, Result<Digest, FailureReason>)] {
        finished.withLock { state in
            defer { state.list.removeAll() }
            return state.list
        }
    }
}

extension FailureReason {
    /// A local failure (disk full, permission) is the same whichever source is tried.
    var isLocal: Bool {
        if case .local = self { return true }
        return false
    }

    /// Only a transfer cut short (by the network or an interruption) leaves bytes worth resuming.
    var keepsPartial: Bool {
        switch self {
        case .network, .interrupted: true
        default: false
        }
    }
}

/// The umask as the kernel reports it in /proc/self/status (Linux 4.7+): reading it with umask(2) would mean
/// setting it, for a moment, under every other thread of the process.
enum ProcessUmask {
    static func read() -> UInt32? {
        guard let file = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("Umask:") else { continue }
            return UInt32(String(text.dropFirst("Umask:".count).filter { ("0"..."7").contains($0) }), radix: 8)
        }
        return nil
    }
}
