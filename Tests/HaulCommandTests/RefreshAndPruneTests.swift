import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// Unpinned entries revalidated with conditional requests, `--require-checksums`, and pruning, through the real
/// binary against a real loopback server.
final class RefreshAndPruneTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// `entries`: (url, dest, pinned bytes or nil for unpinned).
    private func writeManifest(_ entries: [(String, String, [UInt8]?)], prune: Bool = false) throws {
        var text = "version: 1\nroot: out\n" + (prune ? "prune: true\n" : "")
        if entries.isEmpty { text += "files: []\n" } else { text += "files:\n" }
        for (url, dest, bytes) in entries {
            text += "  - url: \(url)\n    dest: \(dest)\n"
            if let bytes { text += "    sha256: \(sha256(bytes))\n" }
        }
        try directory.write("haul.yaml", text)
    }

    // MARK: Revalidation

    func testAnUnpinnedFileIsRevalidatedAnd304WritesNothing() throws {
        let files = StaticFiles(["/data.csv": Array("v1\n".utf8)])
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        try writeManifest([(server.url("/data.csv"), "data.csv", nil)])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let path = directory.path("out/data.csv")
        let before = try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, "a revalidation may change the file")
        XCTAssertEqual(
            plan.stdout,
            """
            ↻ data.csv (unpinned; ask the server whether it changed)
            Plan: 1 to revalidate, 0 up to date.

            """)

        server.resetLog()
        let again = try directory.haul(["sync"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertTrue(
            again.stdout.contains("Nothing to do: 1 file up to date (1 confirmed by their server)"), again.stdout)
        XCTAssertEqual(server.requests.map { $0.header("If-None-Match") }, [files.etag("/data.csv")])
        XCTAssertEqual(server.requests.map { $0.header("If-Modified-Since") }, [files.lastModified("/data.csv")])
        XCTAssertEqual(
            try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int, before,
            "a 304 leaves the very same file in place")

        files.set("/data.csv", Array("v2\n".utf8))
        let changed = try directory.haul(["sync"])
        XCTAssertEqual(changed.exitCode, 0, changed.stderr)
        XCTAssertEqual(directory.read("out/data.csv"), Array("v2\n".utf8))
        server.resetLog()
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(
            server.requests.map { $0.header("If-None-Match") }, [files.etag("/data.csv")],
            "the new version's validators were recorded")
    }

    /// A file haul did not write, under an unpinned entry: plan and sync say it is replaced by the server's copy.
    func testAnUnpinnedEntryOverAFileHaulDidNotWriteIsAReplacementSaidSo() throws {
        let server = try LoopbackHTTPServer(files: ["/feed.json": Array("{\"v\":2}".utf8)])
        defer { server.stop() }
        try writeManifest([(server.url("/feed.json"), "feed.json", nil)])
        try directory.write("out/feed.json", "mine")
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, plan.stdout)
        XCTAssertTrue(
            plan.stdout.hasPrefix("~ feed.json (not written by haul; the server's copy replaces it)\n"), plan.stdout)
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertTrue(
            sync.stdout.contains("~ feed.json (not written by haul; the server's copy replaces it)"), sync.stdout)
        XCTAssertEqual(directory.read("out/feed.json"), Array("{\"v\":2}".utf8))
        XCTAssertNil(server.requests.last?.header("If-None-Match"), "nothing to ask conditionally with")
        XCTAssertTrue(try directory.haul(["plan"]).stdout.contains("↻ feed.json"), "haul's from now on: revalidated")
    }

    func testALocallyModifiedUnpinnedFileIsFetchedUnconditionally() throws {
        let files = StaticFiles(["/data.csv": Array("server\n".utf8)])
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        try writeManifest([(server.url("/data.csv"), "data.csv", nil)])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try directory.write("out/data.csv", "edited by hand\n")
        server.resetLog()
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(
            server.requests.map { $0.header("If-None-Match") }, [nil],
            "the recorded validators describe other bytes than those on disk")
        XCTAssertEqual(directory.read("out/data.csv"), Array("server\n".utf8))
    }

    func testRequireChecksumsRefusesUnpinnedEntriesNamingThemBeforeAnyRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1], "/b": [2]])
        defer { server.stop() }
        try writeManifest([(server.url("/a"), "a.bin", [1]), (server.url("/b"), "b.bin", nil)])
        for command in [["sync", "--require-checksums"], ["plan", "--require-checksums"]] {
            let result = try directory.haul(command)
            XCTAssertEqual(result.exitCode, 3, command.joined(separator: " "))
            XCTAssertEqual(
                result.stderr,
                "haul.yaml:7:5: error: files[1]: b.bin has no checksum, and --require-checksums is set "
                    + "(`haul add --update b.bin` fetches it and writes its checksum into the manifest)\n")
        }
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(directory.exists("out/a.bin"))
    }

    // MARK: Pruning

    func testPruneDeletesOnlyUnchangedFilesThisManifestWroteAndTheDirectoriesItEmptied() throws {
        let keep: [UInt8] = Array("keep\n".utf8), old: [UInt8] = Array("old\n".utf8),
            edited: [UInt8] = Array("edit\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/keep": keep, "/old": old, "/edited": edited])
        defer { server.stop() }
        try writeManifest([
            (server.url("/keep"), "keep.txt", keep), (server.url("/old"), "deep/er/old.txt", old),
            (server.url("/edited"), "edited.txt", edited),
        ])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try directory.write("out/mine.txt", "a file haul never wrote\n")
        try directory.write("out/edited.txt", "changed by the user\n")

        try writeManifest([(server.url("/keep"), "keep.txt", keep)], prune: true)
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2)
        XCTAssertEqual(
            plan.stdout,
            """
            - deep/er/old.txt (no longer in the manifest)
            ! edited.txt (not pruned: modified since haul wrote it)
            Plan: 1 to prune, 1 up to date.

            """)
        XCTAssertTrue(directory.exists("out/deep/er/old.txt"), "plan deletes nothing")

        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, "a kept modified file is a warning: \(sync.stderr)")
        XCTAssertEqual(
            sync.stderr, "warning: edited.txt: not pruned: modified since haul wrote it; haul no longer manages it\n")
        XCTAssertTrue(sync.stdout.contains("Fetched 0 files (0 B), 1 up to date, 1 pruned in"), sync.stdout)
        XCTAssertFalse(directory.exists("out/deep"), "the directories pruning emptied are gone")
        XCTAssertEqual(directory.read("out/edited.txt"), Array("changed by the user\n".utf8))
        XCTAssertEqual(directory.read("out/mine.txt"), Array("a file haul never wrote\n".utf8))
        XCTAssertEqual(directory.read("out/keep.txt"), keep)

        let again = try directory.haul(["sync"])
        XCTAssertEqual(again.stderr, "", "the kept file is no longer haul's: no warning twice")
        XCTAssertEqual(try directory.haul(["plan"]).exitCode, 0)
    }

    func testWithoutPruningNothingIsDeletedAndPruneLaterStillKnowsWhatHaulWrote() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1], "/b": [2]])
        defer { server.stop() }
        try writeManifest([(server.url("/a"), "a.bin", [1]), (server.url("/b"), "b.bin", [2])])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try writeManifest([(server.url("/a"), "a.bin", [1])])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/b.bin"), [2], "no pruning unless asked")
        // plan says so, and that nothing changes unless --prune is given (exit 0).
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout)
        XCTAssertEqual(plan.stdout, "No changes: 1 file up to date.\n1 file no longer listed (--prune deletes them).\n")
        let planPrune = try directory.haul(["plan", "--prune"])
        XCTAssertEqual(planPrune.exitCode, 2, planPrune.stdout)
        XCTAssertEqual(planPrune.stdout, "- b.bin (no longer in the manifest)\nPlan: 1 to prune, 1 up to date.\n")
        let pruned = try directory.haul(["sync", "--prune"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stderr)
        XCTAssertFalse(directory.exists("out/b.bin"))
        XCTAssertEqual(directory.read("out/a.bin"), [1])
    }

    func testAFileThatWasAlreadyInPlaceIsNeverPruned() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1]])
        defer { server.stop() }
        try directory.write("out/a.bin", [1])
        try writeManifest([(server.url("/a"), "a.bin", [1])])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(server.requests.count, 0, "found in place, not written by haul")
        try writeManifest([], prune: true)
        let result = try directory.haul(["sync", "--force"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), [1])
    }

    func testAnEmptyFilesListWithPruningIsRefusedUnlessForced() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1]])
        defer { server.stop() }
        try writeManifest([(server.url("/a"), "a.bin", [1])])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try writeManifest([], prune: true)
        let refused = try directory.haul(["sync"])
        XCTAssertEqual(refused.exitCode, 3)
        XCTAssertTrue(refused.stderr.hasPrefix("haul.yaml: error: files: is empty and pruning is on"), refused.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), [1])
        let forced = try directory.haul(["sync", "--force"])
        XCTAssertEqual(forced.exitCode, 0, forced.stderr)
        XCTAssertFalse(directory.exists("out/a.bin"))
        XCTAssertTrue(directory.exists("out"), "root itself stays")
    }

    func testAnotherManifestsFilesAreNotPruned() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1], "/b": [2]])
        defer { server.stop() }
        try writeManifest([(server.url("/a"), "a.bin", [1])])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        try directory.write(
            "other.yaml",
            """
            version: 1
            root: out
            prune: true
            files:
              - url: \(server.url("/b"))
                dest: b.bin
                sha256: \(sha256([2]))
            """)
        let result = try directory.haul(["sync", "other.yaml"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), [1], "a.bin belongs to haul.yaml")
        XCTAssertEqual(directory.read("out/b.bin"), [2])
    }
}
