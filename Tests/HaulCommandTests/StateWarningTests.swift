import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// The state is a hint: when it cannot be saved, or a line of it cannot be read, the run says so once and goes on;
/// the files are right either way and only speed is lost.
final class StateWarningTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let files: [(dest: String, bytes: [UInt8])] = (0..<3).map { ("f\($0).bin", Array("content \($0)\n".utf8)) }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: files.map { ("/" + $0.dest, $0.bytes) }))
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }

    private func writeManifest(_ entries: ArraySlice<(dest: String, bytes: [UInt8])>) throws {
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for (dest, bytes) in entries {
            yaml += "  - url: \(server.url("/" + dest))\n    dest: \(dest)\n"
            yaml += "    sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)\n"
        }
        try directory.write("haul.yaml", yaml)
    }

    private func occurrences(of text: String, in output: String) -> Int {
        output.components(separatedBy: text).count - 1
    }

    /// `chattr +i` on `.haul`: nothing may be created or renamed there, so the state cannot be written. The
    /// journal exists already (as after a run whose state could not be saved) and can still be appended to, so the
    /// files go in place: a batch whose ownership cannot be journaled would not (see `JournalFaultTests`).
    func testAStateThatCannotBeSavedLeavesTheFilesInPlaceAndWarnsOnceInEveryMode() throws {
        try writeManifest(files[..<1])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try writeManifest(files[...])
        try directory.write("out/.haul/journal", "")
        let immutable = try Capability.required { try ImmutableAttribute(directory.path("out/.haul")) }
        defer { immutable.release() }

        let statePath = directory.path("out/.haul/state.new")
        let human = try directory.haul(["sync"])
        XCTAssertEqual(human.exitCode, 0, human.stderr)
        for (dest, bytes) in files { XCTAssertEqual(directory.read("out/" + dest), bytes, dest) }
        let warning =
            "warning: the state could not be saved (cannot write \"\(statePath)\": Operation not permitted); "
            + "the next sync hashes the files again"
        XCTAssertEqual(occurrences(of: warning, in: human.stderr), 1, human.stderr)

        try FileManager.default.removeItem(atPath: directory.path("out/f2.bin"))
        let json = try directory.haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 0, json.stderr)
        let warnings = json.stdout.split(separator: "\n").filter { $0.contains("\"event\":\"warning\"") }
        XCTAssertEqual(warnings.count, 1, json.stdout)
        XCTAssertTrue(warnings.first?.contains("the state could not be saved") == true, json.stdout)

        immutable.release()
        server.resetLog()
        let after = try directory.haul(["sync"])
        XCTAssertEqual(after.exitCode, 0, after.stderr)
        XCTAssertEqual(server.requests.count, 0, "files the state missed are hashed, not fetched again")
        XCTAssertFalse(after.stderr.contains("warning"), after.stderr)
    }

    func testOneDamagedStateLineDropsThatRecordAloneWithAWarning() throws {
        try writeManifest(files[...])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let statePath = directory.path("out/.haul/state")
        var lines = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let damaged = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("f1.bin\t") })
        var fields = lines[damaged].split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        fields[2] = "not-an-inode"
        lines[damaged] = fields.joined(separator: "\t")
        try directory.write("out/.haul/state", lines.joined(separator: "\n"))

        server.resetLog()
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertTrue(
            result.stderr.contains(
                "warning: \(statePath): 1 line could not be read and was dropped; that file is hashed again"),
            result.stderr)
        XCTAssertEqual(server.requests.count, 0)
        let rebuilt = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
        XCTAssertFalse(rebuilt.contains("not-an-inode"), "the damaged line is replaced by what the re-hash found")
        for (dest, _) in files { XCTAssertTrue(rebuilt.contains(dest + "\t"), dest) }

        let again = try directory.haul(["sync"])
        XCTAssertFalse(again.stderr.contains("warning"), again.stderr)
    }

    /// A state far larger than haul ever writes (sparse: anyone who can write `.haul` makes one in an instant) is
    /// not read: `plan`, `sync` and `verify` run as with no state, the sync warns once, naming it and the cap,
    /// hashes what is there, and replaces it with a state of the usual size.
    func testAnOversizedStateIsAWarningAndARehashNeverACrash() throws {
        try writeManifest(files[...])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let statePath = directory.path("out/.haul/state")
        XCTAssertEqual(truncate(statePath, 64 << 30), 0)

        for command in [["plan"], ["verify"]] {
            let result = try directory.haul(command)
            XCTAssertEqual(result.exitCode, 0, "\(command): \(result.stdout)\(result.stderr)")
        }
        server.resetLog()
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(
            sync.stderr,
            "warning: \(statePath) is 68719476736 bytes, more than the 2 GiB haul reads of a state; "
                + "hashing every file to rebuild it\n")
        XCTAssertEqual(server.requests.count, 0, "the files in place are hashed, not fetched")
        var info = stat()
        XCTAssertEqual(stat(statePath, &info), 0)
        XCTAssertLessThan(info.st_size, 4096, "rebuilt")
    }

    /// A journal past the same cap is not read either: a warning naming it, and the state saved retires it.
    func testAnOversizedJournalIsAWarningAndIsRetiredUnread() throws {
        try writeManifest(files[...])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let journalPath = directory.path("out/.haul/journal")
        try directory.write("out/.haul/journal", "")
        XCTAssertEqual(truncate(journalPath, (2 << 30) + 1), 0)
        let withJournal = try directory.haul(["sync"])
        XCTAssertEqual(withJournal.exitCode, 0, withJournal.stderr)
        XCTAssertEqual(
            withJournal.stderr,
            "warning: \(journalPath) is 2147483649 bytes, more than the 2 GiB haul reads of its "
                + "journal; the files it names are not pruned\n")
        XCTAssertFalse(directory.exists("out/.haul/journal"), "retired by the state this run saved")
        XCTAssertEqual(try directory.haul(["sync"]).stderr, "")
    }
}
