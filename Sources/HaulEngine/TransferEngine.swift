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
    /// The rules every transfer's decisions follow (`TransferStateMachine`).
    private let rules: TransferStateMachine.Rules
    fileprivate let partials: PartialStore?
    fileprivate var startsWriteback: Bool { configuration.startsWriteback }
    /// The process's umask (nil if unknown), read once: what `open(2)` leaves out of a new file's mode.
    fileprivate let umask: UInt32? = ProcessUmask.read()

    package init(configuration: EngineConfiguration) {
        self.configuration = configuration
        self.rules = TransferStateMachine.Rules(
            retryPolicy: configuration.retryPolicy,
            redirects: RedirectPolicy(maxRedirects: configuration.maxRedirects),
            maxBodyBytes: configuration.maxBodyBytes)
        self.partials = configuration.partialDirectory.map(PartialStore.init(folder:))
    }

    /// Fetches every request and returns when all have finished. Events reach `delegate` on the loops' threads:
    /// this one, and with `configuration.loops` above one, others at the same time.
    package func run(
        _ requests: [TransferRequest], delegate: TransferDelegate, reportsProgress: Bool = false,
        cancellation: Cancellation? = nil
    ) {
        run(
            count: requests.count, request: { requests[$0] }, delegate: delegate, reportsProgress: reportsProgress,
            cancellation: cancellation)
    }

    /// The same for `count` requests made on demand, in order, by the loop about to start each: the first
    /// transfer does not wait for 100,000 requests to be built, and building them is shared between the loops.
    package func run(
        count: Int, request: @escaping @Sendable (Int) -> TransferRequest, delegate: TransferDelegate,
        reportsProgress: Bool = false, cancellation: Cancellation? = nil
    ) {
        let run = RunState(
            queue: RequestQueue(count: count, make: request), claims: PartialClaims(), badHosts: BadHosts(),
            rateLimiter: configuration.maxBytesPerSecond.map {
                RateLimiter(bytesPerSecond: $0, now: MonotonicClock.seconds())
            })
        let shares = configuration.loopShares
        let folders = Self.stagingFolders(loops: shares.count, in: configuration.temporaryDirectory)
        let others = zip(shares, folders).dropFirst().compactMap { share, folder in
            // A loop whose thread cannot start leaves its share unused; the others take every request.
            startThread { [self] in
                runLoop(
                    share, stagingIn: folder, run: run, delegate: delegate, reportsProgress: reportsProgress,
                    cancellation: cancellation)
            }
        }
        runLoop(
            shares[0], stagingIn: folders[0], run: run, delegate: delegate, reportsProgress: reportsProgress,
            cancellation: cancellation)
        for thread in others { pthread_join(thread, nil) }
        // Left only if no loop could start (libcurl out of memory): every request still ends with an event.
        for request in run.queue.takeAll() {
            Self.end(
                request, delegate: delegate, reason: .local(operation: .startLibcurl, path: "transfers", errno: ENOMEM))
        }
    }

    /// A request (and its sharers) that never started ends with `reason` as its only failure.
    fileprivate static func end(_ request: TransferRequest, delegate: TransferDelegate, reason: FailureReason) {
        for one in [request] + request.sharers {
            delegate.transfer(
                one.id,
                didProduce: .finished(
                    .failure(
                        TransferFailure(attempts: [
                            AttemptFailure(sourceDisplayURL: one.sources.first?.displayURL ?? "", reason: reason)
                        ]))))
        }
    }

    /// Where each loop writes its files: with several loops, each in a folder of its own in `temporaryDirectory`
    /// (`loop-K`, see `isLoopFolderName`). Creating a file and renaming one out of a folder both hold that folder's
    /// lock: with one folder, both loops and the commit wait on it. On a journaled ext4, 100,000 small files took
    /// 2.5–7% less time in four A/B runs (docs/PERFORMANCE.md, "Durability on real disks"). A folder that cannot
    /// be made leaves its loop in `temporaryDirectory`, as with one loop.
    private static func stagingFolders(loops: Int, in temporary: DirectoryHandle) -> [DirectoryHandle] {
        guard loops > 1 else { return [temporary] }
        return (1...loops).map { index in
            (try? temporary.subdirectory(loopFolderName(index), creatingWithMode: 0o700).get()) ?? temporary
        }
    }

    private func runLoop(
        _ share: EngineConfiguration.LoopShare, stagingIn folder: DirectoryHandle, run: RunState,
        delegate: TransferDelegate, reportsProgress: Bool, cancellation: Cancellation?
    ) {
        let limits = [
            (CURLMOPT_MAX_TOTAL_CONNECTIONS, share.transfers),
            (CURLMOPT_MAX_HOST_CONNECTIONS, share.connectionsPerHost),
            (CURLMOPT_MAXCONNECTS, share.transfers * 2),
        ]
        guard let multi = MultiHandle(limits: limits) else {
            // No loop of its own: the requests it would have taken end now rather than wait for a loop forever.
            let reason = FailureReason.local(operation: .startLibcurl, path: "a transfer loop", errno: ENOMEM)
            while let request = run.queue.next() { TransferEngine.end(request, delegate: delegate, reason: reason) }
            return
        }
        var loop = Loop(
            engine: self, multi: multi, share: share, stagingFolder: folder, run: run, delegate: delegate,
            reportsProgress: reportsProgress, schedule: LoopSchedule(slots: share.transfers))
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
        /// The run's `--limit-rate` budget, shared by every loop.
        let rateLimiter: RateLimiter?
    }

    /// The mutable state of one loop of a `run`: transfers in libcurl, transfers whose body is complete but whose
    /// trailing hash is still being computed, and the schedule of those waiting (to retry, for a slot, for
    /// descriptors), which decides what goes on when. Requests come from the queue the loops share.
    private struct Loop {
        let engine: TransferEngine
        let multi: MultiHandle
        /// This loop's part of the run's limits.
        let share: EngineConfiguration.LoopShare
        /// Where this loop creates its temporary files.
        let stagingFolder: DirectoryHandle
        let run: RunState
        let delegate: TransferDelegate
        let reportsProgress: Bool
        /// Attempts in libcurl: each holds a slot, a handle and its open file.
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        /// Bodies complete, hash still running: they hold a slot, a file and a hashing thread.
        var verifying: [ObjectIdentifier: Transfer] = [:]
        /// The transfers waiting, and what goes on next.
        var schedule: LoopSchedule<Transfer>
        let trailingDigests = TrailingDigests()
        let clock = LoopClock()
        var idleHandles: [EasyHandle] = []
        let namePrefix: String = {
            var generator = SystemRandomNumberGenerator()
            return String(generator.next() as UInt64, radix: 16) + "-"
        }()
        var temporaryCount = 0

        private var hasWork: Bool {
            !active.isEmpty || !verifying.isEmpty || !schedule.isEmpty
        }

        /// Transfers holding a slot: in libcurl, or being hashed (they hold a file and a hashing thread).
        private var running: Int { active.count + verifying.count }

        mutating func run(cancellation: Cancellation?) {
            while run.queue.hasMore || hasWork {
                if let cancellation, cancellation.isCancelled { return stopAll(cancellation.reason) }
                // Refill before polling: curl_multi_poll sleeps its whole timeout when it holds no transfers.
                clock.tick()
                let now = clock.now
                for transfer in schedule.beginTurn(now: now, running: running) {
                    let reason = FailureReason.local(
                        operation: .openFileOrConnection,
                        path: transfer.state.source.displayURL, errno: EMFILE)
                    execute(transfer.state.stop(because: reason), for: transfer)
                }
                fill: while let next = schedule.next(running: running) {
                    switch next {
                    case .resume(let transfer): attach(transfer)
                    case .newRequest:
                        guard let request = run.queue.next() else { break fill }
                        start(request)
                    }
                }
                if let limiter = run.rateLimiter { resumePaused(limiter, now: now) }
                multi.perform()
                let finished = multi.completed()
                for (easy, result) in finished { complete(easy, result) }
                let digests = trailingDigests.take()
                for (key, digest) in digests {
                    guard let transfer = verifying.removeValue(forKey: key) else { continue }
                    judge(transfer, digest: digest)
                }
                let rateWait = run.rateLimiter.flatMap { limiter in
                    active.values.contains(where: \.isPausedForRate) ? limiter.wait(now: now) : nil
                }
                if let milliseconds = schedule.sleep(
                    now: now, running: running, finishedSome: !finished.isEmpty,
                    digestsArrived: !digests.isEmpty, rateWait: rateWait)
                {
                    multi.poll(milliseconds: milliseconds)
                }
            }
        }

        /// Stopped (interrupted, or out of time): every transfer ends now with `reason`. Partials of pinned files are
        /// kept (with their validator) for the next run; other temporary files are removed. Queued requests never
        /// start (whichever loop stops first takes them all).
        private mutating func stopAll(_ reason: FailureReason) {
            // Hashes still running report to nobody, and wake nothing: the multi handle is about to go.
            trailingDigests.close()
            let inFlight = Array(active.values) + Array(verifying.values) + schedule.drain()
            for transfer in active.values { if let easy = transfer.easy { multi.remove(easy) } }
            active = [:]
            verifying = [:]
            for transfer in inFlight {
                execute(transfer.state.stop(because: reason, bytesWritten: transfer.takeBytesWritten()), for: transfer)
            }
            for request in run.queue.takeAll() { TransferEngine.end(request, delegate: delegate, reason: reason) }
        }

        /// Transfers paused for the rate budget go on while it allows, a different one first each turn so that none
        /// waits behind the others for ever.
        private mutating func resumePaused(_ limiter: RateLimiter, now: Double) {
            for transfer in schedule.pausedOrder(active.values.filter(\.isPausedForRate)) {
                guard limiter.allows(now: now) else { return }
                transfer.resume()
            }
        }

        private mutating func start(_ request: TransferRequest) {
            let transfer = makeTransfer(TransferStateMachine(request: request, rules: engine.rules))
            execute(transfer.state.start(badHosts: badHostFlags(transfer)), for: transfer)
        }

        /// A sharer becomes a transfer of its own, from where the group left it (`TransferStateMachine.goOnAlone`).
        private mutating func goOnAlone(_ sharer: Sharer, after failure: AttemptFailure?) {
            let transfer = makeTransfer(
                TransferStateMachine(
                    request: sharer.request, rules: engine.rules, rotation: sharer.rotation,
                    failures: sharer.failures))
            execute(
                transfer.state.goOnAlone(after: failure, now: clock.now, badHosts: badHostFlags(transfer)),
                for: transfer)
        }

        private func makeTransfer(_ state: TransferStateMachine) -> Transfer {
            Transfer(
                state, partials: engine.partials, reportsProgress: reportsProgress,
                startsWriteback: engine.startsWriteback,
                rateLimiter: run.rateLimiter, lowSpeedLimit: engine.configuration.lowSpeedLimit, clock: clock
            ) { [delegate, id = state.request.id] in
                delegate.transfer(id, didProduce: $0)
            }
        }

        /// Carries out what the transfer's machine decided.
        private mutating func execute(_ action: TransferStateMachine.Action, for transfer: Transfer) {
            let id = transfer.state.request.id
            switch action {
            case .openFile(let started):
                for one in started {
                    delegate.transfer(one.id, didProduce: .started(sourceDisplayURL: one.sourceDisplayURL))
                }
                openFile(for: transfer)
            case .send:
                attach(transfer)
            case .verify(let fromDisk):
                verify(transfer, fromDisk: fromDisk)
            case .waitForDescriptors:
                putDown(transfer)
                schedule.waitForDescriptors(transfer)
            case .retry(let failure, let next, let bytes):
                if let failure { delegate.transfer(id, didProduce: .attemptFailed(failure, next: next)) }
                if let failure = transfer.prepare(bytes) {
                    return execute(
                        transfer.state.failed(failure, now: clock.now, badHosts: badHostFlags(transfer)), for: transfer)
                }
                if next.delay > 0 {
                    park(transfer, until: clock.now + next.delay)
                } else if transfer.file != nil {
                    attach(transfer)
                } else {
                    // A sharer going on alone holds no slot yet: it waits for one like a request not yet started.
                    schedule.makeReady(transfer)
                }
            case .giveUp(let last, let failures, let keepsPartial, let sharers):
                if let last { delegate.transfer(id, didProduce: .attemptFailed(last, next: nil)) }
                finish(transfer, keepingFile: keepsPartial, sharers: sharers)
                delegate.transfer(id, didProduce: .finished(.failure(TransferFailure(attempts: failures))))
            case .deliver(let file, let sharers):
                // A verified partial leaves the digest-named slot, which every entry with this content shares, for a
                // name of its own before its owner (who commits later) gets it.
                guard let partial = transfer.file else { return }
                var verified = partial
                if transfer.state.isResumable {
                    let owned = newTemporaryFile()
                    switch verified.move(to: owned.name, in: owned.folder) {
                    case .success(let moved): verified = moved
                    case .failure(let failure):
                        let reason = FailureReason.local(
                            operation: .moveVerifiedFile, path: owned.path, errno: failure.errno)
                        return execute(
                            transfer.state.failed(reason, now: clock.now, badHosts: badHostFlags(transfer)),
                            for: transfer)
                    }
                    engine.partials?.removeMetadata(forPartial: partial)
                }
                finish(transfer, keepingFile: true, sharers: sharers)
                var delivered = file.at(verified, hasFileMode: transfer.hasFileMode)
                delivered.httpVersion = transfer.httpVersion
                delegate.transfer(id, didProduce: .finished(.success(delivered)))
            case .notModified(let sourceDisplayURL, let freshFor, let removesFile, let sharers):
                finish(transfer, keepingFile: !removesFile, sharers: sharers)
                delegate.transfer(id, didProduce: .notModified(sourceDisplayURL: sourceDisplayURL, freshFor: freshFor))
            }
        }

        /// Which of the transfer's sources are on hosts that refused or timed out in this run. Nothing is parsed
        /// while no host has failed, nor for a request with one source (there is nothing to reorder).
        private func badHostFlags(_ transfer: Transfer) -> [Bool] {
            guard transfer.state.request.sources.count > 1, !run.badHosts.isEmpty else { return [] }
            let keys = transfer.hostKeys ?? transfer.state.request.sources.map { BadHosts.key(for: $0.url) }
            transfer.hostKeys = keys
            return keys.map(run.badHosts.contains)
        }

        /// A pinned file gets the partial named by its digest (the machine says what of it to resume); anything else, or
        /// a second entry wanting the same partial in this run, gets a fresh random name.
        private mutating func openFile(for transfer: Transfer) {
            if let digest = transfer.state.partialDigest, let partials = engine.partials,
                case let partial = partials.file(for: digest),
                run.claims.claim(partial.name)
            {
                switch Self.openPartial(partial, of: partials, for: transfer.state) {
                case .success(let opened):
                    return execute(
                        transfer.adopt(partial, descriptor: opened.descriptor, isPartial: true, resume: opened.resume),
                        for: transfer)
                case .failure(let reason):
                    run.claims.release(partial.name)
                    return couldNotStart(transfer, reason)
                }
            }
            let fresh = newTemporaryFile()
            switch FileClone.create(fresh, mode: transfer.state.request.fileMode, umask: engine.umask) {
            case .success(let created):
                execute(
                    transfer.adopt(fresh, descriptor: created.descriptor, hasFileMode: created.hasFileMode),
                    for: transfer)
            case .failure(let error):
                couldNotStart(transfer, .local(operation: .createTemporaryFile, path: fresh.path, errno: error.code))
            }
        }

        /// The partial, open, and what of it the current source may resume; the rest is dropped with its metadata.
        private static func openPartial(
            _ partial: StagedFile, of partials: PartialStore, for state: TransferStateMachine
        )
            -> Result<(descriptor: Int32, resume: (offset: Int64, validator: ResumeValidator)?), FailureReason>
        {
            let descriptor: Int32
            switch partial.open(O_RDWR | O_CREAT) {
            case .success(let opened): descriptor = opened
            case .failure(let failure):
                return .failure(.local(operation: .openPartialFile, path: partial.path, errno: failure.errno))
            }
            var info = stat()
            var failure = FailureReason.local(operation: .usePartialFile, path: partial.path, errno: EINVAL)
            // A FIFO or a device planted under a partial's name is not a partial.
            if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                let resume = state.resumable(
                    partialOf: Int64(info.st_size), metadata: partials.metadata(forPartial: partial))
                if resume != nil { return .success((descriptor, resume)) }
                // A new partial is empty already. Truncating it anyway would also arm ext4's `auto_da_alloc`, which
                // starts writing the file back at its first close: a flush nobody asked for.
                if info.st_size == 0 || ftruncate(descriptor, 0) == 0 {
                    partials.removeMetadata(forPartial: partial)
                    return .success((descriptor, nil))
                }
                failure = .local(operation: .truncate, path: partial.path, errno: errno)
            }
            close(descriptor)
            return .failure(failure)
        }

        private mutating func couldNotStart(_ transfer: Transfer, _ reason: FailureReason) {
            execute(transfer.state.attemptCouldNotStart(reason), for: transfer)
        }

        /// Configures the transfer's handle for its next request and hands it to libcurl. A transfer coming back
        /// from a wait opens its file again and takes a handle first; a sharer going on alone opens its file.
        private mutating func attach(_ transfer: Transfer) {
            guard transfer.file != nil else { return openFile(for: transfer) }
            if let code = transfer.reopenFile() {
                return couldNotStart(transfer, .local(operation: .open, path: transfer.temporaryPath, errno: code))
            }
            guard let easy = transfer.easy ?? idleHandles.popLast() ?? EasyHandle() else {
                return couldNotStart(
                    transfer, .local(operation: .startLibcurl, path: transfer.temporaryPath, errno: ENOMEM))
            }
            transfer.easy = easy
            let request = transfer.state.attemptStarts()
            transfer.beginAttempt()
            let configuration = engine.configuration
            easy.reset()
            easy.set(CURLOPT_URL, request.url)
            easy.set(CURLOPT_NOSIGNAL, true)
            // Only http and https, for the request and (belt and braces) for redirects, which haul follows itself.
            easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
            easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            easy.set(CURLOPT_FOLLOWLOCATION, false)
            if transfer.state.request.headOnly { easy.set(CURLOPT_NOBODY, true) }
            easy.set(CURLOPT_USERAGENT, configuration.userAgent)
            easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(easy.errorBuffer))
            easy.preferReceiveBuffer(bytes: 256 * 1024)
            // Stalls (no byte for the whole window) and the low-speed floor (less than `lowSpeedLimit` bytes/s
            // averaged over the window) are caught by the transfer-info callback (`Transfer.checkProgress`).
            if let connectTimeout = configuration.connection.connectTimeout {
                easy.set(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int((connectTimeout * 1000).rounded(.up))))
            } else {
                easy.set(CURLOPT_CONNECTTIMEOUT, transfer.state.request.stallWindowSeconds)
            }
            if let proxy = configuration.connection.proxy { easy.set(CURLOPT_PROXY, proxy) }
            if let noProxy = configuration.connection.noProxy { easy.set(CURLOPT_NOPROXY, noProxy) }
            if let client = transfer.state.source.clientCertificate ?? configuration.connection.clientCertificate {
                easy.set(CURLOPT_SSLCERT, client.certificate)
                if let key = client.key { easy.set(CURLOPT_SSLKEY, key) }
            }
            if request.url.lowercased().hasPrefix("https:") { easy.set(CURLOPT_PIPEWAIT, true) }
            if let caFile = configuration.caFile { easy.set(CURLOPT_CAINFO, caFile) }
            // No Accept-Encoding: the bytes hashed are the bytes stored.
            easy.setHeaders(request.headers)
            easy.setCallbacks(
                context: Unmanaged.passUnretained(transfer).toOpaque(), write: transferWriteCallback,
                header: transferHeaderCallback, progress: transferInfoCallback,
                openSocket: transferOpenSocketCallback)
            if let refused = easy.refusal ?? multi.add(easy) { return couldNotStart(transfer, refused) }
            active[easy.raw] = transfer
        }

        /// The transfer waits until `time` holding nothing a running transfer needs: its slot, its handle (back to
        /// the pool) and its open file (reopened when the wait is over) are all given up.
        private mutating func park(_ transfer: Transfer, until time: Double) {
            putDown(transfer)
            schedule.park(transfer, until: time)
        }

        /// The transfer closes its file and gives its handle back to the pool: it holds no descriptor while it waits.
        private mutating func putDown(_ transfer: Transfer) {
            transfer.closeFile()
            if let easy = transfer.easy { idleHandles.append(easy) }
            transfer.easy = nil
        }

        private mutating func complete(_ raw: UnsafeMutableRawPointer, _ result: CURLcode) {
            guard let transfer = active.removeValue(forKey: raw), let easy = transfer.easy else { return }
            multi.remove(easy)
            transfer.httpVersion = easy.httpVersion
            let url = transfer.state.currentURL
            let status = transfer.state.headers.status
            if status > 0 { run.badHosts.forgive(url) }
            let connection = engine.configuration.connection
            let error =
                result == CURLE_OK
                ? ClientCertificatePage.refusal(status: status, body: transfer.discardedStart)
                : Self.failure(of: transfer, result, easy, connection)
            let redirect =
                (300..<400).contains(status)
                ? easy.redirectURL ?? transfer.state.headers.location.flatMap { resolveRedirect($0, against: url) }
                : nil
            let action = transfer.state.attemptEnded(
                bytesWritten: transfer.takeBytesWritten(), error: error, writeRefused: result == CURLE_WRITE_ERROR,
                outOfDescriptors: DescriptorShortage.means(transfer.socketError), redirectTarget: redirect,
                proxyAuthentication: status == 407 ? Self.proxyAuthentication(for: url, connection) : nil,
                now: clock.now,
                badHosts: badHostFlags(transfer))
            if case .retry(let failure?, _, _) = action, failure.reason.marksHostBad { run.badHosts.markBad(url) }
            if case .giveUp(let failure?, _, _, _) = action, failure.reason.marksHostBad { run.badHosts.markBad(url) }
            execute(action, for: transfer)
        }

        /// Every byte is in: the digest decides. Inline-hashed bodies are judged now; trailing hashes report back
        /// through `trailingDigests` and a wake-up, so the loop never waits for a hash.
        private mutating func verify(_ transfer: Transfer, fromDisk: Bool) {
            guard transfer.trailingHasher != nil || fromDisk, let trailing = transfer.startTrailingHash() else {
                return judge(transfer, digest: transfer.finishInlineHash())
            }
            let key = ObjectIdentifier(transfer)
            verifying[key] = transfer
            trailing.finish(at: transfer.state.fileBytes) {
                [trailingDigests, wakeUp = multi.wakeUpHandle, path = transfer.temporaryPath] result in
                trailingDigests.add(
                    key, result.mapError { .local(operation: .readBack, path: path, errno: $0.code) }, waking: wakeUp)
            }
        }

        /// libcurl's error, in haul's terms: answers libcurl itself found malformed are protocol violations (not
        /// retried on that URL), a proxy's 407 to a tunnel says what the proxy wants, and a proxy that failed is named
        /// as the proxy, not the origin.
        private static func failure(
            of transfer: Transfer, _ result: CURLcode, _ easy: EasyHandle,
            _ settings: ConnectionSettings
        ) -> FailureReason {
            let detail = easy.errorMessage
            let message = scrub(
                detail.isEmpty ? result.message : detail, of: transfer.state.source.secrets + settings.proxySecrets)
            let url = transfer.state.currentURL
            if easy.connectCode == 407 { return proxyAuthentication(for: url, settings) }
            if let refusal = proxyFailure(for: url, result, connectCode: easy.connectCode, settings) { return refusal }
            // The alert a server sends when it wants a client certificate, or refuses the one it was given.
            let certificateGiven = transfer.state.source.clientCertificate != nil || settings.clientCertificate != nil
            switch TLSAlert(libcurlMessage: detail) {
            case .certificateRequired?: return .clientCertificateRefused(given: certificateGiven)
            case _? where certificateGiven: return .clientCertificateRefused(given: true)
            default: break
            }
            switch result {
            case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL:
                // Invalid Content-Length, a status line libcurl cannot read, an unsupported status code.
                return .protocolViolation(.unreadableAnswer(ServerText.quoted(message, limit: 200)))
            case CURLE_OUT_OF_MEMORY where transfer.state.headers.headerBytes > 0 && transfer.bytesWritten == 0:
                // libcurl 7.88 reports a header line over its 100 KiB limit as out of memory.
                return .protocolViolation(.headerLineTooLong)
            case CURLE_OPERATION_TIMEDOUT:
                // The only timeout libcurl is given is the connect timeout: `--connect-timeout`, else the stall window
                // (see `attach`). Stalls and the speed floor are judged by the transfer-info callback, which ends
                // the attempt with its own reason.
                let within = settings.connectTimeoutShown ?? "\(transfer.state.request.stallWindowSeconds) s"
                return .network(code: CurlCode(result), message: "could not connect within \(within)")
            default:
                return .network(code: CurlCode(result), message: message)
            }
        }

        /// A request through a proxy that the proxy itself failed: it could not be found or reached (libcurl then
        /// connects to nothing else), or it answered a tunnel's CONNECT with an error. nil for a direct request.
        private static func proxyFailure(
            for url: String, _ result: CURLcode, connectCode: Int,
            _ settings: ConnectionSettings
        ) -> FailureReason? {
            guard let proxy = ProxySettings.proxy(for: url, settings: settings) else { return nil }
            let failed = { (how: ProxyTrouble, transient: Bool) in
                FailureReason.proxyFailed(
                    variable: proxy.variable, proxy: proxy.redactedURL, how: how, transient: transient)
            }
            if connectCode >= 300 {
                return failed(.refusedTunnel(status: connectCode), connectCode >= 500 || connectCode == 429)
            }
            switch result {
            case CURLE_COULDNT_RESOLVE_PROXY: return failed(.unresolved, true)
            case CURLE_COULDNT_CONNECT: return failed(.unreachable, true)
            default: return nil
            }
        }

        /// A proxy's 407 names the proxy and where it was set, for the user to fix.
        private static func proxyAuthentication(for url: String, _ settings: ConnectionSettings) -> FailureReason {
            let proxy = ProxySettings.proxy(for: url, settings: settings)
            return .proxyAuthenticationRequired(variable: proxy?.variable, proxy: proxy?.redactedURL)
        }

        private mutating func judge(_ transfer: Transfer, digest: Result<Digest, FailureReason>) {
            let verdict = transfer.state.digestComputed(digest, now: clock.now, badHosts: badHostFlags(transfer))
            settle(verdict.sharers, servedFrom: transfer)
            execute(verdict.action, for: transfer)
        }

        /// What the leader's bytes, or its end, mean for the requests that shared them: a copy of their own, going
        /// on alone, or the end.
        private mutating func settle(_ outcomes: [TransferStateMachine.SharerOutcome], servedFrom transfer: Transfer) {
            for outcome in outcomes {
                switch outcome {
                case .serve(let sharer, let file):
                    let copy = newTemporaryFile()
                    guard let original = transfer.file else { continue }
                    let id = sharer.request.id
                    switch FileClone.copy(original, to: copy, mode: sharer.request.fileMode, umask: engine.umask) {
                    case .success(let hasFileMode):
                        var delivered = file.at(copy, hasFileMode: hasFileMode)
                        delivered.httpVersion = transfer.httpVersion
                        delegate.transfer(id, didProduce: .finished(.success(delivered)))
                    case .failure(let error):
                        let failure = AttemptFailure(
                            sourceDisplayURL: file.sourceDisplayURL,
                            reason: .local(operation: .copyVerifiedFile, path: copy.path, errno: error.code))
                        delegate.transfer(
                            id, didProduce: .finished(.failure(TransferFailure(attempts: sharer.failures + [failure]))))
                    }
                case .goOnAlone(let sharer, let failure):
                    goOnAlone(sharer, after: failure)
                case .end(let id, let failures):
                    delegate.transfer(id, didProduce: .finished(.failure(TransferFailure(attempts: failures))))
                }
            }
        }

        /// The transfer is leaving the engine: its file is closed (and removed, unless kept), its handle goes back to
        /// the pool, its partial name is free again, and the sharers it did not serve go their ways.
        private mutating func finish(
            _ transfer: Transfer, keepingFile: Bool, sharers: [TransferStateMachine.SharerOutcome]
        ) {
            putDown(transfer)
            if transfer.state.isResumable, let file = transfer.file { run.claims.release(file.name) }
            if !keepingFile { transfer.removeFile() }
            settle(sharers, servedFrom: transfer)
        }

        /// libcurl's messages may quote the host or URL it was given; none of the source's secrets survive.
        static func scrub(_ message: String, of secrets: [String]) -> String {
            var message = message
            for secret in secrets.sorted(by: { $0.count > $1.count }) where !secret.isEmpty {
                // By bytes: a secret must go even where a combining mark after it would make it part of a longer character.
                message = String(
                    decoding: Array(message.utf8).replacing(Array(secret.utf8), with: "***".utf8), as: UTF8.self)
            }
            return message
        }

        /// A fresh name in the loop's staging folder: unique within the run (a random prefix per run, then a counter)
        /// without a getrandom call per file; files are created with O_EXCL all the same. The grammar is
        /// `isStagingName`'s.
        private mutating func newTemporaryFile() -> StagedFile {
            temporaryCount += 1
            return StagedFile(folder: stagingFolder, name: namePrefix + String(temporaryCount, radix: 16) + ".part")
        }
    }
}

extension DownloadedFile {
    /// The verified file as it lies in the temporary folder.
    fileprivate func at(_ file: StagedFile, hasFileMode: Bool) -> DownloadedFile {
        var placed = self
        placed.temporaryPath = file.path
        placed.temporaryFolder = file.folder
        placed.temporaryName = file.name
        placed.hasFileMode = hasFileMode
        return placed
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
        if case .local(_, _, let code) = self { DescriptorShortage.means(code) } else { false }
    }

    /// A local failure (disk full, permission) is the same whichever source is tried.
    var isLocal: Bool { if case .local = self { true } else { false } }

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
