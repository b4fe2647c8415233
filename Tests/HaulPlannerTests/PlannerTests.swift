import HaulDigest
import HaulManifest
import HaulPlanner
import XCTest

/// The planner is pure: every decision is checked here from values, with no file system and no network.
final class PlannerTests: XCTestCase {
    private let content: [UInt8] = Array("pinned content\n".utf8)
    private var digest: Digest { StreamingHasher.digest(content, algorithm: .sha256) }
    private var otherDigest: Digest { StreamingHasher.digest(Array("other".utf8), algorithm: .sha256) }

    private func entry(_ dest: String, checksum: Checksum? = nil, size: Int64? = nil, index: Int = 0) -> FileEntry {
        FileEntry(index: index, url: TemplatedString(literal: "https://example.com/\(dest)"), mirrors: [],
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
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .file(size: 15, digest: otherDigest)),
                       .fetch(.digestMismatch(local: otherDigest)))
    }

    func testSizeMismatchIsReplacedWithoutNeedingADigest() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned, size: 15), .file(size: 3, digest: nil)),
                       .fetch(.sizeMismatch(local: 3, expected: 15)))
    }

    func testUnpinnedPresentFileIsKept() {
        XCTAssertEqual(Planner.decide(entry("a"), .file(size: 99, digest: nil)), .keep)
    }

    func testUnpinnedFileWithPinnedSizeIsReplacedWhenSizeDiffers() {
        XCTAssertEqual(Planner.decide(entry("a", size: 10), .file(size: 99, digest: nil)),
                       .fetch(.sizeMismatch(local: 99, expected: 10)))
        XCTAssertEqual(Planner.decide(entry("a", size: 99), .file(size: 99, digest: nil)), .keep)
    }

    func testSymlinkAtDestinationIsReplaced() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .symlink), .fetch(.replacesSymlink))
    }

    func testObstructionsAndInaccessibleDestinationsAreRefused() {
        XCTAssertEqual(Planner.decide(entry("a", checksum: pinned), .obstructed("a directory is in the way")),
                       .refuse("a directory is in the way"))
        XCTAssertEqual(Planner.decide(entry("a"), .inaccessible("parent \"x\" leads outside root")),
                       .refuse("parent \"x\" leads outside root"))
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
        ]
        let plan = Planner.plan(files, observed: [
            .file(size: 15, digest: digest), .missing, .file(size: 15, digest: otherDigest),
            .obstructed("a directory is in the way"), .missing,
        ])
        XCTAssertEqual(plan.entries.map(\.entry.destination.description), ["keep", "new", "wrong", "blocked", "unpinned-new"])
        XCTAssertEqual(plan.downloads.map(\.entry.destination.description), ["new", "unpinned-new"])
        XCTAssertEqual(plan.replacements.map(\.entry.destination.description), ["wrong"])
        XCTAssertEqual(plan.fetches.count, 3)
        XCTAssertEqual(plan.refusals.map(\.entry.destination.description), ["blocked"])
        XCTAssertEqual(plan.upToDateCount, 1)
        XCTAssertEqual(plan.knownBytesToFetch, 30, "only pinned sizes count")
        XCTAssertTrue(plan.hasChanges)
    }

    func testNothingToDo() {
        let plan = Planner.plan([entry("a", checksum: pinned)], observed: [.file(size: 15, digest: digest)])
        XCTAssertFalse(plan.hasChanges)
        XCTAssertEqual(plan.upToDateCount, 1)
        XCTAssertTrue(Planner.plan([], observed: []).entries.isEmpty)
    }
}
