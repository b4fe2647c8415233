import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// Real libcurl against a real loopback server, real temporary files.
final class TransferEngineTests: XCTestCase {
    private var temporary: TemporaryDirectory!

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func engine(jobs: Int = 4) -> TransferEngine {
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path), maxConcurrentTransfers: jobs,
                retryPolicy: RetryPolicy(baseDelay: 0.01, jitter: 0)))
    }

    private func request(
        _ id: Int, _ sources: [TransferSource], bytes: [UInt8]?, size: Int64? = nil, retries: Int = 0
    ) -> TransferRequest {
        TransferRequest(
            id: id, sources: sources, expectedDigest: bytes.map { StreamingHasher.digest($0, algorithm: .sha256) },
            expectedSize: size, retries: retries, stallTimeout: 5)
    }

    private func source(_ url: String, headers: [HTTPHeader] = []) -> TransferSource {
        TransferSource(url: url, displayURL: url, headers: headers)
    }

    private func contents(_ path: String) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return [UInt8](data)
    }

    private func leftoverTemporaryFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: temporary.path)
    }

    func testFetchesManyFilesConcurrentlyIntoVerifiedTemporaryFilesOverReusedConnections() throws {
        var files: [String: [UInt8]] = [:]
        for i in 0..<60 { files["/f\(i)"] = (0..<(i * 977 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) } }
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let recorder = Recorder()
        engine(jobs: 4).run(
            (0..<60).map { request($0, [source(server.url("/f\($0)"))], bytes: files["/f\($0)"]) }, delegate: recorder)
        let results = recorder.results
        XCTAssertEqual(results.count, 60)
        for i in 0..<60 {
            let file = try XCTUnwrap(try results[i]?.get(), "transfer \(i)")
            XCTAssertEqual(contents(file.temporaryPath), files["/f\(i)"])
            XCTAssertEqual(file.size, Int64(files["/f\(i)"]!.count))
            XCTAssertTrue(file.temporaryPath.hasPrefix(temporary.path + "/") && file.temporaryPath.hasSuffix(".part"))
            var info = stat()
            XCTAssertEqual(stat(file.temporaryPath, &info), 0)
            XCTAssertEqual(info.st_mode & 0o777, 0o600, "nobody else can read unverified bytes")
        }
        XCTAssertEqual(
            Set(results.values.compactMap { try? $0.get().temporaryPath }).count, 60, "every transfer has its own file")
        XCTAssertLessThanOrEqual(server.connectionCount, 4, "connections are reused, at most one per job")
        XCTAssertEqual(server.requests.count, 60)
        XCTAssertNil(
            server.requests.first { $0.header("Accept-Encoding") != nil },
            "no Accept-Encoding: bytes hashed are bytes stored")
    }

    func testServerErrorIsAFailureAndNeverAFile() throws {
        let server = try LoopbackHTTPServer(files: [:])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/missing"))], bytes: [1, 2, 3])], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(
            failure.attempts, [AttemptFailure(sourceDisplayURL: server.url("/missing"), reason: .httpStatus(404))])
        XCTAssertEqual(try leftoverTemporaryFiles(), [], "a failed transfer leaves no temporary file")
    }

    func testChecksumMismatchMovesToTheMirrorWithoutRetryingTheSameURL() throws {
        let good: [UInt8] = Array("the right bytes".utf8)
        let server = try LoopbackHTTPServer(files: ["/bad": Array("the wrong bytes".utf8), "/good": good])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run(
            [request(0, [source(server.url("/bad")), source(server.url("/good"))], bytes: good, retries: 3)],
            delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), good)
        XCTAssertEqual(file.sourceDisplayURL, server.url("/good"))
        XCTAssertEqual(server.requests.map(\.path), ["/bad", "/good"], "a mismatch is not retried on the same URL")
        XCTAssertEqual(recorder.attemptFailures.count, 1)
    }

    func testEverySourceFailingListsEachURLAndWhy() throws {
        let expected: [UInt8] = Array("expected".utf8)
        let server = try LoopbackHTTPServer(files: ["/wrong": Array("not it".utf8)])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run(
            [request(0, [source(server.url("/wrong")), source(server.url("/gone"))], bytes: expected)],
            delegate: recorder)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(
            failure.lastFailurePerSource.map(\.sourceDisplayURL), [server.url("/wrong"), server.url("/gone")])
        guard case .digestMismatch(let want, let got, _) = failure.attempts[0].reason else {
            return XCTFail("\(failure)")
        }
        XCTAssertEqual(want, StreamingHasher.digest(expected, algorithm: .sha256))
        XCTAssertEqual(got, StreamingHasher.digest(Array("not it".utf8), algorithm: .sha256))
        XCTAssertEqual(failure.attempts[1].reason, .httpStatus(404))
        XCTAssertEqual(try leftoverTemporaryFiles(), [])
    }

    func testTransientStatusIsRetriedExactlyRetriesTimes() throws {
        let server = try LoopbackHTTPServer { _ in .status(503) }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: [1], retries: 2)], delegate: recorder)
        XCTAssertEqual(server.requests.count, 3, "retries: 2 means 3 requests at most")
        XCTAssertEqual(recorder.attemptFailures.map(\.retryIn).map { $0 != nil }, [true, true, false])
        guard case .failure = recorder.results[0] else { return XCTFail("expected a failure") }
    }

    func testTransientFailureThenSuccess() throws {
        let body: [UInt8] = Array("finally".utf8)
        let count = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            let n = count.withLock { n in
                n += 1; return n
            }
            return n == 1 ? .status(502) : .ok(body)
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: body, retries: 1)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), body)
        XCTAssertEqual(server.requests.count, 2)
    }

    func testPermanentStatusIsNotRetried() throws {
        let server = try LoopbackHTTPServer { _ in .status(403) }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: [1], retries: 5)], delegate: recorder)
        XCTAssertEqual(server.requests.count, 1)
    }

    func testConnectionCutMidBodyIsAClientErrorAndTheRetryStartsClean() throws {
        let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0) }
        let count = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            let n = count.withLock { n in
                n += 1; return n
            }
            var response = ServerResponse.ok(body)
            if n == 1 { response.fault = .closeAfter(bytes: 40_000) }
            return response
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: body, retries: 1)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), body, "no bytes of the cut attempt survive")
        guard case .network = recorder.attemptFailures.first?.failure.reason else {
            return XCTFail("a cut connection is a client-side error: \(recorder.attemptFailures)")
        }
    }

    func testMoreBytesThanThePinnedSizeAbortsTheTransfer() throws {
        let server = try LoopbackHTTPServer(files: ["/big": [UInt8](repeating: 7, count: 50_000)])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/big"))], bytes: [7], size: 1)], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(failure.attempts.map(\.reason), [.tooLarge(limit: 1)])
    }

    func testHeadersGoOnlyToTheirOriginAndNeverToMirrors() throws {
        let body: [UInt8] = Array("body".utf8)
        let mirror = try LoopbackHTTPServer(files: ["/x": body])
        defer { mirror.stop() }
        let primary = try LoopbackHTTPServer { _ in .status(500) }
        defer { primary.stop() }
        let recorder = Recorder()
        let auth = [HTTPHeader(name: "Authorization", value: "Bearer s3cret")]
        engine().run(
            [request(0, [source(primary.url("/x"), headers: auth), source(mirror.url("/x"))], bytes: body)],
            delegate: recorder)
        XCTAssertNotNil(try recorder.results[0]?.get())
        XCTAssertEqual(primary.requests.first?.header("Authorization"), "Bearer s3cret")
        XCTAssertEqual(mirror.requests.count, 1)
        XCTAssertNil(mirror.requests.first?.header("Authorization"), "a mirror never gets the manifest's headers")
    }

    func testCrossOriginRedirectDropsHeadersSameOriginKeepsThem() throws {
        let body: [UInt8] = Array("redirected".utf8)
        let other = try LoopbackHTTPServer(files: ["/final": body])
        defer { other.stop() }
        let otherURL = other.url("/final")
        let origin = try LoopbackHTTPServer { request in
            switch request.path {
            case "/start": ServerResponse(status: 302, headers: [("Location", "/hop")], body: [])
            case "/hop": ServerResponse(status: 301, headers: [("Location", otherURL)], body: [])
            default: .notFound
            }
        }
        defer { origin.stop() }
        let recorder = Recorder()
        let auth = [HTTPHeader(name: "Authorization", value: "Bearer s3cret")]
        engine().run([request(0, [source(origin.url("/start"), headers: auth)], bytes: body)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), body)
        XCTAssertEqual(origin.requests.map(\.path), ["/start", "/hop"])
        XCTAssertEqual(origin.requests.map { $0.header("Authorization") }, ["Bearer s3cret", "Bearer s3cret"])
        XCTAssertEqual(other.requests.count, 1)
        XCTAssertNil(other.requests[0].header("Authorization"), "credentials never follow a redirect to another origin")
    }

    func testRedirectLoopAndForeignSchemesAreRefused() throws {
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/a": ServerResponse(status: 302, headers: [("Location", "/b")], body: [])
            case "/b": ServerResponse(status: 302, headers: [("Location", "/a")], body: [])
            case "/file": ServerResponse(status: 302, headers: [("Location", "file:///etc/passwd")], body: [])
            default: .notFound
            }
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run(
            [
                request(0, [source(server.url("/a"))], bytes: [1]),
                request(1, [source(server.url("/file"))], bytes: [1]),
            ],
            delegate: recorder)
        guard case .failure(let loop) = recorder.results[0], case .failure(let file) = recorder.results[1] else {
            return XCTFail("both must fail")
        }
        XCTAssertEqual(loop.attempts.map(\.reason), [.redirectRefused(.loop)])
        XCTAssertEqual(file.attempts.map(\.reason), [.redirectRefused(.unsupportedScheme("file"))])
    }

    func testConnectionRefusedIsAClientSideError() throws {
        // A port that was just free: bind, read the port, close.
        let server = try LoopbackHTTPServer(files: [:])
        let url = server.url("/x")
        server.stop()
        let recorder = Recorder()
        engine().run([request(0, [source(url)], bytes: [1])], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0], case .network(let code, _) = failure.attempts[0].reason
        else {
            return XCTFail("expected a network failure")
        }
        XCTAssertEqual(code, .couldNotConnect)
    }

    /// A TLS handshake that fails (here: the port answers in plain HTTP) is a transient failure, as a reset is: the
    /// URL is asked again up to its retries. A certificate that cannot be verified is not (`TLSTransferTests`).
    func testAFailedTLSHandshakeIsRetriedLikeAnyTransientFailure() throws {
        let server = try BannerServer()
        defer { server.stop() }
        let url = server.url("/x")
        let recorder = Recorder()
        engine().run([request(0, [source(url)], bytes: [1], retries: 2)], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0] else {
            return XCTFail("plain HTTP cannot complete a TLS handshake")
        }
        XCTAssertEqual(failure.attempts.count, 3, "the first request and 2 retries: \(failure)")
        for attempt in failure.attempts {
            guard case .network(let code, _) = attempt.reason else { return XCTFail("\(attempt)") }
            XCTAssertEqual(code, .sslConnectError, "\(attempt)")
        }
    }

    /// An option libcurl refuses fails the transfer before any request, naming the option: a request never goes out
    /// half-configured. libcurl refuses strings over 8 MB (CURL_MAX_INPUT_LENGTH), so a URL that long is refused.
    func testAnOptionLibcurlRefusesFailsTheTransferBeforeAnyRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/x": [1]])
        defer { server.stop() }
        let url = server.url("/x") + "?" + String(repeating: "a", count: 9_000_000)
        let recorder = Recorder()
        engine().run([request(0, [source(url)], bytes: [1], retries: 2)], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0],
            case .network(let code, let message) = failure.attempts[0].reason
        else {
            return XCTFail("expected a refused option: \(String(describing: recorder.results[0]))")
        }
        XCTAssertEqual(code, .badFunctionArgument)
        XCTAssertEqual(message, "libcurl refused option 10002: A libcurl function was given a bad argument")
        XCTAssertEqual(failure.attempts.count, 1, "not retried")
        XCTAssertEqual(server.requests.count, 0)
    }

    func testProgressReportsBytesWrittenAndExpectedTotals() throws {
        let body = [UInt8](repeating: 1, count: 3_000_000)
        let server = try LoopbackHTTPServer { _ in
            var response = ServerResponse.ok(body)
            response.fault = .trickle(bytesPerChunk: 500_000, interval: 0.15)
            return response
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: body)], delegate: recorder, reportsProgress: true)
        let progress = recorder.progress
        XCTAssertFalse(progress.isEmpty)
        XCTAssertEqual(progress.map(\.totalBytesWritten), progress.map(\.totalBytesWritten).sorted())
        XCTAssertTrue(progress.allSatisfy { $0.totalBytesExpected == 3_000_000 && $0.bytesWritten > 0 })
        // Each report says what arrived since the previous one: together they account for every byte once.
        XCTAssertEqual(progress.map { Int64($0.bytesWritten) }.reduce(0, +), progress.last?.totalBytesWritten)
    }

    /// The temporary file is created with the mode the file will have in place, exactly, whatever the umask
    /// leaves out (then it is set by descriptor); without a mode asked, it is private.
    func testTheTemporaryFileHasTheRequestedModeExactly() throws {
        let body = [UInt8](repeating: 3, count: 1000)
        let server = try LoopbackHTTPServer(files: ["/f": body])
        defer { server.stop() }
        for (umaskBits, mode) in [(mode_t(0o022), UInt32?.some(0o644)), (0o077, 0o640), (0o027, 0o755), (0o022, nil)] {
            let previous = umask(umaskBits)
            defer { umask(previous) }
            var asked = request(0, [source(server.url("/f"))], bytes: body)
            asked.fileMode = mode
            let recorder = Recorder()
            engine().run([asked], delegate: recorder)
            guard case .success(let file) = recorder.results[0] else { return XCTFail("\(recorder.results)") }
            var info = stat()
            XCTAssertEqual(lstat(file.temporaryPath, &info), 0)
            XCTAssertEqual(UInt32(info.st_mode & 0o7777), mode ?? 0o600, "umask \(String(umaskBits, radix: 8))")
            XCTAssertEqual(file.hasFileMode, mode != nil)
            unlink(file.temporaryPath)
        }
    }

    /// A body that arrives whole at once is told by its end alone: 100,000 small files need no progress event
    /// each.
    func testABodyThatArrivesAtOnceIsNotReportedAsProgress() throws {
        let body = [UInt8](repeating: 7, count: 4096)
        let server = try LoopbackHTTPServer(files: ["/small": body])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run(
            [request(0, [source(server.url("/small"))], bytes: body)], delegate: recorder, reportsProgress: true)
        guard case .success(let file) = recorder.results[0] else { return XCTFail("\(recorder.results)") }
        XCTAssertEqual(file.size, 4096)
        XCTAssertEqual(recorder.progress, [])
    }
}

extension TransferEngineTests {
    /// Bodies past the threshold are hashed by a trailing hasher on another thread: same verdicts as inline.
    private var largeBody: [UInt8] {
        var generator = SplitMix(seed: 42)
        return (0..<(12 << 20) / 8).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
    }

    func testLargeBodyIsVerifiedByTheTrailingHasher() throws {
        let body = largeBody
        let server = try LoopbackHTTPServer(files: ["/large": body])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/large"))], bytes: body)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(file.digest, StreamingHasher.digest(body, algorithm: .sha256))
        XCTAssertEqual(contents(file.temporaryPath), body)
    }

    func testLargeBodyWithTheWrongDigestMovesToTheMirror() throws {
        let body = largeBody
        var corrupted = body
        corrupted[corrupted.count - 1] ^= 0xff
        let server = try LoopbackHTTPServer(files: ["/bad": corrupted, "/good": body])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run(
            [request(0, [source(server.url("/bad")), source(server.url("/good"))], bytes: body)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(file.sourceDisplayURL, server.url("/good"))
        XCTAssertEqual(contents(file.temporaryPath), body)
        guard case .digestMismatch = recorder.attemptFailures.first?.failure.reason else {
            return XCTFail("\(recorder.attemptFailures)")
        }
    }

    func testLargeBodyCutMidwayIsRetriedFromZero() throws {
        let body = largeBody
        let count = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            let n = count.withLock { n in
                n += 1; return n
            }
            return n == 1 ? ServerResponse.ok(body).with(fault: .closeAfter(bytes: 9 << 20)) : .ok(body)
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: body, retries: 1)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), body)
        XCTAssertEqual(server.requests.count, 2)
    }
}

/// Collects engine events (from every loop's thread; read once `run` has returned).
final class Recorder: TransferDelegate {
    private struct Events {
        var results: [Int: Result<DownloadedFile, TransferFailure>] = [:]
        var attemptFailures: [(failure: AttemptFailure, next: NextAttempt?)] = []
        var progress: [TransferProgress] = []
        var notModified: [Int: String] = [:]
        var started: [Int: String] = [:]
        /// Ids that got more than one ending event (`finished` or `notModified`): there must be none.
        var endedTwice: [Int] = []
    }
    private let events = Mutex(Events())

    var results: [Int: Result<DownloadedFile, TransferFailure>] { events.withLock { $0.results } }
    /// `retryIn`: the wait before the next attempt, nil when it starts at once or nothing follows.
    var attemptFailures: [(failure: AttemptFailure, retryIn: Double?)] {
        events.withLock { $0.attemptFailures.map { ($0.failure, $0.next.flatMap { $0.delay > 0 ? $0.delay : nil }) } }
    }
    /// What each failed attempt said comes next (nil: nothing, the transfer failed).
    var nextAttempts: [NextAttempt?] { events.withLock { $0.attemptFailures.map(\.next) } }
    var progress: [TransferProgress] { events.withLock { $0.progress } }
    var notModified: [Int: String] { events.withLock { $0.notModified } }
    var started: [Int: String] { events.withLock { $0.started } }
    var endedTwice: [Int] { events.withLock { $0.endedTwice } }

    func transfer(_ id: Int, didProduce event: TransferEvent) {
        events.withLock { events in
            switch event {
            case .started(let source): events.started[id] = source
            case .progress(let p): events.progress.append(p)
            case .attemptFailed(let failure, let next): events.attemptFailures.append((failure, next))
            case .finished(let result):
                if events.results[id] != nil || events.notModified[id] != nil { events.endedTwice.append(id) }
                events.results[id] = result
            case .notModified(let source, _):
                if events.results[id] != nil || events.notModified[id] != nil { events.endedTwice.append(id) }
                events.notModified[id] = source
            }
        }
    }
}

extension TransferEngineTests {
    func testPerHostConnectionCapHolds() throws {
        let files = Dictionary(
            uniqueKeysWithValues: (0..<20).map { ("/f\($0)", [UInt8](repeating: UInt8($0), count: 30_000)) })
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path),
                maxConcurrentTransfers: 8, maxConnectionsPerHost: 2))
        let recorder = Recorder()
        engine.run(
            (0..<20).map { request($0, [source(server.url("/f\($0)"))], bytes: files["/f\($0)"]) }, delegate: recorder)
        XCTAssertEqual(recorder.results.values.filter { (try? $0.get()) != nil }.count, 20)
        XCTAssertLessThanOrEqual(server.connectionCount, 2)
    }
}

extension TransferEngineTests {
    /// A failed longer attempt must not leave its tail behind a shorter right one: the file is exactly the bytes
    /// that were hashed.
    func testALongerWrongBodyLeavesNoTailBehindTheShorterRightOne() throws {
        let right: [UInt8] = Array(repeating: 1, count: 50_000)
        let server = try LoopbackHTTPServer(files: ["/long": [UInt8](repeating: 2, count: 200_000), "/right": right])
        defer { server.stop() }
        let recorder = Recorder()
        engine().run(
            [request(0, [source(server.url("/long")), source(server.url("/right"))], bytes: right)], delegate: recorder)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), right)
    }

    func testARedirectWithALargeBodyIsStillFollowed() throws {
        let body: [UInt8] = Array("the target".utf8)
        let server = try LoopbackHTTPServer { request in
            request.path == "/moved"
                ? ServerResponse(
                    status: 302, headers: [("Location", "/target")], body: [UInt8](repeating: 0x20, count: 500_000))
                : request.path == "/target" ? .ok(body) : .notFound
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/moved"))], bytes: body)], delegate: recorder)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), body)
    }

    func testALargeErrorBodyStillReportsItsStatusAndIsNotRetriedAsANetworkFailure() throws {
        let server = try LoopbackHTTPServer { _ in .status(404, body: [UInt8](repeating: 0x41, count: 500_000)) }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [source(server.url("/x"))], bytes: [1], retries: 3)], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(failure.attempts.map(\.reason), [.httpStatus(404)])
        XCTAssertEqual(server.requests.count, 1)
    }

    func testLibcurlMessagesAreScrubbedOfTheSourcesSecrets() throws {
        let server = try LoopbackHTTPServer(files: [:])
        let port = String(server.port)
        server.stop()
        let recorder = Recorder()
        let url = "http://127.0.0.1:\(port)/x"
        engine().run(
            [
                request(
                    0, [TransferSource(url: url, displayURL: "http://127.0.0.1:${PORT}/x", secrets: [port])], bytes: [1]
                )
            ],
            delegate: recorder)
        guard case .failure(let failure) = recorder.results[0],
            case .network(.couldNotConnect, let message) = failure.attempts[0].reason
        else {
            return XCTFail("expected a refused connection")
        }
        XCTAssertFalse(message.contains(port), message)
        XCTAssertTrue(message.contains("***"), message)
    }
}
