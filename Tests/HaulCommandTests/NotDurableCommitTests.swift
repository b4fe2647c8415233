import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A folder whose fsync fails after the renames (EIO from `FaultFileSystem`): the new content is already in place,
/// so the report says exactly that — in place, but not yet durable — never "failed" (which promises the old
/// content). The run exits 1, and the state records the file and the gap: the next run syncs the file and its
/// folder, says so again if that still fails, and clears the mark once it succeeds.
final class NotDurableCommitTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private var faults: FaultFileSystem?
    private let bytes = Array("the new, pinned content\n".utf8)
    private let other = Array("a file in another folder\n".utf8)
    private let old = Array("old".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(files: ["/a.bin": bytes, "/b.bin": other])
        faults = try Capability.required { try FaultFileSystem(over: directory, mountPoint: "out", backing: "back") }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/a.bin")), dest: data/a.bin, sha256: \(sha256(bytes)) }
              - { url: \(server.url("/b.bin")), dest: elsewhere/b.bin, sha256: \(sha256(other)) }
            """)
        try directory.write("out/data/a.bin", old)
    }

    override func tearDown() {
        faults?.unmount()
        server.stop()
        directory = nil
    }

    func testAFolderSyncThatFailsAfterTheRenameIsReportedAsInPlaceButNotDurable() throws {
        try faults?.inject(["fsyncdir data"])
        let result = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(result.exitCode, 1, result.stdout + result.stderr)
        XCTAssertEqual(
            result.stderr,
            "error: data/a.bin: in place, but not yet durable: cannot sync the directory of it: "
                + "Input/output error\n")
        XCTAssertFalse(result.stderr.contains("failed"), result.stderr)
        let stdout = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(stdout.contains("fetched data/a.bin (24 B)"), result.stdout)
        XCTAssertTrue(stdout.contains("fetched elsewhere/b.bin (25 B)"), result.stdout)
        XCTAssertTrue(
            stdout.last?.hasPrefix("Fetched 2 files (49 B), 0 up to date, 1 not yet durable in ") ?? false,
            result.stdout)
        XCTAssertEqual(directory.read("back/data/a.bin"), bytes, "the new content is in place")
        XCTAssertEqual(directory.read("back/elsewhere/b.bin"), other)

        // The state records the file as it is, and that it is not yet durable: the next run fetches nothing but
        // syncs the folder again, and says so while it still fails.
        server.resetLog()
        let still = try directory.haul(["sync"])
        XCTAssertEqual(still.exitCode, 1, still.stdout + still.stderr)
        XCTAssertEqual(server.requests.count, 0, "the file in place is not fetched again")
        XCTAssertEqual(
            still.stderr,
            "error: data/a.bin: in place, but not yet durable: cannot sync the directory of it: "
                + "Input/output error\n")
        XCTAssertTrue(still.stdout.hasPrefix("2 files up to date, 1 not yet durable in "), still.stdout)

        // With the disk healthy again, the gap is closed: the file and its folder are synced, and the mark goes.
        try faults?.inject([])
        let closed = try directory.haul(["sync"])
        XCTAssertEqual(closed.exitCode, 0, closed.stderr)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertTrue(closed.stdout.hasPrefix("Nothing to do: 2 files up to date"), closed.stdout)
        XCTAssertFalse(String(decoding: directory.read("back/.haul/state") ?? [], as: UTF8.self).contains("unsynced"))
        // Nothing is left to sync: a failing folder is not even asked.
        try faults?.inject(["fsyncdir data"])
        let after = try directory.haul(["sync"])
        XCTAssertEqual(after.exitCode, 0, after.stderr)
        XCTAssertEqual(after.stderr, "")
    }

    /// `--json`: the file an earlier run left not durable, still not durable, is a `done` event with result
    /// `not-durable` (nothing fetched: no URL, size or digest) and the error; the summary counts it.
    func testJSONSaysAgainWhatIsStillNotDurable() throws {
        try faults?.inject(["fsyncdir data"])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 1)
        let result = try directory.haul(["sync", "--json"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        let events = try result.stdout.split(separator: "\n").map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
        }
        let done = try XCTUnwrap(events.first { $0["event"] as? String == "done" })
        XCTAssertEqual(done["dest"] as? String, "data/a.bin")
        XCTAssertEqual(done["result"] as? String, "not-durable")
        XCTAssertEqual(
            done["error"] as? String,
            "in place, but not yet durable: cannot sync the directory of it: Input/output error")
        XCTAssertTrue(done["url"] is NSNull && done["digest"] is NSNull, "\(done)")
        let summary = try XCTUnwrap(events.last)
        XCTAssertEqual(summary["not_durable"] as? Int, 1)
        XCTAssertEqual(summary["fetched"] as? Int, 0)
        XCTAssertEqual(summary["exit_status"] as? Int, 1)
    }

    /// Only the sync of `.haul` fails after the state's rename: the state is saved (the next run trusts it and
    /// fetches nothing), but not yet durable, so the journal is kept, said as such; the next run retires it.
    func testAStateSavedButNotDurableKeepsTheJournalUntilTheNextRunRetiresIt() throws {
        try faults?.inject(["fsyncdir .haul"])
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stdout + result.stderr)
        XCTAssertEqual(
            result.stderr,
            "warning: the state is saved but not yet durable (cannot sync the directory "
                + "\"\(directory.path("out/.haul"))\": Input/output error); the journal is kept, and the next sync retires it\n"
        )
        XCTAssertTrue(directory.exists("back/.haul/journal"))
        XCTAssertTrue(
            String(decoding: directory.read("back/.haul/state") ?? [], as: UTF8.self).contains("data/a.bin\t"),
            "the state was saved")

        try faults?.inject([])
        server.resetLog()
        let next = try directory.haul(["sync"])
        XCTAssertEqual(next.exitCode, 0, next.stderr)
        XCTAssertEqual(next.stderr, "")
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertTrue(next.stdout.hasPrefix("Nothing to do: 2 files up to date"), next.stdout)
        XCTAssertFalse(directory.exists("back/.haul/journal"), "retired once the state is durable")
    }

    func testJSONKeepsDoneForTheFileAndMarksItNotDurable() throws {
        try faults?.inject(["fsyncdir data"])
        let result = try directory.haul(["sync", "--json"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let events = try result.stdout.split(separator: "\n").map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
        }
        XCTAssertFalse(events.contains { $0["event"] as? String == "failed" }, result.stdout)
        let done = try XCTUnwrap(
            events.first { $0["event"] as? String == "done" && $0["dest"] as? String == "data/a.bin" })
        XCTAssertEqual(done["result"] as? String, "fetched-not-durable")
        XCTAssertEqual(
            done["error"] as? String,
            "in place, but not yet durable: cannot sync the directory of it: "
                + "Input/output error")
        XCTAssertEqual(done["digest"] as? String, "sha256:" + sha256(bytes))
        XCTAssertEqual(done["bytes"] as? Int, bytes.count)
        let fine = try XCTUnwrap(
            events.first { $0["event"] as? String == "done" && $0["dest"] as? String == "elsewhere/b.bin" })
        XCTAssertEqual(fine["result"] as? String, "fetched")
        XCTAssertTrue(fine["error"] is NSNull, "every done event has an error, null when there is none")
        let summary = try XCTUnwrap(events.last)
        XCTAssertEqual(summary["event"] as? String, "summary")
        XCTAssertEqual(summary["fetched"] as? Int, 2)
        XCTAssertEqual(summary["failed"] as? Int, 0)
        XCTAssertEqual(summary["not_durable"] as? Int, 1)
        XCTAssertEqual(summary["exit_status"] as? Int, 1)
    }
}
