import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// The root's key (`.haul/key`) is what proves which records haul wrote. A record that names a manifest without
/// that proof is never called that manifest's file, and a key that cannot be read for a moment is never replaced
/// (a new key would prove nothing the old one tagged).
final class OwnerKeyTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let names = ["a.bin", "b.bin", "c.bin"]

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: names.map { ("/" + $0, Array("new \($0)\n".utf8)) }))
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }

    private func writeManifest(_ listed: [String], named name: String = "haul.yaml") throws {
        let entries = listed.map {
            "  - { url: \(server.url("/" + $0)), dest: \($0), sha256: \(sha256(Array("new \($0)\n".utf8))) }\n"
        }
        try directory.write(
            name, "version: 1\nroot: out\nfiles:" + (listed.isEmpty ? " []\n" : "\n" + entries.joined()))
    }

    /// A line added to the state that says a manifest which is gone wrote the user's file: the plan does not call
    /// it that manifest's file (it says the record has no proof), while a manifest that is really gone is named
    /// as before; pruning deletes neither.
    func testARecordNamingAGoneManifestWithoutProofIsNotCalledItsFile() throws {
        try writeManifest(["a.bin"], named: "old.yaml")
        XCTAssertEqual(try directory.haul(["sync", "old.yaml"]).exitCode, 0)
        XCTAssertEqual(unlink(directory.path("old.yaml")), 0)
        try writeManifest(["b.bin"])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let mine = Array("the user's own file\n".utf8)
        try directory.write("out/mine.txt", mine)
        let state = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
        let forged =
            "mine.txt\t0\t0\t-1\t0.000000000\t0.000000000\tsha256:\(sha256(mine))\t../gone.yaml\t\t\t\t\t\t\(String(repeating: "0", count: 32))\t"
        var lines = state.split(separator: "\n").map(String.init)
        lines.append(forged)
        let records = lines.dropFirst().sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        try directory.write("out/.haul/state", ([lines[0]] + records).joined(separator: "\n") + "\n")

        let plan = try directory.haul(["plan", "--prune"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout + plan.stderr)
        XCTAssertEqual(
            plan.stdout,
            "! 1 file written by ../old.yaml, which is gone: not pruned (--adopt ../old.yaml makes this "
                + "manifest their owner)\n! 1 file recorded as written by ../gone.yaml without haul's proof (a state an "
                + "older haul wrote, or one edited): not pruned (--adopt ../gone.yaml vouches for them)\n"
                + "No changes: 1 file up to date.\n")
        XCTAssertEqual(try directory.haul(["sync", "--prune"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/mine.txt"), mine)
        XCTAssertEqual(directory.read("out/a.bin"), Array("new a.bin\n".utf8))
    }

    /// The key cannot be read during one sync (EIO): the sync goes on, says that what it writes is not proven, and
    /// leaves the key as it is; once it reads again, the files it proved are pruned as before.
    func testAKeyThatCannotBeReadIsNotReplaced() throws {
        let faults = try Capability.required {
            try FaultFileSystem(over: directory, mountPoint: "out", backing: "back")
        }
        defer { faults.unmount() }
        try writeManifest(["a.bin", "b.bin"])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let key = try XCTUnwrap(directory.read("back/.haul/key"))

        try faults.inject(["read .haul/key"])
        try writeManifest(names)
        let unreadable = try directory.haul(["sync"])
        XCTAssertEqual(unreadable.exitCode, 0, unreadable.stderr)
        XCTAssertEqual(
            unreadable.stderr,
            "warning: the root's key is not usable (cannot read \"\(directory.path("out/.haul/key"))\": "
                + "Input/output error); the files this sync wrote are not pruned until --adopt ../haul.yaml vouches for them\n"
        )
        XCTAssertEqual(directory.read("back/c.bin"), Array("new c.bin\n".utf8))
        XCTAssertEqual(directory.read("back/.haul/key"), key, "the key is kept")

        try faults.inject([])
        try writeManifest(["c.bin"])
        let pruned = try directory.haul(["sync", "--prune"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stderr)
        XCTAssertEqual(directory.list("back"), [".haul", "c.bin"], "what the key proved is pruned:\n\(pruned.stdout)")
    }
}
