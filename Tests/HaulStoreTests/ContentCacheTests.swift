import Foundation
import Glibc
import HaulDigest
import HaulFileSystem
import HaulStore
import XCTest

/// `ContentCache` on real files: layout, verified copies, atomic insertion, eviction.
final class ContentCacheTests: XCTestCase {
    private var scratch: Scratch!
    private var cache: ContentCache!
    private var staging: DirectoryHandle!
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 64)

    override func setUpWithError() throws {
        scratch = try Scratch()
        try scratch.mkdir("staging")
        cache = try ContentCache.open(scratch.at("cache/nested"), create: true).get()
        staging = try DirectoryHandle.opening(scratch.at("staging"))
    }

    deinit { buffer.deallocate() }

    private func digest(_ bytes: [UInt8], _ algorithm: DigestAlgorithm = .sha256) -> Digest {
        StreamingHasher.digest(bytes, algorithm: algorithm)
    }

    private func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed }
    }

    private func insert(_ content: [UInt8], as name: String = "verified.part") throws -> Digest {
        try scratch.write("staging/\(name)", content)
        let digest = digest(content)
        XCTAssertNil(cache.insert(digest, size: Int64(content.count), from: staging, name: name))
        return digest
    }

    /// Inserted under `sha256/ab/abcdef…`, as a copy (its own inode, one link), nothing left in `tmp/`; read back
    /// into a staging folder byte for byte, larger than the buffer so that it takes several chunks.
    func testInsertionAndAVerifiedCopyRoundTrip() throws {
        let content = bytes(10_000, seed: 1)
        let digest = try insert(content)
        let entry = scratch.at("cache/nested/" + ContentCache.relativePath(of: digest))
        XCTAssertEqual(ContentCache.relativePath(of: digest), "sha256/\(digest.hex.prefix(2))/\(digest.hex)")
        XCTAssertEqual(scratch.read("cache/nested/" + ContentCache.relativePath(of: digest)), content)
        var entryInfo = stat(), sourceInfo = stat()
        XCTAssertEqual(stat(entry, &entryInfo), 0)
        XCTAssertEqual(stat(scratch.at("staging/verified.part"), &sourceInfo), 0)
        XCTAssertNotEqual(entryInfo.st_ino, sourceInfo.st_ino, "a copy, never a hard link")
        XCTAssertEqual(entryInfo.st_nlink, 1)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.at("cache/nested/tmp")), [])
        XCTAssertTrue(cache.contains(digest))

        guard
            case .copied(let size, let hasMode) = cache.copyVerified(
                digest, size: 10_000, to: staging, name: "hit.part",
                buffer: buffer)
        else {
            return XCTFail("expected a hit")
        }
        XCTAssertEqual(size, 10_000)
        XCTAssertFalse(hasMode, "no mode asked: 0600, for the committer to set")
        XCTAssertEqual(scratch.read("staging/hit.part"), content)
        var staged = stat()
        XCTAssertEqual(stat(scratch.at("staging/hit.part"), &staged), 0)
        XCTAssertEqual(staged.st_mode & 0o7777, 0o600)

        // Created with the entry's mode exactly, whatever the umask would leave of it.
        for (mode, umask) in [(UInt32(0o644), UInt32(0o022)), (0o644, 0o077), (0o4755, 0o022)] {
            let name = "mode-\(String(mode, radix: 8))-\(String(umask, radix: 8)).part"
            let previous = Glibc.umask(mode_t(umask))
            defer { Glibc.umask(previous) }
            guard
                case .copied(_, let exact) = cache.copyVerified(
                    digest, size: 10_000, to: staging, name: name, mode: mode,
                    umask: umask, buffer: buffer)
            else {
                return XCTFail("expected a hit")
            }
            XCTAssertTrue(exact, name)
            XCTAssertEqual(stat(scratch.at("staging/" + name), &staged), 0)
            XCTAssertEqual(staged.st_mode & 0o7777, mode_t(mode), name)
        }
        // Inserting it again only touches it.
        XCTAssertNil(cache.insert(digest, size: 10_000, from: staging, name: "verified.part"))
        XCTAssertEqual(cache.entries().count, 1)
    }

    func testAMissingDigestIsAMiss() throws {
        guard
            case .missing = cache.copyVerified(
                digest([1, 2, 3]), size: nil, to: staging, name: "x.part", buffer: buffer)
        else {
            return XCTFail("expected a miss")
        }
        XCTAssertNil(scratch.read("staging/x.part"))
        XCTAssertFalse(cache.contains(digest([1, 2, 3])))
    }

    /// `containing` answers as `contains` does, whether it lists a folder (most of its entries asked about) or looks
    /// names up one by one (a few asked about): entries, misses, a folder, a symlink and a name in capitals where
    /// an entry would be, entries of another algorithm and of a weak one.
    func testContainingAnswersAsContainsDoes() throws {
        // Digests all in `sha256/ab/`, the files made by hand: the cache trusts no content it only looks at.
        func crafted(_ number: Int) -> Digest {
            Digest(algorithm: .sha256, bytes: [0xab] + (0..<31).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ number) })
        }
        let folder = "cache/nested/sha256/ab"
        for number in 0..<30 { try scratch.write("\(folder)/\(crafted(number).hex)", [1]) }
        try scratch.mkdir("\(folder)/\(crafted(30).hex)")
        try scratch.symlink("\(folder)/\(crafted(31).hex)", to: crafted(0).hex)
        try scratch.write("\(folder)/\(crafted(32).hex.uppercased())", [1])
        let other = try insert(bytes(100, seed: 9))
        let sha512 = digest([4, 5, 6], .sha512)
        try scratch.write("cache/nested/sha512/\(sha512.hex.prefix(2))/\(sha512.hex)", [1])
        let weak = digest([7], .md5)
        try scratch.write("cache/nested/md5/\(weak.hex.prefix(2))/\(weak.hex)", [1])

        let many = (0..<100).map(crafted) + [other, sha512, weak]
        let folderBytes = Int(try XCTUnwrap(scratch.linkStatus(folder)).st_size)
        XCTAssertTrue(ContentCache.listingPays(folderBytes: folderBytes, lookups: 100), "the folder must be listed")
        XCTAssertFalse(ContentCache.listingPays(folderBytes: folderBytes, lookups: 3), "the few must be looked up")
        let expected = (0..<100).map { $0 < 30 } + [true, true, false]
        XCTAssertEqual(cache.containing(many), expected)
        XCTAssertEqual(many.map(cache.contains), expected)
        let few = [crafted(2), crafted(30), crafted(32)]
        XCTAssertEqual(cache.containing(few), [true, false, false])
    }

    /// Bytes that are not the digest's (same size), or a size other than the pinned one: removed, nothing staged.
    func testACorruptEntryIsRemovedAndNothingIsStaged() throws {
        let content = bytes(9000, seed: 2)
        let digest = try insert(content)
        var damaged = content
        damaged[8999] ^= 1
        try scratch.write("cache/nested/" + ContentCache.relativePath(of: digest), damaged)
        guard
            case .corrupt(let entry) = cache.copyVerified(
                digest, size: 9000, to: staging, name: "hit.part", buffer: buffer)
        else {
            return XCTFail("expected a corrupt entry")
        }
        XCTAssertEqual(entry.found, .digest(self.digest(damaged)))
        XCTAssertNil(entry.removal, "removed")
        XCTAssertNil(scratch.read("cache/nested/" + ContentCache.relativePath(of: digest)), "the bad entry is gone")
        XCTAssertNil(scratch.read("staging/hit.part"), "nothing staged")

        let again = try insert(content)
        guard
            case .corrupt(let sized) = cache.copyVerified(
                again, size: 8999, to: staging, name: "hit.part", buffer: buffer)
        else {
            return XCTFail("a size other than the pinned one is corrupt")
        }
        XCTAssertEqual(sized.found, .size(9000, pinned: 8999))
        XCTAssertFalse(cache.contains(again))
    }

    /// SHA-1 and MD5 are never stored nor looked up: a shared store must not trust digests one can collide.
    func testWeakAlgorithmsAreNeitherStoredNorRead() throws {
        let content = bytes(100, seed: 3)
        try scratch.write("staging/weak.part", content)
        let weak = digest(content, .md5)
        XCTAssertNil(cache.insert(weak, size: 100, from: staging, name: "weak.part"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.at("cache/nested/md5")))
        try scratch.write("cache/nested/md5/\(weak.hex.prefix(2))/\(weak.hex)", content)
        guard case .missing = cache.copyVerified(weak, size: nil, to: staging, name: "w.part", buffer: buffer) else {
            return XCTFail("an md5 entry is not used")
        }
        XCTAssertEqual(cache.entries().count, 0)
    }

    /// A symlink where a folder of the layout should be is not followed (a removal must not reach outside).
    func testASymlinkedFolderIsNotFollowed() throws {
        let content = bytes(50, seed: 4)
        let digest = digest(content)
        try scratch.write("outside/\(digest.hex)", Array("victim".utf8))
        try scratch.mkdir("cache/nested/sha256")
        XCTAssertEqual(symlink(scratch.at("outside"), scratch.at("cache/nested/sha256/\(digest.hex.prefix(2))")), 0)
        guard case .missing = cache.copyVerified(digest, size: nil, to: staging, name: "s.part", buffer: buffer) else {
            return XCTFail("a symlinked folder is not the cache's")
        }
        XCTAssertEqual(scratch.read("outside/\(digest.hex)"), Array("victim".utf8))
    }

    /// Inserting fails cleanly (an error naming the path; no partial entry) when `tmp` cannot be a folder.
    func testAnInsertionThatCannotStartSaysWhy() throws {
        try scratch.write("cache/nested/tmp", "a file")
        let content = bytes(10, seed: 5)
        try scratch.write("staging/v.part", content)
        let failure = try XCTUnwrap(cache.insert(digest(content), size: 10, from: staging, name: "v.part"))
        XCTAssertEqual(failure.errno, ENOTDIR)
        XCTAssertTrue(failure.description.contains("cache/nested/tmp"), failure.description)
        XCTAssertFalse(cache.contains(digest(content)))
    }

    /// Oldest mtime first until the total fits; `tmp/` files older than an hour go, younger ones stay.
    func testCollectRemovesTheLeastRecentlyUsedFirst() throws {
        var digests: [Digest] = []
        for seed in UInt8(0)..<4 { digests.append(try insert(bytes(1000, seed: 10 + seed), as: "v\(seed).part")) }
        let now = ContentCache.now()
        // Ages: entry 2 oldest, then 0, then 3, then 1.
        for (index, age) in [(2, 400), (0, 300), (3, 200), (1, 100)] {
            var times = [
                timespec(tv_sec: now.tv_sec - age, tv_nsec: 0), timespec(tv_sec: now.tv_sec - age, tv_nsec: 0),
            ]
            XCTAssertEqual(
                utimensat(
                    AT_FDCWD, scratch.at("cache/nested/" + ContentCache.relativePath(of: digests[index])), &times, 0), 0
            )
        }
        try scratch.write("cache/nested/tmp/5e1f-7a-1.tmp", "x")
        var old = [timespec(tv_sec: now.tv_sec - 4000, tv_nsec: 0), timespec(tv_sec: now.tv_sec - 4000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, scratch.at("cache/nested/tmp/5e1f-7a-1.tmp"), &old, 0), 0)
        try scratch.write("cache/nested/tmp/young", "x")
        try scratch.write("cache/nested/sha256/zz-not-ours", "left alone")

        XCTAssertEqual(cache.entries().count, 4)
        let collection = cache.collect(maxBytes: 2500)
        XCTAssertEqual(
            collection.removed.map(\.relativePath), [2, 0].map { ContentCache.relativePath(of: digests[$0]) })
        XCTAssertEqual(collection.remainingCount, 2)
        XCTAssertEqual(collection.remainingBytes, 2000)
        XCTAssertEqual(collection.staleTemporaries, ["5e1f-7a-1.tmp"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.at("cache/nested/tmp")), ["young"])
        XCTAssertTrue(cache.contains(digests[1]) && cache.contains(digests[3]))
        XCTAssertNotNil(scratch.read("cache/nested/sha256/zz-not-ours"))
    }

    func testTheDefaultDirectory() {
        XCTAssertEqual(
            ContentCache.defaultDirectory(environment: ["HAUL_CACHE": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"]), "/c"
        )
        XCTAssertEqual(ContentCache.defaultDirectory(environment: ["XDG_CACHE_HOME": "/x", "HOME": "/h"]), "/x/haul")
        XCTAssertEqual(
            ContentCache.defaultDirectory(environment: ["XDG_CACHE_HOME": "relative", "HOME": "/h"]), "/h/.cache/haul",
            "XDG says a relative path is to be ignored")
        XCTAssertEqual(ContentCache.defaultDirectory(environment: ["HAUL_CACHE": "", "HOME": "/h"]), "/h/.cache/haul")
        XCTAssertNil(ContentCache.defaultDirectory(environment: [:]))
    }

    /// The one form of an insertion's name in `tmp/`, which is all `collect` removes there.
    func testInsertionNames() {
        for name in ["1a2b-3c4d-5.tmp", "0-0-0.tmp", "ffffffffffffffff-ffffffffffffffff-1.tmp"] {
            XCTAssertTrue(ContentCache.isInsertionName(name), name)
        }
        for name in [
            "notes.txt", "1a2b-3c4d.tmp", "1a2b-3c4d-5-6.tmp", "1A2B-3c4d-5.tmp", "1a2b--5.tmp", "1a2b-3c4d-5.tmpx",
            "1a2b-3c4d-5.part", "1a2b-3c4d-g.tmp", ".tmp", "-.tmp", "11111111111111111-1-1.tmp",
        ] {
            XCTAssertFalse(ContentCache.isInsertionName(name), name)
        }
    }

    /// Without the marker, a folder is a cache only by its layout: nothing but what a cache holds, or nothing.
    func testAFolderIsACacheByItsLayout() {
        XCTAssertEqual(ContentCache.Recognition.of(names: []), .layout)
        XCTAssertEqual(
            ContentCache.Recognition.of(names: ["sha256", "sha512", "tmp", "lost+found", "haul-cache"]), .layout)
        XCTAssertEqual(
            ContentCache.Recognition.of(names: ["tmp", "sha256", "Documents", ".bashrc"]), .stranger(".bashrc"))
    }

    /// Made with the marker; a folder holding anything else without it is refused, and nothing is made in it.
    func testAFolderThatIsNotACacheIsRefused() throws {
        XCTAssertTrue(
            String(decoding: scratch.read("cache/nested/haul-cache") ?? [], as: UTF8.self).hasPrefix(
                "haul content cache\n"))
        try scratch.write("home/notes.txt", "mine")
        for create in [false, true] {
            guard
                case .failure(.notACache(let path, let stranger)) = ContentCache.open(
                    scratch.at("home"), create: create)
            else {
                return XCTFail("refused (create: \(create))")
            }
            XCTAssertEqual(path, scratch.at("home"))
            XCTAssertEqual(stranger, "notes.txt")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.at("home")), ["notes.txt"])
        guard case .failure(.missing) = ContentCache.open(scratch.at("none"), create: false) else {
            return XCTFail("missing")
        }
        // With the marker, whatever else is there.
        try scratch.write("home/haul-cache", "haul content cache\n")
        XCTAssertNoThrow(try ContentCache.open(scratch.at("home"), create: false).get())
    }

    /// Without a pinned size, an entry larger than `maxSize` is not copied (nothing staged) and not removed; with
    /// one, its size is what decides.
    func testAnEntryOverTheLimitIsNotCopied() throws {
        let content = bytes(5000, seed: 7)
        let digest = try insert(content)
        guard
            case .tooLarge(let path, let limit) = cache.copyVerified(
                digest, size: nil, maxSize: 4999, to: staging, name: "big.part",
                buffer: buffer)
        else {
            return XCTFail("expected over the limit")
        }
        XCTAssertEqual(path, scratch.at("cache/nested/" + ContentCache.relativePath(of: digest)))
        XCTAssertEqual(limit, 4999)
        XCTAssertNil(scratch.read("staging/big.part"), "nothing staged")
        XCTAssertTrue(cache.contains(digest), "not removed")
        guard
            case .copied = cache.copyVerified(
                digest, size: nil, maxSize: 5000, to: staging, name: "big.part", buffer: buffer)
        else {
            return XCTFail("at the limit, copied")
        }
        guard
            case .copied = cache.copyVerified(
                digest, size: 5000, maxSize: 10, to: staging, name: "pinned.part", buffer: buffer)
        else {
            return XCTFail("a pinned size is its own limit")
        }
    }
}
