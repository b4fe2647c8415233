import HaulDigest
import HaulManifest
import HaulTestSupport
import XCTest

@testable import HaulStore

/// The state file's format: what it keeps, what it refuses, and that a refusal costs time, never correctness.
final class StateCacheTests: XCTestCase {
    private let digest = StreamingHasher.digest(Array("x".utf8), algorithm: .sha256)

    private func record(_ inode: UInt64, origin: Origin? = nil) -> StateRecord {
        StateRecord(identity: FileIdentity(device: 1, inode: inode, size: 1,
                                           modified: FileTime(seconds: 1_700_000_000, nanoseconds: 123_456_789),
                                           changed: FileTime(seconds: 1_700_000_000, nanoseconds: 987_654_321)),
                    digest: digest, origin: origin)
    }

    func testRecordsWithAndWithoutOriginRoundTripIncludingAwkwardNamesAndValidators() throws {
        let cache = StateCache(records: [
            "found.bin": record(1),
            "dir/with\ttab%and\nnewline.bin": record(2, origin: Origin(manifestKey: "m1", sourceKey: "s1",
                                                                         etag: "\"tag\twith tab\"", lastModified: nil)),
            "written.bin": record(3, origin: Origin(manifestKey: "m1", sourceKey: "s2", etag: nil,
                                                    lastModified: "Tue, 14 Nov 2023 22:13:21 GMT")),
        ])
        let bytes = StateFile.serialized(cache.records)
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).hasPrefix("haul-state\t3\n"))
        XCTAssertEqual(StateFile.parse(bytes), cache.records)
    }

    /// The same records make the same file: lines in byte order of their names, whatever the dictionary's order,
    /// including names that agree on their first 16 bytes, a name that is a prefix of another, and non-ASCII.
    func testLinesAreInByteOrderOfTheirNames() {
        let names = ["b.bin", "a", "ab", "abcdefghijklmnop", "abcdefghijklmnopq", "abcdefghijklmnopa", "abcdefghijklmno",
                     "data/2024/z.bin", "data/2024/a.bin", "é.bin", "e.bin", "Z.bin", "d000/t000010.bin", "d000/t000009.bin"]
        let cache = StateCache(records: Dictionary(uniqueKeysWithValues: names.enumerated().map { (DestinationKey($1), record(UInt64($0))) }))
        let lines = String(decoding: StateFile.serialized(cache.records), as: UTF8.self).split(separator: "\n").dropFirst()
        let written = lines.map { String($0.prefix { $0 != "\t" }) }
        XCTAssertEqual(written, names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        XCTAssertEqual(StateFile.parse(StateFile.serialized(cache.records)), cache.records)
    }

    /// A large state is formatted on two threads: the parts, joined, are exactly the one-thread file, in byte
    /// order across the seam.
    func testALargeStateFormattedInPartsIsTheSameFile() {
        let names = (0..<20_000).map { "d\($0 % 7)/file-\(String($0, radix: 36)).bin" }
        let cache = StateCache(records: Dictionary(uniqueKeysWithValues: names.enumerated().map { offset, name in
            (DestinationKey(name), record(UInt64(offset), origin: offset % 3 == 0 ? Origin(manifestKey: "m", sourceKey: "s\(offset)",
                                                                            etag: "\"e\(offset)\"", lastModified: nil) : nil))
        }))
        let parts = StateFile.serializedParts(cache.records, threads: 2)
        XCTAssertEqual(parts.count, 3, "the header, then one part per thread")
        let whole = Array(parts.joined())
        XCTAssertEqual(whole, StateFile.serializedParts(cache.records, threads: 1).first)
        let written = String(decoding: whole, as: UTF8.self).split(separator: "\n").dropFirst()
            .map { String($0.prefix { $0 != "\t" }) }
        XCTAssertEqual(written, names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        XCTAssertEqual(StateFile.parse(whole), cache.records)
    }

    /// Any time a file system can hold survives the round trip: seconds and nanoseconds are kept as a pair, never
    /// multiplied into one 64-bit count (which overflows past 2262 and before 1677).
    func testTimesFarFromNineteenSeventyRoundTrip() throws {
        let far = [FileTime(seconds: 10_413_792_000, nanoseconds: 5),            // 2300-01-01
                   FileTime(seconds: -11_676_096_000, nanoseconds: 999_999_999),  // 1600-01-01
                   FileTime(seconds: .max, nanoseconds: 999_999_999), FileTime(seconds: .min, nanoseconds: 0)]
        var records: [DestinationKey: StateRecord] = [:]
        for (index, time) in far.enumerated() {
            records[DestinationKey("f\(index)")] = StateRecord(identity: FileIdentity(device: 1, inode: UInt64(index), size: 1, modified: time,
                                                                     changed: far[(index + 1) % far.count]), digest: digest)
        }
        let cache = StateCache(records: records)
        XCTAssertEqual(StateFile.parse(StateFile.serialized(cache.records)), cache.records)
        XCTAssertTrue(String(decoding: StateFile.serialized(cache.records), as: UTF8.self).contains("\t10413792000.000000005\t-11676096000.999999999\t"))
        XCTAssertTrue(far[1] < far[0] && far[3] < far[1] && FileTime(seconds: 5, nanoseconds: 1) < FileTime(seconds: 5, nanoseconds: 2))
    }

    /// The previous format (times as whole nanoseconds) is still read, so an upgrade costs no re-hash.
    func testThePreviousFormatIsReadWithTimesInNanoseconds() throws {
        let parsed = try XCTUnwrap(StateFile.parse(Array("haul-state\t2\na.bin\t1\t2\t3\t1700000000123456789\t-1\t\(digest)\n".utf8)))
        let identity = try XCTUnwrap(parsed["a.bin"]).identity
        XCTAssertEqual(identity.modified, FileTime(seconds: 1_700_000_000, nanoseconds: 123_456_789))
        XCTAssertEqual(identity.changed, FileTime(seconds: -1, nanoseconds: 999_999_999))
        XCTAssertNil(StateFile.parse(Array("haul-state\t3\na.bin\t1\t2\t3\t1700000000123456789\t5.000000000\t\(digest)\n".utf8)),
                     "this version's times have a point and nine digits")
    }

    /// A journaled record replaces the state's unless the state already records that content from that writer; it
    /// never vouches for a file by identity (size -1 matches no file).
    func testAJournalFoldsIntoTheStateAsRecordsThatMustBeHashed() throws {
        let writer = Origin(manifestKey: "m")
        var cache = StateCache(records: ["same.bin": record(1, origin: writer), "older.bin": record(2, origin: writer)])
        let other = StreamingHasher.digest(Array("y".utf8), algorithm: .sha256)
        let unknown = OwnershipJournal.unknownIdentity
        cache.fold(["same.bin": StateRecord(identity: unknown, digest: digest, origin: writer),
                    "older.bin": StateRecord(identity: unknown, digest: other, origin: writer),
                    "new.bin": StateRecord(identity: unknown, digest: other, origin: writer)])
        XCTAssertEqual(cache.records["same.bin"], record(1, origin: writer), "already saved: kept as it is")
        XCTAssertEqual(cache.records["older.bin"], StateRecord(identity: unknown, digest: other, origin: writer))
        XCTAssertEqual(cache.records["new.bin"]?.identity.size, -1)
        XCTAssertEqual(StateFile.parse(StateFile.serialized(cache.records)), cache.records, "a folded record survives being saved")
    }

    /// Another version's file is not read at all; one damaged line costs only its own record (that file is
    /// hashed again), never the others'.
    func testAForeignFileIsRejectedWholeAndADamagedLineAlone() throws {
        let line = "a.bin\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)"
        let other = "b.bin\t6\t7\t8\t9.000000000\t10.000000000\t\(digest)"
        XCTAssertNotNil(StateFile.parse(Array("haul-state\t3\n\(line)\n".utf8)))
        XCTAssertNil(StateFile.parse(lines: Array("haul-state\t1\n\(line)\n".utf8)), "an older format")
        XCTAssertNil(StateFile.parse(lines: Array("haul-state\t4\n\(line)\n".utf8)), "a newer format")
        XCTAssertNil(StateFile.parse(lines: Array("garbage\u{0}\n\(line)\n".utf8)))
        for damaged in [
            "\(line)\tm",                          // a truncated origin
            "../escape\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)",  // a path that leaves root
            "/abs\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)",
            ".haul/state\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)",
            "\(line)\t\ts\t\t",                 // an origin without its manifest
            "a.bin\tx\t2\t3\t4.000000000\t5.000000000\t\(digest)",
            "a.bin\t1\t2\t3\t4.000000000\t5.000000000\tmd4:00",
            "a.bin\t1\t2\t3\t99999999999999999999999.000000000\t5.000000000\t\(digest)",
            "a.bin\t1\t2\t3\t4.5\t5.000000000\t\(digest)",
        ] {
            let parsed = try XCTUnwrap(StateFile.parse(lines: Array("haul-state\t3\n\(damaged)\n\(other)\n".utf8)), damaged)
            XCTAssertEqual(parsed.unreadable, 1, damaged)
            XCTAssertEqual(Array(parsed.records.keys), ["b.bin"], damaged)
            XCTAssertNil(StateFile.parse(Array("haul-state\t3\n\(damaged)\n".utf8)), "parse(_:) wants every line: \(damaged)")
        }
    }

    func testSaveAndLoadThroughTheFileSystem() throws {
        let directory = try TemporaryDirectory()
        try directory.makeDirectory(".haul")
        let cache = StateCache(records: ["a.bin": record(7, origin: Origin(manifestKey: "m", sourceKey: "s"))])
        try cache.save(root: directory.path)
        let (loaded, warning) = StateCache.load(root: directory.path)
        XCTAssertNil(warning)
        XCTAssertEqual(loaded, cache)
        try directory.write(".haul/state", "haul-state\t1\n")
        XCTAssertEqual(StateCache.load(root: directory.path).cache, StateCache())
        XCTAssertNotNil(StateCache.load(root: directory.path).warning)
    }

    /// A state saved right after its files were written is still later than each of them, so the next run trusts
    /// every record; a record dated in the future is not waited for.
    func testASavedStateIsLaterThanEveryFileItRecords() throws {
        let directory = try TemporaryDirectory()
        try directory.makeDirectory(".haul")
        try directory.write("a.bin", "x")
        let identity = try XCTUnwrap(FileIdentity.of(path: directory.path("a.bin")))
        let cache = StateCache(records: ["a.bin": StateRecord(identity: identity, digest: digest)])
        try cache.save(root: directory.path)
        let loaded = StateCache.load(root: directory.path).cache
        let saved = try XCTUnwrap(loaded.writtenAt)
        XCTAssertLessThan(identity.newestTime, saved)
        XCTAssertTrue(loaded.trusts(try XCTUnwrap(loaded.records["a.bin"]), for: identity))
        XCTAssertEqual(loaded, cache, "the content is what was saved")

        var future = identity
        future.modified = FileTime(seconds: saved.seconds + 3_600, nanoseconds: 0)
        try StateCache(records: ["a.bin": StateRecord(identity: future, digest: digest)]).save(root: directory.path)
        let later = StateCache.load(root: directory.path).cache
        XCTAssertLessThan(try XCTUnwrap(later.writtenAt), future.modified, "an hour ahead is not waited for")
        XCTAssertFalse(later.trusts(try XCTUnwrap(later.records["a.bin"]), for: future))
    }

    /// The stamp rewrites the file's last byte until its mtime is later than the time asked for, and leaves the
    /// bytes as they were.
    func testAStampMovesTheModificationTimePastTheOneAskedFor() throws {
        let directory = try TemporaryDirectory()
        try directory.write("f", "0123456789")
        let descriptor = open(directory.path("f"), O_RDWR)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        let before = try XCTUnwrap(FileIdentity.of(path: directory.path("f")))
        let target = FileTime(seconds: before.modified.seconds, nanoseconds: 999_999_999)
        XCTAssertTrue(FileSystemClock.stamp(descriptor, laterThan: target))
        let after = try XCTUnwrap(FileIdentity.of(path: directory.path("f")))
        XCTAssertLessThan(target, after.modified)
        XCTAssertEqual(directory.read("f"), Array("0123456789".utf8))
        XCTAssertFalse(FileSystemClock.stamp(descriptor, laterThan: FileTime(seconds: after.modified.seconds + 60, nanoseconds: 0)))
    }
}
