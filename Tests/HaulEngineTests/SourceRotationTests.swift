import HaulEngine
import XCTest

/// The retry and mirror order, decided from values.
final class SourceRotationTests: XCTestCase {
    /// Drives a rotation with the outcomes given for each attempt in turn; returns the steps taken.
    private func walk(
        sources: Int, retries: Int, bad: [Bool] = [], outcomes: (Int) -> SourceRotation.Outcome
    ) -> [String] {
        var rotation = SourceRotation(sources: sources, retries: retries)
        var source = rotation.first(avoiding: bad)
        var steps = ["\(source)"]
        while true {
            rotation.record(outcomes(source), at: source)
            guard let step = rotation.next(avoiding: bad) else { break }
            steps.append(step.backoffRound > 0 ? "wait\(step.backoffRound) \(step.source)" : "\(step.source)")
            source = step.source
            if steps.count > 100 { return steps + ["runaway"] }
        }
        return steps
    }

    func testOneURLIsRetriedWithBackoffUpToItsRetries() {
        XCTAssertEqual(walk(sources: 1, retries: 3) { _ in .transient() }, ["0", "wait1 0", "wait2 0", "wait3 0"])
        XCTAssertEqual(walk(sources: 1, retries: 0) { _ in .transient() }, ["0"])
    }

    func testEveryURLIsTriedOnceBeforeAnyBackoffThenRoundsGoRoundThem() {
        XCTAssertEqual(
            walk(sources: 3, retries: 2) { _ in .transient() },
            ["0", "1", "2", "wait1 0", "1", "2", "wait2 0", "1", "2"])
    }

    func testAPermanentFailureTakesTheURLOutOfEveryLaterRound() {
        XCTAssertEqual(
            walk(sources: 3, retries: 2) { $0 == 1 ? .permanent : .transient() },
            ["0", "1", "2", "wait1 0", "2", "wait2 0", "2"])
        XCTAssertEqual(walk(sources: 2, retries: 5) { _ in .permanent }, ["0", "1"])
    }

    func testURLsOnBadHostsComeLastOtherwiseInTheirOrder() {
        XCTAssertEqual(
            walk(sources: 4, retries: 1, bad: [true, false, true, false]) { _ in .transient() },
            ["1", "3", "0", "2", "wait1 1", "3", "0", "2"])
    }

    func testStepsSayWhichRetryOfTheURLTheyAre() {
        var rotation = SourceRotation(sources: 2, retries: 3)
        rotation.record(.transient(), at: 0)
        XCTAssertEqual(rotation.next(avoiding: []), SourceRotation.Step(source: 1, retry: 0, backoffRound: 0))
        rotation.record(.transient(), at: 1)
        XCTAssertEqual(rotation.next(avoiding: []), SourceRotation.Step(source: 0, retry: 1, backoffRound: 1))
    }

    func testRetryAfterIsAFloorUnderTheWaitForThatURLOnly() {
        var rotation = SourceRotation(sources: 2, retries: 3)
        rotation.record(.transient(notBefore: 100), at: 0)
        let toMirror = rotation.next(avoiding: [])
        XCTAssertEqual(toMirror?.source, 1)
        XCTAssertEqual(
            toMirror.map { rotation.delay(before: $0, now: 40) { _ in 2 } }, 0, "the mirror is not held back")
        rotation.record(.transient(), at: 1)
        let back = rotation.next(avoiding: [])
        XCTAssertEqual(back?.source, 0)
        XCTAssertEqual(
            back.map { rotation.delay(before: $0, now: 40) { _ in 2 } }, 60, "Retry-After outlasts the backoff")
        XCTAssertEqual(
            back.map { rotation.delay(before: $0, now: 99) { _ in 2 } }, 2, "the backoff outlasts what is left")
    }
}
