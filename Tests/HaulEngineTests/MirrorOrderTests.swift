import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// A dead host costs one connect, not a minute per file: a failing URL hands over to the next one at once,
/// backoffs start only when every URL was tried, a wait holds no transfer slot, and a host that refused or timed
/// out is tried after the others for the rest of the run. Real sockets: a port that refuses, a listener that
/// never answers, loopback servers that count requests.
final class MirrorOrderTests: XCTestCase {
    private var temporary: TemporaryDirectory!
    private let body: [UInt8] = Array("the file".utf8)

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func engine(jobs: Int = 4, baseDelay: Double = 0.001) -> TransferEngine {
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path), maxConcurrentTransfers: jobs,
                retryPolicy: RetryPolicy(baseDelay: baseDelay, jitter: 0)))
    }

    private func request(_ id: Int, _ urls: [String], retries: Int, stallTimeout: Double = 5) -> TransferRequest {
        TransferRequest(
            id: id, sources: urls.map { TransferSource(url: $0, displayURL: $0) },
            expectedDigest: StreamingHasher.digest(body, algorithm: .sha256), expectedSize: nil,
            retries: retries, stallTimeout: stallTimeout)
    }

    func testARefusedURLHandsOverToTheMirrorAtOnce() throws {
        let dead = try RefusingPort()
        let mirror = try LoopbackHTTPServer(files: ["/f": body])
        defer { mirror.stop() }
        let recorder = Recorder()
        engine().run([request(0, [dead.url("/f"), mirror.url("/f")], retries: 3)], delegate: recorder)
        XCTAssertEqual(try XCTUnwrap(try recorder.results[0]?.get()).sourceDisplayURL, mirror.url("/f"))
        XCTAssertEqual(
            recorder.attemptFailures.count, 1, "one connect to the dead URL, not 4: \(recorder.attemptFailures)")
        XCTAssertEqual(recorder.nextAttempts.first??.sourceDisplayURL, mirror.url("/f"))
        XCTAssertEqual(recorder.nextAttempts.first??.delay, 0)
    }

    func testAStalledURLHandsOverToTheMirrorAfterOneStallWindow() throws {
        let silent = try SilentListener()
        let mirror = try LoopbackHTTPServer(files: ["/f": body])
        defer { mirror.stop() }
        let recorder = Recorder()
        engine().run(
            [request(0, [silent.url("/f"), mirror.url("/f")], retries: 2, stallTimeout: 1)], delegate: recorder)
        XCTAssertEqual(try XCTUnwrap(try recorder.results[0]?.get()).sourceDisplayURL, mirror.url("/f"))
        XCTAssertEqual(
            recorder.attemptFailures.map(\.failure.sourceDisplayURL), [silent.url("/f")],
            "one stall window on the silent URL, then the mirror")
    }

    /// Backoff rounds go round the URLs; each URL gets at most retries + 1 requests.
    func testRetriesGoRoundTheURLsAfterEachWasTriedOnce() throws {
        let order = Mutex<[String]>([])
        let server = try LoopbackHTTPServer { request in
            order.withLock { $0.append(request.path) }
            return .status(503)
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [server.url("/a"), server.url("/b")], retries: 2)], delegate: recorder)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("every URL fails") }
        XCTAssertEqual(order.withLock { $0 }, ["/a", "/b", "/a", "/b", "/a", "/b"])
        XCTAssertEqual(
            recorder.nextAttempts.map {
                $0.map { [$0.sourceDisplayURL, $0.delay > 0 ? "wait" : "now", "\($0.retry)"] }
            },
            [
                [server.url("/b"), "now", "0"], [server.url("/a"), "wait", "1"], [server.url("/b"), "now", "1"],
                [server.url("/a"), "wait", "2"], [server.url("/b"), "now", "2"], nil,
            ])
        XCTAssertEqual(failure.lastFailurePerSource.map(\.reason), [.httpStatus(503), .httpStatus(503)])
    }

    func testAURLThatCannotImproveIsNotAskedAgainWhileTheOthersAre() throws {
        let order = Mutex<[String]>([])
        let server = try LoopbackHTTPServer { request in
            order.withLock { $0.append(request.path) }
            return request.path == "/gone" ? .notFound : .status(503)
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine().run([request(0, [server.url("/gone"), server.url("/busy")], retries: 2)], delegate: recorder)
        XCTAssertEqual(order.withLock { $0 }, ["/gone", "/busy", "/busy", "/busy"])
    }

    /// Within a run, a host that refused is tried after hosts that did not: the first transfer pays one connect,
    /// the others go to the mirror first.
    func testAHostThatRefusedIsTriedLastForTheRestOfTheRun() throws {
        let dead = try RefusingPort()
        let mirror = try LoopbackHTTPServer(files: ["/f": body])
        defer { mirror.stop() }
        let recorder = Recorder()
        engine(jobs: 1).run(
            (0..<5).map { request($0, [dead.url("/f"), mirror.url("/f")], retries: 3) }, delegate: recorder)
        XCTAssertEqual(recorder.results.values.filter { (try? $0.get()) != nil }.count, 5)
        XCTAssertEqual(recorder.attemptFailures.count, 1, "\(recorder.attemptFailures)")
        XCTAssertEqual(mirror.requests.count, 5)
        XCTAssertEqual(
            Set(recorder.started.values), [dead.url("/f"), mirror.url("/f")], "the first starts at the dead URL")
    }

    func testTheOrderOfAnEntrysURLsIsOtherwiseKept() throws {
        let first = try LoopbackHTTPServer(files: ["/f": body])
        defer { first.stop() }
        let second = try LoopbackHTTPServer(files: ["/f": body])
        defer { second.stop() }
        let recorder = Recorder()
        engine().run((0..<3).map { request($0, [first.url("/f"), second.url("/f")], retries: 1) }, delegate: recorder)
        XCTAssertEqual(first.requests.count, 3)
        XCTAssertEqual(second.requests.count, 0)
    }

    /// A request that dies on a reused keep-alive connection before any response byte is sent again at once on
    /// a fresh connection (RFC 9110 9.2.2: GET is idempotent), without spending a retry.
    func testARequestLostOnAReusedConnectionIsSentAgainAtOnce() throws {
        let seenConnections = Mutex<Set<Int>>([])
        let dropped = Mutex(false)
        let server = try LoopbackHTTPServer { [body] request in
            let reused = !seenConnections.withLock { $0.insert(request.connectionID).inserted }
            if reused,
                dropped.withLock({ done in
                    defer { done = true }; return !done
                })
            {
                return ServerResponse.ok(body).with(fault: .closeWithoutResponse)
            }
            return .ok(body)
        }
        defer { server.stop() }
        let recorder = Recorder()
        engine(jobs: 1).run((0..<2).map { request($0, [server.url("/f\($0)")], retries: 0) }, delegate: recorder)
        XCTAssertEqual(
            recorder.results.values.filter { (try? $0.get()) != nil }.count, 2, "\(recorder.attemptFailures)")
        XCTAssertEqual(server.requests.map(\.path), ["/f0", "/f1", "/f1"])
        XCTAssertTrue(recorder.attemptFailures.isEmpty)
        XCTAssertEqual(server.connectionCount, 2)
    }
}
