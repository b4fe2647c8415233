import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// I/O errors from the disk itself, made by a FUSE file system that fails chosen operations (`FaultFileSystem`):
/// each is reported for what it is, and what can be repaired is repaired.
final class IOErrorTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private var faults: FaultFileSystem?
    private let bytes = Array("the pinned content\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(files: ["/a.bin": bytes])
        faults = try Capability.required { try FaultFileSystem(over: directory, mountPoint: "out", backing: "back") }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/a.bin")), dest: data/a.bin, sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }
            """)
    }

    override func tearDown() {
        faults?.unmount()
        server.stop()
        directory = nil
    }

    func testADestinationThatReadsWithEIOIsReplacedNotBlockedForever() throws {
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        // A new identity, so that the file must be read again; then reading it fails.
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, directory.path("out/data/a.bin"), &times, 0), 0)
        try faults?.inject(["read a.bin"])

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, plan.stdout + plan.stderr)
        XCTAssertTrue(
            plan.stdout.contains("~ data/a.bin (cannot read it: Input/output error; it will be replaced)"),
            plan.stdout)
        let verify = try directory.haul(["verify"])
        XCTAssertEqual(verify.exitCode, 1)
        XCTAssertTrue(
            verify.stdout.contains("unreadable data/a.bin (cannot read it: Input/output error)"), verify.stdout)

        server.resetLog()
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(server.requests.count, 1, "the unreadable copy is fetched again")
        try faults?.inject([])
        XCTAssertEqual(directory.read("back/data/a.bin"), bytes)
        XCTAssertEqual(try directory.haul(["verify"]).exitCode, 0)
    }

    func testAnEIOReadingTheStateIsCalledAnIOErrorNotCorruption() throws {
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try faults?.inject(["read .haul/state"])
        server.resetLog()
        // --rehash: a plain sync would find nothing changed from its settled snapshot, and not read the state at all.
        let sync = try directory.haul(["sync", "--rehash"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains(
                "warning: cannot read \(directory.path("out"))/.haul/state: Input/output error; hashing every file"),
            sync.stderr)
        XCTAssertFalse(sync.stderr.contains("corrupt"), sync.stderr)
        XCTAssertEqual(server.requests.count, 0)
    }

    /// The summary's time is the whole run's, pruning included (a slow unlink here takes a second and a half).
    func testTheSummaryTimeIncludesPruning() throws {
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try directory.write(
            "haul.yaml",
            "version: 1\nroot: out\nprune: true\nfiles:\n  - { url: \(server.url("/a.bin")), dest: b.bin }\n")
        try faults?.inject(["unlink a.bin DELAY"])
        let result = try directory.haul(["sync", "--json"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertFalse(directory.exists("back/data/a.bin"))
        let summary = try XCTUnwrap(result.stdout.split(separator: "\n").last { $0.contains("\"event\":\"summary\"") })
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(summary.utf8)) as? [String: Any])
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(json["seconds"] as? Double), 1.0, String(summary))
        XCTAssertEqual(json["pruned"] as? Int, 1)
    }
}
