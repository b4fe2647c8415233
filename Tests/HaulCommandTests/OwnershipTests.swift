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
            if entries.contains("kept") { yaml += "  - { url: \(server.url("/kept")), dest: kept.txt, sha256: \(sha256(kept)) }\n" }
            if entries.contains("dropped") { yaml += "  - { url: \(server.url("/dropped")), dest: sub/dropped.txt, sha256: \(sha256(dropped)) }\n" }
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
        let killed = try HaulProcess.run(["sync"], environment: environment, currentDirectory: directory.path, timeout: 30)
        XCTAssertEqual(killed.exitCode, 128 + SIGKILL, killed.stderr)
        XCTAssertEqual(directory.read("out/sub/dropped.txt"), dropped, "committed before the kill")
        XCTAssertEqual(directory.read("out/feed.txt"), unpinned)

        XCTAssertTrue(directory.exists("out/.haul/journal"))
        try manifest(["kept"])
        server.resetLog()
        let prune = try HaulProcess.run(["sync"], currentDirectory: directory.path)
        XCTAssertEqual(prune.exitCode, 0, prune.stderr)
        XCTAssertFalse(directory.exists("out/sub/dropped.txt"), "the killed run's file is still haul's to prune:\n\(prune.stdout)")
        XCTAssertFalse(directory.exists("out/sub"), "and the folder it leaves empty")
        XCTAssertFalse(directory.exists("out/feed.txt"), "an unpinned file too:\n\(prune.stdout)")
        XCTAssertEqual(directory.read("out/kept.txt"), kept)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(directory.exists("out/.haul/journal"), "folded into the saved state")
    }
}
