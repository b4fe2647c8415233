import Haul
import HaulDigest
import HaulEngine
import HaulFailures
import HaulManifest
import HaulPlanner
import HaulStore
import XCTest
@testable import HaulCommand

/// The text people read, from values: the plan, failures and their hints, in the notation the manifest used.
final class HumanReportTests: XCTestCase {
    private let wanted = StreamingHasher.digest(Array("wanted\n".utf8), algorithm: .sha256)
    private let found = StreamingHasher.digest(Array("found\n".utf8), algorithm: .sha256)

    private func entry(_ dest: String, _ checksum: Checksum? = nil, size: Int64? = nil) -> FileEntry {
        FileEntry(
            index: 0, url: TemplatedString(literal: "https://example.com/\(dest)"), mirrors: [],
            destination: DestinationPath(dest)!, checksum: checksum, size: size, mode: FileMode(0o644),
            retries: 3, timeout: Seconds(30), headers: [], location: SourceLocation(line: 1, column: 1))
    }

    func testThePlanListsEachChangeWithItsReasonAndSumsItUp() {
        let hex = Checksum(digest: wanted, notation: .hexKey)
        let plan = Planner.plan(
            [
                entry("new.bin", hex, size: 2048), entry("stale.bin", hex), entry("feed.json"), entry("same.bin", hex),
                entry("link.bin", hex),
            ],
            observed: [
                .missing, .file(size: 6, digest: found), .file(size: 10, digest: nil), .file(size: 7, digest: wanted),
                .symlink,
            ],
            pruning: [
                PruneCandidate(
                    destination: DestinationPath("old.bin")!, written: wanted, local: .file(size: 7, digest: wanted)),
                PruneCandidate(
                    destination: DestinationPath("edited.bin")!, written: wanted,
                    local: .file(size: 6, digest: found)),
            ])
        let lines = HumanReport.planLines(plan)
        XCTAssertEqual(lines.count, 7, lines.joined(separator: "\n"))
        XCTAssertEqual(lines[0], "+ new.bin (missing)")
        XCTAssertTrue(lines[1].hasPrefix("~ stale.bin (checksum differs: have "), lines[1])
        XCTAssertTrue(
            lines[1].contains(String(found.hex.prefix(8))) && lines[1].contains(String(wanted.hex.prefix(8))), lines[1])
        XCTAssertEqual(lines[2], "↻ feed.json (unpinned; ask the server whether it changed)")
        XCTAssertEqual(lines[3], "~ link.bin (a symlink is in the way; it will be replaced)")
        XCTAssertEqual(lines[4], "- old.bin (no longer in the manifest)")
        XCTAssertTrue(lines[5].hasPrefix("! edited.bin (not pruned: "), lines[5])
        XCTAssertEqual(
            lines[6], "Plan: 1 to download (2.0 KiB), 2 to replace, 1 to revalidate, 1 to prune, 1 up to date.")
    }

    func testNothingToDoSaysHowManyFilesAreUpToDate() {
        let plan = Planner.plan(
            [entry("a", Checksum(digest: wanted, notation: .hexKey))], observed: [.file(size: 7, digest: wanted)])
        XCTAssertEqual(HumanReport.planLines(plan), ["No changes: 1 file up to date."])
    }

    func testAMismatchIsShownInTheManifestsOwnNotation() {
        let integrity = Checksum(digest: wanted, notation: .subresourceIntegrity)
        let text = HumanReport.describe(.digestMismatch(expected: wanted, actual: found), checksum: integrity)
        XCTAssertEqual(text, "checksum mismatch: expected \(integrity.render(wanted)), got \(integrity.render(found))")
        XCTAssertTrue(integrity.render(wanted).hasPrefix("sha256-"), integrity.render(wanted))
    }

    func testAnUntrustedCertificateSaysHowToTrustAPrivateCA() {
        let text = HumanReport.describe(
            .network(code: .peerFailedVerification, message: "SSL certificate problem"), checksum: nil)
        XCTAssertEqual(
            text,
            "the server's TLS certificate could not be verified; to trust a private CA, pass --ca-file FILE or set HAUL_CA_FILE"
        )
        let refused = HumanReport.describe(
            .network(code: .couldNotConnect, message: "Connection refused"), checksum: nil)
        XCTAssertEqual(
            refused, "could not connect (refused, or no route to the host)", "no CA hint where a CA cannot help")
    }

    /// libcurl's wording only under --verbose, after haul's; where haul has no words of its own, libcurl's alone.
    func testLibcurlsOwnWordsFollowHaulsUnderVerboseOnly() {
        let reset = FailureReason.network(code: .receiveError, message: "Recv failure: Connection reset by peer")
        let failure = EntryFailure.transfer(
            TransferFailure(attempts: [AttemptFailure(sourceDisplayURL: "https://a.example/x", reason: reset)]))
        XCTAssertEqual(
            HumanReport.failureLines(entry: entry("x"), failure: failure),
            ["error: x: https://a.example/x: the connection failed while receiving (reset by the server?)"])
        XCTAssertEqual(
            HumanReport.failureLines(entry: entry("x"), failure: failure, verbose: true),
            [
                "error: x: https://a.example/x: the connection failed while receiving (reset by the server?) "
                    + "(libcurl: Recv failure: Connection reset by peer)"
            ])
        XCTAssertEqual(
            HumanReport.failureMessages(entry: entry("x"), failure: failure),
            ["https://a.example/x: the connection failed while receiving (reset by the server?)"],
            "a JSON event or an annotation carries the destination beside the text, not in it")
        let stalled = FailureReason.network(code: .operationTimedOut, message: "no data for 2 s")
        XCTAssertEqual(FailureWording.reason(stalled), "no data for 2 s")
        XCTAssertNil(FailureWording.libcurlDetail(stalled))
    }

    func testEveryURLTriedIsNamedWithItsLastFailure() {
        let failure = TransferFailure(attempts: [
            AttemptFailure(sourceDisplayURL: "https://a.example/x", reason: .httpStatus(503)),
            AttemptFailure(sourceDisplayURL: "https://b.example/x", reason: .httpStatus(404)),
            AttemptFailure(sourceDisplayURL: "https://a.example/x", reason: .httpStatus(500)),
        ])
        XCTAssertEqual(
            HumanReport.failureLines(entry: entry("x"), failure: .transfer(failure)),
            [
                "error: x: all 2 sources failed:",
                "  https://a.example/x: HTTP 500",
                "  https://b.example/x: HTTP 404",
            ])
        let one = TransferFailure(attempts: [
            AttemptFailure(sourceDisplayURL: "https://a.example/x", reason: .httpStatus(404))
        ])
        XCTAssertEqual(
            HumanReport.failureLines(entry: entry("x"), failure: .transfer(one)),
            ["error: x: https://a.example/x: HTTP 404"])
    }

    /// The sync hands its warnings over as values; the reporter says them.
    func testTheSyncsWarningsAreSaidWithWhatCausedThem() throws {
        let readOnly = StoreError(operation: .write, path: ".haul/state", errno: EROFS)
        XCTAssertEqual(
            HumanReport.sentence(.stateNotSaved(readOnly)),
            "the state could not be saved (cannot write \".haul/state\": Read-only file system); the next sync hashes "
                + "the files again")
        XCTAssertEqual(
            HumanReport.sentence(.unproven(manifest: "old.yaml", files: 1)),
            "1 file recorded as written by old.yaml without haul's proof (a state an older haul wrote, or one edited): "
                + "not pruned (--adopt old.yaml vouches for them)")
        XCTAssertEqual(
            HumanReport.sentence(
                .cacheEntryTooLarge(path: "/c/ab/cd", limit: 10, destination: try XCTUnwrap(DestinationPath("a.bin")))),
            "the cache entry /c/ab/cd is not used: \(SizeLimit.exceeded(10, pinned: false)); a.bin is downloaded")
    }
}
