@testable import HaulEngine
import XCTest

/// The low-speed floor, fed numbers: it fails an attempt as soon as its last window averaged under the floor, and
/// not before a window has passed.
final class SpeedFloorTests: XCTestCase {
    func testATrickleFailsOnceOneWindowHasPassed() {
        var floor = SpeedFloor(window: 3, bytesPerSecond: 1024)
        floor.restart(at: 0, bytes: 0)
        var bytes: Int64 = 0
        var failedAt: Double?
        for step in 1...100 where failedAt == nil {
            let now = Double(step) * 0.25
            bytes += 100  // 400 B/s
            if !floor.allows(now: now, bytes: bytes) { failedAt = now }
        }
        XCTAssertEqual(failedAt, 3)
    }

    func testABurstThenATrickleFailsOneWindowAfterTheBurst() {
        var floor = SpeedFloor(window: 3, bytesPerSecond: 1024)
        floor.restart(at: 0, bytes: 0)
        XCTAssertTrue(floor.allows(now: 0.5, bytes: 1 << 20))
        var failedAt: Double?
        for step in 1...40 where failedAt == nil {
            let now = 0.5 + Double(step) * 0.25
            if !floor.allows(now: now, bytes: (1 << 20) + Int64(step) * 10) { failedAt = now }
        }
        // Until 3 s the window holds the burst; from 3.5 s on, the window since 0.5 s holds only the trickle.
        XCTAssertEqual(failedAt, 3.5)
    }

    func testASteadyTransferAboveTheFloorNeverFailsAndARestartForgetsThePast() {
        var floor = SpeedFloor(window: 2, bytesPerSecond: 1000)
        floor.restart(at: 0, bytes: 0)
        for step in 1...400 {
            XCTAssertTrue(floor.allows(now: Double(step) * 0.1, bytes: Int64(step) * 150), "at step \(step)")
        }
        floor.restart(at: 40, bytes: 60_000)
        XCTAssertTrue(floor.allows(now: 41.9, bytes: 60_000), "a window has not passed since the restart")
        XCTAssertFalse(floor.allows(now: 42, bytes: 60_000))
    }
}
