import HaulDigest
@testable import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

final class RetryPolicyTests: XCTestCase {
    private func policy(random: Double = 0, now: Double = 1_000_000) -> RetryPolicy {
        RetryPolicy(
            baseDelay: 1, maxDelay: 30, maxRetryAfter: 120, jitter: 0.25, random: { random }, wallClock: { now })
    }

    func testExponentialBackoffIsCapped() {
        XCTAssertEqual((1...7).map { policy().delay(beforeRetry: $0, retryAfter: nil) }, [1, 2, 4, 8, 16, 30, 30])
        XCTAssertEqual(policy().delay(beforeRetry: 500, retryAfter: nil), 30, "no overflow for absurd counts")
    }

    func testJitterOnlyShortensTheDelayByAtMostItsFraction() {
        XCTAssertEqual(policy(random: 0.5).delay(beforeRetry: 3, retryAfter: nil), 4 * (1 - 0.125))
        XCTAssertEqual(policy(random: 0.999_999).delay(beforeRetry: 1, retryAfter: nil), 0.75, accuracy: 1e-6)
    }

    func testRetryAfterIsAFloorAndIsItselfCapped() {
        XCTAssertEqual(policy().delay(beforeRetry: 1, retryAfter: .seconds(10)), 10)
        XCTAssertEqual(policy().delay(beforeRetry: 5, retryAfter: .seconds(3)), 16, "backoff above the floor wins")
        XCTAssertEqual(
            policy().delay(beforeRetry: 1, retryAfter: .seconds(86_400)), 120, "a server cannot park a job for a day")
        XCTAssertEqual(policy(now: 1_000_000).delay(beforeRetry: 1, retryAfter: .date(1_000_050)), 50)
        XCTAssertEqual(
            policy(now: 1_000_000).delay(beforeRetry: 1, retryAfter: .date(999_000)), 1, "a past date adds nothing")
    }

    func testRetryAfterHeaderForms() {
        XCTAssertEqual(RetryAfter(headerValue: " 120 "), .seconds(120))
        XCTAssertEqual(RetryAfter(headerValue: "Sun, 06 Nov 1994 08:49:37 GMT"), .date(784_111_777))
        XCTAssertEqual(RetryAfter(headerValue: "Thu, 01 Jan 1970 00:00:00 GMT"), .date(0))
        XCTAssertEqual(RetryAfter(headerValue: "Sat, 29 Feb 2020 23:59:59 GMT"), .date(1_583_020_799))
        XCTAssertNil(RetryAfter(headerValue: "-5"))
        XCTAssertNil(RetryAfter(headerValue: "soon"))
        XCTAssertNil(RetryAfter(headerValue: "Sun, 06 Nov 1994 08:49:37 PST"))
        XCTAssertNil(RetryAfter(headerValue: ""))
    }

    func testTransientClassification() {
        for status in [408, 429, 500, 502, 503, 504, 599] {
            XCTAssertTrue(FailureReason.httpStatus(status).isTransient, "\(status)")
        }
        for status in [400, 401, 403, 404, 410, 501, 505] {
            XCTAssertFalse(FailureReason.httpStatus(status).isTransient, "\(status)")
        }
        XCTAssertTrue(FailureReason.network(code: .couldNotConnect, message: "").isTransient, "connection refused")
        XCTAssertTrue(FailureReason.network(code: .operationTimedOut, message: "").isTransient, "timeout")
        XCTAssertTrue(FailureReason.network(code: .receiveError, message: "").isTransient, "reset")
        XCTAssertTrue(FailureReason.network(code: .partialFile, message: "").isTransient, "partial body")
        XCTAssertFalse(
            FailureReason.network(code: .peerFailedVerification, message: "").isTransient, "TLS verification")
        XCTAssertTrue(FailureReason.network(code: .sslConnectError, message: "").isTransient, "TLS handshake")
        XCTAssertFalse(FailureReason.local(operation: .write, path: "/x", errno: ENOSPC).isTransient)
        let digest = StreamingHasher.digest([1], algorithm: .sha256)
        XCTAssertFalse(FailureReason.digestMismatch(expected: digest, actual: digest).isTransient)
    }

    /// The engine reads `Retry-After` from the answer and hands it to the policy: the delay it reports is exact.
    func testEngineHonoursRetryAfterFromTheServer() throws {
        let temporary = try TemporaryDirectory()
        let body: [UInt8] = Array("ok".utf8)
        let count = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            let n = count.withLock { n in
                n += 1; return n
            }
            switch n {
            case 1: return .status(503, headers: [("Retry-After", "1")])
            case 2: return .status(429, headers: [("Retry-After", "Thu, 01 Jan 1970 00:00:02 GMT")])
            default: return .ok(body)
            }
        }
        defer { server.stop() }
        // Wall clock at the epoch: the date above is 2 s away. Caps scaled down so the test runs in milliseconds.
        let policy = RetryPolicy(baseDelay: 0.001, maxDelay: 0.001, maxRetryAfter: 0.05, jitter: 0, wallClock: { 0 })
        let engine = TransferEngine(
            configuration: EngineConfiguration(temporaryDirectory: heldOpen(temporary.path), retryPolicy: policy))
        let recorder = Recorder()
        engine.run(
            [
                TransferRequest(
                    id: 0, sources: [TransferSource(url: server.url("/x"), displayURL: "x")],
                    expectedDigest: StreamingHasher.digest(body, algorithm: .sha256), expectedSize: nil,
                    retries: 2, stallTimeout: 5)
            ], delegate: recorder)
        XCTAssertNotNil(try recorder.results[0]?.get())
        XCTAssertEqual(recorder.attemptFailures.map(\.failure.reason), [.httpStatus(503), .httpStatus(429)])
        XCTAssertEqual(recorder.attemptFailures.map(\.retryIn), [0.05, 0.05], "Retry-After (capped) is the floor")
    }
}

extension RetryPolicyTests {
    func testHostileRetryAfterDatesAreIgnoredNotTrapped() {
        XCTAssertNil(RetryAfter(headerValue: "Sun, 06 Nov 300000000000 08:49:37 GMT"))
        XCTAssertNil(RetryAfter(headerValue: "Sun, 06 Nov 1969 08:49:37 GMT"))
        XCTAssertNil(RetryAfter(headerValue: "99999999999999999999999"))
        XCTAssertEqual(RetryAfter(headerValue: "Fri, 31 Dec 9999 23:59:59 GMT"), .date(253_402_300_799))
    }
}
