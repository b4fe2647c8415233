import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// The settled fast path as users meet it: a no-op of a manifest an earlier run left in place says what the whole
/// way says, and anything validation reads that changed (the file, a `${VAR}`, the root, the shard's view of an
/// invalid edit) is validated again: an invalid manifest is refused by every run, sharded or not.
final class SettledRunCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let bodies = (0..<8).map { index in
        (0..<(500 + index * 13)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
    }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: bodies.indices.map { ("/d/f\($0)", bodies[$0]) }))
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }

    private func destination(_ index: Int) -> String { "d\(index % 3)/f\(index)" }

    /// Root and URLs through the environment, so that changing a variable changes what validation reads.
    private func manifest(count: Int = 8, sha256: (Int) -> String? = { _ in nil }) -> String {
        var lines = ["version: 1", "root: ${SETTLED_ROOT:-out}", "files:"]
        for index in 0..<count {
            let digest = sha256(index) ?? StreamingHasher.digest(bodies[index], algorithm: .sha256).hex
            lines.append("  - {url: \"${SETTLED_BASE}/d/f\(index)\", dest: \(destination(index)), sha256: \(digest)}")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private var environment: [String: String] { ["SETTLED_BASE": server.baseURL] }

    private func haul(_ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
        try directory.haul(arguments, environment: environment ?? self.environment)
    }

    /// Syncs until a run says nothing is left to do twice in a row (the first such run may still have had to prove
    /// files written within the clock's resolution of the state): the root is then settled.
    private func settle(_ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        for _ in 0..<3 {
            let result = try haul(["sync", "haul.yaml", "--progress", "none"] + arguments)
            XCTAssertEqual(result.exitCode, 0, result.stderr, file: file, line: line)
            FileClock.waitForATick()
        }
    }

    private func assertFiles(in root: String, file: StaticString = #filePath, line: UInt = #line) {
        for index in bodies.indices {
            XCTAssertEqual(
                directory.read("\(root)/\(destination(index))"), bodies[index], destination(index), file: file,
                line: line)
        }
    }

    func testEveryChangeToWhatValidationReadsIsValidatedAgain() throws {
        try directory.write("haul.yaml", manifest())
        try settle()
        assertFiles(in: "out")
        server.resetLog()
        let noOp = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(noOp.exitCode, 0, noOp.stderr)
        XCTAssertEqual(noOp.stdout.components(separatedBy: " in ").first, "Nothing to do: 8 files up to date")
        XCTAssertEqual(noOp.stderr, "")
        let plan = try haul(["plan", "haul.yaml"])
        XCTAssertEqual(plan.exitCode, 0, plan.stderr)
        XCTAssertEqual(plan.stdout, "No changes: 8 files up to date.\n")
        XCTAssertEqual(server.requests.count, 0)

        // A variable the manifest names, unset, then set to what makes a URL invalid: refused, with the place.
        let unset = try haul(["sync", "haul.yaml"], environment: [:])
        XCTAssertEqual(unset.exitCode, 3, unset.stdout)
        XCTAssertTrue(
            unset.stderr.contains("haul.yaml:4:11: error: files[0].url: environment variable SETTLED_BASE is not set"),
            unset.stderr)
        let invalid = try haul(["plan", "haul.yaml"], environment: ["SETTLED_BASE": "ftp://127.0.0.1:1"])
        XCTAssertEqual(invalid.exitCode, 3, invalid.stdout)
        XCTAssertTrue(invalid.stderr.contains("haul.yaml:4:11: error: files[0].url:"), invalid.stderr)

        // The root through a variable, then through --root: the files go where it now says.
        let moved = try haul(
            ["sync", "haul.yaml", "--progress", "none"],
            environment: environment.merging(["SETTLED_ROOT": "other"]) { $1 })
        XCTAssertEqual(moved.exitCode, 0, moved.stderr)
        assertFiles(in: "other")
        let overridden = try haul(["sync", "haul.yaml", "--root", "elsewhere", "--progress", "none"])
        XCTAssertEqual(overridden.exitCode, 0, overridden.stderr)
        assertFiles(in: "elsewhere")
        XCTAssertEqual(server.requests.count, 16, "every file of both new roots, none of out's")

        // An edit: a valid one is synced, an invalid one refused with its place, and the settled root is as it was.
        server.resetLog()
        try directory.write("haul.yaml", manifest(count: 7))
        XCTAssertEqual(try haul(["sync", "haul.yaml", "--progress", "none"]).exitCode, 0)
        XCTAssertEqual(server.requests.count, 0, "a file no longer listed is left alone")
        let lines = manifest().components(separatedBy: "\n")
        try directory.write("haul.yaml", manifest(sha256: { $0 == 7 ? "abc" : nil }))
        let refused = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(refused.exitCode, 3, refused.stdout)
        XCTAssertTrue(refused.stderr.contains("haul.yaml:\(lines.count - 1):"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("error: files[7].sha256: expected 64 hex digits"), refused.stderr)
        try directory.write("haul.yaml", manifest())
        try settle()
        let again = try haul(["sync", "haul.yaml", "--json"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertTrue(
            again.stdout.hasPrefix(
                #"{"event":"plan","version":1,"changes":[],"download":0,"replace":0,"revalidate":0,"prune":0,"blocked":0,"up_to_date":8,"bytes":0}"#
            ),
            again.stdout)
        XCTAssertEqual(server.requests.count, 0)
        assertFiles(in: "out")
    }

    /// Settled shards each answer for their own entries; an invalid edit anywhere in the manifest is refused by
    /// every shard, also by one whose own entries did not change.
    func testEveryShardRefusesAnInvalidEditWhereverItIs() throws {
        try directory.write("haul.yaml", manifest())
        let shards = (1...4).map { "\($0)/4" }
        for _ in 0..<3 {
            for shard in shards { try settle(["--shard", shard]) }
        }
        assertFiles(in: "out")
        for (number, shard) in zip(1..., shards) {
            let result = try haul(["sync", "haul.yaml", "--shard", shard, "--json"])
            XCTAssertEqual(result.exitCode, 0, result.stderr)
            let own = bodies.indices.filter { HaulCommandTests.shard(of: destination($0), count: 4) == number }.count
            XCTAssertTrue(
                result.stdout.contains(#""up_to_date":\#(own),"bytes":0,"shard":"\#(shard)","manifest_entries":8}"#),
                result.stdout)
        }
        let edited = try XCTUnwrap(bodies.indices.first { HaulCommandTests.shard(of: destination($0), count: 4) != 1 })
        try directory.write("haul.yaml", manifest(sha256: { $0 == edited ? String(repeating: "z", count: 64) : nil }))
        let refused = try haul(["sync", "haul.yaml", "--shard", "1/4", "--progress", "none"])
        XCTAssertEqual(refused.exitCode, 3, refused.stdout)
        XCTAssertTrue(refused.stderr.contains("error: files[\(edited)].sha256:"), refused.stderr)
        try directory.write("haul.yaml", manifest())
        let restored = try haul(["sync", "haul.yaml", "--shard", "1/4", "--progress", "none"])
        XCTAssertEqual(restored.exitCode, 0, restored.stderr)
        XCTAssertTrue(restored.stdout.hasPrefix("Nothing to do"), restored.stdout)
    }

    /// A parent folder swapped for a symlink to a copy outside root keeps every file's identity; the entry still
    /// fails, as the whole way fails it.
    func testAParentLeadingOutsideRootFailsTheEntryEvenWhenEveryFileIsAsRecorded() throws {
        try directory.write("haul.yaml", manifest())
        try settle()
        XCTAssertEqual(rename(directory.path("out/d1"), directory.path("outside")), 0)
        XCTAssertEqual(symlink(directory.path("outside"), directory.path("out/d1")), 0)
        let result = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(result.exitCode, 1, result.stdout + result.stderr)
        XCTAssertTrue((result.stdout + result.stderr).contains("d1/f1"), result.stdout + result.stderr)
        XCTAssertEqual(server.requests.count, 8, "nothing fetched through the symlink")
    }

    /// An unpinned entry kept fresh by its server's `max-age`: a sync finds nothing to do, and `plan` still lists
    /// it with its freshness (which only the whole way can say).
    func testAPlanStillListsAnUnpinnedEntryKeptFresh() throws {
        let fresh = try LoopbackHTTPServer(files: StaticFiles(["/feed.json": Array("{\"v\":1}".utf8)]), maxAge: 600)
        defer { fresh.stop() }
        try directory.write("haul.yaml", manifest() + "  - {url: \"\(fresh.url("/feed.json"))\", dest: feed.json}\n")
        try settle()
        let sync = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertTrue(sync.stdout.hasPrefix("Nothing to do: 9 files up to date"), sync.stdout)
        let plan = try haul(["plan", "haul.yaml"])
        XCTAssertEqual(plan.exitCode, 0, plan.stderr)
        XCTAssertTrue(plan.stdout.hasPrefix("= feed.json (unpinned; fresh for "), plan.stdout)
        XCTAssertTrue(plan.stdout.hasSuffix("No changes: 9 files up to date.\n"), plan.stdout)
        XCTAssertEqual(fresh.requests.count, 1, "fetched once, then kept fresh")
    }

    /// What shows the fast path reads nothing but the files' identities: the state, made unreadable under it, is not
    /// read by a settled no-op (no warning), and is read again (and said unreadable) once a variable changes.
    func testASettledNoOpLeavesTheStateUnreadAndAChangedVariableReadsItAgain() throws {
        let faults = try Capability.required {
            try FaultFileSystem(over: directory, mountPoint: "out", backing: "back")
        }
        defer { faults.unmount() }
        try directory.write("haul.yaml", manifest())
        for _ in 0..<3 {
            try settle()
            FileClock.waitForANewSecond()  // the FUSE mount may keep whole seconds
        }
        try faults.inject(["read .haul/state"])
        let settled = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(settled.exitCode, 0, settled.stderr)
        XCTAssertEqual(settled.stderr, "", "the state was not read")
        XCTAssertTrue(settled.stdout.hasPrefix("Nothing to do: 8 files up to date"), settled.stdout)
        let changed = try haul(
            ["sync", "haul.yaml", "--progress", "none"], environment: ["SETTLED_BASE": server.baseURL + "/."])
        XCTAssertEqual(changed.exitCode, 0, changed.stderr)
        XCTAssertTrue(changed.stderr.contains("/.haul/state: Input/output error"), changed.stderr)
        try faults.inject([])
    }
}
