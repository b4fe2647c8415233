import HaulDigest
import HaulManifest
import HaulTestSupport
import XCTest

@testable import HaulStore

/// The state file's format: what it keeps, what it refuses, and that a refusal costs time, never correctness.
final class StateCacheTests: XCTestCase {
    private let digest = StreamingHasher.digest(Array("x".utf8), algorithm: .sha256)

    private func record(_ inode: UInt64, origin: Origin? = nil) -> StateRecord {
        StateRecord(
            identity: FileIdentity(
                device: 1, inode: inode, size: 1,
                modified: FileTime(seconds: 1_700_000_000, nanoseconds: 123_456_789),
                changed: FileTime(seconds: 1_700_000_000, nanoseconds: 987_654_321)),
            digest: digest, origin: origin)
    }

    func testRecordsWithAndWithoutOriginRoundTripIncludingAwkwardNamesAndValidators() throws {
        let cache = StateCache(records: [
            "found.bin": record(1),
            "dir/with\ttab%and\nnewline.bin": record(
                2,
                origin: Origin(
                    manifestKey: "m1", sourceKey: "s1",
                    etag: "\"tag\twith tab\"", lastModified: nil)),
            "written.bin": record(
                3,
                origin: Origin(
                    manifestKey: "m1", sourceKey: "s2", etag: nil,
                    lastModified: "Tue, 14 Nov 2023 22:13:21 GMT")),
            "tagged.bin": StateRecord(
                identity: record(4).identity, digest: digest, origin: Origin(manifestKey: "m2"),
                ownerTag: OwnerTag(digest), unsynced: true),
        ])
        let bytes = StateFile.serialized(cache.records)
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).hasPrefix("haul-state\t5\n"))
        XCTAssertTrue(
            String(decoding: bytes, as: UTF8.self).contains("\tm2\t\t\t\t\t\t\(digest.hex.prefix(32))\tunsynced\n"))
        XCTAssertEqual(StateFile.parse(bytes), cache.records)
    }

    /// The same records make the same file: lines in byte order of their names, whatever the dictionary's order,
    /// including names that agree on their first 16 bytes, a name that is a prefix of another, and non-ASCII.
    func testLinesAreInByteOrderOfTheirNames() {
        let names = [
            "b.bin", "a", "ab", "abcdefghijklmnop", "abcdefghijklmnopq", "abcdefghijklmnopa", "abcdefghijklmno",
            "data/2024/z.bin", "data/2024/a.bin", "é.bin", "e.bin", "Z.bin", "d000/t000010.bin", "d000/t000009.bin",
        ]
        let cache = StateCache(
            records: Dictionary(
                uniqueKeysWithValues: names.enumerated().map { (DestinationKey($1), record(UInt64($0))) }))
        let lines = String(decoding: StateFile.serialized(cache.records), as: UTF8.self).split(separator: "\n")
            .dropFirst()
        let written = lines.map { String($0.prefix { $0 != "\t" }) }
        XCTAssertEqual(written, names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        XCTAssertEqual(StateFile.parse(StateFile.serialized(cache.records)), cache.records)
    }

    /// A large state is formatted on two threads: the parts, joined, are exactly the one-thread file, in byte
    /// order across the seam.
    func testALargeStateFormattedInPartsIsTheSameFile() {
        let names = (0..<20_000).map { "d\($0 % 7)/file-\(String($0, radix: 36)).bin" }
        let cache = StateCache(
            records: Dictionary(
                uniqueKeysWithValues: names.enumerated().map { offset, name in
                    (
                        DestinationKey(name),
                        record(
                            UInt64(offset),
                            origin: offset % 3 == 0
                                ? Origin(
                                    manifestKey: "m", sourceKey: "s\(offset)",
                                    etag: "\"e\(offset)\"", lastModified: nil) : nil)
                    )
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
        let far = [
            FileTime(seconds: 10_413_792_000, nanoseconds: 5),  // 2300-01-01
            FileTime(seconds: -11_676_096_000, nanoseconds: 999_999_999),  // 1600-01-01
            FileTime(seconds: .max, nanoseconds: 999_999_999), FileTime(seconds: .min, nanoseconds: 0),
        ]
        var records: [DestinationKey: StateRecord] = [:]
        for (index, time) in far.enumerated() {
            records[DestinationKey("f\(index)")] = StateRecord(
                identity: FileIdentity(
                    device: 1, inode: UInt64(index), size: 1, modified: time,
                    changed: far[(index + 1) % far.count]), digest: digest)
        }
        let cache = StateCache(records: records)
        XCTAssertEqual(StateFile.parse(StateFile.serialized(cache.records)), cache.records)
        XCTAssertTrue(
            String(decoding: StateFile.serialized(cache.records), as: UTF8.self).contains(
                "\t10413792000.000000005\t-11676096000.999999999\t"))
        XCTAssertTrue(
            far[1] < far[0] && far[3] < far[1]
                && FileTime(seconds: 5, nanoseconds: 1) < FileTime(seconds: 5, nanoseconds: 2))
    }

    /// The previous format (times as whole nanoseconds) is still read, so an upgrade costs no re-hash.
    func testThePreviousFormatIsReadWithTimesInNanoseconds() throws {
        let parsed = try XCTUnwrap(
            StateFile.parse(Array("haul-state\t2\na.bin\t1\t2\t3\t1700000000123456789\t-1\t\(digest)\n".utf8)))
        let identity = try XCTUnwrap(parsed["a.bin"]).identity
        XCTAssertEqual(identity.modified, FileTime(seconds: 1_700_000_000, nanoseconds: 123_456_789))
        XCTAssertEqual(identity.changed, FileTime(seconds: -1, nanoseconds: 999_999_999))
        XCTAssertNil(
            StateFile.parse(Array("haul-state\t3\na.bin\t1\t2\t3\t1700000000123456789\t5.000000000\t\(digest)\n".utf8)),
            "this version's times have a point and nine digits")
    }

    /// A journaled record replaces the state's unless the state already records that content from that writer; it
    /// never vouches for a file by identity (size -1 matches no file).
    func testAJournalFoldsIntoTheStateAsRecordsThatMustBeHashed() throws {
        let writer = Origin(manifestKey: "m")
        var cache = StateCache(records: ["same.bin": record(1, origin: writer), "older.bin": record(2, origin: writer)])
        let other = StreamingHasher.digest(Array("y".utf8), algorithm: .sha256)
        let unknown = OwnershipJournal.unknownIdentity
        cache.fold([
            "same.bin": StateRecord(identity: unknown, digest: digest, origin: writer),
            "older.bin": StateRecord(identity: unknown, digest: other, origin: writer),
            "new.bin": StateRecord(identity: unknown, digest: other, origin: writer),
        ])
        XCTAssertEqual(cache.records["same.bin"], record(1, origin: writer), "already saved: kept as it is")
        XCTAssertEqual(cache.records["older.bin"], StateRecord(identity: unknown, digest: other, origin: writer))
        XCTAssertEqual(cache.records["new.bin"]?.identity.size, -1)
        XCTAssertEqual(
            StateFile.parse(StateFile.serialized(cache.records)), cache.records, "a folded record survives being saved")
    }

    /// Another version's file is not read at all; one damaged line costs only its own record (that file is
    /// hashed again), never the others'.
    func testAForeignFileIsRejectedWholeAndADamagedLineAlone() throws {
        let line = "a.bin\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)"
        let other = "b.bin\t6\t7\t8\t9.000000000\t10.000000000\t\(digest)"
        XCTAssertNotNil(StateFile.parse(Array("haul-state\t3\n\(line)\n".utf8)))
        XCTAssertNil(StateFile.parse(lines: Array("haul-state\t1\n\(line)\n".utf8)), "an older format")
        XCTAssertNil(StateFile.parse(lines: Array("haul-state\t6\n\(line)\n".utf8)), "a newer format")
        XCTAssertNil(StateFile.parse(lines: Array("garbage\u{0}\n\(line)\n".utf8)))
        for damaged in [
            "\(line)\tm",  // a truncated origin
            "../escape\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)",  // a path that leaves root
            "/abs\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)",
            ".haul/state\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)",
            "\(line)\t\ts\t\t",  // an origin without its manifest
            "a.bin\tx\t2\t3\t4.000000000\t5.000000000\t\(digest)",
            "a.bin\t1\t2\t3\t4.000000000\t5.000000000\tmd4:00",
            "a.bin\t1\t2\t3\t99999999999999999999999.000000000\t5.000000000\t\(digest)",
            "a.bin\t1\t2\t3\t4.5\t5.000000000\t\(digest)",
            "\(line)\tm\t\t\t\t\t\tnot-hex\t",  // an owner tag that is not one
            "\(line)\tm\t\t\t\t\t\t\t\(digest.hex.prefix(32))",  // a sync mark that is not one
            "\(line)\tm\t\t\t\t\t\t\(digest.hex.prefix(30))\t",
        ] {
            let parsed = try XCTUnwrap(
                StateFile.parse(lines: Array("haul-state\t3\n\(damaged)\n\(other)\n".utf8)), damaged)
            XCTAssertEqual(parsed.unreadable, 1, damaged)
            XCTAssertEqual(Array(parsed.records.keys), ["b.bin"], damaged)
            XCTAssertNil(
                StateFile.parse(Array("haul-state\t3\n\(damaged)\n".utf8)), "parse(_:) wants every line: \(damaged)")
        }
    }

    func testSaveAndLoadThroughTheFileSystem() throws {
        let directory = try TemporaryDirectory()
        try directory.makeDirectory(".haul")
        let cache = StateCache(records: ["a.bin": record(7, origin: Origin(manifestKey: "m", sourceKey: "s"))])
        try cache.save(root: directory.path)
        let (loaded, problems) = StateCache.load(root: directory.path)
        XCTAssertEqual(problems, [])
        XCTAssertEqual(loaded, cache)
        try directory.write(".haul/state", "haul-state\t1\n")
        XCTAssertEqual(StateCache.load(root: directory.path).cache, StateCache())
        XCTAssertEqual(
            StateCache.load(root: directory.path).problems, [.corrupt(path: directory.path(".haul/state"))])
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
        XCTAssertFalse(
            FileSystemClock.stamp(descriptor, laterThan: FileTime(seconds: after.modified.seconds + 60, nanoseconds: 0))
        )
    }

    /// A state the version before wrote (no owner tags) is read whole: its records of files haul wrote have no
    /// tag, so they spare a hash but prove nothing.
    func testTheFormatBeforeOwnerTagsIsReadWithoutThem() throws {
        let line = "a.bin\t1\t2\t3\t4.000000000\t5.000000000\t\(digest)"
        let parsed = try XCTUnwrap(
            StateFile.parse(
                Array(
                    ("haul-state\t3\n\(line)\tm\t\t\t\n"
                        + "b.bin\t1\t3\t3\t4.000000000\t5.000000000\t\(digest)\tm\ts\t\"e\"\t\t7\t9\n").utf8)))
        XCTAssertEqual(parsed["a.bin"]?.origin?.manifestKey, "m")
        XCTAssertNil(parsed["a.bin"]?.ownerTag)
        XCTAssertEqual(parsed["b.bin"]?.origin?.freshUntil, 9)
        XCTAssertNil(parsed["b.bin"]?.ownerTag)
        XCTAssertEqual(parsed["b.bin"]?.unsynced, false)
    }

    /// The root's key proves a record only for the destination, content and manifest it tagged; another root's
    /// key proves nothing, and neither does a record without a tag.
    func testTheKeyProvesOnlyWhatItTagged() throws {
        let directory = try TemporaryDirectory()
        let area = try PrivateArea.create(root: directory.path)
        let key = try OwnerKey.loadOrCreate(area: area, lock: nil).get()
        let other = StreamingHasher.digest(Array("y".utf8), algorithm: .sha256)
        let tag = key.tag(destination: "a.bin", digest: digest, manifestKey: "haul.yaml")
        let tagged = StateRecord(
            identity: record(1).identity, digest: digest, origin: Origin(manifestKey: "haul.yaml"), ownerTag: tag)
        XCTAssertTrue(key.proves(tagged, at: "a.bin"))
        XCTAssertFalse(key.proves(tagged, at: "b.bin"), "another destination")
        var changed = tagged
        changed.digest = other
        XCTAssertFalse(key.proves(changed, at: "a.bin"), "another content")
        changed = tagged
        changed.origin = Origin(manifestKey: "other.yaml")
        XCTAssertFalse(key.proves(changed, at: "a.bin"), "another manifest")
        changed = tagged
        changed.ownerTag = nil
        XCTAssertFalse(key.proves(changed, at: "a.bin"), "no tag")

        XCTAssertEqual(
            try OwnerKey.loadOrCreate(area: area, lock: nil).get().tag(
                destination: "a.bin", digest: digest, manifestKey: "haul.yaml"),
            tag, "the key is kept, not made again")
        var info = stat()
        XCTAssertEqual(lstat(directory.path(".haul/key"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        XCTAssertEqual(info.st_size, 32)
        let elsewhere = try TemporaryDirectory()
        let otherKey = try OwnerKey.loadOrCreate(area: PrivateArea.create(root: elsewhere.path), lock: nil).get()
        XCTAssertFalse(otherKey.proves(tagged, at: "a.bin"), "another root's key")
    }

    /// An append that a crash cut short leaves a last line without its newline: it is not read, and the next
    /// append cuts it off rather than gluing its first line to it.
    func testATornLastLineOfTheJournalIsNeitherReadNorGluedToTheNextAppend() throws {
        let directory = try TemporaryDirectory()
        let area = try PrivateArea.create(root: directory.path)
        let journal = OwnershipJournal(area: area)
        let origin = Origin(manifestKey: "haul.yaml")
        XCTAssertNil(
            journal.append([(try XCTUnwrap(DestinationPath("a.bin")), Ownership(digest: digest, origin: origin))]))
        let complete = try XCTUnwrap(directory.read(".haul/journal"))
        var torn = complete + Array("b.bin\t0\t0\t-1\t0.000000000\t0.000000000\t\(digest)\tha".utf8)
        try directory.write(".haul/journal", torn)
        XCTAssertEqual(
            Set(OwnershipJournal.read(in: area).records?.keys ?? [:].keys), ["a.bin"], "the torn line is not read")

        XCTAssertNil(
            journal.append([(try XCTUnwrap(DestinationPath("c.bin")), Ownership(digest: digest, origin: origin))]))
        let records = try XCTUnwrap(OwnershipJournal.read(in: area).records)
        XCTAssertEqual(Set(records.keys), ["a.bin", "c.bin"])
        XCTAssertEqual(records["c.bin"]?.origin?.manifestKey, "haul.yaml")
        torn = try XCTUnwrap(directory.read(".haul/journal"))
        XCTAssertFalse(String(decoding: torn, as: UTF8.self).contains("b.bin"), "cut off before the append")
    }

    /// A state or journal larger than haul ever writes is not read (a sparse file costs nothing to make): a
    /// warning, and an empty cache, at once.
    func testAStateOrJournalPastTheCapIsNotRead() throws {
        let directory = try TemporaryDirectory()
        try StateCache(records: ["a.bin": record(1)]).save(root: directory.path)
        XCTAssertEqual(truncate(directory.path(".haul/state"), off_t(StateCache.maximumBytes) + 1), 0)
        let (cache, problems) = StateCache.load(root: directory.path)
        XCTAssertEqual(cache, StateCache())
        XCTAssertEqual(
            problems,
            [.tooLarge(path: directory.path(".haul/state"), size: 2_147_483_649, limit: StateCache.maximumBytes)])

        try StateCache(records: ["a.bin": record(1)]).save(root: directory.path)
        try directory.write(".haul/journal", "")
        XCTAssertEqual(truncate(directory.path(".haul/journal"), 64 << 30), 0)
        let (withJournal, journalProblems) = StateCache.load(root: directory.path)
        XCTAssertEqual(withJournal.records.count, 1, "the state is read; the journal is not")
        XCTAssertTrue(withJournal.hasJournal, "so that the next save retires it")
        XCTAssertEqual(
            journalProblems,
            [.journalTooLarge(path: directory.path(".haul/journal"), size: 64 << 30, limit: StateCache.maximumBytes)])
    }

    /// On a file system that fills up mid-append (a tmpfs: the lines that fit the last page are written, then
    /// ENOSPC), the append fails whole: it says so, and the journal is cut back to what it held before.
    func testAnAppendCutShortByAFullDiskFailsAndLeavesTheJournalAsItWas() throws {
        let directory = try TemporaryDirectory()
        try directory.makeDirectory("root")
        let mount = try Capability.required { try TestMount.tmpfs(at: directory.path("root"), size: 64 << 10) }
        defer { mount.unmount() }
        let area = try PrivateArea.create(root: directory.path("root"))
        let journal = OwnershipJournal(area: area)
        let origin = Origin(manifestKey: "haul.yaml")
        XCTAssertNil(
            journal.append([(try XCTUnwrap(DestinationPath("first.bin")), Ownership(digest: digest, origin: origin))]))
        let before = try XCTUnwrap(directory.read("root/.haul/journal"))
        // Fill what is left, so that the next append has the rest of the journal's page and no more.
        let filler = open(directory.path("root/filler"), O_WRONLY | O_CREAT, 0o600)
        XCTAssertGreaterThanOrEqual(filler, 0)
        let block = [UInt8](repeating: 1, count: 4096)
        while write(filler, block, block.count) > 0 {}
        close(filler)

        let batch = try (0..<39).map {
            (try XCTUnwrap(DestinationPath("d/file-\($0).bin")), Ownership(digest: digest, origin: origin))
        }
        let failure = try XCTUnwrap(journal.append(batch))
        XCTAssertEqual(failure.errno, ENOSPC)
        XCTAssertEqual(
            failure.description, "cannot write \"\(directory.path("root/.haul/journal"))\": No space left on device")
        XCTAssertEqual(directory.read("root/.haul/journal"), before, "no part of the failed append is left")
        XCTAssertEqual(Set(OwnershipJournal.read(in: area).records?.keys ?? [:].keys), ["first.bin"])
    }

    /// Members of an unpacked tree carry what the tree was unpacked from; pinned files around them keep theirs, and
    /// every member of one tree shares one origin once read back.
    func testMembersOfAnUnpackedTreeRoundTripBesidePlainFiles() throws {
        let archive = StreamingHasher.digest(Array("archive".utf8), algorithm: .sha256)
        let tree = StreamingHasher.digest(Array("tree".utf8), algorithm: .sha256)
        let unpacked = Origin(
            manifestKey: "m",
            unpacked: UnpackedFrom(archive: archive, rules: "0123456789abcdef", tree: tree, folder: "sdk"))
        let untreed = Origin(
            manifestKey: "m",
            unpacked: UnpackedFrom(archive: archive, rules: "fedcba9876543210", tree: nil, folder: "tools"))
        let pinned = Origin(manifestKey: "m")
        let cache = StateCache(records: [
            "a.bin": record(1, origin: pinned),
            "sdk/bin/tool": record(2, origin: unpacked),
            "sdk/lib/x.so": record(3, origin: unpacked),
            "tools/t": record(4, origin: untreed),
            "z.bin": record(5, origin: pinned),
        ])
        let bytes = StateFile.serialized(cache.records)
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).hasPrefix("haul-state\t5\n"))
        let parsed = try XCTUnwrap(StateFile.parse(bytes))
        XCTAssertEqual(parsed, cache.records)
        XCTAssertTrue(parsed["sdk/bin/tool"]?.origin === parsed["sdk/lib/x.so"]?.origin, "one origin per tree")
        XCTAssertNil(parsed["z.bin"]?.origin?.unpacked, "a plain file after a tree's members is no member")
        XCTAssertNil(parsed["tools/t"]?.origin?.unpacked?.tree)
    }

    /// A member's record names the folder its tree is; one that says its member lies elsewhere is not believed (a
    /// prune would take that folder for the tree's).
    func testAMemberOutsideTheFolderItsRecordNamesIsUnreadable() throws {
        let archive = StreamingHasher.digest(Array("archive".utf8), algorithm: .sha256)
        let elsewhere = Origin(
            manifestKey: "m",
            unpacked: UnpackedFrom(archive: archive, rules: "0123456789abcdef", tree: nil, folder: "sdk"))
        let bytes = StateFile.serialized([
            "a.bin": record(1, origin: Origin(manifestKey: "m")), "tools/t": record(2, origin: elsewhere),
        ])
        let parsed = try XCTUnwrap(StateFile.parse(lines: bytes))
        XCTAssertEqual(Set(parsed.records.keys), ["a.bin"])
        XCTAssertEqual(parsed.unreadable, 1)
    }
}
