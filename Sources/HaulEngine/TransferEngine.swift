import CCurl
import Glibc
import HaulDigest
import HaulFileSystem
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
package final class TransferEngine: Sendable {
    private let configuration: EngineConfiguration
    private let redirects: RedirectPolicy
    fileprivate let partials: PartialStore?
    /// The process's umask (nil if unknown), read once: what `open(2)` leaves out of a new file's mode.
    fileprivate let umask: UInt32? = ProcessUmask.read()

    package init(configuration: EngineConfiguration) {
        self.configuration = configuration
        self.redirects = RedirectPolicy(maxRedirects: configuration.maxRedirects)
        self.partials = configuration.partialDirectory.map(PartialStore.init(folder:))
    }

    package static var libcurlVersion: String { Curl.version }

    /// Fetches every request and returns when all have finished. Events reach `delegate` on the loops' threads:
    /// this one, and with `configuration.loops` above one, others at the same time.
    package func run(_ requests: [TransferRequest], delegate: TransferDelegate, reportsProgress: Bool = false,
                    cancellation: Cancellation? = nil) {
        run(count: requests.count, request: { requests[$0] }, delegate: delegate, reportsProgress: reportsProgress,
            cancellation: cancellation)
    }

    /// The same for `count` requests made on demand, in order, by the loop about to start each: the first
    /// transfer does not wait for 100,000 requests to be built, and building them is shared between the loops.
    package func run(count: Int, request: @escaping @Sendable (Int) -> TransferRequest, delegate: TransferDelegate,
                    reportsProgress: Bool = false, cancellation: Cancellation? = nil) {
        let run = RunState(queue: RequestQueue(count: count, make: request), claims: PartialClaims(), badHosts: BadHosts())
        let shares = configuration.loopShares
        let others = shares.dropFirst().compactMap { share in
            // A loop whose thread cannot start leaves its share unused; the others take every request.
            startThread { [self] in
                runLoop(share, run: run, delegate: delegate, reportsProgress: reportsProgress, cancellation: cancellation)
            }
        }
        runLoop(shares[0], run: run, delegate: delegate, reportsProgress: reportsProgress, cancellation: cancellation)
        for thread in others { pthread_join(thread, nil) }
        // Left only if no loop could start (libcurl out of memory): every request still ends with an event.
        for request in run.queue.takeAll() {
            Self.end(request, delegate: delegate, reason: .local(operation: "initialize libcurl for", path: "transfers", errno: ENOMEM))
        }
    }

    /// A request (and its sharers) that never started ends with `reason` as its only failure.
    fileprivate static func end(_ request: TransferRequest, delegate: TransferDelegate, reason: FailureReason) {
        for one in [request] + request.sharers {
            delegate.transfer(one.id, didProduce: .finished(.failure(TransferFailure(attempts: [
                AttemptFailure(sourceDisplayURL: one.sources.first?.displayURL ?? "", reason: reason),
            ]))))
        }
    }

    private func runLoop(_ share: EngineConfiguration.LoopShare, run: RunState, delegate: TransferDelegate,
                         reportsProgress: Bool, cancellation: Cancellation?) {
        let limits = [(CURLMOPT_MAX_TOTAL_CONNECTIONS, share.transfers), (CURLMOPT_MAX_HOST_CONNECTIONS, share.connectionsPerHost),
                      (CURLMOPT_MAXCONNECTS, share.transfers * 2)]
        guard let multi = MultiHandle(limits: limits) else {
            // No loop of its own: the requests it would have taken end now rather than wait for a loop forever.
            let reason = FailureReason.local(operation: "initialize libcurl for", path: "a transfer loop", errno: ENOMEM)
            while let request = run.queue.next() { TransferEngine.end(request, delegate: delegate, reason: reason) }
            return
        }
        var loop = Loop(engine: self, multi: multi, share: share, run: run, delegate: delegate,
                        reportsProgress: reportsProgress)
        let wakeUp = multi.wakeUpHandle
        cancellation?.attach(wakeUp)
        defer { cancellation?.detach(wakeUp) }
        loop.run(cancellation: cancellation)
    }

    /// What the loops of one `run` share.
    private struct RunState: Sendable {
        let queue: RequestQueue
        /// Partial files held by a transfer of this run (any loop): a second entry with the same digest gets its
        /// own file.
        let claims: PartialClaims
        /// Hosts that refused or timed out in this run: tried after the others.
        let badHosts: BadHosts
    }

    /// The mutable state of one loop of a `run`: transfers in libcurl, transfers waiting to retry or for a slot,
    /// and transfers whose body is complete but whose trailing hash is still being computed. Requests come from
    /// the queue the loops share.
    private struct Loop {
        let engine: TransferEngine
        let multi: MultiHandle
        /// This loop's part of the run's limits.
        let share: EngineConfiguration.LoopShare
        let run: RunState
        let delegate: TransferDelegate
        let reportsProgress: Bool
        /// Attempts in libcurl: each holds a slot, a handle and its open file.
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        /// Waiting out a backoff: no slot, no handle, no open file (any number may wait).
        var parked: [Transfer] = []
        /// Due to go on (a wait that is over, a sharer going on alone): they get free slots before new requests.
        var ready = FIFO<Transfer>()
        /// Bodies complete, hash still running: they hold a slot, a file and a hashing thread.
        var verifying: [ObjectIdentifier: Transfer] = [:]
        /// Out of descriptors (EMFILE, ENFILE) when they were to open their file or connect: they go on when
        /// another transfer of this loop has ended and given its descriptors back, not as failures.
        var waitingForDescriptors: [Transfer] = []
        /// Since when no transfer of this loop has run while some wait for descriptors: past half a minute, the
        /// descriptors are not coming back (something else holds them) and the waiting ones fail. Time, not turns:
        /// a turn can be short when the other loop's transfers are what holds the descriptors.
        var starvedSince: Double?
        let trailingDigests = TrailingDigests()
        let clock = LoopClock()
        var idleHandles: [EasyHandle] = []
        let namePrefix: String = {
            var generator = SystemRandomNumberGenerator()
            return String(generator.next() as UInt64, radix: 16) + "-"
        }()
        var temporaryCount = 0

        init(engine: TransferEngine, multi: MultiHandle, share: EngineConfiguration.LoopShare, run: RunState,
             delegate: TransferDelegate, reportsProgress: Bool) {
            self.engine = engine
            self.multi = multi
            self.share = share
            self.run = run
            self.delegate = delegate
            self.reportsProgress = reportsProgress
        }

        private var hasWork: Bool {
            !active.isEmpty || !parked.isEmpty || !ready.isEmpty || !verifying.isEmpty || !waitingForDescriptors.isEmpty
        }

        mutating func run(cancellation: Cancellation?) {
            let limit = share.transfers
            while run.queue.hasMore || hasWork {
                if let cancellation, cancellation.isCancelled { return stopAll(cancellation.reason) }
                // Refill before polling: curl_multi_poll sleeps its whole timeout when it holds no transfers.
                clock.tick()
                let now = clock.now
                if !parked.isEmpty {
                    let due = parked.filter { $0.retryAt <= now }.sorted { $0.retryAt < $1.retryAt }
                    parked.removeAll { $0.retryAt <= now }
                    for transfer in due { ready.append(transfer) }
                }
                resumeWaitingForDescriptors(now: now)
                // Transfers still being hashed hold a file and a hashing thread: they count against --jobs. One
                // waiting for a retry does not; when its wait is over, it goes before requests not yet started.
                // No new request starts while some wait for descriptors: it would only take theirs.
                while active.count + verifying.count < limit {
                    if let transfer = ready.popFirst() {
                        attach(transfer)
                    } else if waitingForDescriptors.isEmpty, let request = run.queue.next() {
                        start(request)
                    } else {
                        break
                    }
                }
                multi.perform()
                let finished = multi.completed()
                for (easy, result) in finished { complete(easy, result) }
                let digests = trailingDigests.take()
                for (key, digest) in digests {
                    guard let transfer = verifying.removeValue(forKey: key) else { continue }
                    judge(transfer, digest: digest)
                }
                // While some wait for descriptors, a turn always sleeps a little: a retry that finds none again
                // must not spin.
                let mayTurnAtOnce = !finished.isEmpty && waitingForDescriptors.isEmpty
                if !mayTurnAtOnce && digests.isEmpty && hasWork && (ready.isEmpty || active.count + verifying.count >= limit) {
                    multi.poll(milliseconds: waitingForDescriptors.isEmpty ? pollTimeout(now: now) : 50)
                }
            }
        }

        /// Stopped (interrupted, or out of time): every transfer ends now with `reason`. Partials of pinned files are kept (with their
        /// validator) for the next run; other temporary files are removed. Queued requests never start (whichever
        /// loop stops first takes them all).
        private mutating func stopAll(_ reason: FailureReason) {
            // Hashes still running report to nobody, and wake nothing: the multi handle is about to go.
            trailingDigests.close()
            let inFlight = Array(active.values) + parked + ready.drain() + Array(verifying.values) + waitingForDescriptors
            waitingForDescriptors = []
            for transfer in active.values { if let easy = transfer.easy { multi.remove(easy) } }
            active = [:]
            parked = []
            verifying = [:]
            for transfer in inFlight { giveUp(transfer, reason) }
            for request in run.queue.takeAll() { TransferEngine.end(request, delegate: delegate, reason: reason) }
        }

        /// Parks `transfer` until descriptors are given back (see `waitingForDescriptors`).
        private mutating func waitForDescriptors(_ transfer: Transfer) {
            transfer.closeFile()
            waitingForDescriptors.append(transfer)
        }

        /// Once a turn, one transfer waiting for descriptors goes on (first in, first out) when a slot is free (the
        /// loop polls at most 50 ms while some wait); with nothing of this loop's own running for half a minute,
        /// the descriptors are not coming back, and the waiting ones fail with what they met.
        private mutating func resumeWaitingForDescriptors(now: Double) {
            guard !waitingForDescriptors.isEmpty else { return }
            if active.isEmpty && verifying.isEmpty {
                let since = starvedSince ?? now
                starvedSince = since
                guard now - since <= 30 else {
                    starvedSince = nil
                    let stuck = waitingForDescriptors
                    waitingForDescriptors = []
                    for transfer in stuck {
                        giveUp(transfer, .local(operation: "open a file or a connection for", path: transfer.source.displayURL,
                                                errno: EMFILE))
                    }
                    return
                }
            } else {
                starvedSince = nil
                guard active.count + verifying.count < share.transfers else { return }
            }
            ready.append(waitingForDescriptors.removeFirst())
        }

        private func pollTimeout(now: Double) -> Int32 {
            guard let soonest = parked.map(\.retryAt).min() else { return 1000 }
            return Int32(max(0, min(1000, (soonest - now) * 1000)))
        }

        private mutating func start(_ request: TransferRequest) {
            guard !request.sources.isEmpty else {
                for one in [request] + request.sharers {
                    delegate.transfer(one.id, didProduce: .finished(.failure(TransferFailure(attempts: []))))
                }
                return
            }
            let transfer = makeTransfer(request, rotation: SourceRotation(sources: request.sources.count, retries: request.retries))
            let first = transfer.rotation.first(avoiding: badHostFlags(transfer))
            if first != transfer.sourceIndex { transfer.prepareAttempt(at: first, keepingBytes: false) }
            delegate.transfer(request.id, didProduce: .started(sourceDisplayURL: transfer.source.displayURL))
            for sharer in transfer.sharers {
                let index = sharer.sourceMap[first] ?? 0
                delegate.transfer(sharer.request.id, didProduce: .started(sourceDisplayURL: sharer.request.sources[index].displayURL))
            }
            switch openFile(for: request, source: first) {
            case .success(let file): transfer.adopt(file)
            case .failure(let reason) where reason.isOutOfDescriptors: return waitForDescriptors(transfer)
            case .failure(let reason): return giveUp(transfer, reason)
            }
            if transfer.partialLooksComplete {
                // Everything is already here (a run ended between download and commit): only the hash is left.
                verify(transfer)
            } else {
                attach(transfer)
            }
        }

        private func makeTransfer(_ request: TransferRequest, rotation: SourceRotation, failures: [AttemptFailure] = [],
                                  source: Int = 0) -> Transfer {
            let delegate = self.delegate
            let id = request.id
            return Transfer(request: request, rotation: rotation, failures: failures, sourceIndex: source,
                            maxBodyBytes: engine.configuration.maxBodyBytes, partials: engine.partials,
                            reportsProgress: reportsProgress, clock: clock) { delegate.transfer(id, didProduce: $0) }
        }

        /// Which of the transfer's sources are on hosts that refused or timed out in this run. Nothing is parsed
        /// while no host has failed, nor for a request with one source (there is nothing to reorder).
        private func badHostFlags(_ transfer: Transfer) -> [Bool] {
            guard transfer.request.sources.count > 1, !run.badHosts.isEmpty else { return [] }
            let keys = transfer.hostKeys ?? transfer.request.sources.map { BadHosts.key(for: $0.url) }
            transfer.hostKeys = keys
            return keys.map(run.badHosts.contains)
        }

        /// A pinned file gets the partial named by its digest (resuming it when its metadata says the bytes came
        /// from `source`); anything else, or a second entry wanting the same partial in this run, gets a fresh
        /// random name.
        private mutating func openFile(for request: TransferRequest, source: Int) -> Result<TemporaryFile, FailureReason> {
            if let digest = request.expectedDigest, let partials = engine.partials,
               (request.expectedSize ?? .max) >= Self.resumableSize {
                let partial = partials.file(for: digest)
                if run.claims.claim(partial.name) {
                    let descriptor: Int32
                    switch partial.open(O_RDWR | O_CREAT) {
                    case .success(let opened): descriptor = opened
                    case .failure(let failure):
                        run.claims.release(partial.name)
                        return .failure(.local(operation: "open partial file", path: partial.path, errno: failure.errno))
                    }
                    var info = stat()
                    // A FIFO or a device planted under a partial's name is not a partial.
                    guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                        close(descriptor)
                        run.claims.release(partial.name)
                        return .failure(.local(operation: "use partial file", path: partial.path, errno: EINVAL))
                    }
                    let size = Int64(info.st_size)
                    let metadata = partials.metadata(forPartial: partial)
                    let resumable = size > 0 && metadata?.sourceKey == request.sources[source].key
                        && size <= (request.expectedSize ?? .max)
                    if let metadata, resumable {
                        return .success(TemporaryFile(staged: partial, descriptor: descriptor, isPartial: true,
                                                      resume: (size, metadata.validator)))
                    }
                    if ftruncate(descriptor, 0) != 0 {
                        let code = errno
                        close(descriptor)
                        run.claims.release(partial.name)
                        return .failure(.local(operation: "truncate", path: partial.path, errno: code))
                    }
                    partials.removeMetadata(forPartial: partial)
                    return .success(TemporaryFile(staged: partial, descriptor: descriptor, isPartial: true, resume: nil))
                }
            }
            let fresh = newTemporaryFile()
            switch FileClone.create(fresh, mode: request.fileMode, umask: engine.umask) {
            case .success(let created):
                return .success(TemporaryFile(staged: fresh, descriptor: created.descriptor, hasFileMode: created.hasFileMode,
                                              isPartial: false, resume: nil))
            case .failure(let error):
                return .failure(.local(operation: "create temporary file", path: fresh.path, errno: error.code))
            }
        }

        /// Configures the transfer's handle for its current URL and hands it to libcurl. A transfer coming back
        /// from a wait opens its file again and takes a handle first.
        private mutating func attach(_ transfer: Transfer) {
            if !transfer.hasFile {
                // A sharer going on alone: its first attempt of its own.
                switch openFile(for: transfer.request, source: transfer.sourceIndex) {
                case .success(let file): transfer.adopt(file)
                case .failure(let reason) where reason.isOutOfDescriptors: return waitForDescriptors(transfer)
                case .failure(let reason): return giveUp(transfer, reason)
                }
            } else if let code = transfer.reopenFile() {
                if code == EMFILE || code == ENFILE { return waitForDescriptors(transfer) }
                return giveUp(transfer, .local(operation: "open", path: transfer.temporaryPath, errno: code))
            }
            if transfer.easy == nil {
                guard let easy = idleHandles.popLast() ?? EasyHandle() else {
                    return giveUp(transfer, .local(operation: "initialize libcurl for", path: transfer.temporaryPath, errno: ENOMEM))
                }
                transfer.easy = easy
            }
            guard let easy = transfer.easy else { return }
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
            easy.preferReceiveBuffer(bytes: 256 * 1024)
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
            easy.setCallbacks(context: Unmanaged.passUnretained(transfer).toOpaque(), write: transferWriteCallback,
                              header: transferHeaderCallback, progress: transferInfoCallback,
                              openSocket: transferOpenSocketCallback)
            if let refused = easy.refusal ?? multi.add(easy) { return giveUp(transfer, refused) }
            transfer.socketError = 0
            transfer.recordVisit()
            active[easy.raw] = transfer
        }

        /// The transfer waits until `time` holding nothing a running transfer needs: its slot, its handle (back to
        /// the pool) and its open file (reopened when the wait is over) are all given up.
        private mutating func park(_ transfer: Transfer, until time: Double) {
            transfer.closeFile()
            if let easy = transfer.easy {
                idleHandles.append(easy)
                transfer.easy = nil
            }
            transfer.retryAt = time
            parked.append(transfer)
        }

        private mutating func complete(_ raw: UnsafeMutableRawPointer, _ result: CURLcode) {
            guard let transfer = active.removeValue(forKey: raw), let easy = transfer.easy else { return }
            multi.remove(easy)
            if transfer.responseHeaders.status > 0 { run.badHosts.forgive(transfer.currentURL) }
            if transfer.restartsFromZero {
                // Not a retry: the server answered, with a range a resume cannot use. The same source, from byte 0,
                // at once (as if it had answered 200).
                let failure = AttemptFailure(sourceDisplayURL: transfer.source.displayURL,
                                             reason: transfer.abortReason ?? .resumeRejected("another range"))
                transfer.failures.append(failure)
                delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, next: sameSourceAtOnce(transfer)))
                transfer.beginRestartFromZero()
                return attach(transfer)
            }
            switch response(of: transfer, result, easy) {
            case .redirect(let url, let sendHeaders):
                transfer.beginRedirect(to: url, sendHeaders: sendHeaders)
                attach(transfer)
            case .failed where transfer.socketError == EMFILE || transfer.socketError == ENFILE:
                // No descriptor for a socket: not the server's fault, and not an attempt.
                idleHandles.append(easy)
                transfer.easy = nil
                transfer.closeFile()
                waitForDescriptors(transfer)
            case .failed(let reason):
                fail(transfer, reason)
            case .bodyComplete:
                verify(transfer)
            case .notModified:
                transfer.closeFile()
                release(transfer)
                if !transfer.isResumable { transfer.file?.remove() }
                splitSharers(of: transfer)
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
        private func response(of transfer: Transfer, _ result: CURLcode, _ easy: EasyHandle) -> Response {
            if let reason = transfer.abortReason { return .failed(reason) }
            // An error body is read only so far; cutting it short is not a network failure.
            guard result == CURLE_OK || transfer.discarding && result == CURLE_WRITE_ERROR else {
                return .failed(Self.failure(of: transfer, result, easy))
            }
            let status = transfer.responseHeaders.status
            if status == 407 {
                let proxy = ProxySettings.proxy(for: transfer.currentURL)
                return .failed(.proxyAuthenticationRequired(variable: proxy?.variable, proxy: proxy?.redactedURL))
            }
            if (300..<400).contains(status),
               let target = easy.redirectURL ?? transfer.responseHeaders.location.flatMap({
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

        /// libcurl's error, in haul's terms: answers libcurl itself found malformed are protocol violations (not
        /// retried on that URL), a proxy's 407 to a tunnel says what the proxy wants.
        private static func failure(of transfer: Transfer, _ result: CURLcode, _ easy: EasyHandle) -> FailureReason {
            let detail = easy.errorMessage
            let message = scrub(detail.isEmpty ? result.message : detail, of: transfer.source.secrets)
            if easy.connectCode == 407 {
                let proxy = ProxySettings.proxy(for: transfer.currentURL)
                return .proxyAuthenticationRequired(variable: proxy?.variable, proxy: proxy?.redactedURL)
            }
            switch result {
            case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL:
                // Invalid Content-Length, a status line libcurl cannot read, an unsupported status code.
                return .protocolViolation(ServerText.quoted(message, limit: 200))
            case CURLE_OUT_OF_MEMORY where transfer.responseHeaders.headerBytes > 0 && transfer.bytesWritten == 0:
                // libcurl 7.88 reports a header line over its 100 KiB limit as out of memory.
                return .protocolViolation("a response header line over 100 KiB")
            default:
                return .network(code: CurlCode(result), message: message)
            }
        }

        /// The bytes are all in: they are a file only if size and digest are what was pinned. Whatever they are for
        /// this request, they may be exactly what a sharer pinned.
        private mutating func judge(_ transfer: Transfer, digest: Result<Digest, FailureReason>) {
            let size = transfer.totalBytes
            let encoding = transfer.servedEncoding
            let reason: FailureReason? = switch digest {
            case .failure(let reason): reason
            case .success(let digest):
                Self.mismatch(transfer.request, size: size, digest: digest, encoding: encoding,
                              unsizedLimit: engine.configuration.maxBodyBytes)
            }
            let spliced = transfer.holdsResumedBytes && !transfer.didFullRefetch
            if case .success(let digest) = digest, !transfer.sharers.isEmpty, reason == nil || !spliced {
                // Bytes spliced onto a partial that fail their own hash are not offered: the splice may be what is
                // wrong, and the full refetch below will be.
                serveSharers(of: transfer, size: size, digest: digest)
            }
            if let reason {
                if spliced && !reason.isLocal {
                    // The splice may be what went wrong: the final hash is the judge, so fetch once in full.
                    let failure = AttemptFailure(sourceDisplayURL: transfer.source.displayURL, reason: reason)
                    transfer.failures.append(failure)
                    delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, next: sameSourceAtOnce(transfer)))
                    transfer.beginFullRefetch()
                    if let file = transfer.file { engine.partials?.removeMetadata(forPartial: file) }
                    return attach(transfer)
                }
                return fail(transfer, reason)
            }
            guard case .success(let digest) = digest, var verified = transfer.file else { return }
            if transfer.isResumable {
                // The digest-named slot is shared by every entry with this content: the verified file leaves it
                // for a name of its own before its owner (who commits later) gets it.
                let owned = newTemporaryFile()
                switch verified.move(to: owned.name, in: owned.folder) {
                case .success(let moved): verified = moved
                case .failure(let failure):
                    return fail(transfer, .local(operation: "move verified file to", path: owned.path, errno: failure.errno))
                }
                if let partial = transfer.file { engine.partials?.removeMetadata(forPartial: partial) }
            }
            transfer.closeFile()
            release(transfer)
            splitSharers(of: transfer)
            let unpinned = transfer.request.expectedDigest == nil
            delegate.transfer(transfer.request.id, didProduce: .finished(.success(DownloadedFile(
                temporaryPath: verified.path, temporaryName: verified.name, size: size, digest: digest,
                sourceDisplayURL: transfer.source.displayURL, sourceIndex: transfer.sourceIndex,
                validators: unpinned ? HTTPValidators(etag: transfer.responseHeaders.etag,
                                                      lastModified: transfer.responseHeaders.lastModified) : nil,
                hasFileMode: transfer.hasFileMode && !transfer.isResumable,
                contentEncoding: unpinned ? encoding : nil))))
        }

        /// Why `size` bytes hashing to `digest` are not the file `request` pinned (or, unsized, more than it may
        /// take: a group's fetch accepts as much as its largest member does); nil when they are.
        private static func mismatch(_ request: TransferRequest, size: Int64, digest: Digest, encoding: String?,
                                     unsizedLimit: Int64) -> FailureReason? {
            if request.expectedSize == nil, size > unsizedLimit { return .tooLarge(limit: unsizedLimit) }
            if let expected = request.expectedSize, expected != size {
                return .sizeMismatch(expected: expected, actual: size, contentEncoding: encoding)
            }
            if let expected = request.expectedDigest, !request.accepts(digest) {
                return .digestMismatch(expected: expected, actual: digest, contentEncoding: encoding)
            }
            return nil
        }

        /// Each sharer that has the source these bytes came from is served by them: a copy of its own when they
        /// are what it pinned; otherwise that source is done for it (wrong bytes are not asked for again) and it
        /// goes on alone with its other sources.
        private mutating func serveSharers(of transfer: Transfer, size: Int64, digest: Digest) {
            var waiting: [Sharer] = []
            for var sharer in transfer.sharers {
                guard let index = sharer.sourceMap[transfer.sourceIndex],
                      sharer.request.hashAlgorithm == transfer.request.hashAlgorithm else {
                    waiting.append(sharer)
                    continue
                }
                let request = sharer.request
                let source = request.sources[index]
                let unpinned = request.expectedDigest == nil
                let reason = Self.mismatch(request, size: size, digest: digest, encoding: transfer.servedEncoding,
                                           unsizedLimit: engine.configuration.maxBodyBytes)
                if let reason {
                    let failure = AttemptFailure(sourceDisplayURL: source.displayURL, reason: reason)
                    sharer.rotation.record(.permanent, at: index)
                    sharer.failures.append(failure)
                    goOnAlone(sharer, after: failure)
                    continue
                }
                let copy = newTemporaryFile()
                guard let original = transfer.file else { continue }
                switch FileClone.copy(original, to: copy, mode: request.fileMode, umask: engine.umask) {
                case .success(let hasFileMode):
                    delegate.transfer(request.id, didProduce: .finished(.success(DownloadedFile(
                        temporaryPath: copy.path, temporaryName: copy.name, size: size, digest: digest,
                        sourceDisplayURL: source.displayURL, sourceIndex: index,
                        validators: unpinned ? HTTPValidators(etag: transfer.responseHeaders.etag,
                                                              lastModified: transfer.responseHeaders.lastModified) : nil,
                        hasFileMode: hasFileMode, contentEncoding: unpinned ? transfer.servedEncoding : nil))))
                case .failure(let error):
                    sharer.failures.append(AttemptFailure(sourceDisplayURL: source.displayURL,
                                                          reason: .local(operation: "copy verified file to", path: copy.path, errno: error.code)))
                    delegate.transfer(request.id, didProduce: .finished(.failure(TransferFailure(attempts: sharer.failures))))
                }
            }
            transfer.sharers = waiting
        }

        /// The leader is done (or gave up): sharers its bytes did not serve go on alone, each from where the
        /// group left it; an interruption ends them with it.
        private mutating func splitSharers(of transfer: Transfer, stoppedBy stop: FailureReason? = nil) {
            let sharers = transfer.sharers
            transfer.sharers = []
            for var sharer in sharers {
                if let stop {
                    sharer.failures.append(AttemptFailure(sourceDisplayURL: sharer.request.sources[0].displayURL, reason: stop))
                    delegate.transfer(sharer.request.id, didProduce: .finished(.failure(TransferFailure(attempts: sharer.failures))))
                } else {
                    goOnAlone(sharer, after: nil)
                }
            }
        }

        /// A sharer becomes a transfer of its own, at its next source (now, or after a backoff), or ends when the
        /// group already exhausted every source it has. `failure`: its own last failure, to report with what
        /// comes next.
        private mutating func goOnAlone(_ sharer: Sharer, after failure: AttemptFailure?) {
            var rotation = sharer.rotation
            let transfer = makeTransfer(sharer.request, rotation: rotation, failures: sharer.failures)
            guard let step = rotation.next(avoiding: badHostFlags(transfer)) else {
                if let failure { delegate.transfer(sharer.request.id, didProduce: .attemptFailed(failure, next: nil)) }
                delegate.transfer(sharer.request.id, didProduce: .finished(.failure(TransferFailure(attempts: sharer.failures))))
                return
            }
            transfer.rotation = rotation
            let delay = delay(before: step, of: transfer)
            if let failure {
                delegate.transfer(sharer.request.id, didProduce: .attemptFailed(failure, next: nextAttempt(step, of: transfer, delay: delay)))
            }
            transfer.prepareAttempt(at: step.source, keepingBytes: false)
            if delay > 0 {
                transfer.retryAt = clock.now + delay
                parked.append(transfer)
            } else {
                ready.append(transfer)
            }
        }

        /// The transfer is leaving the engine: its handle goes back to the pool and its partial name is free
        /// again. Whoever ends the transfer decides what becomes of the partial and its metadata.
        private mutating func release(_ transfer: Transfer) {
            if let easy = transfer.easy {
                idleHandles.append(easy)
                transfer.easy = nil
            }
            if transfer.isResumable, let file = transfer.file { run.claims.release(file.name) }
        }

        /// A failed attempt: the next source at once, the same or another after a backoff (see `SourceRotation`),
        /// or the end. Sharers count the attempt as theirs when they have the same source.
        private mutating func fail(_ transfer: Transfer, _ reason: FailureReason) {
            let failure = AttemptFailure(sourceDisplayURL: transfer.source.displayURL, reason: reason)
            transfer.failures.append(failure)
            if reason.marksHostBad { run.badHosts.markBad(transfer.currentURL) }
            // A local failure (disk full, permission) is the same whichever source is tried.
            guard !reason.isLocal, !reason.stopsTheRun else {
                delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, next: nil))
                return giveUp(transfer, nil)
            }
            var notBefore: Double?
            if case .httpStatus = reason, let retryAfter = transfer.responseHeaders.retryAfter {
                notBefore = clock.now + engine.configuration.retryPolicy.floor(for: retryAfter)
            }
            let outcome: SourceRotation.Outcome = reason.isTransient ? .transient(notBefore: notBefore) : .permanent
            transfer.rotation.record(outcome, at: transfer.sourceIndex)
            // What the URL did is the group's; wrong bytes are judged for each sharer on its own (`serveSharers`).
            for index in transfer.sharers.indices where !reason.isAboutTheBytes {
                guard let shared = transfer.sharers[index].sourceMap[transfer.sourceIndex] else { continue }
                transfer.sharers[index].rotation.record(outcome, at: shared)
                transfer.sharers[index].failures.append(AttemptFailure(
                    sourceDisplayURL: transfer.sharers[index].request.sources[shared].displayURL, reason: reason))
            }
            guard let step = transfer.rotation.next(avoiding: badHostFlags(transfer)) else {
                delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, next: nil))
                return giveUp(transfer, nil)
            }
            let delay = delay(before: step, of: transfer)
            delegate.transfer(transfer.request.id, didProduce: .attemptFailed(failure, next: nextAttempt(step, of: transfer, delay: delay)))
            transfer.prepareAttempt(at: step.source, keepingBytes: reason.keepsPartial)
            if delay > 0 {
                park(transfer, until: clock.now + delay)
            } else {
                attach(transfer)
            }
        }

        /// Seconds before `step`, to the microsecond (a `Retry-After` floor reads back as the number it was).
        private func delay(before step: SourceRotation.Step, of transfer: Transfer) -> Double {
            let policy = engine.configuration.retryPolicy
            let seconds = transfer.rotation.delay(before: step, now: clock.now) { policy.delay(beforeRetry: $0, retryAfter: nil) }
            return (seconds * 1e6).rounded() / 1e6
        }

        /// The same source again, at once, without a retry spent: the server answered, in a way a fresh full
        /// request (not a resume) can fix.
        private func sameSourceAtOnce(_ transfer: Transfer) -> NextAttempt {
            nextAttempt(SourceRotation.Step(source: transfer.sourceIndex, retry: transfer.rotation.failures(at: transfer.sourceIndex),
                                            backoffRound: 0), of: transfer, delay: 0)
        }

        private func nextAttempt(_ step: SourceRotation.Step, of transfer: Transfer, delay: Double) -> NextAttempt {
            NextAttempt(sourceDisplayURL: transfer.request.sources[step.source].displayURL, sourceIndex: step.source,
                        delay: delay, retry: step.retry, retries: transfer.rotation.retries)
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
            if !keepsPartial, let file = transfer.file {
                file.remove()
                if transfer.isResumable { engine.partials?.removeMetadata(forPartial: file) }
            }
            splitSharers(of: transfer, stoppedBy: reason.stopsTheRun ? reason : nil)
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

        /// A fresh name in the temporary folder: unique within the run (a random prefix per run, then a counter)
        /// without a getrandom call per file; files are created with O_EXCL all the same. The grammar is
        /// `isStagingName`'s.
        private mutating func newTemporaryFile() -> StagedFile {
            temporaryCount += 1
            return StagedFile(folder: engine.configuration.temporaryDirectory,
                              name: namePrefix + String(temporaryCount, radix: 16) + ".part")
        }
    }
}

/// A first-in, first-out queue: appending and taking the first are O(1) (amortized).
private struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }

    mutating func append(_ item: Element) { items.append(item) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        return item
    }

    mutating func drain() -> [Element] {
        defer { self = FIFO() }
        return Array(items[head...])
    }
}

/// Hosts (scheme, host and port) that refused connections or timed out during this run, shared by the loops:
/// the sources of later transfers that are on them are tried after the others. A host that answers again is
/// forgiven.
private final class BadHosts: Sendable {
    private let hosts = Mutex<Set<String>>([])
    /// Read on every choice of a source; the set is locked only once a host has failed.
    private let count = Atomic<Int>(0)

    var isEmpty: Bool { count.load(ordering: .relaxed) == 0 }

    static func key(for url: String) -> String {
        guard let origin = URLOrigin(url) else { return url }
        return "\(origin.scheme)://\(origin.host):\(origin.port)"
    }

    func contains(_ key: String) -> Bool { hosts.withLock { $0.contains(key) } }

    func markBad(_ url: String) {
        let key = Self.key(for: url)
        hosts.withLock { hosts in
            if hosts.insert(key).inserted { count.wrappingAdd(1, ordering: .relaxed) }
        }
    }

    func forgive(_ url: String) {
        guard !isEmpty else { return }
        let key = Self.key(for: url)
        hosts.withLock { hosts in
            if hosts.remove(key) != nil { count.wrappingSubtract(1, ordering: .relaxed) }
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
    /// The process (or the system) ran out of file descriptors: a matter of waiting, not of the source.
    var isOutOfDescriptors: Bool {
        if case .local(_, _, let code) = self { return code == EMFILE || code == ENFILE }
        return false
    }

    /// A local failure (disk full, permission) is the same whichever source is tried.
    var isLocal: Bool {
        if case .local = self { return true }
        return false
    }

    /// The bytes arrived and are not the file pinned: a verdict on one request's pin, not on the URL.
    var isAboutTheBytes: Bool {
        switch self {
        case .digestMismatch, .sizeMismatch: true
        default: false
        }
    }

    /// Only a transfer cut short (by the network, an interruption or the run's time limit) leaves bytes worth resuming.
    var keepsPartial: Bool {
        switch self {
        case .network, .interrupted, .timeLimitReached: true
        default: false
        }
    }

    /// The run is stopping (a signal, its time limit): nothing more is tried, for any entry.
    var stopsTheRun: Bool {
        switch self {
        case .interrupted, .timeLimitReached: true
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
