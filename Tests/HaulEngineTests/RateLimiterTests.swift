import HaulEngine
import XCTest

/// The run's byte budget, on a clock the test moves.
final class RateLimiterTests: XCTestCase {
    func testAChunkIsTakenWholeAndItsDebtIsWaitedOff() {
        let limiter = RateLimiter(bytesPerSecond: 1000, now: 0)
        XCTAssertTrue(limiter.allows(now: 0), "a tenth of a second's worth to start with")
        limiter.spend(600, now: 0)
        XCTAssertFalse(limiter.allows(now: 0), "500 bytes in debt")
        XCTAssertEqual(limiter.wait(now: 0), 0.5, accuracy: 1e-9)
        XCTAssertFalse(limiter.allows(now: 0.5))
        XCTAssertTrue(limiter.allows(now: 0.501))
        XCTAssertEqual(limiter.wait(now: 0.6), 0)
    }

    func testAQuietSpellSavesAtMostATenthOfASecond() {
        let limiter = RateLimiter(bytesPerSecond: 1000, now: 0)
        limiter.spend(100, now: 0)
        // An hour of nothing is not an hour of bytes at once.
        limiter.spend(101, now: 3600)
        XCTAssertFalse(limiter.allows(now: 3600))
        XCTAssertEqual(limiter.wait(now: 3600), 0.001, accuracy: 1e-9)
    }

    func testOneBudgetForEveryCaller() {
        let limiter = RateLimiter(bytesPerSecond: 1 << 20, now: 0)
        // Ten seconds of 64 KiB chunks from two callers take ten seconds, not five.
        var now = 0.0
        var received = 0
        while now < 10 {
            for _ in 0..<2 where limiter.allows(now: now) {
                limiter.spend(64 << 10, now: now)
                received += 64 << 10
            }
            now += 0.001
        }
        XCTAssertEqual(Double(received), Double(10 << 20), accuracy: Double(256 << 10))
    }
}
