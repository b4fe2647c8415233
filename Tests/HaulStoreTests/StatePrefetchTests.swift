import Glibc
import HaulDigest
import HaulManifest
import XCTest

@testable import HaulStore

/// Looking at destinations while the manifest is still being read: what is kept must be exactly what the full
/// observation would say, and a sync must hold the run lock before it looks.
final class StatePrefetchTests: XCTestCase {
    private func entry(_ index: Int, _ dest: String, pinned: Bool = true) throws -> FileEntry {
        let checksum = pinned ? Checksum(digest: StreamingHasher.digest(Array(dest.utf8), algorithm: .sha256), notation: .hexKey) : nil
        return FileEntry(index: index, url: TemplatedString(literal: "http://127.0.0.1:1/\(dest)"), mirrors: [],
                         destination: try XCTUnwrap(DestinationPath(dest)), checksum: checksum, size: nil,
                         mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: [],
                         location: SourceLocation(line: index + 1, column: 1))
    }

    /// A state recording each of `paths` as it is on disk now.
    private func saveState(of paths: [String], in scratch: Scratch) throws -> StateCache {
        var records: [DestinationKey: StateRecord] = [:]
        for path in paths {
            let identity = try XCTUnwrap(FileIdentity.of(path: scratch.at(path)), path)
            records[DestinationKey(path)] = StateRecord(identity: identity, digest: StreamingHasher.digest(try XCTUnwrap(scratch.read(path)),
                                                                                          algorithm: .sha256))
        }
        let cache = StateCache(records: records)
        try scratch.mkdir(".haul")
        try cache.save(root: scratch.path)
        return cache
    }

    /// A prefetch that has been told `root` and `entries`, as the parser would tell it.
    private func reading(_ entries: [FileEntry], root: String, looking: StatePrefetch.Looking = .withoutLock,
                         ended: Bool = true) -> StatePrefetch {
        let prefetch = StatePrefetch(looking: looking)
        prefetch.start(root: root)
        for entry in entries { prefetch.entryRead(entry) }
        if ended { prefetch.endEntries() }
        return prefetch
    }

    private func glance(_ entries: [FileEntry], root: String, looking: StatePrefetch.Looking = .withoutLock)
        -> (prefetch: StatePrefetch, cache: StateCache, records: [StateRecord?]?, glances: Glances?) {
        let prefetch = reading(entries, root: root, looking: looking)
        let lock = prefetch.takeLock(root: root)
        defer { withExtendedLifetime(lock) {} }
        let (cache, _, glances) = prefetch.take(root: root)
        return (prefetch, cache, glances?.records(for: entries), glances)
    }

    func testOnlyFilesExactlyAsRecordedAreKeptAndTheyAreWhatTheObserverSays() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        for name in ["same.bin", "unpinned.bin", "touched.bin", "gone.bin", "now-a-dir.bin", "inside/x.bin"] {
            try scratch.write(name, "content of \(name)")
        }
        let cache = try saveState(of: ["same.bin", "unpinned.bin", "touched.bin", "gone.bin", "now-a-dir.bin", "inside/x.bin"],
                                  in: scratch)
        try scratch.write("new.bin", "not in the state")
        // Changed since the state was written: new content of the same size, gone, a directory in the way, and a
        // parent moved outside root and replaced by a symlink to it (x.bin keeps its identity, but is not under
        // root any more).
        usleep(10_000)
        try scratch.write("touched.bin", "CONTENT OF touched.bin")
        XCTAssertEqual(unlink(scratch.at("gone.bin")), 0)
        XCTAssertEqual(unlink(scratch.at("now-a-dir.bin")), 0)
        try scratch.mkdir("now-a-dir.bin")
        XCTAssertEqual(rename(scratch.at("inside"), outside.at("inside")), 0)
        try scratch.symlink("inside", to: outside.at("inside"))

        let names = ["same.bin", "unpinned.bin", "touched.bin", "gone.bin", "now-a-dir.bin", "inside/x.bin", "new.bin"]
        let entries = try names.enumerated().map { try entry($0.offset, $0.element, pinned: $0.element != "unpinned.bin") }
        let result = glance(entries, root: scratch.path)
        XCTAssertEqual(result.cache, cache)
        let records = try XCTUnwrap(result.records)
        let glances = try XCTUnwrap(result.glances)
        XCTAssertEqual(records.count, entries.count)
        XCTAssertEqual(names.indices.filter { records[$0] != nil }.map { names[$0] }, ["same.bin", "unpinned.bin"])

        let requests = entries.map { ObservationRequest(entry: $0, cache: result.cache) }
        let full = LocalObserver(root: scratch.path).observeAllRecording(requests, concurrency: 1)
        for index in entries.indices {
            guard let record = records[index] else { continue }
            XCTAssertEqual(glances.file(index: index, record: record), full[index].file, names[index])
            XCTAssertEqual(record, full[index].record, names[index])
        }
        guard case .escapesRoot = full[5].file else { return XCTFail("inside/x.bin: \(full[5].file)") }
    }

    func testAnEntryThatIsNotTheOneSeenAtItsIndexGetsNothing() throws {
        let scratch = try Scratch()
        try scratch.write("a.bin", "a")
        try scratch.write("b.bin", "b")
        _ = try saveState(of: ["a.bin", "b.bin"], in: scratch)
        let prefetch = reading([try entry(0, "a.bin"), try entry(1, "b.bin")], root: scratch.path)
        let glances = try XCTUnwrap(prefetch.take(root: scratch.path).glances)
        // The manifest in the end lists them the other way round (an entry re-read, say).
        let records = glances.records(for: [try entry(0, "b.bin"), try entry(1, "a.bin")])
        XCTAssertEqual(records.count, 2)
        XCTAssertNil(records[0] ?? nil)
        XCTAssertNil(records[1] ?? nil)
    }

    func testASyncTakesTheRunLockBeforeLookingAndHandsItOver() throws {
        let scratch = try Scratch()
        try scratch.write("a.bin", "a")
        _ = try saveState(of: ["a.bin"], in: scratch)
        let prefetch = reading([try entry(0, "a.bin")], root: scratch.path, looking: .underLock(holder: "pid 1, test"))
        var lock = prefetch.takeLock(root: scratch.path)
        XCTAssertNotNil(lock)
        XCTAssertThrowsError(try RunLock(root: scratch.path, wait: false, holder: "second")) { error in
            guard case RunLock.Failure.busy(_, let holder) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(holder, "pid 1, test")
        }
        XCTAssertEqual(try XCTUnwrap(prefetch.take(root: scratch.path).glances).records(for: [try entry(0, "a.bin")]).count, 1)
        lock = nil
        XCTAssertNoThrow(try RunLock(root: scratch.path, wait: false, holder: "after"))
    }

    func testABusyRootIsNotLookedAtButItsStateIsStillRead() throws {
        let scratch = try Scratch()
        try scratch.write("a.bin", "a")
        let cache = try saveState(of: ["a.bin"], in: scratch)
        let holder = try RunLock(root: scratch.path, wait: false, holder: "another run")
        let result = glance([try entry(0, "a.bin")], root: scratch.path, looking: .underLock(holder: "test"))
        XCTAssertNil(result.prefetch.takeLock(root: scratch.path))
        XCTAssertNil(result.glances, "nothing may be looked at while another run holds the root")
        XCTAssertEqual(result.cache, cache)
        withExtendedLifetime(holder) {}
    }

    func testALockTakenForARootTheManifestDidNotEndUpWithIsReleased() throws {
        let scratch = try Scratch()
        try scratch.write("a.bin", "a")
        _ = try saveState(of: ["a.bin"], in: scratch)
        let prefetch = reading([try entry(0, "a.bin")], root: scratch.path, looking: .underLock(holder: "test"), ended: false)
        XCTAssertNil(prefetch.takeLock(root: scratch.at("elsewhere")))
        XCTAssertNil(prefetch.take(root: scratch.at("elsewhere")).glances)
        XCTAssertNoThrow(try RunLock(root: scratch.path, wait: false, holder: "next"))
    }

    /// A first sync has no state: the entries the parser goes on reading must not queue up (100,000 of them).
    func testWithoutAStateNothingQueuesUp() throws {
        let scratch = try Scratch()
        let prefetch = StatePrefetch(looking: .underLock(holder: "test"))
        prefetch.start(root: scratch.path)
        for _ in 0..<200 where !prefetch.hasLoaded { usleep(5_000) }
        XCTAssertTrue(prefetch.hasLoaded)
        for index in 0..<1000 { prefetch.entryRead(try entry(index, "f\(index).bin")) }
        XCTAssertEqual(prefetch.queuedEntryCount, 0)
        XCTAssertNil(prefetch.takeLock(root: scratch.path), "no state: the sync takes the lock itself")
        XCTAssertNil(prefetch.take(root: scratch.path).glances)
    }

    func testARewrittenStateDiscardsWhatWasSeen() throws {
        let scratch = try Scratch()
        try scratch.write("a.bin", "a")
        _ = try saveState(of: ["a.bin"], in: scratch)
        let prefetch = reading([try entry(0, "a.bin")], root: scratch.path)
        XCTAssertNil(prefetch.takeLock(root: scratch.path), "no lock without a sync")  // and the reading is done
        usleep(10_000)
        let rewritten = StateCache(records: [:])
        try rewritten.save(root: scratch.path)
        let taken = prefetch.take(root: scratch.path)
        XCTAssertEqual(taken.cache, rewritten)
        XCTAssertNil(taken.glances)
    }
}
