import Foundation
import Glibc
import HaulTestSupport
import XCTest

/// `extract:` at its edges, through the real `haul` binary: a download cut mid-way resumes in the same run and still
/// unpacks exactly the packed tree (also when the server answers the resume with the whole body, or changed the
/// archive meanwhile: never a tree spliced from two archives); a folder that already holds the members is adopted
/// and the user's own file kept, while one whose file has a member's name and other bytes is refused untouched; names
/// the file system cannot hold are refused; a 7z unpacks; an extract entry lands whatever its place among the
/// entries a run handles (`--shard`, `haul add`); and a damaged tree is repaired from the content cache alone.
final class ArchiveEdgeTests: XCTestCase {
    private var fixture: ArchiveFixture!
    /// Answers queued for the origin's next requests of a path, before it answers as a static file server does.
    private var script: ScriptedResponses!

    override func setUpWithError() throws {
        let files = StaticFiles()
        let script = ScriptedResponses(then: files.respond)
        self.script = script
        fixture = try ArchiveFixture(files: files) { _, request in script.respond(to: request) }
    }

    override func tearDown() {
        fixture = nil
        script = nil
    }

    /// Where the first answer of a big archive is cut: a few MiB in, in the middle of a member.
    private static let cut = 3 << 20

    /// `src/<name>`: nine members of 1 MiB that no compressor shrinks (`seed` makes them differ between versions),
    /// a small file and a symlink, packed as `format` and published at `/<name>.<format>`: the archive and its URL.
    private func bigArchive(_ name: String, format: String, seed: Int = 0) throws -> (archive: [UInt8], url: String) {
        for index in 0..<9 {
            try fixture.directory.write(
                "src/\(name)/data/part\(index).bin", pseudoRandom(1 << 20, seed: seed * 100 + index))
        }
        try fixture.directory.write("src/\(name)/README", "seed \(seed)\n")
        try FileManager.default.createSymbolicLink(
            atPath: fixture.directory.path("src/\(name)/data/first"),
            withDestinationPath: "part0.bin")
        let archive = try fixture.pack(name, format: format)
        XCTAssertGreaterThan(archive.count, 8 << 20)
        return (archive, fixture.publish("/\(name).\(format)", archive))
    }

    /// The `Range` header of each request for `path`, in order (nil: none).
    private func ranges(_ path: String) -> [String?] {
        fixture.server.requests(path: path).map { $0.header("Range") }
    }

    // MARK: Resume

    /// The first answer is cut after 3 MiB (the connection closed): the same run asks for the rest with a validated
    /// `Range`, and the tree is exactly the packed one, with nothing left in `.haul/tmp` or `.haul/partial`.
    func testACutDownloadResumesWithARangeInTheSameRunAndUnpacksTheWholeTree() throws {
        for (name, format) in [("big-gz", "tar.gz"), ("big-zst", "tar.zst")] {
            let (archive, url) = try bigArchive(name, format: format)
            let path = "/\(name).\(format)"
            script.enqueueFault(.closeAfter(bytes: Self.cut), for: path)
            try fixture.manifest([ArchiveFixture.entry(url, dest: "big", sha256: sha256(archive))])
            try fixture.syncSucceeds()
            XCTAssertEqual(try fixture.listing("out/big"), try fixture.listing("src/" + name), format)
            XCTAssertEqual(ranges(path), [nil, "bytes=\(Self.cut)-"], format)
            XCTAssertEqual(
                fixture.server.requests(path: path).last?.header("If-Range"), fixture.files.etag(path), format)
            XCTAssertEqual(script.pendingCount, 0)
            fixture.assertNoLitter(destinations: ["big"], format)
        }
        let plan = try fixture.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout + plan.stderr)
    }

    /// A server that ignores the `Range` of the resume and sends the whole body again with a 200: the kept bytes are
    /// dropped and the tree unpacked afresh from the new body, exactly the packed tree.
    func testAWholeBodyAnsweringTheResumeUnpacksTheTreeAfresh() throws {
        let (archive, url) = try bigArchive("big", format: "tar.gz")
        let path = "/big.tar.gz", files = fixture.files
        script.enqueueFault(.closeAfter(bytes: Self.cut), for: path)
        script.enqueue(for: path) { _ in
            .ok(
                files.contents(path) ?? [],
                headers: [("ETag", files.etag(path) ?? ""), ("Last-Modified", files.lastModified(path) ?? "")])
        }
        try fixture.manifest([ArchiveFixture.entry(url, dest: "big", sha256: sha256(archive))])
        try fixture.syncSucceeds()
        XCTAssertEqual(ranges(path), [nil, "bytes=\(Self.cut)-"], "the whole body answered a resume")
        XCTAssertEqual(script.pendingCount, 0)
        XCTAssertEqual(try fixture.listing("out/big"), try fixture.listing("src/big"))
        fixture.assertNoLitter(destinations: ["big"])
    }

    /// Between the cut and the resume the server publishes another archive (new ETag and Last-Modified), so the
    /// validated resume gets the new archive whole. Both versions are plain tars of the same names and sizes, so that
    /// a splice of the old head and the new tail would unpack to a plausible mixed tree. Pinned to the new archive
    /// (by its checksum, or by its tree alone), the folder becomes exactly the new tree; pinned to the old one, the
    /// sync fails and the folder keeps the tree it held.
    func testAnArchiveChangedBetweenTheCutAndTheResumeIsNeverSpliced() throws {
        let (old, url) = try bigArchive("sdk", format: "tar", seed: 1)
        let (new, _) = try bigArchive("sdk-new", format: "tar", seed: 2)
        XCTAssertEqual(old.count, new.count)
        let oldTree = try fixture.nixHash("src/sdk"), newTree = try fixture.nixHash("src/sdk-new")
        try fixture.source("first", [.file("README", "the tree before\n")])
        try fixture.manifestPinning("first", format: "tar.gz", dest: "sdk")
        try fixture.syncSucceeds()
        let before = try fixture.listing("out/sdk")
        let newListing = try fixture.listing("src/sdk-new")

        let path = "/sdk.tar", files = fixture.files
        let pins: [(name: String, sha256: String?, extract: [String], succeeds: Bool)] = [
            ("the old archive", sha256(old), [], false),
            ("the old tree", nil, ["tree: \(oldTree)"], false),
            ("the new archive", sha256(new), [], true),
            ("the new tree", nil, ["tree: \(newTree)"], true),
        ]
        for pin in pins {
            fixture.publish(path, old)
            script.enqueue(for: path) { request in
                let cut = files.respond(to: request).with(fault: .closeAfter(bytes: Self.cut))
                files.set(path, new)
                return cut
            }
            fixture.server.resetLog()
            let current = try fixture.listing("out/sdk")
            try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk", sha256: pin.sha256, extract: pin.extract)])
            let sync = try fixture.haul(["sync"])
            XCTAssertEqual(script.pendingCount, 0, pin.name)
            // A pinned archive's partial is resumed, with an If-Range the changed archive fails; a tree pinned alone
            // does not pin the archive's bytes, so its partial is not kept.
            XCTAssertEqual(ranges(path), [nil, pin.sha256 == nil ? nil : "bytes=\(Self.cut)-"], pin.name)
            if pin.succeeds {
                XCTAssertEqual(sync.exitCode, 0, "\(pin.name): \(sync.stdout)\(sync.stderr)")
                XCTAssertEqual(try fixture.listing("out/sdk"), newListing, pin.name)
            } else {
                XCTAssertEqual(sync.exitCode, 1, "\(pin.name): \(sync.stdout)\(sync.stderr)")
                XCTAssertTrue(sync.stderr.contains("error: sdk: "), "\(pin.name): \(sync.stderr)")
                let expected = pin.sha256 ?? oldTree
                XCTAssertTrue(
                    sync.stderr.contains(expected), "\(pin.name): the error names the pin \(expected): \(sync.stderr)")
                XCTAssertEqual(try fixture.listing("out/sdk"), current, "\(pin.name): the folder is as it was")
                XCTAssertEqual(current, before, pin.name)
            }
            fixture.assertNoLitter(destinations: ["sdk"], pin.name)
        }
    }

    // MARK: Files already in the folder

    /// The manifest pins `src/sdk` packed as a `.tar.gz` for `sdk`, which the archive unpacked by hand with `tar`
    /// already fills.
    private func sdkUnpackedByHand() throws {
        try fixture.source("sdk", ArchiveSyncTests.sdk)
        try fixture.manifestPinning("sdk", format: "tar.gz", dest: "sdk")
        try fixture.directory.makeDirectory("out/sdk")
        try Archives.run(
            "tar", ["-xzf", fixture.directory.path("archives/sdk.tar.gz"), "-C", fixture.directory.path("out/sdk")])
    }

    /// A folder unpacked by hand with `tar` holds every member byte for byte, and a file of the user's: the sync
    /// adopts it, keeps the user's file (named in a warning), and the next plan has nothing to do.
    func testAFolderThatAlreadyHoldsTheMembersIsAdoptedAndTheUsersFileKept() throws {
        try sdkUnpackedByHand()
        try fixture.directory.write("out/sdk/notes.txt", "mine\n")
        let expected = try fixture.listing("out/sdk")
        XCTAssertEqual(expected.filter { !$0.hasPrefix("notes.txt") }, try fixture.listing("src/sdk"))

        let sync = try fixture.syncSucceeds()
        XCTAssertTrue(
            sync.stderr.contains(
                "warning: sdk/: kept 1 file the archive did not put there (\"sdk/notes.txt\"); "
                    + "haul does not manage it"), "the user's file is named in a warning: \(sync.stderr)")
        XCTAssertEqual(try fixture.listing("out/sdk"), expected)
        fixture.assertNoLitter(destinations: ["sdk"])
        let plan = try fixture.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout + plan.stderr)
    }

    /// A file of the user's has the name of a member, with other bytes: the tree is not put in place (that file
    /// would be lost), the error names it, and the folder is byte for byte as it was.
    func testAUsersFileWithAMembersNameAndOtherBytesRefusesTheTree() throws {
        try sdkUnpackedByHand()
        try fixture.directory.write("out/sdk/lib/libx.so", "my own build\n")
        try fixture.directory.write("out/sdk/notes.txt", "mine\n")
        let before = try fixture.listing("out/sdk")

        let sync = try fixture.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1, sync.stdout + sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: sdk: cannot carry into the new tree \"sdk/lib/libx.so\": the new tree has a member "
                    + "of that name; the old tree is left as it was"), sync.stderr)
        XCTAssertFalse(sync.stderr.contains("notes.txt"), "only the file in the way is named: \(sync.stderr)")
        XCTAssertEqual(try fixture.listing("out/sdk"), before)
        fixture.assertNoLitter(destinations: ["sdk"])
    }

    // MARK: Names

    /// Names a file system cannot hold, or haul refuses to hold: each is refused naming the archive, the member and
    /// the rule, exit 1, and neither the folder that held a tree nor a new one shows anything of it.
    func testNamesThatAreNotUTF8OrTooLongAreRefused() throws {
        try fixture.source("good", [.file("README", "good\n")])
        try fixture.manifestPinning("good", format: "tar.gz", dest: "kept")
        try fixture.syncSucceeds()
        let kept = try fixture.listing("out/kept")

        let component = String(repeating: "a", count: 256)
        let longPath = (0..<17).map { _ in String(repeating: "b", count: 250) }.joined(separator: "/")  // 4,266 bytes
        let cases: [(name: String, member: [String: Any], shown: String, rule: String)] = [
            (
                "not-utf8.tar",
                ["name_hex": Array("bad-".utf8).map { String(format: "%02x", $0) }.joined() + "fffe", "data": "x"],
                "bad-\u{FFFD}\u{FFFD}", "its name is not valid UTF-8"
            ),
            (
                "long-component.tar", ["name": "dir/" + component, "data": "x"],
                "dir/" + String(repeating: "a", count: 76) + "…",
                "\"\(String(repeating: "a", count: 80))…\" is 256 bytes long; a file or folder name has at most 255 bytes"
            ),
            (
                "long-path.tar", ["name": longPath, "data": "x"], String(longPath.prefix(80)) + "…",
                "its path is \(longPath.utf8.count) bytes long; a path has at most 4095 bytes"
            ),
        ]
        XCTAssertEqual(longPath.utf8.count, 4266)
        for example in cases {
            let url = fixture.publish("/hostile/" + example.name, try fixture.craft(example.name, [example.member]))
            try fixture.manifest([ArchiveFixture.entry(url, dest: "kept"), ArchiveFixture.entry(url, dest: "fresh")])
            let sync = try fixture.haul(["sync"])
            XCTAssertEqual(sync.exitCode, 1, "\(example.name): \(sync.stdout)\(sync.stderr)")
            for dest in ["kept", "fresh"] {
                let expected = "error: \(dest): cannot unpack \"\(dest)\": member \"\(example.shown)\": \(example.rule)"
                XCTAssertTrue(sync.stderr.contains(expected), "\(expected)\nnot in:\n\(sync.stderr)")
            }
            XCTAssertEqual(try fixture.listing("out/kept"), kept, example.name)
            XCTAssertFalse(fixture.directory.exists("out/fresh"), example.name)
            fixture.assertNoLitter(destinations: ["kept"], example.name)
        }
    }

    // MARK: 7z

    /// A 7z (whose index follows its data) is unpacked from the verified file, named by its URL or recognized by its
    /// bytes alone.
    func testA7zArchiveUnpacksToExactlyThePackedTree() throws {
        guard access("/usr/bin/7z", X_OK) == 0 else {
            throw Capability.unavailable("7z is not installed (Debian: p7zip-full): no 7z archive can be made")
        }
        try fixture.source("sdk", ArchiveSyncTests.sdk)
        let archive = try fixture.pack("sdk", format: "7z")
        XCTAssertEqual(Array(archive.prefix(2)), Array("7z".utf8))
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk.7z", archive), dest: "named", sha256: sha256(archive)),
            ArchiveFixture.entry(fixture.publish("/download/7", archive), dest: "sniffed", sha256: sha256(archive)),
        ])
        try fixture.syncSucceeds()
        let packed = try fixture.listing("src/sdk")
        XCTAssertTrue(packed.contains("bin/latest -> tool"), "\(packed)")
        XCTAssertEqual(try fixture.listing("out/named"), packed)
        XCTAssertEqual(try fixture.listing("out/sniffed"), packed)
        fixture.assertNoLitter(destinations: ["named", "sniffed"])
        let plan = try fixture.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout + plan.stderr)
    }

    // MARK: An extract entry among others

    /// Three entries, the second an archive: `--shard K/3` for the archive's shard, where neither other entry is,
    /// runs the archive alone (its manifest index is not its place in the run) and puts exactly its tree in place.
    func testAnExtractEntryAloneInItsShardLands() throws {
        try fixture.source("sdk", ArchiveSyncTests.sdk)
        let archive = try fixture.pack("sdk", format: "tar.gz")
        let mine = shard(of: "sdk", count: 3)
        let others = Array((0..<100).map { "file-\($0).txt" }.filter { shard(of: $0, count: 3) != mine }.prefix(2))
        let plain = others.map {
            ArchiveFixture.fileEntry(
                fixture.publish("/" + $0, Array($0.utf8)), dest: $0, sha256: sha256(Array($0.utf8)))
        }
        try fixture.manifest([
            plain[0],
            ArchiveFixture.entry(fixture.publish("/sdk.tar.gz", archive), dest: "sdk", sha256: sha256(archive)),
            plain[1],
        ])
        try fixture.syncSucceeds(["--shard", "\(mine)/3"])
        XCTAssertEqual(try fixture.listing("out/sdk"), try fixture.listing("src/sdk"))
        XCTAssertEqual(fixture.server.requests.map(\.path), ["/sdk.tar.gz"])
        fixture.assertNoLitter(destinations: ["sdk"], shard: "shard-\(mine)-of-3")

        try fixture.syncSucceeds()
        for dest in others { XCTAssertEqual(fixture.directory.read("out/" + dest), Array(dest.utf8)) }
        fixture.assertNoLitter(destinations: ["sdk"] + others, shard: "shard-\(mine)-of-3")
    }

    /// `haul add --extract` into a manifest that lists two entries already: the new entry is the third of the
    /// manifest and the only one `add` puts in place, and its tree lands.
    func testAddExtractAfterTwoEntriesPutsTheTreeInPlace() throws {
        try fixture.source("sdk", ArchiveSyncTests.sdk)
        let archive = try fixture.pack("sdk", format: "tar.gz")
        let url = fixture.publish("/sdk-1.2.tar.gz", archive)
        let plain = ["a.txt", "b.txt"].map {
            ArchiveFixture.fileEntry(
                fixture.publish("/" + $0, Array($0.utf8)), dest: $0, sha256: sha256(Array($0.utf8)))
        }
        try fixture.manifest(plain)
        try fixture.syncSucceeds()
        try fixture.directory.makeDirectory("tmp")
        let add = try fixture.haul(["add", "--extract", url], environment: ["TMPDIR": fixture.directory.path("tmp")])
        XCTAssertEqual(add.exitCode, 0, add.stdout + add.stderr)
        XCTAssertTrue(add.stdout.contains("as files[2]"), add.stdout)
        XCTAssertEqual(try fixture.listing("out/sdk-1.2"), try fixture.listing("src/sdk"))
        fixture.assertNoLitter(destinations: ["a.txt", "b.txt", "sdk-1.2"])
        try fixture.assertTheNextSyncAsksNothing()
    }

    // MARK: Repair from the cache

    /// A member edited and another removed after a `sync --cache`: the next `sync --cache` unpacks the archive the
    /// cache kept, says so, and asks the server nothing; the tree is exactly the packed one again.
    func testADamagedTreeIsRepairedFromTheCacheWithoutARequest() throws {
        try fixture.source("sdk", ArchiveSyncTests.sdk)
        try fixture.manifestPinning("sdk", format: "tar.xz", dest: "sdk")
        let cache = fixture.directory.path("cache")
        try fixture.syncSucceeds(["--cache", cache])
        let packed = try fixture.listing("src/sdk")
        XCTAssertEqual(try fixture.listing("out/sdk"), packed)
        XCTAssertEqual(fixture.server.requests.count, 1)

        try fixture.directory.write("out/sdk/bin/tool", "#!/bin/sh\necho tampered\n")
        XCTAssertEqual(unlink(fixture.directory.path("out/sdk/lib/libx.a")), 0)
        XCTAssertNotEqual(try fixture.listing("out/sdk"), packed)
        let repair = try fixture.syncSucceeds(["--cache", cache])
        XCTAssertTrue(
            repair.stdout.contains(
                "~ sdk/ (archive, 2 files in it changed since haul unpacked it; unpacked again, "
                    + "your own files kept; from the cache)"), repair.stdout)
        XCTAssertTrue(repair.stdout.contains("1 from the cache"), repair.stdout)
        XCTAssertEqual(fixture.server.requests.count, 1, "no request: the archive came from the cache")
        XCTAssertEqual(try fixture.listing("out/sdk"), packed)
        fixture.assertNoLitter(destinations: ["sdk"])
    }
}
