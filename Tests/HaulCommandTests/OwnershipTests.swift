import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// Knowing what haul wrote survives a crash: a run killed after committing a file but before saving its state
/// still owns that file, and a later prune deletes it.
final class OwnershipTests: XCTestCase {

    func testAFileCommittedByARunKilledBeforeItSavedTheStateIsStillPrunable() throws {
        let directory = try TemporaryDirectory()
        let kept = Array("kept\n".utf8), dropped = Array("dropped\n".utf8), unpinned = Array("feed\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/kept": kept, "/dropped": dropped, "/feed": unpinned])
        defer { server.stop() }
        func manifest(_ entries: [String]) throws {
            var yaml = "version: 1\nroot: out\nprune: true\nfiles:\n"
            if entries.contains("kept") {
                yaml += "  - { url: \(server.url("/kept")), dest: kept.txt, sha256: \(sha256(kept)) }\n"
            }
            if entries.contains("dropped") {
                yaml += "  - { url: \(server.url("/dropped")), dest: sub/dropped.txt, sha256: \(sha256(dropped)) }\n"
            }
            if entries.contains("feed") { yaml += "  - { url: \(server.url("/feed")), dest: feed.txt }\n" }
            try directory.write("haul.yaml", yaml)
        }
        try manifest(["kept"])
        XCTAssertEqual(try HaulProcess.run(["sync"], currentDirectory: directory.path).exitCode, 0)

        try manifest(["kept", "dropped", "feed"])
        var realRoot = directory.path("out")
        if let resolved = realpath(realRoot, nil) {
            realRoot = String(cString: resolved)
            free(resolved)
        }
        let environment = try Capability.required("cannot kill haul before it saves the state") {
            try KillSwitch.environment(.rename(n: 1, targetPrefix: realRoot + "/.haul/state"))
        }
        let killed = try HaulProcess.run(
            ["sync"], environment: environment, currentDirectory: directory.path, timeout: 30)
        XCTAssertEqual(killed.exitCode, 128 + SIGKILL, killed.stderr)
        XCTAssertEqual(directory.read("out/sub/dropped.txt"), dropped, "committed before the kill")
        XCTAssertEqual(directory.read("out/feed.txt"), unpinned)

        XCTAssertTrue(directory.exists("out/.haul/journal"))
        try manifest(["kept"])
        server.resetLog()
        let prune = try HaulProcess.run(["sync"], currentDirectory: directory.path)
        XCTAssertEqual(prune.exitCode, 0, prune.stderr)
        XCTAssertFalse(
            directory.exists("out/sub/dropped.txt"), "the killed run's file is still haul's to prune:\n\(prune.stdout)")
        XCTAssertFalse(directory.exists("out/sub"), "and the folder it leaves empty")
        XCTAssertFalse(directory.exists("out/feed.txt"), "an unpinned file too:\n\(prune.stdout)")
        XCTAssertEqual(directory.read("out/kept.txt"), kept)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(directory.exists("out/.haul/journal"), "folded into the saved state")
    }

    /// Someone who can write `.haul` (a CI cache restored from elsewhere) but cannot read its key adds lines that
    /// say this manifest wrote the user's files: to the journal, in this format (with a tag copied from a real
    /// line) and in the format before tags, and to the state; and sets a real record's identity to that of the
    /// user's file now at its path. Nothing of the user's is deleted: the plan names the unproven records, while
    /// the file haul did write is still pruned.
    func testLinesHaulDidNotWriteMakeNoFilePrunable() throws {
        let directory = try TemporaryDirectory()
        let kept = Array("kept\n".utf8), dropped = Array("dropped\n".utf8), replaced = Array("replaced\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/kept": kept, "/dropped": dropped, "/replaced": replaced])
        defer { server.stop() }
        func manifest(_ names: [String]) throws {
            let entries = names.map {
                "  - { url: \(server.url("/" + $0)), dest: \($0).txt, sha256: \(sha256(Array("\($0)\n".utf8))) }\n"
            }
            try directory.write("haul.yaml", "version: 1\nroot: out\nfiles:\n" + entries.joined())
        }
        try manifest(["kept", "dropped", "replaced"])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let mine = Array("the user's own file\n".utf8), theirs = Array("another file of the user's\n".utf8)
        let edited = Array("the user's edit\n".utf8)
        try directory.write("out/mine.txt", mine)
        try directory.write("out/theirs.txt", theirs)
        try directory.write("out/replaced.txt", edited)

        let state = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
        var lines = state.split(separator: "\n").map(String.init)
        let keptFields = try XCTUnwrap(lines.first { $0.hasPrefix("kept.txt\t") }).split(
            separator: "\t", omittingEmptySubsequences: false)
        XCTAssertEqual(keptFields.count, 15, "a record of a file haul wrote carries its tag")
        let copiedTag = keptFields.count == 15 ? keptFields[13] : Substring(String(repeating: "0", count: 32))
        let unknown = "0\t0\t-1\t0.000000000\t0.000000000"
        try directory.write(
            "out/.haul/journal",
            "mine.txt\t\(unknown)\tsha256:\(sha256(mine))\t../haul.yaml\t\t\t\t\t\t\(copiedTag)\t\n"
                + "mine.txt\t\(unknown)\tsha256:\(sha256(mine))\t../haul.yaml\t\t\t\n")
        var identity = stat()
        XCTAssertEqual(lstat(directory.path("out/theirs.txt"), &identity), 0)
        let times = { (time: timespec) in "\(time.tv_sec).\(String(format: "%09ld", time.tv_nsec))" }
        let theirIdentity =
            "\(identity.st_dev)\t\(identity.st_ino)\t\(identity.st_size)\t\(times(identity.st_mtim))\t\(times(identity.st_ctim))"
        lines.append("theirs.txt\t\(theirIdentity)\tsha256:\(sha256(theirs))\t../haul.yaml\t\t\t\t\t\t\(copiedTag)\t")
        XCTAssertEqual(lstat(directory.path("out/replaced.txt"), &identity), 0)
        let replacedIdentity =
            "\(identity.st_dev)\t\(identity.st_ino)\t\(identity.st_size)\t\(times(identity.st_mtim))\t\(times(identity.st_ctim))"
        let index = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("replaced.txt\t") })
        var fields = lines[index].split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        fields.replaceSubrange(1...5, with: replacedIdentity.split(separator: "\t").map(String.init))
        lines[index] = fields.joined(separator: "\t")
        let records = lines.dropFirst().sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        try directory.write("out/.haul/state", ([lines[0]] + records).joined(separator: "\n") + "\n")

        try manifest(["kept"])
        let plan = try directory.haul(["plan", "--prune"])
        XCTAssertEqual(plan.exitCode, 2, plan.stdout)
        XCTAssertTrue(
            plan.stdout.hasPrefix(
                "! 2 files recorded as written by ../haul.yaml without haul's proof (a state an older "
                    + "haul wrote, or one edited): not pruned (--adopt ../haul.yaml vouches for them)\n"),
            plan.stdout)
        XCTAssertTrue(plan.stdout.contains("- dropped.txt (no longer in the manifest)\n"), plan.stdout)
        XCTAssertTrue(plan.stdout.contains("! replaced.txt (not pruned: "), plan.stdout)

        let sync = try directory.haul(["sync", "--prune"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/mine.txt"), mine, "a journal line haul did not write deletes nothing")
        XCTAssertEqual(directory.read("out/theirs.txt"), theirs, "nor does a state line")
        XCTAssertEqual(
            directory.read("out/replaced.txt"), edited, "a file is hashed before it is pruned, whatever its record says"
        )
        XCTAssertFalse(directory.exists("out/dropped.txt"), "what haul wrote is still pruned:\n\(sync.stdout)")
        XCTAssertEqual(directory.read("out/kept.txt"), kept)
    }
}
