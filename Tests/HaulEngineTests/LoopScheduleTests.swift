@testable import HaulEngine
import XCTest

/// An engine loop's decisions about waiting transfers, from values: time and counts go in, what goes on (and how
/// long the loop sleeps) comes out. The waiters are numbers.
final class LoopScheduleTests: XCTestCase {
    private typealias Schedule = LoopSchedule<Int>

    /// Takes slots until the schedule gives none: the waiters resumed in order, then how many new requests.
    private func fill(_ schedule: inout Schedule, running: Int, requests: Int = .max) -> (resumed: [Int], new: Int) {
        var resumed: [Int] = []
        var new = 0
        var running = running
        while let next = schedule.next(running: running) {
            switch next {
            case .resume(let waiter): resumed.append(waiter)
            case .newRequest:
                guard new < requests else { return (resumed, new) }
                new += 1
            }
            running += 1
        }
        return (resumed, new)
    }

    // MARK: slots

    func testNothingStartsWithoutAFreeSlot() {
        var schedule = Schedule(slots: 2)
        schedule.makeReady(1)
        XCTAssertNil(schedule.next(running: 2))
        XCTAssertEqual(fill(&schedule, running: 1).resumed, [1])
    }

    func testTransfersThatWaitedGoBeforeNewRequestsFirstInFirstOut() {
        var schedule = Schedule(slots: 4)
        schedule.makeReady(7)
        schedule.makeReady(3)
        let filled = fill(&schedule, running: 0)
        XCTAssertEqual(filled.resumed, [7, 3])
        XCTAssertEqual(filled.new, 2, "the other two slots take new requests")
        XCTAssertTrue(schedule.isEmpty)
    }

    func testTheReadyQueueKeepsItsOrderAcrossTurns() {
        var schedule = Schedule(slots: 1)
        for waiter in 1...5 { schedule.makeReady(waiter) }
        var order: [Int] = []
        for turn in 0..<3 {
            order += fill(&schedule, running: 0).resumed
            schedule.makeReady(10 + turn)
        }
        order += fill(&schedule, running: 0).resumed
        XCTAssertEqual(order, [1, 2, 3, 4])
        XCTAssertEqual(fill(&schedule, running: 0).resumed, [5])
        XCTAssertEqual(fill(&schedule, running: 0).resumed, [10])
    }

    // MARK: backoff

    func testAParkedTransferGoesOnWhenItsWaitIsOverSoonestFirst() {
        var schedule = Schedule(slots: 4)
        schedule.park(1, until: 12)
        schedule.park(2, until: 11)
        schedule.park(3, until: 20)
        XCTAssertEqual(schedule.beginTurn(now: 10, running: 0), [])
        XCTAssertEqual(fill(&schedule, running: 0, requests: 0).resumed, [], "no wait is over at 10")
        _ = schedule.beginTurn(now: 12, running: 0)
        XCTAssertEqual(fill(&schedule, running: 0, requests: 0).resumed, [2, 1])
        XCTAssertFalse(schedule.isEmpty, "3 still waits")
        _ = schedule.beginTurn(now: 20, running: 0)
        XCTAssertEqual(fill(&schedule, running: 0, requests: 0).resumed, [3])
        XCTAssertTrue(schedule.isEmpty)
    }

    func testAWaitHoldsNoSlot() {
        var schedule = Schedule(slots: 1)
        schedule.park(1, until: 100)
        XCTAssertEqual(fill(&schedule, running: 0, requests: 1).new, 1, "a new request takes the slot meanwhile")
    }

    // MARK: descriptors

    func testNoNewRequestStartsWhileSomeWaitForDescriptors() {
        var schedule = Schedule(slots: 4)
        schedule.waitForDescriptors(1)
        schedule.waitForDescriptors(2)
        XCTAssertNil(schedule.next(running: 1))
        XCTAssertEqual(schedule.beginTurn(now: 0, running: 1), [])
        XCTAssertEqual(fill(&schedule, running: 1).resumed, [1], "one a turn, then nothing new")
        XCTAssertNil(schedule.next(running: 2))
        _ = schedule.beginTurn(now: 0.05, running: 2)
        let filled = fill(&schedule, running: 2)
        XCTAssertEqual(filled.resumed, [2])
        XCTAssertEqual(filled.new, 1, "the last one gone, new requests start again")
    }

    func testAWaiterForDescriptorsGoesOnOnlyWhenASlotIsFree() {
        var schedule = Schedule(slots: 2)
        schedule.waitForDescriptors(1)
        XCTAssertEqual(schedule.beginTurn(now: 0, running: 2), [])
        XCTAssertNil(schedule.next(running: 1), "not made ready while the slots were full")
        XCTAssertEqual(schedule.beginTurn(now: 1, running: 1), [])
        XCTAssertEqual(fill(&schedule, running: 1, requests: 0).resumed, [1])
    }

    func testWaitersForDescriptorsFailAfterHalfAMinuteWithNothingRunning() {
        var schedule = Schedule(slots: 2)
        schedule.waitForDescriptors(1)
        schedule.waitForDescriptors(2)
        schedule.waitForDescriptors(3)
        // Each turn, one goes on and finds none again: with nothing of the loop running, the clock runs.
        var now = 100.0
        XCTAssertEqual(schedule.beginTurn(now: now, running: 0), [])
        XCTAssertEqual(fill(&schedule, running: 0).resumed, [1])
        schedule.waitForDescriptors(1)
        now += Schedule.descriptorPatience
        XCTAssertEqual(schedule.beginTurn(now: now, running: 0), [], "exactly the patience is still patience")
        XCTAssertEqual(fill(&schedule, running: 0).resumed, [2])
        schedule.waitForDescriptors(2)
        XCTAssertEqual(schedule.beginTurn(now: now + 0.001, running: 0).sorted(), [1, 2, 3])
        XCTAssertTrue(schedule.isEmpty)
        XCTAssertEqual(fill(&schedule, running: 0, requests: 1).new, 1, "new requests may start again")
    }

    func testATransferRunningResetsThePatience() {
        var schedule = Schedule(slots: 2)
        schedule.waitForDescriptors(1)
        XCTAssertEqual(schedule.beginTurn(now: 0, running: 0), [])
        XCTAssertEqual(fill(&schedule, running: 0).resumed, [1])
        schedule.waitForDescriptors(1)
        XCTAssertEqual(schedule.beginTurn(now: 20, running: 1), [], "something runs: the wait starts again")
        XCTAssertEqual(fill(&schedule, running: 1).resumed, [1])
        schedule.waitForDescriptors(1)
        XCTAssertEqual(schedule.beginTurn(now: 40, running: 0), [])
        _ = fill(&schedule, running: 0)
        schedule.waitForDescriptors(1)
        XCTAssertEqual(schedule.beginTurn(now: 70, running: 0), [], "30 s since 40, not since 0")
        _ = fill(&schedule, running: 0)
        schedule.waitForDescriptors(1)
        XCTAssertEqual(schedule.beginTurn(now: 70.5, running: 0), [1])
    }

    // MARK: sleeping

    func testTheLoopSleepsUntilTheSoonestWaitEndsAtMostASecond() {
        var schedule = Schedule(slots: 2)
        XCTAssertNil(
            schedule.sleep(now: 0, running: 0, finishedSome: false, digestsArrived: false, rateWait: nil),
            "nothing to wait for")
        XCTAssertEqual(
            schedule.sleep(now: 0, running: 1, finishedSome: false, digestsArrived: false, rateWait: nil), 1000)
        schedule.park(1, until: 0.25)
        schedule.park(2, until: 0.1234)
        XCTAssertEqual(
            schedule.sleep(now: 0, running: 0, finishedSome: false, digestsArrived: false, rateWait: nil), 124)
        XCTAssertEqual(
            schedule.sleep(now: 0, running: 0, finishedSome: false, digestsArrived: false, rateWait: 0.01), 10,
            "the rate budget's wait when it is sooner")
        XCTAssertEqual(
            schedule.sleep(now: 0.2, running: 0, finishedSome: false, digestsArrived: false, rateWait: nil), 0,
            "a wait already over: poll and go round")
    }

    func testTheLoopTurnsAtOnceWhenItHasSomethingToDo() {
        var schedule = Schedule(slots: 2)
        XCTAssertNil(
            schedule.sleep(now: 0, running: 1, finishedSome: true, digestsArrived: false, rateWait: nil),
            "transfers ended: their slots may be filled")
        XCTAssertNil(
            schedule.sleep(now: 0, running: 1, finishedSome: false, digestsArrived: true, rateWait: nil),
            "hashes came back: their verdicts are due")
        schedule.makeReady(1)
        XCTAssertNil(
            schedule.sleep(now: 0, running: 1, finishedSome: false, digestsArrived: false, rateWait: nil),
            "a ready transfer and a free slot")
        XCTAssertEqual(
            schedule.sleep(now: 0, running: 2, finishedSome: false, digestsArrived: false, rateWait: nil), 1000,
            "a ready transfer but no free slot")
    }

    func testWhileSomeWaitForDescriptorsEveryTurnSleepsAShortWhile() {
        var schedule = Schedule(slots: 2)
        schedule.waitForDescriptors(1)
        XCTAssertEqual(
            schedule.sleep(now: 0, running: 0, finishedSome: false, digestsArrived: false, rateWait: nil), 50)
        XCTAssertEqual(
            schedule.sleep(now: 0, running: 1, finishedSome: true, digestsArrived: false, rateWait: nil), 50,
            "transfers that ended do not make it spin")
        XCTAssertNil(schedule.sleep(now: 0, running: 1, finishedSome: false, digestsArrived: true, rateWait: nil))
    }

    /// A wait under a millisecond is a 1 ms poll, never a poll of 0 that returns at once (which had both loops
    /// spinning at 100% while rate-limited).
    func testAWaitUnderAMillisecondPollsForOne() {
        XCTAssertEqual(Schedule.milliseconds(0.0004), 1)
        XCTAssertEqual(Schedule.milliseconds(0.000_999_999), 1)
        XCTAssertEqual(Schedule.milliseconds(0), 0)
        XCTAssertEqual(Schedule.milliseconds(0.0123), 13)
        XCTAssertEqual(Schedule.milliseconds(-1), 0)
        XCTAssertEqual(Schedule.milliseconds(5), 1000)
    }

    // MARK: the rate budget

    func testThePausedTransferOfferedTheBudgetFirstChangesEveryTurn() {
        var schedule = Schedule(slots: 3)
        let firsts = (0..<6).compactMap { _ in schedule.pausedOrder(["a", "b", "c"]).first }
        XCTAssertEqual(Set(firsts), ["a", "b", "c"])
        XCTAssertEqual(firsts[0..<3].sorted(), ["a", "b", "c"], "each first once in three turns")
        XCTAssertEqual(schedule.pausedOrder(["a", "b", "c"]).sorted(), ["a", "b", "c"], "every one is offered it")
        XCTAssertEqual(schedule.pausedOrder([String]()), [])
    }

    // MARK: stopping

    func testDrainingGivesEveryWaiterOnce() {
        var schedule = Schedule(slots: 1)
        schedule.park(1, until: 5)
        schedule.makeReady(2)
        schedule.makeReady(3)
        _ = schedule.next(running: 0)
        schedule.waitForDescriptors(4)
        XCTAssertEqual(schedule.drain().sorted(), [1, 3, 4])
        XCTAssertTrue(schedule.isEmpty)
        XCTAssertEqual(schedule.drain(), [])
    }
}
