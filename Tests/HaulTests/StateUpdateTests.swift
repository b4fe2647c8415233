import Glibc
import HaulDigest
import HaulFailures
import HaulManifest
import HaulPlanner
import HaulStore
import HaulTestSupport
import XCTest
@testable import Haul

/// What the state records after a run (`Sync.stateUpdate`), from the run's outcomes as values: real files and a
/// real state under a temporary root, no server, the time given.
final class StateUpdateTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let clock: @Sendable () -> Double = { 1_000_000 }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func digest(_ text: String) -> Digest { StreamingHasher.digest(Array(text.utf8), algorithm: .sha256) }

    /// `pinned.bin` (pinned) and `served.bin` (unpinned, confirmed by its server at 500,000 s).
    private func manifest() throws -> Manifest {
        let entries: [(String, Checksum?)] = [
            ("pinned.bin", Checksum(digest: digest("pinned"), notation: .hexKey)),
            ("served.bin", nil),
        ]
        let files = try entries.enumerated().map { index, entry in
            FileEntry(
                index: index, url: TemplatedString(literal: "http://127.0.0.1:1/\(entry.0)"), mirrors: [],
                destination: try XCTUnwrap(DestinationPath(entry.0)), checksum: entry.1, size: nil,
                mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: [],
                location: SourceLocation(line: index + 4, column: 5))
        }
        return Manifest(
            sourcePath: directory.path + "/haul.yaml", version: 1, root: directory.path, prune: false,
            files: files, warnings: [])
    }

    private let servedOrigin = Origin(
        manifestKey: "haul.yaml", sourceKey: "http://127.0.0.1:1/served.bin", etag: "\"v1\"",
        checkedAt: 500_000, freshUntil: 500_060)

    /// Both files on disk and recorded as they are, plus records of `extra` destinations (files gone since).
    private func recordedRoot(extra: [String] = []) throws -> (Sync, Observation) {
        try directory.write("pinned.bin", "pinned")
        try directory.write("served.bin", "served")
        var records: [DestinationKey: StateRecord] = [:]
        for (name, origin) in [("pinned.bin", Origin(manifestKey: "haul.yaml")), ("served.bin", servedOrigin)] {
            let identity = try XCTUnwrap(FileIdentity.of(path: directory.path(name)))
            records[DestinationKey(name)] = StateRecord(
                identity: identity, digest: digest(name == "pinned.bin" ? "pinned" : "served"),
                origin: origin)
        }
        for name in extra {
            records[DestinationKey(name)] = StateRecord(
                identity: try XCTUnwrap(FileIdentity.of(path: directory.path("pinned.bin"))),
                digest: digest(name), origin: Origin(manifestKey: "haul.yaml"))
        }
        // Written after the files' clock tick, so that the records vouch for them.
        FileClock.waitForATick()
        try StateCache(records: records).save(in: PrivateArea.create(root: directory.path))
        var options = SyncOptions()
        options.wallClock = clock
        let sync = Sync(manifest: try manifest(), options: options)
        return (sync, try sync.observe(.lookingOnly))
    }

    private func update(
        _ sync: Sync, _ observation: Observation, _ outcomes: [EntryOutcome],
        prunes: [(DestinationPath, PruneOutcome)] = [], now: FileTime = .now
    ) -> Sync.StateUpdate {
        var result = SyncResult(plan: sync.plan(observation), outcomes: outcomes, seconds: 0)
        result.prunes = prunes
        let authorship = Authorship(manifestKey: observation.manifestKey, key: nil, rewrites: .none, wallClock: clock)
        return Sync.stateUpdate(observation, result, authorship: authorship, now: now)
    }

    private func changed(_ update: Sync.StateUpdate) -> [String: StateRecord?] {
        Dictionary(update.changes.records.map { ($0.0.text, $0.1) }, uniquingKeysWith: { _, last in last })
    }

    func testANoOpChangesNothing() throws {
        let (sync, observation) = try recordedRoot()
        XCTAssertEqual(observation.vouched, [true, true])
        let update = update(sync, observation, [.upToDate, .upToDate])
        XCTAssertTrue(update.changes.records.isEmpty)
        XCTAssertFalse(update.settles)
    }

    func testA304ConfirmsTheRecordAtTheRunsTimeAndKeepsTheRest() throws {
        let (sync, observation) = try recordedRoot()
        let changes = changed(update(sync, observation, [.upToDate, .notModified(freshFor: 60)]))
        XCTAssertEqual(Array(changes.keys), ["served.bin"])
        let record = try XCTUnwrap(changes["served.bin"] ?? nil)
        XCTAssertEqual(record.digest, digest("served"))
        XCTAssertEqual(record.origin?.checkedAt, 1_000_000, "confirmed now, by the run's clock")
        XCTAssertEqual(record.origin?.freshUntil, 1_000_060)
        XCTAssertEqual(record.origin?.etag, "\"v1\"", "the validator it was confirmed with stays")

        let unbounded = changed(update(sync, observation, [.upToDate, .notModified(freshFor: nil)]))
        XCTAssertEqual(unbounded["served.bin"]??.origin?.checkedAt, 1_000_000)
        XCTAssertNil(unbounded["served.bin"]??.origin?.freshUntil, "no max-age: fresh for no time")
    }

    func testAFailedEntryRecordsWhatIsOnDiskNotWhatWasWanted() throws {
        let (sync, observation) = try recordedRoot()
        let failure = EntryFailure.commit(StoreError(operation: .renameInto, path: "pinned.bin", errno: EACCES))
        let unchanged = update(sync, observation, [.failed(failure), .upToDate])
        XCTAssertTrue(unchanged.changes.records.isEmpty, "the old file is still there, as recorded")

        // Changed by the user since: the failed sync records the file as it is, and no longer as haul's.
        FileClock.waitForATick()
        try directory.write("pinned.bin", "edited")
        let (_, edited) = try (sync, sync.observe(.lookingOnly))
        XCTAssertEqual(edited.vouched, [false, true])
        let changes = changed(update(sync, edited, [.failed(failure), .upToDate]))
        XCTAssertEqual(Array(changes.keys), ["pinned.bin"])
        XCTAssertEqual(changes["pinned.bin"]??.digest, digest("edited"))
        XCTAssertNil(changes["pinned.bin"]??.origin, "not what haul wrote")

        // Gone: nothing is recorded of it.
        XCTAssertEqual(unlink(directory.path("pinned.bin")), 0)
        let gone = try sync.observe(.lookingOnly)
        let forgotten = changed(update(sync, gone, [.failed(failure), .upToDate]))
        XCTAssertEqual(Array(forgotten.keys), ["pinned.bin"])
        XCTAssertEqual(forgotten["pinned.bin"], .some(nil))
    }

    func testAPrunedRecordGoesUnlessThePruneFailed() throws {
        let (sync, observation) = try recordedRoot(extra: ["old.bin", "stuck.bin", "mine.bin", "vanished.bin"])
        let prunes: [(DestinationPath, PruneOutcome)] = try [
            (XCTUnwrap(DestinationPath("old.bin")), .deleted),
            (
                XCTUnwrap(DestinationPath("stuck.bin")),
                .failed(StoreError(operation: .delete, path: "stuck.bin", errno: EBUSY))
            ),
            (XCTUnwrap(DestinationPath("mine.bin")), .kept(.modified)),
            (XCTUnwrap(DestinationPath("vanished.bin")), .forgotten),
        ]
        let changes = changed(update(sync, observation, [.upToDate, .upToDate], prunes: prunes))
        XCTAssertEqual(changes.keys.sorted(), ["mine.bin", "old.bin", "vanished.bin"])
        XCTAssertTrue(changes.values.allSatisfy { $0 == nil }, "forgotten, not rewritten")
    }

    /// A file dated after the state was written cannot be vouched for by it: it is hashed, found the same, and the
    /// state is worth writing again once the file's times are in the past, so that the next run trusts it.
    func testARecordTooRecentToTrustSettlesByAWriteNotAChange() throws {
        try directory.write("pinned.bin", "pinned")
        try directory.write("served.bin", "served")
        var later = FileTime.now
        later.seconds += 3600
        var times = [
            timespec(tv_sec: Int(later.seconds), tv_nsec: 0), timespec(tv_sec: Int(later.seconds), tv_nsec: 0),
        ]
        XCTAssertEqual(utimensat(AT_FDCWD, directory.path("pinned.bin"), &times, 0), 0)
        let identity = try XCTUnwrap(FileIdentity.of(path: directory.path("pinned.bin")))
        let servedIdentity = try XCTUnwrap(FileIdentity.of(path: directory.path("served.bin")))
        FileClock.waitForATick()
        try StateCache(records: [
            DestinationKey("pinned.bin"): StateRecord(
                identity: identity, digest: digest("pinned"), origin: Origin(manifestKey: "haul.yaml")),
            DestinationKey("served.bin"): StateRecord(
                identity: servedIdentity, digest: digest("served"), origin: servedOrigin),
        ]).save(in: PrivateArea.create(root: directory.path))
        var options = SyncOptions()
        options.wallClock = clock
        let sync = Sync(manifest: try manifest(), options: options)
        let observation = try sync.observe(.lookingOnly)
        XCTAssertEqual(observation.vouched, [false, true], "dated an hour ahead: hashed")

        let now = update(sync, observation, [.upToDate, .upToDate])
        XCTAssertTrue(now.changes.records.isEmpty, "found as recorded: the same record")
        XCTAssertFalse(now.settles, "its times are still ahead: writing the state again would not help")

        var afterIt = later
        afterIt.seconds += 1
        let then = update(sync, observation, [.upToDate, .upToDate], now: afterIt)
        XCTAssertTrue(then.changes.records.isEmpty)
        XCTAssertTrue(then.settles, "written after its times, the state vouches for it")
    }
}
