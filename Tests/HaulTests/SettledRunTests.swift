import Foundation
import Glibc
@testable import Haul
import HaulDigest
import HaulManifest
import HaulPlanner
import HaulTestSupport
import Synchronization
import XCTest

/// The settled fast path through the API, on real files and a loopback server: a snapshot is believed for its key
/// (fingerprint, haul's version, shard) and for the files and state it was written beside, and for nothing else.
final class SettledRunTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let bodies = (0..<3).map { index in Array("file \(index)\n".utf8) }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: bodies.indices.map { ("/f\($0)", bodies[$0]) }))
        try writeManifest()
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }

    private var manifestPath: String { directory.path("haul.yaml") }

    /// `extra`: lines appended to `files:`.
    private func writeManifest(_ extra: String = "") throws {
        let entries = bodies.indices.map { index in
            "  - {url: \(server.url("/f\(index)")), dest: d/f\(index), sha256: \(StreamingHasher.digest(bodies[index], algorithm: .sha256).hex)}\n"
        }.joined()
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles:\n" + entries + extra)
    }

    /// One `haul sync` through the API: read, validate, observe under the lock, plan, apply.
    @discardableResult
    private func sync(shard: Shard? = nil) throws -> SyncResult {
        let manifest = try ManifestLoader.load(ManifestLoader.read(path: manifestPath), environment: [:])
        var options = SyncOptions()
        options.shard = shard
        let sync = Sync(manifest: manifest, options: options)
        let observation = try sync.observe(.exclusive(wait: .no, holder: "SettledRunTests"))
        let result = sync.apply(sync.plan(observation), observed: observation, observer: nil)
        XCTAssertEqual(result.exitStatus, .success)
        return result
    }

    private func check(
        shard: Shard? = nil, prunes: Bool = false, adopts: Bool = false, rehash: Bool = false,
        version: String = HaulVersion.current
    ) throws -> SettledRun.Verdict? {
        SettledRun.check(
            try ManifestLoader.read(path: manifestPath), environment: [:], commandLineHeaders: [], shard: shard,
            prunes: prunes, adopts: adopts, rehash: rehash, access: .lookingOnly, listsPlan: false,
            freshnessDiffers: false, version: version)
    }

    /// Until the clock moves on, a file written just now is not older than a snapshot written just after it.
    private func waitForTheClock() { FileClock.waitForATick() }

    func testASnapshotIsBelievedForItsKeyFilesAndStateAlone() throws {
        XCTAssertNil(try check(), "nothing settled yet")
        try sync()
        waitForTheClock()
        try sync()
        let verdict = try XCTUnwrap(try check())
        XCTAssertEqual(verdict.plan.upToDateCount, 3)
        XCTAssertFalse(verdict.plan.hasChanges)
        XCTAssertEqual(verdict.plan.tally.upToDate, 3)

        XCTAssertNil(try check(version: "0.0.0-another"), "another haul's snapshot")
        XCTAssertNil(try check(shard: Shard(index: 1, count: 2)), "a shard has its own")
        XCTAssertNil(try check(prunes: true), "pruning looks at the whole state")
        XCTAssertNil(try check(adopts: true), "adopting changes owners in the state")
        XCTAssertNil(try check(rehash: true))

        // The state saved again (the same bytes, a new identity), then a journal left beside it.
        let state = try XCTUnwrap(directory.read("out/.haul/state"))
        try directory.write("out/.haul/state", state)
        XCTAssertNil(try check(), "another state")
        try sync()
        waitForTheClock()
        try sync()
        XCTAssertNotNil(try check())
        try directory.write("out/.haul/journal", "")
        XCTAssertNil(try check(), "a journal to retire")
        try FileManager.default.removeItem(atPath: directory.path("out/.haul/journal"))
        XCTAssertNotNil(try check())

        // A snapshot cut short, as a crash would leave it.
        let folder = directory.path("out/.haul/settled")
        let name = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: folder).first)
        let whole = try XCTUnwrap(directory.read("out/.haul/settled/\(name)"))
        try directory.write("out/.haul/settled/\(name)", Array(whole.dropLast(4)))
        XCTAssertNil(try check(), "no trailer, no snapshot")
        try directory.write("out/.haul/settled/\(name)", whole)
        XCTAssertNotNil(try check())
    }

    /// A file changed in place (same size), replaced by a symlink, or removed: the snapshot no longer holds, and the
    /// run that repairs it settles again.
    func testAnyFileNotAsRecordedSendsTheRunTheWholeWay() throws {
        try sync()
        waitForTheClock()
        try sync()
        XCTAssertNotNil(try check())
        try directory.write("out/d/f1", Array("FILE 1\n".utf8))
        XCTAssertNil(try check(), "edited in place")
        let repaired = try sync()
        XCTAssertEqual(repaired.counts.fetched, 1)
        XCTAssertEqual(directory.read("out/d/f1"), bodies[1])
        waitForTheClock()
        try sync()
        XCTAssertNotNil(try check())

        try FileManager.default.removeItem(atPath: directory.path("out/d/f2"))
        try FileManager.default.createSymbolicLink(atPath: directory.path("out/d/f2"), withDestinationPath: "f0")
        XCTAssertNil(try check(), "a symlink where the file was")
        try FileManager.default.removeItem(atPath: directory.path("out/d/f2"))
        XCTAssertNil(try check(), "missing")

        // The folder swapped for a symlink to a copy outside root: same files, same identities, still refused.
        try sync()
        waitForTheClock()
        try sync()
        XCTAssertNotNil(try check())
        XCTAssertEqual(rename(directory.path("out/d"), directory.path("outside")), 0)
        try FileManager.default.createSymbolicLink(
            atPath: directory.path("out/d"), withDestinationPath: directory.path("outside"))
        XCTAssertNil(try check(), "a parent leading outside root")
    }

    /// A run that changes anything forgets the snapshots of every shard of the manifest: what it wrote may change what
    /// they would decide (here: files they no longer list once the manifest is as before).
    func testARunThatChangesAnythingForgetsEveryShardsSnapshot() throws {
        let shards = [Shard(index: 1, count: 2), Shard(index: 2, count: 2)].compactMap { $0 }
        // Until every shard's files are older than the state the other shards saved, a shard's run saves the state
        // again to prove them, which the other's snapshot then no longer matches: a few rounds settle them all.
        for _ in 0..<3 {
            for shard in shards { try sync(shard: shard) }
            waitForTheClock()
        }
        for shard in shards { XCTAssertNotNil(try check(shard: shard), "\(shard)") }
        for shard in shards { try sync(shard: shard) }
        for shard in shards { XCTAssertNotNil(try check(shard: shard), "a shard's no-op keeps the others settled") }

        server.files?.set("/extra", Array("extra\n".utf8))
        try writeManifest(
            "  - {url: \(server.url("/extra")), dest: e/extra, sha256: \(StreamingHasher.digest(Array("extra\n".utf8), algorithm: .sha256).hex)}\n"
        )
        let extraShard = try XCTUnwrap(shards.first { $0.contains(try XCTUnwrap(DestinationPath("e/extra"))) })
        XCTAssertEqual(try sync(shard: extraShard).counts.fetched, 1)
        try writeManifest()
        for shard in shards { XCTAssertNil(try check(shard: shard), "\(shard): forgotten") }
    }

    /// Only what counts alone can tell is settled: an unpinned entry its server gave no freshness (asked about on
    /// every run) or a manifest with warnings (said on every run) leave no snapshot.
    func testUnpinnedEntriesWithoutFreshnessAndWarningsLeaveNoSnapshot() throws {
        for extra in [
            "  - {url: \(server.url("/f0")), dest: unpinned}\n",
            "  - {url: \(server.url("/f0")), dest: weak, checksum: \"md5:\(StreamingHasher.digest(bodies[0], algorithm: .md5).hex)\"}\n",
        ] {
            try? FileManager.default.removeItem(atPath: directory.path("out"))
            try writeManifest(extra)
            try sync()
            waitForTheClock()
            try sync()
            XCTAssertNil(try check(), extra)
        }
    }

    /// An unpinned entry kept because its server said it stays fresh (`max-age`) is settled until the first such
    /// entry is due, on a clock not set back, for a run that would ask the same way and lists no plan.
    func testAnUnpinnedEntryKeptFreshIsSettledUntilItIsDue() throws {
        let feed = Array("{\"v\":1}".utf8)
        let fresh = try LoopbackHTTPServer(files: StaticFiles(["/feed.json": feed]), maxAge: 600)
        defer { fresh.stop() }
        try writeManifest("  - {url: \(fresh.url("/feed.json")), dest: feed.json}\n")
        let start = 1_800_000_000.0
        let clock = Mutex(start)
        func sync() throws {
            let manifest = try ManifestLoader.load(ManifestLoader.read(path: manifestPath), environment: [:])
            var options = SyncOptions()
            options.wallClock = { clock.withLock { $0 } }
            let sync = Sync(manifest: manifest, options: options)
            let observation = try sync.observe(.exclusive(wait: .no, holder: "SettledRunTests"))
            XCTAssertEqual(
                sync.apply(sync.plan(observation), observed: observation, observer: nil).exitStatus, .success)
        }
        func check(
            at now: Double, listsPlan: Bool = false, freshnessDiffers: Bool = false
        ) throws -> SettledRun.Verdict? {
            SettledRun.check(
                try ManifestLoader.read(path: manifestPath), environment: [:], commandLineHeaders: [], shard: nil,
                prunes: false, adopts: false, rehash: false, access: .lookingOnly, listsPlan: listsPlan,
                freshnessDiffers: freshnessDiffers, now: now)
        }
        try sync()
        XCTAssertNil(try check(at: start + 1), "fetched this run: its freshness is the next run's to judge")
        clock.withLock { $0 = start + 100 }
        waitForTheClock()
        try sync()
        XCTAssertEqual(fresh.requests.count, 1, "kept fresh, not asked")
        let verdict = try XCTUnwrap(try check(at: start + 101))
        XCTAssertEqual(verdict.plan.upToDateCount, 4)
        XCTAssertNotNil(try check(at: start + 599))
        XCTAssertNil(try check(at: start + 600), "due: its server is asked again")
        XCTAssertNil(try check(at: start - 3600), "a clock set back before the freshness was judged")
        XCTAssertNil(try check(at: start + 101, listsPlan: true), "plan shows a line for it")
        XCTAssertNil(try check(at: start + 101, freshnessDiffers: true), "--refresh, or rewritten sources")
    }
}
