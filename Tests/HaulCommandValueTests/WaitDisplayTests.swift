import XCTest

@testable import HaulCommand
@testable import HaulEngine

/// A transfer waiting out a backoff says what it waits for, in the live view and in a log's heartbeat, instead of
/// a rate of nothing. Driven from values with a fake clock.
final class WaitDisplayTests: XCTestCase {
    private let next = NextAttempt(
        sourceDisplayURL: "https://h.example/a.iso", sourceIndex: 0, delay: 4, retry: 2, retries: 3)

    func testTheLiveViewShowsTheWaitInsteadOfBytesAndRate() {
        var model = ProgressModel(rateWindow: 3, now: 0)
        model.started(0, "a.iso", size: 1000, now: 0)
        model.attemptFailed(0, next: next, now: 10)
        model.sample(now: 10.2)
        let frame = model.frame(columns: 80, rows: 24)
        XCTAssertEqual(frame.count, 2)
        XCTAssertEqual(frame[1], "  a.iso  retry 2 of 3 for https://h.example/a.iso in 4 s")
        model.sample(now: 12.5)
        XCTAssertTrue(model.frame(columns: 80, rows: 24)[1].hasSuffix("in 2 s"))
        // Narrow: the wait is cut in the middle, never past the width.
        model.sample(now: 12.5)
        XCTAssertTrue(model.frame(columns: 30, rows: 24).allSatisfy { ProgressFormatting.columns(of: $0) <= 29 })
        // Once the wait is over, the row is a transfer row again.
        model.sample(now: 14.5)
        XCTAssertFalse(model.frame(columns: 80, rows: 24)[1].contains("retry 2 of 3"))
    }

    func testTheHeartbeatSaysWhatTheTransferWaitsFor() {
        var model = ProgressModel(rateWindow: 5, now: 0)
        model.started(0, "a.iso", size: 1000, now: 0)
        model.attemptFailed(0, next: next, now: 4)
        model.sample(now: 5)
        XCTAssertEqual(
            model.heartbeat(now: 5, interval: 5),
            "still fetching a.iso: retry 2 of 3 for https://h.example/a.iso in 3 s")
    }

    func testAnAttemptAtTheNextURLAtOnceIsNoWait() {
        var model = ProgressModel(rateWindow: 3, now: 0)
        model.started(0, "a.iso", size: 1000, now: 0)
        model.attemptFailed(
            0, next: NextAttempt(sourceDisplayURL: "m", sourceIndex: 1, delay: 0, retry: 0, retries: 3), now: 1)
        model.sample(now: 1.1)
        XCTAssertNil(model.active[0]?.wait)
        XCTAssertEqual(model.heartbeat(now: 5, interval: 5), "still fetching a.iso: 0 B / 1000 B, 0 B/s")
    }
}
