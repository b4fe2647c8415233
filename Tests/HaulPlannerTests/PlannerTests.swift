import HaulDigest
import HaulFailures
import HaulManifest
import HaulPlanner
import XCTest

/// The planner is pure: every decision is checked here from values, with no file system and no network.
final class PlannerTests: XCTestCase {
    private let content: [UInt8] = Array("pinned content\n".utf8)
    private var digest: Digest { StreamingHasher.digest(content, algorithm: .sha256) }
    private var otherDigest: Digest { StreamingHasher.digest(Array("other".utf8), algorithm: .sha256) }

    private func entry(_ dest: String, checksum: Checksum? = nil, size: Int64? = nil, index: Int = 0) -> FileEntry {
        FileEntry(
            index: index, url: TemplatedString(literal: "https://example.com/\(dest)"), mirrors: [],
            destination: DestinationPath(dest)!, checksum: checksum, size: size, mode: FileMode(0o644),
            retries: 3, timeout: Seconds(30), headers: [], location: SourceLocation(line: 1, column: 1))
    }

    private var pinned: Checksum { Checksum(digest: digest, notation: .hexKey) }

    func testMissingFileIsDownloaded() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .missing), .fetch(.missing))
        XCTAssertEqual(Planner.decide(entry("a"), .missing), .fetch(.missing), "unpinned and missing is fetched too")
    }

    func testMatchingDigestIsKeptWhateverTheURL() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .file(size: 15, digest: digest)), .keep)
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned, size: 15), .file(size: 15, digest: digest)), .keep)
    }

    func testDifferentDigestIsReplaced() {
        XCTAssertEqual(
            Planner.decide(entry("a", checksum: pinned), .file(size: 15, digest: otherDigest)),
            .fetch(.digestMismatch(local: otherDigest)))
    }

    /// An integrity value may list several acceptable digests: a file matching any of them is kept.
    func testAFileMatchingAnyAcceptedDigestIsKept() {
        let either = Checksum(digest: otherDigest, notation: .subresourceIntegrity, alternatives: [digest])
        XCTAssertEqual(Planner.decide(entry("a", checksum: either), .file(size: 15, digest: digest)), .keep)
        let third = StreamingHasher.digest(Array("third".utf8), algorithm: .sha256)
        XCTAssertEqual(
            Planner.decide(entry("a", checksum: either), .file(size: 15, digest: third)),
            .fetch(.digestMismatch(local: third)))
    }

    /// A regular file that cannot be read is replaced (it is not what was pinned, whatever it holds); for
    /// pruning it is kept, since nothing proves it is what haul wrote.
    func testAnUnreadableFileIsReplacedButNeverPruned() {
        XCTAssertEqual(
            Planner.decide(entry("a", checksum: pinned), .unreadable(ioError)), .fetch(.unreadable(ioError)))
        XCTAssertEqual(
            Planner.decide(
                PruneCandidate(
                    destination: DestinationPath("a")!, written: digest,
                    local: .unreadable(ioError))), .keep(.obstacle(.failed(ioError))))
    }

    func testSizeMismatchIsReplacedWithoutNeedingADigest() {
        XCTAssertEqual(
            Planner.decide(entry("a", checksum: pinned, size: 15), .file(size: 3, digest: nil)),
            .fetch(.sizeMismatch(local: 3, expected: 15)))
    }

    func testUnpinnedPresentFileIsRevalidatedWithItsServer() {
        XCTAssertEqual(Planner.decide(entry("a"), .file(size: 99, digest: nil)), .revalidate)
        XCTAssertTrue(
            Planner.plan([entry("a")], observed: [.file(size: 99, digest: nil)]).hasChanges,
            "a revalidation may change the file: plan reports it")
    }

    func testUnpinnedFileWithPinnedSizeIsReplacedWhenSizeDiffers() {
        XCTAssertEqual(
            Planner.decide(entry("a", size: 10), .file(size: 99, digest: nil)),
            .fetch(.sizeMismatch(local: 99, expected: 10)))
        XCTAssertEqual(Planner.decide(entry("a", size: 99), .file(size: 99, digest: nil)), .revalidate)
    }

    func testSymlinkAtDestinationIsReplaced() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .symlink), .fetch(.replacesSymlink))
    }

    func testObstructionsAndInaccessibleDestinationsAreRefused() {
        XCTAssertEqual(
            Planner.decide(entry("a", checksum: pinned), .obstructed(.inTheWay(.directory))),
            .refuse(.inTheWay(.directory)))
        XCTAssertEqual(Planner.decide(entry("a"), .inaccessible(escapes)), .refuse(.failed(escapes)))
    }

    func testPinnedFileThatWasNotHashedIsReplacedRatherThanTrusted() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .file(size: 15, digest: nil)), .fetch(.unverified))
    }

    func testPlanTotalsAndOrder() {
        let files = [
            entry("keep", checksum: pinned, size: 15, index: 0),
            entry("new", checksum: pinned, size: 15, index: 1),
            entry("wrong", checksum: pinned, size: 15, index: 2),
            entry("blocked", checksum: pinned, index: 3),
            entry("unpinned-new", index: 4),
            entry("unpinned-present", index: 5),
        ]
        let plan = Planner.plan(
            files,
            observed: [
                .file(size: 15, digest: digest), .missing, .file(size: 15, digest: otherDigest),
                .obstructed(.inTheWay(.directory)), .missing, .file(size: 1, digest: nil),
            ])
        XCTAssertEqual(
            plan.entries.map(\.entry.destination.description),
            ["keep", "new", "wrong", "blocked", "unpinned-new", "unpinned-present"])
        XCTAssertEqual(plan.revalidations.map(\.entry.destination.description), ["unpinned-present"])
        XCTAssertEqual(plan.downloads.map(\.entry.destination.description), ["new", "unpinned-new"])
        XCTAssertEqual(plan.replacements.map(\.entry.destination.description), ["wrong"])
        XCTAssertEqual(plan.fetches.count, 3)
        XCTAssertEqual(plan.refusals.map(\.entry.destination.description), ["blocked"])
        XCTAssertEqual(plan.upToDateCount, 1)
        XCTAssertEqual(plan.knownBytesToFetch, 30, "only pinned sizes count")
        XCTAssertTrue(plan.hasChanges)
        // The one-pass totals a summary uses agree with the lists.
        let tally = plan.tally
        XCTAssertEqual([tally.downloads.count, tally.downloads.sized], [2, 1])
        XCTAssertEqual([tally.replacements.count, tally.replacements.sized], [1, 1])
        XCTAssertEqual([tally.downloads.knownBytes, tally.replacements.knownBytes], [15, 15])
        XCTAssertEqual([tally.revalidations, tally.refusals, tally.upToDate, tally.deletions], [1, 1, 1, 0])
        XCTAssertTrue(tally.hasChanges)
    }

    func testTotalsSaturateInsteadOfOverflowing() {
        let files = [
            entry("a", checksum: pinned, size: .max, index: 0), entry("b", checksum: pinned, size: 5, index: 1),
        ]
        let plan = Planner.plan(files, observed: [.missing, .missing])
        XCTAssertEqual(plan.tally.downloads.knownBytes, .max)
        XCTAssertEqual(plan.knownBytesToFetch, .max)
    }

    func testNothingToDo() {
        let plan = Planner.plan([entry("a", checksum: pinned)], observed: [.file(size: 15, digest: digest)])
        XCTAssertFalse(plan.hasChanges)
        XCTAssertFalse(plan.tally.hasChanges)
        XCTAssertEqual(plan.upToDateCount, 1)
        XCTAssertTrue(Planner.plan([], observed: []).entries.isEmpty)
    }

    // MARK: Pruning

    private let ioError = StoreError(operation: .read, path: "a", errno: EIO)
    private let escapes = StoreError(
        operation: .inspect, path: "x/a", errno: 0, problem: .parentEscapesRoot(parent: "x", target: "/elsewhere"))

    private func candidate(_ dest: String, _ local: LocalState) -> PruneCandidate {
        PruneCandidate(destination: DestinationPath(dest)!, written: digest, local: local)
    }

    func testPruneDeletesOnlyWhatIsStillExactlyWhatHaulWrote() {
        XCTAssertEqual(Planner.decide(candidate("a", .file(size: 15, digest: digest))), .delete)
        XCTAssertEqual(
            Planner.decide(candidate("a", .file(size: 15, digest: otherDigest))), .keep(.modified))
        XCTAssertEqual(
            Planner.decide(candidate("a", .file(size: 3, digest: nil))), .keep(.modified),
            "a size that differs is a modification, even unhashed")
        XCTAssertEqual(Planner.decide(candidate("a", .symlink)), .keep(.replacedBySymlink))
        XCTAssertEqual(
            Planner.decide(candidate("a", .obstructed(.inTheWay(.fifo)))), .keep(.obstacle(.inTheWay(.fifo))))
        XCTAssertEqual(
            Planner.decide(candidate("a", .inaccessible(escapes))), .keep(.obstacle(.failed(escapes))))
        XCTAssertEqual(
            Planner.decide(candidate("a", .tree(nil, changed: []))), .keep(.obstacle(.inTheWay(.directory))))
        XCTAssertEqual(Planner.decide(candidate("a", .missing)), .forget)
    }

    /// A symlink an unpacked tree held is its member as long as it points where the archive said: then pruned.
    func testPruneDeletesATreesSymlinkOnlyWhileItPointsWhereTheArchiveSaid() {
        let destination = DestinationPath("sdk/link")!
        XCTAssertEqual(
            Planner.decide(
                PruneCandidate(destination: destination, written: digest, local: .symlink, linkTarget: digest)),
            .delete)
        XCTAssertEqual(
            Planner.decide(
                PruneCandidate(
                    destination: destination, written: digest, local: .symlink,
                    linkTarget: otherDigest)),
            .keep(.pointsElsewhere))
    }

    func testOnlyDeletionsCountAsPruneChanges() {
        let keepOnly = Planner.plan(
            [entry("a", checksum: pinned)], observed: [.file(size: 15, digest: digest)],
            pruning: [candidate("old", .file(size: 15, digest: otherDigest)), candidate("gone", .missing)])
        XCTAssertFalse(keepOnly.hasChanges, "a kept modified file and a forgotten record change nothing on disk")
        XCTAssertTrue(keepOnly.deletions.isEmpty)
        let deleting = Planner.plan([], observed: [], pruning: [candidate("old", .file(size: 15, digest: digest))])
        XCTAssertTrue(deleting.hasChanges)
        XCTAssertEqual(deleting.deletions.map(\.destination.description), ["old"])
    }
}

/// Freshness: an unpinned file its server confirmed is kept without a request while the server's word (or the
/// entry's own `refresh` interval) lasts, and asked again after, or at once with `--refresh`.
final class FreshnessPlanTests: XCTestCase {
    private func unpinned(refresh: Double? = nil) -> FileEntry {
        var entry = FileEntry(
            index: 0, url: TemplatedString(literal: "https://example.com/feed.json"), mirrors: [],
            destination: DestinationPath("feed.json")!, checksum: nil, size: nil, mode: FileMode(0o644),
            retries: 3, timeout: Seconds(30), headers: [], location: SourceLocation(line: 1, column: 1))
        entry.refresh = refresh.map(Seconds.init)
        return entry
    }

    private func action(
        _ entry: FileEntry, _ confirmation: Confirmation?, now: Double, always: Bool = false,
        local: LocalState = .file(size: 10, digest: nil)
    ) -> Action {
        Planner.plan(
            [entry], observed: [local],
            revalidation: Revalidation(confirmations: [confirmation], now: now, always: always)
        ).actions[0]
    }

    func testTheServersFreshnessSkipsTheRequestUntilItEnds() {
        let confirmed = Confirmation(checkedAt: 1000, freshUntil: 1600)
        XCTAssertEqual(action(unpinned(), confirmed, now: 1100), .fresh(for: 500))
        XCTAssertEqual(action(unpinned(), confirmed, now: 1600), .revalidate, "fresh until, not including, its end")
        XCTAssertEqual(action(unpinned(), confirmed, now: 1100, always: true), .revalidate, "--refresh asks anyway")
        XCTAssertEqual(action(unpinned(), Confirmation(checkedAt: 1000, freshUntil: nil), now: 1001), .revalidate)
        XCTAssertEqual(action(unpinned(), nil, now: 1100), .revalidate)
        XCTAssertEqual(
            Planner.plan([unpinned()], observed: [.file(size: 10, digest: nil)]).actions, [.revalidate],
            "no revalidation input: always asked")
    }

    func testTheEntrysRefreshIntervalReplacesTheServersWord() {
        let confirmed = Confirmation(checkedAt: 1000, freshUntil: 1010)
        XCTAssertEqual(action(unpinned(refresh: 600), confirmed, now: 1100), .fresh(for: 500))
        XCTAssertEqual(
            action(unpinned(refresh: 600), Confirmation(checkedAt: 1000, freshUntil: 99_999), now: 1700), .revalidate)
        XCTAssertEqual(
            action(unpinned(refresh: 600), Confirmation(checkedAt: 1000, freshUntil: nil), now: 1599), .fresh(for: 1))
    }

    /// A confirmation dated after now was taken while the clock ran ahead: its freshness counts from a time that
    /// has not come, so the server is asked again (a minute of skew is tolerated).
    func testAConfirmationFromTheFutureIsNotFresh() {
        let ahead = Confirmation(checkedAt: 1000 + 30 * 86_400, freshUntil: nil)
        XCTAssertEqual(action(unpinned(refresh: 600), ahead, now: 1000), .revalidate)
        XCTAssertEqual(action(unpinned(), Confirmation(checkedAt: 5000, freshUntil: 9000), now: 1000), .revalidate)
        XCTAssertEqual(
            action(unpinned(refresh: 600), Confirmation(checkedAt: 1030, freshUntil: nil), now: 1000), .fresh(for: 630),
            "half a minute ahead: skew, tolerated")
        XCTAssertEqual(
            action(unpinned(refresh: 600), Confirmation(checkedAt: 1061, freshUntil: nil), now: 1000), .revalidate)
    }

    func testFreshnessNeverKeepsAMissingFileOrCountsAsAChange() {
        let confirmed = Confirmation(checkedAt: 1000, freshUntil: 1600)
        XCTAssertEqual(action(unpinned(), confirmed, now: 1100, local: .missing), .fetch(.missing))
        XCTAssertEqual(action(unpinned(), confirmed, now: 1100, local: .symlink), .fetch(.replacesSymlink))
        let plan = Planner.plan(
            [unpinned()], observed: [.file(size: 10, digest: nil)],
            revalidation: Revalidation(confirmations: [confirmed], now: 1100))
        XCTAssertFalse(plan.hasChanges, "plan exits 0 while the file is fresh")
        XCTAssertEqual(plan.upToDateCount, 1)
        XCTAssertEqual(plan.tally.upToDate, 1)
    }

    /// The earliest end of the entries kept fresh, from the time they were judged at: what a settled snapshot is
    /// believed until. None without a fresh entry, or without a time.
    func testTheEarliestFreshEntryBoundsThePlan() {
        var second = unpinned(refresh: 60)
        second.index = 1
        let plan = Planner.plan(
            [unpinned(), second], observed: [.file(size: 10, digest: nil), .file(size: 10, digest: nil)],
            revalidation: Revalidation(
                confirmations: [
                    Confirmation(checkedAt: 1000, freshUntil: 1600),
                    Confirmation(checkedAt: 1000, freshUntil: nil),
                ],
                now: 1030))
        XCTAssertEqual(plan.actions, [.fresh(for: 570), .fresh(for: 30)])
        XCTAssertEqual(plan.decidedAt, 1030)
        XCTAssertEqual(plan.freshUntil, 1060)
        let asked = Planner.plan(
            [unpinned()], observed: [.file(size: 10, digest: nil)],
            revalidation: Revalidation(confirmations: [nil], now: 1030))
        XCTAssertEqual(asked.actions, [.revalidate])
        XCTAssertNil(asked.freshUntil)
        XCTAssertNil(
            Planner.plan([unpinned()], observed: [.file(size: 10, digest: nil)]).freshUntil, "no time, no bound")
    }

    /// A plan from a settled snapshot counts its entries as up to date, lists none and changes nothing.
    func testSettledEntriesAreCountedUpToDate() {
        var plan = Plan(files: [], actions: [])
        plan.settledCount = 5
        XCTAssertEqual(plan.upToDateCount, 5)
        XCTAssertEqual(plan.tally.upToDate, 5)
        XCTAssertFalse(plan.hasChanges)
        XCTAssertFalse(plan.tally.hasChanges)
    }
}

/// An unpinned entry over a file haul has no record of writing: no validators to ask with, so it is a replacement,
/// said as one, never a revalidation.
final class NotWrittenByHaulPlanTests: XCTestCase {
    func testAnUnrecordedFileUnderAnUnpinnedEntryIsReplacedAndSaidSo() {
        let entry = FileEntry(
            index: 0, url: TemplatedString(literal: "https://example.com/feed.json"), mirrors: [],
            destination: DestinationPath("feed.json")!, checksum: nil, size: nil, mode: FileMode(0o644),
            retries: 3, timeout: Seconds(30), headers: [], location: SourceLocation(line: 1, column: 1))
        let present = LocalState.file(size: 10, digest: nil)
        let unrecorded = Revalidation(confirmations: [nil], written: [false], now: 0, always: true)
        XCTAssertEqual(
            Planner.plan([entry], observed: [present], revalidation: unrecorded).actions, [.fetch(.notWrittenByHaul)])
        let recorded = Revalidation(confirmations: [nil], written: [true], now: 0)
        XCTAssertEqual(Planner.plan([entry], observed: [present], revalidation: recorded).actions, [.revalidate])
        XCTAssertEqual(
            Planner.plan([entry], observed: [.missing], revalidation: unrecorded).actions, [.fetch(.missing)])
    }
}
