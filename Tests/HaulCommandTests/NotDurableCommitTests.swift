import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A folder whose fsync fails after the renames (EIO from `FaultFileSystem`): the new content is already in place,
/// so the report says exactly that — in place, but not yet durable — never "failed" (which promises the old
/// content). The run exits 1, the state records the file, and the next run has nothing to do.
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
        try directory.write("haul.yaml", """
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
        XCTAssertEqual(result.stderr, "error: data/a.bin: in place, but not yet durable: cannot sync the directory of it: "
                       + "Input/output error\n")
        XCTAssertFalse(result.stderr.contains("failed"), result.stderr)
        let stdout = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(stdout.contains("fetched data/a.bin (24 B)"), result.stdout)
        XCTAssertTrue(stdout.contains("fetched elsewhere/b.bin (25 B)"), result.stdout)
        XCTAssertTrue(stdout.last?.hasPrefix("Fetched 2 files (49 B), 0 up to date, 1 not yet durable in ") ?? false,
                      result.stdout)
        XCTAssertEqual(directory.read("back/data/a.bin"), bytes, "the new content is in place")
        XCTAssertEqual(directory.read("back/elsewhere/b.bin"), other)

        // The state records the file as it is: the next run, with the disk healthy again, has nothing to do.
        try faults?.inject([])
        server.resetLog()
        let next = try directory.haul(["sync"])
        XCTAssertEqual(next.exitCode, 0, next.stderr)
        XCTAssertEqual(server.requests.count, 0, "the file in place is not fetched again")
        XCTAssertTrue(next.stdout.hasPrefix("Nothing to do: 2 files up to date"), next.stdout)
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
        let done = try XCTUnwrap(events.first { $0["event"] as? String == "done" && $0["dest"] as? String == "data/a.bin" })
        XCTAssertEqual(done["result"] as? String, "fetched-not-durable")
        XCTAssertEqual(done["error"] as? String, "in place, but not yet durable: cannot sync the directory of it: "
                       + "Input/output error")
        XCTAssertEqual(done["digest"] as? String, "sha256:" + sha256(bytes))
        XCTAssertEqual(done["bytes"] as? Int, bytes.count)
        let fine = try XCTUnwrap(events.first { $0["event"] as? String == "done" && $0["dest"] as? String == "elsewhere/b.bin" })
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
