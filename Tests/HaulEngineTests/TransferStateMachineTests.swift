import Glibc
import HaulDigest
@testable import HaulEngine
import XCTest

/// The decisions of one transfer, driven from values: events in, actions out. No socket, no file, no clock.
final class TransferStateMachineTests: XCTestCase {
    private typealias Machine = TransferStateMachine
    private let body: [UInt8] = Array(repeating: 7, count: 1000)
    private var digest: Digest { StreamingHasher.digest(body, algorithm: .sha256) }
    private let other = StreamingHasher.digest([1, 2, 3], algorithm: .sha256)

    /// Backoff 1 s doubling, a quarter of it removed at random; the random number is fixed so delays are exact.
    private func rules(random: Double = 0.5, maxRetryAfter: Double = 120) -> Machine.Rules {
        Machine.Rules(
            retryPolicy: RetryPolicy(
                baseDelay: 1, maxDelay: 30, maxRetryAfter: maxRetryAfter, jitter: 0.25,
                random: { random }, wallClock: { 0 }),
            redirects: RedirectPolicy(maxRedirects: 10), maxBodyBytes: 1 << 20)
    }

    private func source(_ url: String, headers: [HTTPHeader] = [], conditional: HTTPValidators? = nil) -> TransferSource
    {
        TransferSource(url: url, displayURL: url, headers: headers, conditional: conditional)
    }

    private func request(
        _ urls: [String], id: Int = 0, pinned: Digest? = nil, size: Int64? = nil, retries: Int = 0,
        sharers: [TransferRequest] = []
    ) -> TransferRequest {
        TransferRequest(
            id: id, sources: urls.map { source($0) }, expectedDigest: pinned, expectedSize: size, retries: retries,
            stallTimeout: 30, sharers: sharers)
    }

    /// A machine whose first attempt is out: started, file opened (a fresh one unless `resume` says otherwise).
    private func started(
        _ request: TransferRequest, badHosts: [Bool] = [], isPartial: Bool = false,
        resume: (offset: Int64, validator: ResumeValidator)? = nil, rules: Machine.Rules? = nil
    ) -> Machine {
        var machine = Machine(request: request, rules: rules ?? self.rules())
        _ = machine.start(badHosts: badHosts)
        XCTAssertEqual(machine.fileOpened(isPartial: isPartial, resume: resume), .send)
        _ = machine.attemptStarts()
        return machine
    }

    /// Feeds a response's header block, line by line, ending with the blank line. False: the machine cut it short.
    @discardableResult
    private func respond(_ machine: inout Machine, _ lines: String...) -> Bool {
        for line in lines + [""] {
            let accepted = Array((line + "\r\n").utf8).withUnsafeBytes { machine.headerLine($0) }
            if !accepted { return false }
        }
        return true
    }

    private func failure(_ url: String, _ reason: FailureReason) -> AttemptFailure {
        AttemptFailure(sourceDisplayURL: url, reason: reason)
    }

    private func next(_ url: String, _ index: Int, delay: Double = 0, retry: Int = 0, of retries: Int) -> NextAttempt {
        NextAttempt(sourceDisplayURL: url, sourceIndex: index, delay: delay, retry: retry, retries: retries)
    }

    private let refused = FailureReason.network(code: .couldNotConnect, message: "refused")

    // MARK: First attempt and the order of sources

    func testTheFirstAttemptAnnouncesEveryRequestOpensTheFileAndAsksTheFirstURL() {
        var sharer = request(["http://b/f", "http://a/f"], id: 1)
        sharer.sources[1].displayURL = "a, as the sharer names it"
        var machine = Machine(request: request(["http://a/f", "http://b/f"], id: 0, sharers: [sharer]), rules: rules())
        XCTAssertEqual(
            machine.start(badHosts: []),
            .openFile(started: [
                Machine.Started(id: 0, sourceDisplayURL: "http://a/f"),
                Machine.Started(id: 1, sourceDisplayURL: "a, as the sharer names it"),
            ]))
        XCTAssertEqual(machine.fileOpened(isPartial: false, resume: nil), .send)
        let sent = machine.attemptStarts()
        XCTAssertEqual(sent.url, "http://a/f")
        XCTAssertEqual(sent.headers, [])
    }

    func testAFirstURLOnAHostThatFailedInThisRunGoesLast() {
        var machine = Machine(request: request(["http://a/f", "http://b/f"]), rules: rules())
        XCTAssertEqual(
            machine.start(badHosts: [true, false]),
            .openFile(started: [Machine.Started(id: 0, sourceDisplayURL: "http://b/f")]))
        _ = machine.fileOpened(isPartial: false, resume: nil)
        XCTAssertEqual(machine.attemptStarts().url, "http://b/f")
    }

    func testATransientFailureMovesToTheNextURLAtOnce() {
        var machine = started(request(["http://a/f", "http://b/f"], retries: 2))
        XCTAssertEqual(
            machine.attemptEnded(error: refused, now: 100, badHosts: []),
            .retry(failure: failure("http://a/f", refused), next: next("http://b/f", 1, of: 2), bytes: .drop))
        XCTAssertEqual(machine.attemptStarts().url, "http://b/f")
    }

    func testABackoffRoundStartsOnlyWhenEveryURLWasTriedWithTheExactDelay() {
        var machine = started(request(["http://a/f", "http://b/f"], retries: 2))
        _ = machine.attemptEnded(error: refused, now: 0, badHosts: [])
        _ = machine.attemptStarts()
        // Round 1: 1 s less a quarter of it times 0.5.
        XCTAssertEqual(
            machine.attemptEnded(error: refused, now: 0, badHosts: []),
            .retry(
                failure: failure("http://b/f", refused), next: next("http://a/f", 0, delay: 0.875, retry: 1, of: 2),
                bytes: .drop))
        _ = machine.attemptStarts()
        XCTAssertEqual(
            machine.attemptEnded(error: refused, now: 0, badHosts: []),
            .retry(failure: failure("http://a/f", refused), next: next("http://b/f", 1, retry: 1, of: 2), bytes: .drop))
        _ = machine.attemptStarts()
        // Round 2 doubles the backoff.
        XCTAssertEqual(
            machine.attemptEnded(error: refused, now: 0, badHosts: []),
            .retry(
                failure: failure("http://b/f", refused), next: next("http://a/f", 0, delay: 1.75, retry: 2, of: 2),
                bytes: .drop))
    }

    /// `retries: N` is N retries after the first attempt, per URL: N + 1 requests, then the end.
    func testRetriesCountRetriesAfterTheFirstAttempt() {
        var machine = started(request(["http://a/f"], retries: 2))
        var requests = 1
        var action = Machine.Action.send
        for _ in 0..<10 {
            XCTAssertTrue(respond(&machine, "HTTP/1.1 503 Busy"))
            action = machine.attemptEnded(now: 0, badHosts: [])
            guard case .retry = action else { break }
            _ = machine.attemptStarts()
            requests += 1
        }
        XCTAssertEqual(requests, 3)
        XCTAssertEqual(
            action,
            .giveUp(
                lastAttempt: failure("http://a/f", .httpStatus(503)),
                failures: Array(repeating: failure("http://a/f", .httpStatus(503)), count: 3),
                keepsPartial: false, sharers: []))
    }

    func testAPermanentFailureIsNotRetriedOnThatURL() {
        var machine = started(request(["http://a/f", "http://b/f"], retries: 3))
        respond(&machine, "HTTP/1.1 404 Not Found")
        XCTAssertEqual(
            machine.attemptEnded(now: 0, badHosts: []),
            .retry(failure: failure("http://a/f", .httpStatus(404)), next: next("http://b/f", 1, of: 3), bytes: .drop))
        _ = machine.attemptStarts()
        respond(&machine, "HTTP/1.1 503 Busy")
        // The next round goes round the URLs still in play: b alone.
        XCTAssertEqual(
            machine.attemptEnded(now: 0, badHosts: []),
            .retry(
                failure: failure("http://b/f", .httpStatus(503)),
                next: next("http://b/f", 1, delay: 0.875, retry: 1, of: 3),
                bytes: .drop))

        let untrusted = FailureReason.network(code: .peerFailedVerification, message: "certificate")
        var alone = started(request(["https://a/f"], retries: 3))
        XCTAssertEqual(
            alone.attemptEnded(error: untrusted, now: 0, badHosts: []),
            .giveUp(
                lastAttempt: failure("https://a/f", untrusted), failures: [failure("https://a/f", untrusted)],
                keepsPartial: false, sharers: []))
    }

    func testRetryAfterIsAFloorUnderTheWaitForThatURL() {
        var machine = started(request(["http://a/f"], retries: 1))
        respond(&machine, "HTTP/1.1 503 Busy", "Retry-After: 7")
        XCTAssertEqual(
            machine.attemptEnded(now: 0, badHosts: []),
            .retry(
                failure: failure("http://a/f", .httpStatus(503)),
                next: next("http://a/f", 0, delay: 7, retry: 1, of: 1),
                bytes: .drop))

        // A mirror is not held back by it; the URL that asked is, counted from when it asked.
        var mirrored = started(request(["http://a/f", "http://b/f"], retries: 1))
        respond(&mirrored, "HTTP/1.1 429 Slow Down", "Retry-After: 100")
        XCTAssertEqual(
            mirrored.attemptEnded(now: 0, badHosts: []),
            .retry(failure: failure("http://a/f", .httpStatus(429)), next: next("http://b/f", 1, of: 1), bytes: .drop))
        _ = mirrored.attemptStarts()
        XCTAssertEqual(
            mirrored.attemptEnded(error: refused, now: 40, badHosts: []),
            .retry(
                failure: failure("http://b/f", refused), next: next("http://a/f", 0, delay: 60, retry: 1, of: 1),
                bytes: .drop))

        // Capped: a server cannot park a job for a day.
        var capped = started(request(["http://a/f"], retries: 1), rules: rules(maxRetryAfter: 120))
        respond(&capped, "HTTP/1.1 503 Busy", "Retry-After: 86400")
        guard case .retry(_, let wait, _) = capped.attemptEnded(now: 0, badHosts: []) else { return XCTFail("a retry") }
        XCTAssertEqual(wait.delay, 120)
    }

    func testALocalFailureEndsTheTransferWithoutTryingAnotherSource() {
        let full = FailureReason.local(operation: .write, path: "/tmp/x", errno: ENOSPC)
        var machine = started(request(["http://a/f", "http://b/f"], retries: 3))
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000")
        guard case .write = machine.bodyBegins() else { return XCTFail("the body is written") }
        machine.abort(full)
        XCTAssertEqual(
            machine.attemptEnded(
                bytesWritten: 10, error: .network(code: CurlCode(rawValue: 23), message: "write"),
                writeRefused: true, now: 0, badHosts: []),
            .giveUp(
                lastAttempt: failure("http://a/f", full), failures: [failure("http://a/f", full)], keepsPartial: false,
                sharers: []))
    }

    // MARK: Verification

    func testAChecksumMismatchMovesToTheNextURLAndNeverAsksTheSameOneAgain() {
        var machine = started(request(["http://a/f", "http://b/f"], pinned: digest, size: 1000, retries: 3))
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000")
        _ = machine.bodyBegins()
        XCTAssertEqual(machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: []), .verify(fromDisk: false))
        let mismatch = FailureReason.digestMismatch(expected: digest, actual: other)
        let verdict = machine.digestComputed(.success(other), now: 0, badHosts: [])
        XCTAssertEqual(verdict.sharers, [])
        XCTAssertEqual(
            verdict.action,
            .retry(failure: failure("http://a/f", mismatch), next: next("http://b/f", 1, of: 3), bytes: .drop))
        _ = machine.attemptStarts()
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000")
        _ = machine.bodyBegins()
        _ = machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: [])
        guard
            case .giveUp(let last, let failures, _, _) = machine.digestComputed(.success(other), now: 0, badHosts: [])
                .action
        else {
            return XCTFail("both URLs served wrong bytes: nothing is asked again")
        }
        XCTAssertEqual(last, failure("http://b/f", mismatch))
        XCTAssertEqual(failures.map(\.sourceDisplayURL), ["http://a/f", "http://b/f"])
    }

    func testVerifiedBytesAreDeliveredWithTheirSourceAndUnpinnedOnesWithTheirValidators() {
        var machine = started(request(["http://a/f"]))
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v9\"", "Content-Encoding: gzip")
        _ = machine.bodyBegins()
        _ = machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: [])
        XCTAssertEqual(
            machine.digestComputed(.success(digest), now: 0, badHosts: []).action,
            .deliver(
                DownloadedFile(
                    temporaryPath: "", temporaryName: "", size: 1000, digest: digest, sourceDisplayURL: "http://a/f",
                    sourceIndex: 0,
                    validators: HTTPValidators(etag: "\"v9\"", lastModified: nil), contentEncoding: "gzip",
                    servedBy: "http://a/f"),
                sharers: []))
    }

    // MARK: Resume

    func testOnlyAPartialFromThisVeryURLThatFitsThePinIsResumed() {
        let machine = started(request(["http://a/f"], pinned: digest, size: 1000), isPartial: true)
        let validator = ResumeValidator.etag("\"v1\"")
        let fromHere = PartialMetadata(sourceKey: TransferSource.key("http://a/f"), validator: validator)
        XCTAssertEqual(machine.resumable(partialOf: 400, metadata: fromHere)?.offset, 400)
        let fromThere = PartialMetadata(sourceKey: TransferSource.key("http://b/f"), validator: validator)
        XCTAssertNil(
            machine.resumable(partialOf: 400, metadata: fromThere), "bytes from another URL may be another version")
        XCTAssertNil(machine.resumable(partialOf: 1001, metadata: fromHere), "longer than the pinned size")
        XCTAssertNil(machine.resumable(partialOf: 0, metadata: fromHere))
        XCTAssertNil(machine.resumable(partialOf: 400, metadata: nil), "no validator to resume under")
    }

    func testAResumeAsksForTheRestUnderItsValidatorAndAWholePartialIsOnlyVerified() {
        var machine = Machine(request: request(["http://a/f"], pinned: digest, size: 1000), rules: rules())
        _ = machine.start(badHosts: [])
        XCTAssertEqual(machine.fileOpened(isPartial: true, resume: (400, .etag("\"v1\""))), .send)
        XCTAssertEqual(machine.attemptStarts().headers, ["Range: bytes=400-", "If-Range: \"v1\""])
        respond(
            &machine, "HTTP/1.1 206 Partial Content", "Content-Range: bytes 400-999/1000", "Content-Length: 600",
            "ETag: \"v1\"")
        XCTAssertEqual(
            machine.bodyBegins(),
            .write(
                offset: 400, truncates: false, metadata: .unchanged, hashesTrailing: true,
                expectedTotal: 1000))
        XCTAssertEqual(machine.attemptEnded(bytesWritten: 600, now: 0, badHosts: []), .verify(fromDisk: true))

        var whole = Machine(request: request(["http://a/f"], pinned: digest, size: 1000), rules: rules())
        _ = whole.start(badHosts: [])
        XCTAssertEqual(
            whole.fileOpened(isPartial: true, resume: (1000, .etag("\"v1\""))), .verify(fromDisk: true),
            "a run ended between download and commit: only the hash is left")
    }

    /// The phase is what the last action leaves the transfer waiting for; only the first file of a transfer may be a
    /// whole partial: a file opened again after a wait for descriptors is sent for.
    func testThePhaseFollowsTheActionsAndOnlyTheFirstFileMayBeWhole() {
        var machine = Machine(
            request: request(["http://a/f", "http://b/f"], pinned: digest, size: 1000, retries: 1), rules: rules())
        XCTAssertEqual(machine.phase, .new)
        _ = machine.start(badHosts: [])
        XCTAssertEqual(machine.phase, .openingFile)
        XCTAssertEqual(
            machine.attemptCouldNotStart(.local(operation: .createTemporaryFile, path: "t", errno: EMFILE)),
            .waitForDescriptors)
        XCTAssertEqual(machine.phase, .waiting)
        XCTAssertEqual(
            machine.fileOpened(isPartial: true, resume: (1000, .etag("\"v1\""))), .send,
            "not the first file: what it holds is asked for, not taken as whole")
        XCTAssertEqual(machine.phase, .requesting)
        _ = machine.attemptStarts()
        respond(&machine, "HTTP/1.1 503 Service Unavailable")
        guard case .retry = machine.attemptEnded(now: 0, badHosts: []) else { return XCTFail("a 503 is retried") }
        XCTAssertEqual(machine.phase, .waiting)
        _ = machine.attemptStarts()
        XCTAssertEqual(machine.currentURL, "http://b/f")
        XCTAssertEqual(machine.headers.status, ResponseHeaders().status, "the next attempt starts with no response")
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000")
        _ = machine.bodyBegins()
        XCTAssertEqual(machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: []), .verify(fromDisk: false))
        XCTAssertEqual(machine.phase, .verifying)
        guard case .deliver = machine.digestComputed(.success(digest), now: 0, badHosts: []).action else {
            return XCTFail("the pinned bytes are delivered")
        }
        XCTAssertEqual(machine.phase, .finished)
    }

    func testACutBodyOfAResumableFileKeepsItsBytesForTheSameURL() {
        var machine = started(request(["http://a/f"], pinned: digest, size: 1000, retries: 1), isPartial: true)
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\"")
        XCTAssertEqual(
            machine.bodyBegins(),
            .write(
                offset: 0, truncates: false,
                metadata: .save(
                    PartialMetadata(
                        sourceKey: TransferSource.key("http://a/f"), validator: .etag("\"v1\""))),
                hashesTrailing: false, expectedTotal: 1000))
        let cut = FailureReason.network(code: .partialFile, message: "cut")
        XCTAssertEqual(
            machine.attemptEnded(bytesWritten: 300, error: cut, now: 0, badHosts: []),
            .retry(
                failure: failure("http://a/f", cut), next: next("http://a/f", 0, delay: 0.875, retry: 1, of: 1),
                bytes: .resume(from: 300)))
        XCTAssertEqual(machine.attemptStarts().headers, ["Range: bytes=300-", "If-Range: \"v1\""])
    }

    func testBytesAreNeverCarriedToAnotherURL() {
        var machine = started(
            request(["http://a/f", "http://b/f"], pinned: digest, size: 1000, retries: 1), isPartial: true)
        respond(&machine, "HTTP/1.1 200 OK", "ETag: \"v1\"")
        _ = machine.bodyBegins()
        let cut = FailureReason.network(code: .partialFile, message: "cut")
        XCTAssertEqual(
            machine.attemptEnded(bytesWritten: 300, error: cut, now: 0, badHosts: []),
            .retry(failure: failure("http://a/f", cut), next: next("http://b/f", 1, of: 1), bytes: .drop))
        XCTAssertEqual(machine.attemptStarts().headers, [])
    }

    func testA200AnsweringAResumeDropsTheBytesAndTakesTheWholeBody() {
        var machine = started(
            request(["http://a/f"], pinned: digest, size: 1000), isPartial: true, resume: (400, .etag("\"v1\"")))
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v2\"")
        XCTAssertEqual(
            machine.bodyBegins(),
            .write(
                offset: 0, truncates: true,
                metadata: .save(
                    PartialMetadata(
                        sourceKey: TransferSource.key("http://a/f"), validator: .etag("\"v2\""))),
                hashesTrailing: false, expectedTotal: 1000))
        XCTAssertEqual(
            machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: []), .verify(fromDisk: false),
            "every byte in the file came with this body")
        XCTAssertEqual(machine.fileBytes, 1000)
    }

    func testA206AtAnotherOffsetRestartsFromZeroAtOnceWithoutSpendingARetry() {
        var machine = started(
            request(["http://a/f"], pinned: digest, size: 1000, retries: 1), isPartial: true,
            resume: (400, .etag("\"v1\"")))
        respond(&machine, "HTTP/1.1 206 Partial Content", "Content-Range: bytes 7-9/1000", "Content-Length: 3")
        XCTAssertEqual(machine.bodyBegins(), .refuse)
        let rejected = FailureReason.resumeRejected(askedFrom: 400, contentRange: "bytes 7-9/1000")
        XCTAssertEqual(machine.abortReason, rejected)
        XCTAssertEqual(
            machine.attemptEnded(
                error: .network(code: CurlCode(rawValue: 23), message: "write"), writeRefused: true,
                now: 0, badHosts: []),
            .retry(
                failure: failure("http://a/f", rejected), next: next("http://a/f", 0, of: 1), bytes: .dropWithMetadata))
        XCTAssertEqual(machine.rotation.failures(at: 0), 0, "no retry spent")
        XCTAssertEqual(machine.attemptStarts().headers, [], "the whole body, no Range")
    }

    func testADigestMismatchOnSplicedBytesEarnsOneFullRefetch() {
        var machine = started(
            request(["http://a/f"], pinned: digest, size: 1000), isPartial: true, resume: (400, .etag("\"v1\"")))
        respond(&machine, "HTTP/1.1 206 Partial Content", "Content-Range: bytes 400-999/1000", "Content-Length: 600")
        _ = machine.bodyBegins()
        XCTAssertEqual(machine.attemptEnded(bytesWritten: 600, now: 0, badHosts: []), .verify(fromDisk: true))
        let mismatch = FailureReason.digestMismatch(expected: digest, actual: other)
        XCTAssertEqual(
            machine.digestComputed(.success(other), now: 0, badHosts: []).action,
            .retry(
                failure: failure("http://a/f", mismatch), next: next("http://a/f", 0, of: 0), bytes: .dropWithMetadata))
        XCTAssertEqual(machine.attemptStarts().headers, [])
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\"")
        _ = machine.bodyBegins()
        _ = machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: [])
        guard
            case .giveUp(let last, _, let keepsPartial, _) = machine.digestComputed(
                .success(other), now: 0, badHosts: []
            ).action
        else {
            return XCTFail("one full refetch, not two")
        }
        XCTAssertEqual(last, failure("http://a/f", mismatch))
        XCTAssertFalse(keepsPartial, "wrong bytes are not worth resuming")
    }

    // MARK: Redirects

    func testARedirectIsAHopOfTheAttemptAndTheSourcesHeadersStayWithTheirOrigin() {
        let secret = HTTPHeader(name: "Authorization", value: "Bearer t")
        var request = request(["https://a.example/f"])
        request.sources[0].headers = [secret]
        var machine = started(request)
        respond(&machine, "HTTP/1.1 302 Found", "Location: /g")
        XCTAssertEqual(machine.attemptEnded(redirectTarget: "https://a.example/g", now: 0, badHosts: []), .send)
        XCTAssertEqual(
            machine.attemptStarts().headers, ["Authorization: Bearer t"], "same origin: the headers go along")
        respond(&machine, "HTTP/1.1 301 Moved")
        XCTAssertEqual(machine.attemptEnded(redirectTarget: "https://cdn.example/g", now: 0, badHosts: []), .send)
        let hop = machine.attemptStarts()
        XCTAssertEqual(hop.url, "https://cdn.example/g")
        XCTAssertEqual(hop.headers, [], "another origin never sees them")
        respond(&machine, "HTTP/1.1 302 Found")
        XCTAssertEqual(machine.attemptEnded(redirectTarget: "https://a.example/h", now: 0, badHosts: []), .send)
        XCTAssertEqual(
            machine.attemptStarts().headers, [], "dropped for the rest of the attempt, even back at the origin")
    }

    func testRedirectLoopsAndDowngradesAreRefused() {
        var loop = started(request(["http://a/f"], retries: 3))
        respond(&loop, "HTTP/1.1 302 Found")
        XCTAssertEqual(loop.attemptEnded(redirectTarget: "http://a/g", now: 0, badHosts: []), .send)
        _ = loop.attemptStarts()
        respond(&loop, "HTTP/1.1 302 Found")
        XCTAssertEqual(
            loop.attemptEnded(redirectTarget: "http://a/f", now: 0, badHosts: []),
            .giveUp(
                lastAttempt: failure("http://a/f", .redirectRefused(.loop)),
                failures: [failure("http://a/f", .redirectRefused(.loop))], keepsPartial: false, sharers: []))

        var downgrade = started(request(["https://a/f"]))
        respond(&downgrade, "HTTP/1.1 302 Found")
        guard
            case .giveUp(let last, _, _, _) = downgrade.attemptEnded(redirectTarget: "http://a/f", now: 0, badHosts: [])
        else {
            return XCTFail("refused")
        }
        XCTAssertEqual(last?.reason, .redirectRefused(.downgrade))
    }

    // MARK: Conditional requests

    func testA304ToAConditionalRequestMeansNotModifiedAndToAnUnconditionalOneAFailure() {
        let validators = HTTPValidators(etag: "\"v1\"", lastModified: nil)
        var conditional = Machine(
            request: TransferRequest(
                id: 0, sources: [source("http://a/f", conditional: validators)],
                expectedDigest: nil, expectedSize: nil, retries: 0, stallTimeout: 30),
            rules: rules())
        _ = conditional.start(badHosts: [])
        _ = conditional.fileOpened(isPartial: false, resume: nil)
        XCTAssertEqual(conditional.attemptStarts().headers, ["If-None-Match: \"v1\""])
        respond(&conditional, "HTTP/1.1 304 Not Modified")
        XCTAssertEqual(
            conditional.attemptEnded(now: 0, badHosts: []),
            .notModified(sourceDisplayURL: "http://a/f", freshFor: nil, removesFile: true, sharers: []))

        var plain = started(request(["http://a/f"]))
        respond(&plain, "HTTP/1.1 304 Not Modified")
        guard case .giveUp(let last, _, _, _) = plain.attemptEnded(now: 0, badHosts: []) else {
            return XCTFail("a failure")
        }
        XCTAssertEqual(last?.reason, .httpStatus(304))
    }

    // MARK: Responses judged from their headers

    func testAnswersThatBreakHTTPAreCutBeforeAnyBodyByte() {
        var outOfRange = started(request(["http://a/f"]))
        XCTAssertFalse(respond(&outOfRange, "HTTP/1.1 600 Odd"))
        XCTAssertEqual(outOfRange.abortReason, .protocolViolation(.statusOutOfRange(600)))

        var conflicting = started(request(["http://a/f"]))
        XCTAssertFalse(respond(&conflicting, "HTTP/1.1 200 OK", "Content-Length: 5", "Content-Length: 6"))
        XCTAssertEqual(conflicting.abortReason, .protocolViolation(.conflictingContentLength(5, 6)))

        var tooLarge = started(request(["http://a/f"], pinned: digest, size: 1000))
        XCTAssertFalse(respond(&tooLarge, "HTTP/1.1 200 OK", "Content-Length: 1001"))
        XCTAssertEqual(tooLarge.abortReason, .tooLarge(limit: 1000))

        var interim = started(request(["http://a/f"]))
        XCTAssertTrue(respond(&interim, "HTTP/1.1 100 Continue"), "an interim answer is followed by the real one")
        XCTAssertTrue(respond(&interim, "HTTP/1.1 200 OK", "Content-Length: 10"))

        var unasked = started(request(["http://a/f"]))
        respond(&unasked, "HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9/10")
        XCTAssertEqual(unasked.bodyBegins(), .refuse)
        XCTAssertEqual(unasked.abortReason, .protocolViolation(.unaskedPartialContent))
    }

    func testAnErrorBodyCutShortIsStillItsStatusNotANetworkFailure() {
        var machine = started(request(["http://a/f"]))
        respond(&machine, "HTTP/1.1 500 Oops")
        XCTAssertEqual(machine.bodyBegins(), .discard)
        guard
            case .giveUp(let last, _, _, _) = machine.attemptEnded(
                error: .network(code: CurlCode(rawValue: 23), message: "write"),
                writeRefused: true, now: 0, badHosts: [])
        else {
            return XCTFail("the end")
        }
        XCTAssertEqual(last?.reason, .httpStatus(500))
    }

    // MARK: Descriptors

    func testRunningOutOfDescriptorsIsAWaitNotAFailedAttempt() {
        var machine = Machine(request: request(["http://a/f", "http://b/f"], retries: 1), rules: rules())
        _ = machine.start(badHosts: [])
        let noDescriptor = FailureReason.local(operation: .createTemporaryFile, path: "/tmp/x", errno: EMFILE)
        XCTAssertEqual(machine.attemptCouldNotStart(noDescriptor), .waitForDescriptors)
        XCTAssertEqual(machine.fileOpened(isPartial: false, resume: nil), .send)
        _ = machine.attemptStarts()
        XCTAssertEqual(
            machine.attemptEnded(error: refused, outOfDescriptors: true, now: 0, badHosts: []), .waitForDescriptors)
        XCTAssertEqual(machine.failures, [])
        XCTAssertEqual(machine.rotation.failures(at: 0), 0)
        XCTAssertEqual(machine.attemptStarts().url, "http://a/f", "the same URL, when descriptors are back")

        let denied = FailureReason.local(operation: .createTemporaryFile, path: "/tmp/x", errno: EACCES)
        XCTAssertEqual(
            machine.attemptCouldNotStart(denied),
            .giveUp(lastAttempt: nil, failures: [failure("http://a/f", denied)], keepsPartial: false, sharers: []))
    }

    // MARK: Stopping, and what stays on disk

    func testAnInterruptionKeepsAResumablePartialWithItsValidatorAndNothingElse() {
        func interrupted(
            pinned: Bool, isPartial: Bool, validator: Bool, bytes: Int64, by reason: FailureReason = .interrupted
        ) -> Bool? {
            var machine = started(
                request(["http://a/f"], pinned: pinned ? digest : nil, size: pinned ? 1000 : nil), isPartial: isPartial)
            if validator {
                respond(&machine, "HTTP/1.1 200 OK", "ETag: \"v1\"")
            } else {
                respond(&machine, "HTTP/1.1 200 OK")
            }
            _ = machine.bodyBegins()
            guard
                case .giveUp(let last, let failures, let keeps, _) = machine.stop(because: reason, bytesWritten: bytes)
            else { return nil }
            XCTAssertNil(last, "nothing to report as an attempt: the run is stopping")
            XCTAssertEqual(failures, [failure("http://a/f", reason)])
            return keeps
        }
        XCTAssertEqual(interrupted(pinned: true, isPartial: true, validator: true, bytes: 500), true)
        XCTAssertEqual(
            interrupted(pinned: true, isPartial: true, validator: true, bytes: 500, by: .timeLimitReached("1m")), true)
        XCTAssertEqual(
            interrupted(pinned: true, isPartial: true, validator: false, bytes: 500), false, "nothing to resume under")
        XCTAssertEqual(interrupted(pinned: true, isPartial: true, validator: true, bytes: 0), false, "nothing to keep")
        XCTAssertEqual(
            interrupted(pinned: false, isPartial: false, validator: true, bytes: 500), false, "not a partial")
    }

    func testAGiveUpAfterACutKeepsThePartialButAfterAnAnswerThatCannotImproveDropsIt() {
        var cut = started(request(["http://a/f"], pinned: digest, size: 1000), isPartial: true)
        respond(&cut, "HTTP/1.1 200 OK", "ETag: \"v1\"")
        _ = cut.bodyBegins()
        guard
            case .giveUp(_, _, true, _) = cut.attemptEnded(
                bytesWritten: 300, error: .network(code: .receiveError, message: "reset"),
                now: 0, badHosts: [])
        else {
            return XCTFail("a cut body is worth resuming in the next run")
        }
        var tooLong = started(request(["http://a/f"], pinned: digest, size: 1000), isPartial: true)
        respond(&tooLong, "HTTP/1.1 200 OK", "ETag: \"v1\"")
        _ = tooLong.bodyBegins()
        tooLong.abort(.tooLarge(limit: 1000))
        guard
            case .giveUp(_, _, false, _) = tooLong.attemptEnded(
                bytesWritten: 1000, error: .network(code: CurlCode(rawValue: 23), message: ""),
                writeRefused: true, now: 0, badHosts: [])
        else {
            return XCTFail("more bytes than pinned are not a partial")
        }
    }

    // MARK: Sharers

    func testBytesServeTheSharersTheyMatchAndTheOthersGoOnAlone() {
        let same = request(["http://a/f"], id: 1, pinned: digest, size: 1000)
        let wrong = request(["http://a/f", "http://b/f"], id: 2, pinned: other, size: 3, retries: 1)
        let elsewhere = request(["http://c/f"], id: 3, pinned: digest, size: 1000)
        var machine = started(
            request(["http://a/f"], id: 0, pinned: digest, size: 1000, sharers: [same, wrong, elsewhere]))
        respond(&machine, "HTTP/1.1 200 OK", "Content-Length: 1000")
        _ = machine.bodyBegins()
        _ = machine.attemptEnded(bytesWritten: 1000, now: 0, badHosts: [])
        let verdict = machine.digestComputed(.success(digest), now: 0, badHosts: [])
        let file = DownloadedFile(
            temporaryPath: "", temporaryName: "", size: 1000, digest: digest, sourceDisplayURL: "http://a/f",
            sourceIndex: 0, servedBy: "http://a/f")
        guard verdict.sharers.count == 2, case .serve(let served, file) = verdict.sharers[0],
            case .goOnAlone(let alone, let why) = verdict.sharers[1]
        else {
            return XCTFail("\(verdict.sharers)")
        }
        XCTAssertEqual(served.request.id, 1)
        XCTAssertEqual(alone.request.id, 2)
        XCTAssertEqual(why, failure("http://a/f", .sizeMismatch(expected: 3, actual: 1000)))
        guard case .deliver(file, let rest) = verdict.action, rest.count == 1,
            case .goOnAlone(let unserved, nil) = rest[0]
        else {
            return XCTFail("\(verdict.action)")
        }
        XCTAssertEqual(
            unserved.request.id, 3, "the bytes came from a URL it does not have: it goes on alone, untouched")

        // Alone, it does not ask the URL that served it wrong bytes again: its mirror, at once.
        var lone = Machine(request: alone.request, rules: rules(), rotation: alone.rotation, failures: alone.failures)
        XCTAssertEqual(
            lone.goOnAlone(after: why, now: 0, badHosts: []),
            .retry(failure: why, next: next("http://b/f", 1, of: 1), bytes: .drop))
        XCTAssertEqual(lone.attemptStarts().url, "http://b/f")
    }

    func testWhatTheSharedURLDidCountsForTheSharersWhoGoOnWithWhatIsLeft() {
        let sharer = request(["http://a/f"], id: 1, pinned: digest, size: 1000, retries: 0)
        var machine = started(
            request(["http://a/f", "http://b/f"], id: 0, pinned: digest, size: 1000, sharers: [sharer]))
        _ = machine.attemptEnded(error: refused, now: 0, badHosts: [])
        XCTAssertEqual(machine.sharers.first?.failures, [failure("http://a/f", refused)])
        _ = machine.attemptStarts()
        guard case .giveUp(_, _, _, let sharers) = machine.attemptEnded(error: refused, now: 0, badHosts: []),
            case .goOnAlone(let alone, nil)? = sharers.first
        else {
            return XCTFail("the sharer goes on alone")
        }
        var lone = Machine(request: alone.request, rules: rules(), rotation: alone.rotation, failures: alone.failures)
        XCTAssertEqual(
            lone.goOnAlone(after: nil, now: 0, badHosts: []),
            .giveUp(lastAttempt: nil, failures: [failure("http://a/f", refused)], keepsPartial: false, sharers: []),
            "its one URL was exhausted by the group: not asked again")
    }

    func testAnInterruptionEndsTheSharersWithTheTransfer() {
        let sharer = request(["http://a/f"], id: 1, pinned: digest, size: 1000)
        var machine = started(request(["http://a/f"], id: 0, pinned: digest, size: 1000, sharers: [sharer]))
        guard case .giveUp(_, _, _, let sharers) = machine.stop(because: .interrupted) else {
            return XCTFail("the end")
        }
        XCTAssertEqual(sharers, [.end(id: 1, failures: [failure("http://a/f", .interrupted)])])
    }

    func testSplicedBytesThatFailTheirOwnHashAreNotOfferedToSharers() {
        let sharer = request(["http://a/f"], id: 1, pinned: other, size: 1000)
        var machine = started(
            request(["http://a/f"], id: 0, pinned: digest, size: 1000, sharers: [sharer]), isPartial: true,
            resume: (400, .etag("\"v1\"")))
        respond(&machine, "HTTP/1.1 206 Partial Content", "Content-Range: bytes 400-999/1000", "Content-Length: 600")
        _ = machine.bodyBegins()
        _ = machine.attemptEnded(bytesWritten: 600, now: 0, badHosts: [])
        let verdict = machine.digestComputed(.success(other), now: 0, badHosts: [])
        XCTAssertEqual(verdict.sharers, [], "the splice may be what is wrong")
        guard case .retry(_, _, .dropWithMetadata) = verdict.action else { return XCTFail("a full refetch") }
        XCTAssertEqual(machine.sharers.map(\.request.id), [1], "still waiting for the full body")
    }
}
