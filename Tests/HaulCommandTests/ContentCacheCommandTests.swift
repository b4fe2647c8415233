import Dispatch
import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// `--cache DIR` / `HAUL_CACHE` and `haul cache …`, run as the real binary against a loopback server that counts
/// requests: what a CI runner that restores one cache for many roots relies on.
final class ContentCacheCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    /// path on the server → bytes; every pinned unless listed in `unpinned`.
    private var files: [String: [UInt8]] = [:]

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        var generator = SplitMix(seed: 42)
        files = [
            "/big.bin": (0..<300_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) },
            "/small.txt": Array("small and pinned\n".utf8),
            "/deep.bin": (0..<40_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) },
            "/loose.txt": Array("unpinned bytes, never cached\n".utf8),
        ]
        server = try LoopbackHTTPServer(files: files)
    }

    override func tearDown() {
        server?.stop()
    }

    private static let destinations = [
        "/big.bin": "big.bin", "/small.txt": "small.txt", "/deep.bin": "a/b/deep.bin",
        "/loose.txt": "loose.txt",
    ]
    private static let pinned = ["/big.bin", "/small.txt", "/deep.bin"]

    private func sha256(_ bytes: [UInt8]) -> String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    /// A manifest at `name` syncing every file to `root` (relative to the manifest, or absolute).
    private func writeManifest(_ name: String, root: String, paths: [String]? = nil) throws {
        var text = "version: 1\nroot: \(root)\nfiles:\n"
        for path in (paths ?? Array(Self.destinations.keys)).sorted() {
            text += "  - url: \(server.url(path))\n    dest: \(Self.destinations[path] ?? path)\n"
            if Self.pinned.contains(path), let bytes = files[path] { text += "    sha256: \(sha256(bytes))\n" }
        }
        try directory.write(name, text)
    }

    private func entryPath(_ cache: String, _ bytes: [UInt8]) -> String {
        let hex = sha256(bytes)
        return "\(cache)/sha256/\(hex.prefix(2))/\(hex)"
    }

    private func assertRootHoldsEveryFile(_ root: String, file: StaticString = #filePath, line: UInt = #line) {
        for (path, destination) in Self.destinations {
            XCTAssertTrue(
                holds(root + "/" + destination, files[path]), "\(destination) in \(root)", file: file, line: line)
        }
    }

    /// Whether the file at `path` holds exactly `bytes` (compared, not printed: a failure would print 300 KB).
    private func holds(_ path: String, _ bytes: [UInt8]?) -> Bool {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) } == bytes && bytes != nil
    }

    /// The lines of `text` that contain `part` (how many times a warning was given).
    private func lines(of text: String, containing part: String) -> [Substring] {
        text.split(separator: "\n").filter { $0.contains(part) }
    }

    private func events(_ stdout: String) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    private func fillCache(_ cache: String) throws {
        try writeManifest("first.yaml", root: "first")
        let first = try directory.haul(["sync", "first.yaml", "--cache", cache])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        XCTAssertEqual(server.requests.count, 4, "the first root downloads everything")
        for path in Self.pinned {
            XCTAssertTrue(
                holds(entryPath(cache, files[path] ?? []), files[path]),
                "the verified download of \(path) is in the cache")
        }
        server.resetLog()
    }

    // 1, 8

    /// A second root with the same manifest is served from the cache with no request for a pinned file, each
    /// `done` event says `cached`, the summary counts them; a sync after that is a no-op that asks for nothing
    /// pinned (the state recorded the cached files, so nothing is hashed or fetched again).
    func testASecondRootIsFilledFromTheCacheWithoutARequest() throws {
        let cache = directory.path("cache")
        try fillCache(cache)

        try writeManifest("second.yaml", root: "second")
        let second = try directory.haul(["sync", "second.yaml", "--json"], environment: ["HAUL_CACHE": cache])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/loose.txt"], "only the unpinned entry is asked for")
        assertRootHoldsEveryFile(directory.path("second"))
        let done = events(second.stdout).filter { $0["event"] as? String == "done" }
        var results: [String: String] = [:]
        for event in done { results[event["dest"] as? String ?? "?"] = event["result"] as? String }
        XCTAssertEqual(
            results, ["big.bin": "cached", "small.txt": "cached", "a/b/deep.bin": "cached", "loose.txt": "fetched"])
        XCTAssertTrue(done.filter { $0["result"] as? String == "cached" }.allSatisfy { $0["url"] is NSNull })
        let summary = try XCTUnwrap(events(second.stdout).last)
        XCTAssertEqual(summary["cached"] as? Int, 3)
        XCTAssertEqual(summary["fetched"] as? Int, 1)
        let state = String(decoding: directory.read("second/.haul/state") ?? [], as: UTF8.self)
        for destination in ["big.bin", "small.txt", "a/b/deep.bin"] {
            XCTAssertTrue(state.contains(destination), "the state records \(destination): \(state)")
        }

        server.resetLog()
        let again = try directory.haul(["sync", "second.yaml", "--json"], environment: ["HAUL_CACHE": cache])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/loose.txt"], "a no-op: only the unpinned file is revalidated")
        XCTAssertEqual(events(again.stdout).first?["up_to_date"] as? Int, 3)
        XCTAssertFalse(again.stdout.contains("\"cached\",\"url\""), "nothing is copied again: \(again.stdout)")

        // The human summary and the --verbose line say where the files came from.
        server.resetLog()
        try writeManifest("third.yaml", root: "third")
        let third = try directory.haul(["sync", "third.yaml", "--cache", cache, "--verbose"])
        XCTAssertEqual(third.exitCode, 0, third.stderr)
        XCTAssertTrue(third.stdout.contains("3 from the cache"), third.stdout)
        XCTAssertTrue(third.stdout.contains("from the cache a/b/deep.bin (39.1 KiB)\n"), third.stdout)
        assertRootHoldsEveryFile(directory.path("third"))
    }

    /// `--no-cache` turns `HAUL_CACHE` off: everything is downloaded, and the cache is not even made.
    func testNoCacheTurnsTheVariableOff() throws {
        try writeManifest("m.yaml", root: "out")
        let result = try directory.haul(
            ["sync", "m.yaml", "--no-cache"], environment: ["HAUL_CACHE": directory.path("cache")])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(server.requests.count, 4)
        XCTAssertFalse(directory.exists("cache"))
    }

    /// An unpinned file is never added: its bytes could change under the same URL, and nothing would vouch for them.
    func testUnpinnedEntriesNeverEnterTheCache() throws {
        let cache = directory.path("cache")
        try writeManifest("m.yaml", root: "out", paths: ["/loose.txt"])
        let result = try directory.haul(["sync", "m.yaml", "--cache", cache])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("out/loose.txt"), files["/loose.txt"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath(cache, files["/loose.txt"] ?? [])))
        let info = try directory.haul(["cache", "info", "--cache", cache, "--json"])
        XCTAssertEqual(info.exitCode, 0, info.stderr)
        XCTAssertEqual(events(info.stdout).first?["entries"] as? Int, 0)
    }

    // 2

    /// Two processes fill two roots from one cache at the same moment: both correct, neither asks for a pinned file.
    func testTwoRootsFillFromOneCacheAtOnce() throws {
        var generator = SplitMix(seed: 7)
        var many: [String: [UInt8]] = [:]
        for index in 0..<150 {
            many["/m\(index).bin"] = (0..<(1000 + index * 97)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        }
        let manyServer = try LoopbackHTTPServer(files: many)
        defer { manyServer.stop() }
        func manifest(root: String) -> String {
            "version: 1\nroot: \(root)\nfiles:\n"
                + many.keys.sorted().map {
                    "  - url: \(manyServer.url($0))\n    dest: d\($0)\n    sha256: \(sha256(many[$0] ?? []))\n"
                }.joined()
        }
        let cache = directory.path("cache")
        try directory.write("fill.yaml", manifest(root: "fill"))
        XCTAssertEqual(try directory.haul(["sync", "fill.yaml", "--cache", cache]).exitCode, 0)
        XCTAssertEqual(manyServer.requests.count, 150)
        manyServer.resetLog()

        try directory.write("a.yaml", manifest(root: "a"))
        try directory.write("b.yaml", manifest(root: "b"))
        let results = Mutex<[String: ProcessResult]>([:])
        let group = DispatchGroup()
        let path = directory.path
        for name in ["a", "b"] {
            DispatchQueue.global().async(group: group) {
                let result = try? HaulProcess.run(
                    ["sync", "\(name).yaml", "--json"], environment: ["HAUL_CACHE": cache],
                    currentDirectory: path)
                results.withLock { $0[name] = result }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        for name in ["a", "b"] {
            let result = try XCTUnwrap(results.withLock { $0[name] })
            XCTAssertEqual(result.exitCode, 0, result.stderr)
            XCTAssertEqual(events(result.stdout).last?["cached"] as? Int, 150, result.stdout)
            for (file, bytes) in many { XCTAssertEqual(directory.read("\(name)/d\(file)"), bytes, "\(name)/d\(file)") }
        }
        XCTAssertEqual(manyServer.requests.count, 0)
    }

    // 3

    /// An entry whose bytes are not its digest's: one warning, the entry removed, the file downloaded and correct,
    /// and the verified download put back in the cache.
    func testACorruptEntryIsRemovedDownloadedAndReAdded() throws {
        let cache = directory.path("cache")
        try fillCache(cache)
        let big = files["/big.bin"] ?? []
        var damaged = big
        damaged[1000] ^= 0xff  // same size: only the digest can tell
        try Data(damaged).write(to: URL(fileURLWithPath: entryPath(cache, big)))

        try writeManifest("second.yaml", root: "second")
        let second = try directory.haul(["sync", "second.yaml", "--cache", cache])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        let warnings = lines(of: second.stderr, containing: "is not the file of its digest")
        XCTAssertEqual(warnings.count, 1, second.stderr)
        XCTAssertTrue(warnings.first?.hasPrefix("warning: ") ?? false, second.stderr)
        XCTAssertTrue(second.stderr.contains("big.bin is downloaded"), second.stderr)
        XCTAssertEqual(Set(server.requests.map(\.path)), ["/big.bin", "/loose.txt"])
        assertRootHoldsEveryFile(directory.path("second"))
        XCTAssertTrue(
            holds(entryPath(cache, big), big),
            "the verified download replaced the bad entry")

        // Also a wrong size, in JSON: one `warning` event.
        try Data(big.prefix(10)).write(to: URL(fileURLWithPath: entryPath(cache, big)))
        try writeManifest("third.yaml", root: "third")
        let third = try directory.haul(["sync", "third.yaml", "--cache", cache, "--json"])
        XCTAssertEqual(third.exitCode, 0, third.stderr)
        XCTAssertEqual(events(third.stdout).filter { $0["event"] as? String == "warning" }.count, 1, third.stdout)
        assertRootHoldsEveryFile(directory.path("third"))
    }

    // 4

    /// The cache on another file system than the root (no reflink, no rename across: the copy path) and on the same.
    func testTheCacheOnAnotherFileSystemAndOnTheSame() throws {
        let shm = "/dev/shm"
        var shmInfo = stat(), tmpInfo = stat()
        guard stat(shm, &shmInfo) == 0, stat(directory.path, &tmpInfo) == 0 else {
            throw XCTSkip("no /dev/shm here")
        }
        guard shmInfo.st_dev != tmpInfo.st_dev else {
            throw XCTSkip("/dev/shm and \(directory.path) are the same file system: nothing to cross")
        }
        let remote = shm + "/haul-cache-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: remote) }
        let cache = directory.path("cache")
        try fillCache(cache)

        // Root on tmpfs, cache on the test directory's file system.
        try writeManifest("remote.yaml", root: remote)
        let crossed = try directory.haul(["sync", "remote.yaml", "--cache", cache])
        XCTAssertEqual(crossed.exitCode, 0, crossed.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/loose.txt"])
        assertRootHoldsEveryFile(remote)

        // The same file system.
        server.resetLog()
        try writeManifest("near.yaml", root: "near")
        let near = try directory.haul(["sync", "near.yaml", "--cache", cache])
        XCTAssertEqual(near.exitCode, 0, near.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/loose.txt"])
        assertRootHoldsEveryFile(directory.path("near"))

        // And filling a cache across file systems (inserted by copy into tmp/, then renamed).
        server.resetLog()
        let remoteCache = remote + "-cache"
        defer { try? FileManager.default.removeItem(atPath: remoteCache) }
        try writeManifest("fill.yaml", root: "fill")
        XCTAssertEqual(try directory.haul(["sync", "fill.yaml", "--cache", remoteCache]).exitCode, 0)
        for path in Self.pinned {
            XCTAssertTrue(holds(entryPath(remoteCache, files[path] ?? []), files[path]))
        }
        XCTAssertEqual(
            (try? FileManager.default.contentsOfDirectory(atPath: remoteCache + "/tmp")) ?? [], [],
            "no insertion is left in tmp/")
    }

    // 5

    /// A cache that cannot be written (`tmp` is a file, so no insertion can start): the sync succeeds, with one
    /// warning for the whole run.
    func testACacheThatCannotBeWrittenWarnsOnceAndTheSyncSucceeds() throws {
        let cache = directory.path("cache")
        try directory.write("cache/tmp", "not a folder")
        try writeManifest("m.yaml", root: "out")
        let result = try directory.haul(["sync", "m.yaml", "--cache", cache])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        assertRootHoldsEveryFile(directory.path("out"))
        let warnings = lines(of: result.stderr, containing: "not added to the cache")
        XCTAssertEqual(warnings.count, 1, result.stderr)
    }

    /// A read-only cache (a read-only bind mount: the tests run as root, whom permission bits do not stop): hits
    /// still served with no request, insertions skipped with one warning, exit 0.
    func testAReadOnlyCacheServesHitsAndWarnsOnce() throws {
        let cache = directory.path("cache")
        try fillCache(cache)
        // One entry missing, so this run has a download to (fail to) insert.
        let small = files["/small.txt"] ?? []
        XCTAssertEqual(unlink(entryPath(cache, small)), 0)
        let mount = try Capability.required { try TestMount.readOnlyBind(at: cache) }
        defer { mount.unmount() }
        try writeManifest("second.yaml", root: "second")
        let result = try directory.haul(["sync", "second.yaml", "--cache", cache])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        assertRootHoldsEveryFile(directory.path("second"))
        XCTAssertEqual(Set(server.requests.map(\.path)), ["/small.txt", "/loose.txt"])
        let warnings = lines(of: result.stderr, containing: "not added to the cache")
        XCTAssertEqual(warnings.count, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("Read-only file system"), result.stderr)
    }

    /// A full cache (a tiny tmpfs): the sync succeeds, one warning.
    func testAFullCacheWarnsOnceAndTheSyncSucceeds() throws {
        let cache = directory.path("cache")
        try directory.makeDirectory("cache")
        let mount = try Capability.required { try TestMount.tmpfs(at: cache, size: 64 << 10) }
        defer { mount.unmount() }
        try writeManifest("m.yaml", root: "out")
        let result = try directory.haul(["sync", "m.yaml", "--cache", cache])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        assertRootHoldsEveryFile(directory.path("out"))
        let warnings = lines(of: result.stderr, containing: "not added to the cache")
        XCTAssertEqual(warnings.count, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("No space left on device"), result.stderr)
        XCTAssertEqual(
            (try? FileManager.default.contentsOfDirectory(atPath: cache + "/tmp")) ?? [], [],
            "the failed insertion left nothing in tmp/")
    }

    // 6

    /// Synced files are copies, never links: editing one in place (same inode, no rename) leaves the cache as it was,
    /// for the root that filled the cache and for the root served from it.
    func testEditingASyncedFileDoesNotAlterTheCache() throws {
        let cache = directory.path("cache")
        try fillCache(cache)
        try writeManifest("second.yaml", root: "second")
        XCTAssertEqual(try directory.haul(["sync", "second.yaml", "--cache", cache]).exitCode, 0)
        let big = files["/big.bin"] ?? []
        for root in ["first", "second"] {
            let destination = directory.path("\(root)/big.bin")
            var destinationInfo = stat(), entryInfo = stat()
            XCTAssertEqual(stat(destination, &destinationInfo), 0)
            XCTAssertEqual(stat(entryPath(cache, big), &entryInfo), 0)
            XCTAssertNotEqual(destinationInfo.st_ino, entryInfo.st_ino, "\(root): not the cache's inode")
            XCTAssertEqual(entryInfo.st_nlink, 1)
            let descriptor = open(destination, O_WRONLY)
            XCTAssertGreaterThanOrEqual(descriptor, 0)
            XCTAssertEqual(pwrite(descriptor, "edited", 6, 0), 6)
            close(descriptor)
            XCTAssertTrue(
                holds(entryPath(cache, big), big),
                "editing \(root)/big.bin left the cache entry as it was")
        }
    }

    // 7

    /// `cache info` counts entries and bytes; `cache gc --max-size` removes the least recently used first (by mtime,
    /// set here explicitly) and stale insertions, and says what it removed.
    func testCacheInfoAndGarbageCollection() throws {
        let cache = directory.path("cache")
        try fillCache(cache)
        let total = Self.pinned.reduce(0) { $0 + (files[$1]?.count ?? 0) }
        let info = try directory.haul(["cache", "info", "--cache", cache, "--json"])
        XCTAssertEqual(info.exitCode, 0, info.stderr)
        let object = try XCTUnwrap(events(info.stdout).first)
        XCTAssertEqual(object["entries"] as? Int, 3)
        XCTAssertEqual(object["bytes"] as? Int, total)
        XCTAssertEqual(object["directory"] as? String, cache)
        let human = try directory.haul(["cache", "info"], environment: ["HAUL_CACHE": cache])
        XCTAssertTrue(human.stdout.contains("entries: 3"), human.stdout)
        XCTAssertTrue(human.stdout.contains("(\(total) bytes)"), human.stdout)

        // Oldest: small, then big, then deep (the most recently used).
        let ages: [(String, Int)] = [("/small.txt", 3000), ("/big.bin", 2000), ("/deep.bin", 1000)]
        for (path, age) in ages { try setModified(entryPath(cache, files[path] ?? []), secondsAgo: age) }
        try directory.write("cache/tmp/5e1f-7a-1.tmp", "left by a crash")
        try setModified(directory.path("cache/tmp/5e1f-7a-1.tmp"), secondsAgo: 7200)
        try directory.write("cache/tmp/5e1f-7a-2.tmp", "being written")

        // Room for deep.bin only: small (oldest) and big go, in that order.
        let limit = (files["/deep.bin"]?.count ?? 0) + 10
        let gc = try directory.haul(["cache", "gc", "--max-size", "\(limit)", "--cache", cache])
        XCTAssertEqual(gc.exitCode, 0, gc.stderr)
        let removed = gc.stdout.split(separator: "\n").filter { $0.hasPrefix("removed sha256/") }
        XCTAssertEqual(removed.count, 2, gc.stdout)
        XCTAssertTrue(removed.first?.contains(sha256(files["/small.txt"] ?? [])) ?? false, "oldest first: \(gc.stdout)")
        XCTAssertTrue(removed.last?.contains(sha256(files["/big.bin"] ?? [])) ?? false, gc.stdout)
        XCTAssertTrue(gc.stdout.contains("removed tmp/5e1f-7a-1.tmp (stale)"), gc.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: entryPath(cache, files["/deep.bin"] ?? [])))
        XCTAssertFalse(FileManager.default.fileExists(atPath: entryPath(cache, files["/big.bin"] ?? [])))
        XCTAssertEqual(directory.list("cache/tmp"), ["5e1f-7a-2.tmp"])
        let after = try directory.haul(["cache", "info", "--cache", cache, "--json"])
        XCTAssertEqual(events(after.stdout).first?["entries"] as? Int, 1)

        // Under the limit already: nothing goes.
        let again = try directory.haul(["cache", "gc", "--max-size", "1M", "--cache", cache])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertTrue(again.stdout.hasPrefix("Removed 0 entries"), again.stdout)
        XCTAssertEqual(try directory.haul(["cache", "gc", "--max-size", "lots", "--cache", cache]).exitCode, 64)
    }

    /// A hit makes its entry the most recently used.
    func testAHitRenewsTheEntrysTime() throws {
        let cache = directory.path("cache")
        try fillCache(cache)
        let small = entryPath(cache, files["/small.txt"] ?? [])
        try setModified(small, secondsAgo: 86_400)
        try writeManifest("second.yaml", root: "second", paths: ["/small.txt"])
        XCTAssertEqual(try directory.haul(["sync", "second.yaml", "--cache", cache]).exitCode, 0)
        var info = stat()
        XCTAssertEqual(stat(small, &info), 0)
        XCTAssertGreaterThan(info.st_mtim.tv_sec, time(nil) - 600)
    }

    private func setModified(_ path: String, secondsAgo: Int) throws {
        let when = timespec(tv_sec: time(nil) - secondsAgo, tv_nsec: 0)
        var times = [when, when]
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    /// `plan` (and the plan a sync prints) says which downloads the cache will serve, and makes nothing.
    func testThePlanSaysWhatTheCacheServes() throws {
        let cache = directory.path("cache")
        try fillCache(cache)
        // One pinned file the cache does not have.
        files["/new.bin"] = Array("not in the cache yet\n".utf8)
        server.files?.set("/new.bin", files["/new.bin"] ?? [])
        try writeManifest("second.yaml", root: "second")
        try directory.write(
            "second.yaml",
            String(decoding: directory.read("second.yaml") ?? [], as: UTF8.self)
                + "  - url: \(server.url("/new.bin"))\n    dest: new.bin\n    sha256: \(sha256(files["/new.bin"] ?? []))\n"
        )

        let plan = try directory.haul(["plan", "second.yaml", "--cache", cache])
        XCTAssertEqual(plan.exitCode, 2, plan.stderr)
        for destination in ["big.bin", "small.txt", "a/b/deep.bin"] {
            XCTAssertTrue(plan.stdout.contains("+ \(destination) (missing; from the cache)"), plan.stdout)
        }
        XCTAssertTrue(plan.stdout.contains("+ new.bin (missing)\n"), plan.stdout)
        XCTAssertTrue(plan.stdout.contains("+ loose.txt (missing)\n"), plan.stdout)
        XCTAssertTrue(plan.stdout.contains("5 to download"), plan.stdout)
        XCTAssertTrue(plan.stdout.contains("3 of those from the cache"), plan.stdout)
        XCTAssertFalse(directory.exists("second"), "plan makes nothing")

        let json = try directory.haul(["plan", "second.yaml", "--cache", cache, "--json"])
        let changes = (events(json.stdout).first?["changes"] as? [[String: Any]]) ?? []
        XCTAssertEqual(
            Set(changes.filter { $0["from_cache"] as? Bool == true }.compactMap { $0["dest"] as? String }),
            ["big.bin", "small.txt", "a/b/deep.bin"])

        let without = try directory.haul(["plan", "second.yaml"])
        XCTAssertFalse(without.stdout.contains("from the cache"), "without --cache, nothing is said of one")
        XCTAssertEqual(server.requests.count, 0, "planning asks no server")
    }
}
