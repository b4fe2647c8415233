import HaulDigest

/// The decisions of one transfer, as a value: which source and hop comes next, and when; what becomes of the bytes
/// already in the file; whether a response is believed; what the digest means for the request and for those that
/// share its bytes. Events go in, actions come out, and the engine carries them out: the machine does no I/O, holds
/// no descriptor or handle and reads no clock (time comes in as a value), so that every rule is tested from values.
struct TransferStateMachine: Sendable {
    /// What a run decides for all its transfers.
    struct Rules: Sendable {
        var retryPolicy: RetryPolicy
        var redirects: RedirectPolicy
        /// Largest body accepted for a file whose size is not pinned.
        var maxBodyBytes: Int64
    }

    let request: TransferRequest
    /// The most bytes an attempt accepts: the pinned size, else the run's limit for unsized files; for a group,
    /// the largest any member accepts (the bytes must arrive for each to judge them against its own).
    let bodyLimit: Int64
    private let rules: Rules
    private(set) var rotation: SourceRotation
    /// Requests fetched together with this one (`TransferRequest.sharers`) that the bytes have not served yet.
    private(set) var sharers: [Sharer]
    /// Every failed attempt, for the final error.
    private(set) var failures: [AttemptFailure]
    private(set) var sourceIndex = 0
    /// Where the transfer stands: what the last action left it waiting for.
    private(set) var phase = Phase.new
    /// What the file holds, across attempts (and runs, for a partial).
    private var bytes = FileBytes()
    /// The attempt at the current source: its hops and the response to the last one.
    private var attempt: Attempt

    /// `rotation` and `failures`: where a sharer going on alone starts from (see `goOnAlone`).
    init(request: TransferRequest, rules: Rules, rotation: SourceRotation? = nil, failures: [AttemptFailure] = []) {
        self.request = request
        self.rotation = rotation ?? SourceRotation(sources: request.sources.count, retries: request.retries)
        self.failures = failures
        self.rules = rules
        bodyLimit = request.sharers.reduce(request.expectedSize ?? rules.maxBodyBytes) {
            max($0, $1.expectedSize ?? rules.maxBodyBytes)
        }
        attempt = Attempt(url: request.sources.first?.url ?? "")
        sharers = request.sharers.map { Sharer($0, leader: request) }
    }

    var source: TransferSource { request.sources[sourceIndex] }
    /// Everything in the file: resumed bytes plus the last attempt's body.
    var fileBytes: Int64 { bytes.resumeOffset + bytes.received }
    /// Whether bytes may be kept across attempts and runs: the file is the partial named by the pinned digest,
    /// which judges the splice.
    var isResumable: Bool { bytes.isResumable }
    /// The URL of the current hop.
    var currentURL: String { attempt.url }
    /// The headers of the current response that haul acts on.
    var headers: ResponseHeaders { attempt.headers }
    /// Why the attempt was cut short, by a judgement of the machine's or a callback of the engine's.
    var abortReason: FailureReason? { attempt.abortReason }
    private var requestsRange: Bool { bytes.resumeOffset > 0 && bytes.validator != nil }
    /// The `Content-Encoding` of the response whose body is in the file, shown safely; nil when there is none.
    private var servedEncoding: String? { attempt.headers.contentEncoding.map { ServerText.quoted($0) } }

    /// Bodies at least this long (by Content-Length or pinned size) are hashed by a `TrailingHasher`: below it,
    /// handing work to another thread costs more than hashing in place.
    static let trailingHashThreshold: Int64 = 8 << 20

    /// Below this, a pinned file is fetched again whole rather than resumed: the partial's bookkeeping would cost
    /// more than the bytes.
    static let resumableSize: Int64 = 256 << 10

    /// The digest naming the partial the bytes go to, kept across attempts and runs; nil: a fresh name.
    var partialDigest: Digest? { (request.expectedSize ?? .max) >= Self.resumableSize ? request.expectedDigest : nil }

    /// What of a partial of `size` bytes the current source may resume: its metadata must say the bytes came from
    /// that very URL, and they must fit the pinned size. nil: the partial starts over.
    func resumable(partialOf size: Int64, metadata: PartialMetadata?) -> (offset: Int64, validator: ResumeValidator)? {
        guard let metadata, size > 0, metadata.sourceKey == source.key, size <= (request.expectedSize ?? .max) else {
            return nil
        }
        return (size, metadata.validator)
    }

    /// The request is taken up: its first source (the first not on a host that failed in this run; `badHosts[i]`
    /// for source i) and a file for it.
    mutating func start(badHosts: [Bool]) -> Action {
        guard !request.sources.isEmpty else {
            return leaving(
                .giveUp(
                    lastAttempt: nil, failures: [], keepsPartial: false,
                    sharers: sharers.map { .end(id: $0.request.id, failures: []) }))
        }
        _ = prepareAttempt(at: rotation.first(avoiding: badHosts), keepingBytes: false)
        return leaving(
            .openFile(
                started: [Started(id: request.id, sourceDisplayURL: source.displayURL)]
                    + sharers.map {
                        Started(
                            id: $0.request.id,
                            sourceDisplayURL: $0.request.sources[$0.sourceMap[sourceIndex] ?? 0].displayURL)
                    }))
    }

    /// The file is open; `resume`: what of the partial it is may be resumed (`resumable`).
    mutating func fileOpened(isPartial: Bool, resume: (offset: Int64, validator: ResumeValidator)?) -> Action {
        let isFirstFile = phase == .openingFile
        bytes.isResumable = isPartial
        bytes.resumeOffset = resume?.offset ?? 0
        bytes.validator = resume?.validator
        // Everything is already here (a run ended between download and commit): only the hash is left.
        if isFirstFile && requestsRange && request.expectedSize == bytes.resumeOffset {
            return leaving(.verify(fromDisk: true))
        }
        return leaving(.send)
    }

    /// The attempt could not start: no file, no handle, libcurl refused it. Out of descriptors is a matter of
    /// waiting, not of the source; anything else ends the transfer.
    mutating func attemptCouldNotStart(_ reason: FailureReason) -> Action {
        reason.isOutOfDescriptors ? leaving(.waitForDescriptors) : stop(because: reason)
    }

    /// The attempt (or a redirect hop) goes to libcurl: the URL and the header lines it sends.
    mutating func attemptStarts() -> (url: String, headers: [String]) {
        attempt.visited.insert(attempt.url)
        attempt.headers = ResponseHeaders()
        attempt.discardsBody = false
        attempt.abortReason = nil
        bytes.received = 0
        var lines = attempt.sendsHeaders ? source.headers.map { "\($0.name): \($0.value)" } : []
        if let conditional = source.conditional { lines += conditional.requestHeaders }
        if requestsRange, let validator = bytes.validator {
            lines += ["Range: bytes=\(bytes.resumeOffset)-", "If-Range: \(validator.ifRangeValue)"]
        }
        return (attempt.url, lines)
    }

    /// One header line of the response, the status line too. False cuts the attempt short (`abortReason` says why):
    /// a response is believed only when it is consistent, judged as its header block ends, before any body byte.
    mutating func headerLine(_ line: UnsafeRawBufferPointer) -> Bool {
        attempt.headers.consume(line)
        if let refusal = attempt.headers.refusal(
            afterLineOf: line.count, resumeOffset: bytes.resumeOffset, bodyLimit: bodyLimit)
        {
            abort(refusal)
        }
        return attempt.abortReason == nil
    }

    /// The first body byte of the response: a body to keep (whole, or the rest of a partial), or one to discard.
    mutating func bodyBegins() -> BodyPlan {
        guard (200..<300).contains(attempt.headers.status) else {
            attempt.discardsBody = true
            return .discard
        }
        let start: Int64
        do {
            start = try attempt.headers.bodyStart(
                resumeOffset: requestsRange ? bytes.resumeOffset : nil, bodyLimit: bodyLimit)
        } catch {
            abort(error)
            return .refuse
        }
        // A 200 to a resume request is the whole body from byte 0: the partial is dropped.
        let truncates = start != bytes.resumeOffset
        bytes.resumeOffset = start
        var metadata = MetadataChange.unchanged
        if let fresh = ResumeValidator(attempt.headers) {
            // Before the first byte lands: the metadata never describes bytes it does not cover. A resume answered
            // with the validator already on disk has nothing new to write (a new source or a full refetch clears
            // `validator` first).
            if fresh != bytes.validator && bytes.isResumable {
                metadata = .save(PartialMetadata(sourceKey: source.key, validator: fresh))
            }
            bytes.validator = fresh
        } else if bytes.isResumable {
            // Bytes without a validator cannot be resumed safely; whatever metadata there was no longer applies.
            metadata = .remove
        }
        let length = attempt.headers.contentLength
        return .write(
            offset: start, truncates: truncates, metadata: metadata,
            hashesTrailing: start > 0 || request.bodyReading != nil
                || max(length ?? -1, request.expectedSize ?? -1) >= Self.trailingHashThreshold,
            expectedTotal: length.map { start + $0 } ?? request.expectedSize)
    }

    /// A callback of the engine cut the attempt short (a write that failed, a stall, too many bytes). The first
    /// reason is the one kept: libcurl's generic write error is not what the user sees.
    mutating func abort(_ reason: FailureReason) { if attempt.abortReason == nil { attempt.abortReason = reason } }

    /// libcurl is done with the attempt: a body to verify, a redirect to follow, a 304, or a failure. `error`: libcurl's
    /// (nil: completed), which `writeRefused` says is the write callback refusing bytes; `outOfDescriptors`: a socket
    /// could not be had; `proxyAuthentication`: what a proxy that answered 407 wants, named from the environment.
    mutating func attemptEnded(
        bytesWritten: Int64 = 0, error: FailureReason? = nil, writeRefused: Bool = false,
        outOfDescriptors: Bool = false, redirectTarget: String? = nil,
        proxyAuthentication: FailureReason? = nil, now: Double, badHosts: [Bool]
    ) -> Action {
        bytes.received = bytesWritten
        let status = attempt.headers.status
        let reason: FailureReason
        if let abortReason = attempt.abortReason {
            // Not a retry: the server answered, with a range a resume cannot use. The same source, from byte 0, at
            // once (as if it had answered 200).
            if case .resumeRejected = abortReason { return restartFromZero(after: abortReason) }
            reason = abortReason
        } else if let error, !(attempt.discardsBody && writeRefused) {
            // An error body is read only so far; cutting it short is not a network failure.
            reason = error
        } else if status == 407 {
            reason = proxyAuthentication ?? .proxyAuthenticationRequired(variable: nil, proxy: nil)
        } else if (300..<400).contains(status), let target = redirectTarget {
            switch rules.redirects.decide(
                current: attempt.url, target: target, source: source.url, visited: attempt.visited)
            {
            case .refuse(let why): reason = .redirectRefused(why)
            case .follow(let url, let sendHeaders):
                // Redirects are hops of one attempt: bytes already resumed stay, the new hop asks for the same range.
                attempt.visited.insert(attempt.url)
                attempt.url = url
                attempt.sendsHeaders = sendHeaders && attempt.sendsHeaders
                return leaving(.send)
            }
        } else if status == 304 && source.conditional != nil {
            return leaving(
                .notModified(
                    sourceDisplayURL: source.displayURL, freshFor: attempt.headers.freshness,
                    removesFile: !bytes.isResumable, sharers: split(stoppedBy: nil)))
        } else if (200..<300).contains(status) {
            return leaving(.verify(fromDisk: bytes.resumeOffset > 0))
        } else {
            reason = .httpStatus(status)
        }
        // No descriptor for a socket: not the server's fault, and not an attempt.
        return outOfDescriptors ? leaving(.waitForDescriptors) : failed(reason, now: now, badHosts: badHosts)
    }

    /// The bytes are all in and hashed: they are a file only if size and digest are what was pinned. Whatever they
    /// are for this request, they may be exactly what a sharer pinned, whose outcomes come first.
    mutating func digestComputed(
        _ digest: Result<Digest, FailureReason>, now: Double,
        badHosts: [Bool]
    ) -> (sharers: [SharerOutcome], action: Action) {
        let judged = digest.flatMap { digest -> Result<Digest, FailureReason> in
            mismatch(request, digest).map { .failure($0) } ?? .success(digest)
        }
        let spliced = bytes.resumeOffset > 0 && !bytes.didFullRefetch
        var served: [SharerOutcome] = []
        if case .success(let digest) = digest, !spliced || (try? judged.get()) != nil {
            // Bytes spliced onto a partial that fail their own hash are not offered: the splice may be what is
            // wrong, and the full refetch below will be.
            served = serveSharers(digest)
        }
        switch judged {
        case .success(let digest):
            // The sharers stay listed until the file is handed over: if it cannot leave the partial's name
            // (`failed`), they go on from there.
            return (
                served,
                leaving(.deliver(file(of: request, from: sourceIndex, digest: digest), sharers: split(stoppedBy: nil)))
            )
        case .failure(let reason) where spliced && !reason.isLocal:
            // The splice may be what went wrong: the final hash is the judge, so fetch once in full.
            bytes.didFullRefetch = true
            return (served, restartFromZero(after: reason))
        case .failure(let reason):
            return (served, failed(reason, now: now, badHosts: badHosts))
        }
    }

    /// Whether asking the same URL again may help: by the failure's kind, or a status the request names as transient.
    private func isTransient(_ reason: FailureReason) -> Bool {
        if case .httpStatus(let status) = reason, request.transientStatuses.contains(status) { return true }
        return reason.isTransient
    }

    /// A failed attempt: the next source at once, the same or another after a backoff (see `SourceRotation`), or
    /// the end. Sharers count the attempt as theirs when they have the same source.
    mutating func failed(_ reason: FailureReason, now: Double, badHosts: [Bool]) -> Action {
        let failure = record(reason)
        // A local failure (disk full, permission) is the same whichever source is tried.
        guard !reason.isLocal, !reason.stopsTheRun else { return giveUp(after: failure) }
        var notBefore: Double?
        if case .httpStatus = reason, let retryAfter = attempt.headers.retryAfter {
            notBefore = now + rules.retryPolicy.floor(for: retryAfter)
        }
        let outcome: SourceRotation.Outcome = isTransient(reason) ? .transient(notBefore: notBefore) : .permanent
        rotation.record(outcome, at: sourceIndex)
        // What the URL did is the group's; wrong bytes are judged for each sharer on its own (`serveSharers`).
        for index in sharers.indices where !reason.isAboutTheBytes {
            guard let shared = sharers[index].sourceMap[sourceIndex] else { continue }
            sharers[index].rotation.record(outcome, at: shared)
            sharers[index].failures.append(
                AttemptFailure(sourceDisplayURL: sharers[index].request.sources[shared].displayURL, reason: reason))
        }
        guard let step = rotation.next(avoiding: badHosts) else { return giveUp(after: failure) }
        return retry(after: failure, at: step, now: now, keepingBytes: reason.keepsPartial)
    }

    /// A sharer going on alone (made with the rotation and failures the group left it): its next source, or the end
    /// when the group already exhausted every source it has. `failure`: its own last one, reported with what follows.
    mutating func goOnAlone(after failure: AttemptFailure?, now: Double, badHosts: [Bool]) -> Action {
        guard let step = rotation.next(avoiding: badHosts) else { return giveUp(after: failure) }
        return retry(after: failure, at: step, now: now, keepingBytes: false)
    }

    /// The transfer ends from outside its attempts: the run stops, its file or handle cannot be had, or the descriptors
    /// it waits for are not coming back. `bytesWritten`: what the attempt in flight, if any, wrote.
    mutating func stop(because reason: FailureReason, bytesWritten: Int64 = 0) -> Action {
        bytes.received += bytesWritten
        _ = record(reason)
        return giveUp(after: nil)
    }

    /// Why the file's bytes, hashing to `digest`, are not the file `request` pinned (or, unsized, more than it may
    /// take: a group's fetch accepts as much as its largest member does); nil when they are.
    private func mismatch(_ request: TransferRequest, _ digest: Digest) -> FailureReason? {
        let size = fileBytes
        if request.expectedSize == nil, size > rules.maxBodyBytes { return .tooLarge(limit: rules.maxBodyBytes) }
        if let expected = request.expectedSize, expected != size {
            return .sizeMismatch(expected: expected, actual: size, contentEncoding: servedEncoding)
        }
        if let expected = request.expectedDigest, !request.accepts(digest) {
            return .digestMismatch(expected: expected, actual: digest, contentEncoding: servedEncoding)
        }
        return nil
    }

    /// Each sharer that has the source these bytes came from gets a copy when they are what it pinned; otherwise that
    /// source is done for it (wrong bytes are not asked for again) and it goes on alone. The others wait.
    private mutating func serveSharers(_ digest: Digest) -> [SharerOutcome] {
        var outcomes: [SharerOutcome] = []
        var waiting: [Sharer] = []
        for var sharer in sharers {
            guard let index = sharer.sourceMap[sourceIndex], sharer.request.hashAlgorithm == request.hashAlgorithm
            else {
                waiting.append(sharer)
                continue
            }
            if let reason = mismatch(sharer.request, digest) {
                let failure = AttemptFailure(sourceDisplayURL: sharer.request.sources[index].displayURL, reason: reason)
                sharer.rotation.record(.permanent, at: index)
                sharer.failures.append(failure)
                outcomes.append(.goOnAlone(sharer, after: failure))
            } else {
                outcomes.append(.serve(sharer, file(of: sharer.request, from: index, digest: digest)))
            }
        }
        sharers = waiting
        return outcomes
    }

    /// The sharers the bytes did not serve, once this transfer is done: each goes on alone from where the group
    /// left it; a stop ends them with it.
    private func split(stoppedBy stop: FailureReason?) -> [SharerOutcome] {
        sharers.map { sharer in
            guard let stop else { return .goOnAlone(sharer, after: nil) }
            let failure = AttemptFailure(sourceDisplayURL: sharer.request.sources[0].displayURL, reason: stop)
            return .end(id: sharer.request.id, failures: sharer.failures + [failure])
        }
    }

    /// The bytes as `request`'s file; the engine says where it lies. Validators and encoding for unpinned files only.
    private func file(of request: TransferRequest, from index: Int, digest: Digest) -> DownloadedFile {
        let unpinned = request.expectedDigest == nil
        return DownloadedFile(
            temporaryPath: "", temporaryName: "", size: fileBytes, digest: digest,
            sourceDisplayURL: request.sources[index].displayURL, sourceIndex: index,
            validators: unpinned
                ? HTTPValidators(etag: attempt.headers.etag, lastModified: attempt.headers.lastModified) : nil,
            contentEncoding: unpinned ? servedEncoding : nil, freshFor: unpinned ? attempt.headers.freshness : nil,
            servedBy: attempt.url == request.sources[index].url
                ? request.sources[index].displayURL : RedirectedURL.display(attempt.url),
            announcedLength: request.headOnly ? attempt.headers.contentLength : nil,
            resumedAt: bytes.resumeOffset > 0 ? bytes.resumeOffset : nil)
    }

    /// The end, in failure. A resumable partial stays for the next run when what ended it left bytes worth resuming
    /// and a validator to resume them with: its metadata, written as the response was accepted, stays with it.
    private mutating func giveUp(after last: AttemptFailure?) -> Action {
        let reason = failures.last?.reason ?? .interrupted
        return leaving(
            .giveUp(
                lastAttempt: last, failures: failures,
                keepsPartial: bytes.isResumable && fileBytes > 0 && reason.keepsPartial && bytes.validator != nil,
                sharers: split(stoppedBy: reason.stopsTheRun ? reason : nil)))
    }

    /// `step` after its wait: the backoff of its round, at least until the server's `Retry-After`, to the microsecond
    /// (a floor reads back as the number it was).
    private mutating func retry(
        after failure: AttemptFailure?, at step: SourceRotation.Step, now: Double, keepingBytes: Bool
    ) -> Action {
        let policy = rules.retryPolicy
        let delay =
            (rotation.delay(before: step, now: now) { policy.delay(beforeRetry: $0, retryAfter: nil) } * 1e6).rounded()
            / 1e6
        let next = NextAttempt(
            sourceDisplayURL: request.sources[step.source].displayURL, sourceIndex: step.source, delay: delay,
            retry: step.retry, retries: rotation.retries)
        return leaving(
            .retry(failure: failure, next: next, bytes: prepareAttempt(at: step.source, keepingBytes: keepingBytes)))
    }

    /// The same source again, at once, from byte 0, without a retry spent: the server answered, in a way a fresh full
    /// request (not a resume) can fix. The partial's metadata goes with its bytes.
    private mutating func restartFromZero(after reason: FailureReason) -> Action {
        let next = NextAttempt(
            sourceDisplayURL: source.displayURL, sourceIndex: sourceIndex, delay: 0,
            retry: rotation.failures(at: sourceIndex), retries: rotation.retries)
        let failure = record(reason)
        bytes.validator = nil
        _ = prepareAttempt(at: sourceIndex, keepingBytes: false)
        return leaving(.retry(failure: failure, next: next, bytes: .dropWithMetadata))
    }

    /// The next attempt, at `next`. The same source resumes what arrived if the failure left bytes worth keeping and a
    /// validator to ask for the rest safely; another starts from byte 0 (a partial is never resumed from another URL).
    private mutating func prepareAttempt(at next: Int, keepingBytes: Bool) -> Bytes {
        let keeps = next == sourceIndex && keepingBytes && bytes.isResumable && bytes.validator != nil && fileBytes > 0
        if !keeps && next != sourceIndex { bytes.validator = nil }
        bytes.resumeOffset = keeps ? fileBytes : 0
        bytes.received = 0
        sourceIndex = next
        attempt = Attempt(url: source.url)
        return keeps ? .resume(from: bytes.resumeOffset) : .drop
    }

    /// `action`, with the phase it leaves the transfer in.
    private mutating func leaving(_ action: Action) -> Action {
        phase = Phase(after: action)
        return action
    }

    private mutating func record(_ reason: FailureReason) -> AttemptFailure {
        var failure = AttemptFailure(sourceDisplayURL: source.displayURL, reason: reason)
        // A refusal by a server the entry's headers (its credentials, most likely) were kept from: the reader must
        // learn that they were never sent there, or they would look refused.
        if case .httpStatus(let status) = reason, status == 401 || status == 403, !attempt.sendsHeaders,
            !source.headers.isEmpty
        {
            failure.headersWithheldAt = RedirectedURL.display(attempt.url)
        }
        failures.append(failure)
        return failure
    }
}

extension TransferStateMachine {
    /// Where a transfer stands between events: what the last action it returned leaves it waiting for.
    enum Phase: Equatable {
        /// Not taken up yet (`start`).
        case new
        /// Its first file is being opened (`fileOpened`): a partial found already whole then needs only its hash.
        case openingFile
        /// A request is with libcurl (`attemptStarts`, the response, `attemptEnded`).
        case requesting
        /// Every byte is in; the hash decides (`digestComputed`).
        case verifying
        /// Between attempts: a backoff, a free slot, descriptors given back.
        case waiting
        /// Delivered, not modified, or given up.
        case finished

        init(after action: Action) {
            switch action {
            case .openFile: self = .openingFile
            case .send: self = .requesting
            case .verify: self = .verifying
            case .waitForDescriptors, .retry: self = .waiting
            case .giveUp, .deliver, .notModified: self = .finished
            }
        }
    }

    /// What the file holds, across attempts (and runs, for a partial).
    struct FileBytes: Sendable {
        /// Whether bytes may be kept across attempts and runs: the file is the partial named by the pinned digest,
        /// which judges the splice.
        var isResumable = false
        /// Bytes already in the file when the attempt started, from an earlier attempt or run (it asks for the rest,
        /// and a digest mismatch then earns one full refetch), and what it wrote after them.
        var resumeOffset: Int64 = 0
        var received: Int64 = 0
        /// What the server said identifies the bytes we have (from the response, or the partial's metadata).
        var validator: ResumeValidator?
        var didFullRefetch = false
    }

    /// One attempt at a source: a request, and the redirect hops it follows.
    struct Attempt: Sendable {
        /// The URL of the current hop.
        var url: String
        /// Whether the source's headers go with this hop (not to another origin).
        var sendsHeaders = true
        /// The URLs this attempt requested: a repeat is a loop.
        var visited: Set<String> = []
        /// The headers of the current hop's response that haul acts on.
        var headers = ResponseHeaders()
        /// The response is not the file (an error's or a redirect's body).
        var discardsBody = false
        /// Why the hop was cut short, by a judgement of the machine's or a callback of the engine's.
        var abortReason: FailureReason?
    }

    enum Action: Equatable {
        /// Open the first attempt's file (a pinned file's partial), then `fileOpened`; `started`: the requests whose
        /// first request this is.
        case openFile(started: [Started])
        /// Send the next request (`attemptStarts` says what it asks for).
        case send
        /// Hash the file, then `digestComputed`; `fromDisk`: it holds bytes this attempt did not receive.
        case verify(fromDisk: Bool)
        /// No descriptor for the file or a socket: wait, holding neither, for another transfer to give some back.
        case waitForDescriptors
        /// Report `failure` (none for a sharer going on alone) with `next`, do `bytes`, then wait `next.delay`.
        case retry(failure: AttemptFailure?, next: NextAttempt, bytes: Bytes)
        /// The end: `lastAttempt` (none when it came from outside an attempt) is reported with nothing after it; the
        /// partial and its metadata stay when `keepsPartial`, otherwise the file goes.
        case giveUp(
            lastAttempt: AttemptFailure?, failures: [AttemptFailure], keepsPartial: Bool, sharers: [SharerOutcome])
        /// Hand the verified file over (named where the engine puts it), then settle the sharers.
        case deliver(DownloadedFile, sharers: [SharerOutcome])
        /// A source asked conditionally answered 304: the copy on disk is current.
        case notModified(sourceDisplayURL: String, freshFor: Double?, removesFile: Bool, sharers: [SharerOutcome])
    }

    struct Started: Equatable {
        var id: Int
        var sourceDisplayURL: String
    }

    /// What becomes of the bytes in the file before the next attempt: kept (the next request asks for the rest,
    /// `Range` from this offset under `If-Range`), dropped (the file is emptied), or dropped with the partial's
    /// metadata, which describes bytes not to be resumed.
    enum Bytes: Equatable { case resume(from: Int64), drop, dropWithMetadata }

    /// What the bytes, or the transfer's end, mean for a sharer: a copy of its own (made with its `fileMode`), going
    /// on alone with its own sources from where the group left it (`goOnAlone`), or the end.
    enum SharerOutcome: Equatable {
        case serve(Sharer, DownloadedFile), goOnAlone(Sharer, after: AttemptFailure?), end(
            id: Int, failures: [AttemptFailure])
    }

    enum BodyPlan: Equatable {
        /// Not the file (a redirect's or an error's body): read a little, so the connection can be reused, and drop it.
        case discard
        /// The attempt ends (`abortReason` says why).
        case refuse
        /// Into the file from `offset`, emptied first when `truncates` (a 200 answered a resume); `hashesTrailing`: on
        /// another core, reading the file back; `expectedTotal`: its length once whole, for progress.
        case write(
            offset: Int64, truncates: Bool, metadata: MetadataChange, hashesTrailing: Bool, expectedTotal: Int64?)
    }

    /// The partial's metadata, written as soon as a response is accepted (not only when the transfer gives up): a
    /// run killed mid-body (SIGKILL, OOM, power) still leaves a partial the next run resumes.
    enum MetadataChange: Equatable { case unchanged, save(PartialMetadata), remove }
}

/// A request fetched together with a leader (`TransferRequest.sharers`) while the leader's bytes may still serve
/// it. It makes no request of its own; the leader's attempts at the sources both have count as its attempts, so
/// that if it has to go on alone, it does not ask a URL again that the group already exhausted.
struct Sharer: Sendable, Equatable {
    let request: TransferRequest
    /// For each of the leader's sources, the index of the same source in this request's list, if it has it.
    let sourceMap: [Int?]
    var rotation: SourceRotation
    var failures: [AttemptFailure] = []

    init(_ request: TransferRequest, leader: TransferRequest) {
        self.request = request
        sourceMap = leader.sources.map { leading in
            guard leading.conditional == nil else { return nil }
            return request.sources.firstIndex {
                $0.conditional == nil && $0.url == leading.url && $0.headers == leading.headers
            }
        }
        rotation = SourceRotation(sources: request.sources.count, retries: request.retries)
    }
}
