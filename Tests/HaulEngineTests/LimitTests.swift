import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// A server that stalls or trickles cannot hold a transfer forever; an unsized body cannot fill the disk.
final class LimitTests: XCTestCase {
    private func run(
        _ server: LoopbackHTTPServer, pinned body: [UInt8]?, retries: Int, stallTimeout: Double = 1,
        maxBodyBytes: Int64 = EngineConfiguration.defaultMaxBodyBytes
    ) throws -> Recorder {
        let temporary = try TemporaryDirectory()
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path), retryPolicy: RetryPolicy(baseDelay: 0.001, jitter: 0),
                maxBodyBytes: maxBodyBytes))
        let recorder = Recorder()
        engine.run(
            [
                TransferRequest(
                    id: 0, sources: [TransferSource(url: server.url("/x"), displayURL: "x")],
                    expectedDigest: body.map { StreamingHasher.digest($0, algorithm: .sha256) },
                    expectedSize: nil, retries: retries, stallTimeout: stallTimeout)
            ], delegate: recorder)
        return recorder
    }

    private func firstThenFine(_ body: [UInt8], first fault: Fault) throws -> LoopbackHTTPServer {
        let served = Mutex(0)
        return try LoopbackHTTPServer { _ in
            let n = served.withLock { n in
                n += 1; return n
            }
            return n == 1 ? ServerResponse.ok(body).with(fault: fault) : .ok(body)
        }
    }

    func testAStalledBodyFailsTheAttemptAfterTheTimeoutAndTheRetrySucceeds() throws {
        let body = [UInt8](repeating: 9, count: 20_000)
        let server = try firstThenFine(body, first: .stallAfter(bytes: 5_000, seconds: 30))
        defer { server.stop() }
        let recorder = try run(server, pinned: body, retries: 1)
        XCTAssertNotNil(try recorder.results[0]?.get())
        guard case .network(let code, let message) = recorder.attemptFailures.first?.failure.reason else {
            return XCTFail("\(recorder.attemptFailures)")
        }
        XCTAssertEqual(code, .operationTimedOut, "a stall is a client-side timeout")
        XCTAssertEqual(message, "no data for 1 s", "caught by the stall window, not by libcurl's averaged speed check")
    }

    func testATrickleBelowTheSpeedFloorFailsTheAttempt() throws {
        let body = [UInt8](repeating: 1, count: 50_000)
        // 100 bytes every 0.25 s: 400 B/s, under the 1 KiB/s floor.
        let server = try firstThenFine(body, first: .trickle(bytesPerChunk: 100, interval: 0.25))
        defer { server.stop() }
        let recorder = try run(server, pinned: body, retries: 1)
        XCTAssertNotNil(try recorder.results[0]?.get())
        guard case .network(.operationTimedOut, _) = recorder.attemptFailures.first?.failure.reason else {
            return XCTFail("\(recorder.attemptFailures)")
        }
    }

    func testAnUnsizedBodyIsCappedByTheGlobalLimit() throws {
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok([UInt8](repeating: 2, count: 10_000)).with(fault: .noContentLength)
        }
        defer { server.stop() }
        let recorder = try run(server, pinned: nil, retries: 0, maxBodyBytes: 4_096)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(failure.attempts.map(\.reason), [.tooLarge(limit: 4_096)])
    }

    func testAContentLengthAboveTheLimitFailsBeforeTheBody() throws {
        // The server announces 10,000 bytes and then stalls before sending any: only the headers can fail it.
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok([UInt8](repeating: 3, count: 10_000)).with(fault: .stallAfter(bytes: 0, seconds: 30))
        }
        defer { server.stop() }
        let recorder = try run(server, pinned: nil, retries: 0, stallTimeout: 20, maxBodyBytes: 4_096)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a failure") }
        XCTAssertEqual(failure.attempts.map(\.reason), [.tooLarge(limit: 4_096)])
    }

    func testALyingContentLengthIsAPartialBodyAndIsRetried() throws {
        let body = [UInt8](repeating: 4, count: 10_000)
        let server = try firstThenFine(body, first: .lyingContentLength(20_000))
        defer { server.stop() }
        let recorder = try run(server, pinned: body, retries: 1)
        XCTAssertNotNil(try recorder.results[0]?.get())
        guard case .network(.partialFile, _) = recorder.attemptFailures.first?.failure.reason else {
            return XCTFail("CURLE_PARTIAL_FILE expected: \(recorder.attemptFailures)")
        }
    }
}
