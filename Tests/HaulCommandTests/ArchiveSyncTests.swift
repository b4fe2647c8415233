import Foundation
import Glibc
import HaulTestSupport
import XCTest

/// `extract:` through the real `haul` binary: every format unpacks to exactly the tree that was packed, the
/// member rules (`strip`, `include`, `exclude`, `format`) pick what they say, the tree's digest is `nix hash path`'s,
/// a pin that does not match leaves the old tree as it was, a no-op opens no member, an edited or removed member is
/// repaired, and the user's own files in the folder outlive a replacement and a prune.
final class ArchiveSyncTests: XCTestCase {
    private var fixture: ArchiveFixture!

    override func setUpWithError() throws { fixture = try ArchiveFixture() }
    override func tearDown() { fixture = nil }

    /// A small SDK: a file, an executable, a symlink to it, a nested folder and an empty one.
    static let sdk: [ArchiveFixture.Member] = [
        .file("README", "the sdk, version 1\n"),
        .file("bin/tool", "#!/bin/sh\necho tool 1\n", executable: true),
        .symlink("bin/latest", to: "tool"),
        .file("lib/libx.so", "shared object 1\n"),
        .file("lib/libx.a", "static library 1\n"),
        .file("share/doc/guide.md", "# guide\n"),
        .folder("share/empty"),
    ]

    static let sdkVersion2: [ArchiveFixture.Member] = [
        .file("README", "the sdk, version 2\n"),
        .file("bin/tool", "#!/bin/sh\necho tool 2\n", executable: true),
        .symlink("bin/latest", to: "tool"),
        .file("lib/libx.so", "shared object 2\n"),
        .file("lib/new.so", "new in 2\n"),
    ]

    // MARK: Formats and member rules

    func testEveryFormatUnpacksToExactlyThePackedTree() throws {
        try fixture.source("sdk", Self.sdk)
        let packed = try fixture.listing("src/sdk")
        XCTAssertTrue(packed.contains("bin/latest -> tool") && packed.contains("share/empty/"), "\(packed)")
        var entries: [String] = []
        for format in Archives.packedFormats {
            let archive = try fixture.pack("sdk", format: format)
            let url = fixture.publish("/sdk.\(format)", archive)
            entries.append(ArchiveFixture.entry(url, dest: "sdk-\(format)", sha256: sha256(archive)))
        }
        try fixture.manifest(entries)
        let sync = try fixture.syncSucceeds()
        XCTAssertTrue(sync.stdout.contains("Fetched 6 files"), sync.stdout)
        for format in Archives.packedFormats {
            XCTAssertEqual(try fixture.listing("out/sdk-\(format)"), packed, format)
        }
        fixture.assertNoLitter(destinations: Archives.packedFormats.map { "sdk-\($0)" })
        let plan = try fixture.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout + plan.stderr)
        XCTAssertTrue(plan.stdout.contains("No changes"), plan.stdout)
    }

    func testStripIncludeAndExcludePickTheMembersTheyName() throws {
        try fixture.source(
            "pkg",
            Self.sdk.map { member in
                switch member {
                case .file(let path, let text, let executable): .file("sdk-1.0/" + path, text, executable: executable)
                case .symlink(let path, let target): .symlink("sdk-1.0/" + path, to: target)
                case .folder(let path): .folder("sdk-1.0/" + path)
                }
            })
        let archive = try fixture.pack("pkg", format: "tar.gz")
        let url = fixture.publish("/sdk-1.0.tar.gz", archive)
        try fixture.manifest([
            ArchiveFixture.entry(url, dest: "stripped", extract: ["strip: 1"]),
            ArchiveFixture.entry(
                url, dest: "picked", extract: ["strip: 1", "include: [\"bin/**\", \"lib/**\"]", "exclude: \"**/*.a\""]),
            ArchiveFixture.entry(url, dest: "whole"),
        ])
        try fixture.syncSucceeds()
        try fixture.source("expected", Self.sdk)
        XCTAssertEqual(try fixture.listing("out/stripped"), try fixture.listing("src/expected"))
        XCTAssertEqual(try fixture.listing("out/whole"), try fixture.listing("src/pkg"))
        let picked = try fixture.listing("out/picked")
        XCTAssertEqual(
            picked.map { $0.split(separator: " ").first.map(String.init) ?? "" },
            ["bin/", "bin/latest", "bin/tool", "lib/", "lib/libx.so"], "\(picked)")
        XCTAssertEqual(fixture.directory.read("out/picked/lib/libx.so"), Array("shared object 1\n".utf8))
        fixture.assertNoLitter(destinations: ["picked", "stripped", "whole"])
    }

    /// The folder `dest` names is an ordinary folder, as readable as the members in it (0755, as haul sets a
    /// member folder), not the private mode of haul's staging area: the tree's root and its subfolders alike.
    func testTheFolderItselfHasTheModeOfItsSubfolders() throws {
        try fixture.source("sdk", Self.sdk)
        let url = fixture.publish("/sdk.tar", try fixture.pack("sdk", format: "tar"))
        try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk")])
        try fixture.syncSucceeds()
        for folder in ["out/sdk", "out/sdk/bin", "out/sdk/share/empty"] {
            var info = stat()
            XCTAssertEqual(lstat(fixture.directory.path(folder), &info), 0, folder)
            XCTAssertEqual(String(info.st_mode & 0o7777, radix: 8), "755", folder)
        }
    }

    /// A URL that names no format: `format:` tells it, or the bytes do; a `format:` the bytes are not is refused.
    func testFormatTellsWhatAURLWithoutASuffixIs() throws {
        try fixture.source("sdk", Self.sdk)
        let packed = try fixture.listing("src/sdk")
        let xz = fixture.publish("/download/1", try fixture.pack("sdk", format: "tar.xz"))
        let zip = fixture.publish("/download/2", try fixture.pack("sdk", format: "zip"))
        let gzip = fixture.publish("/download/3", try fixture.pack("sdk", format: "tar.gz"))
        try fixture.manifest([
            ArchiveFixture.entry(xz, dest: "from-xz", extract: ["format: tar.xz"]),
            ArchiveFixture.entry(zip, dest: "from-zip", extract: ["format: zip"]),
            ArchiveFixture.entry(gzip, dest: "sniffed"),
        ])
        try fixture.syncSucceeds()
        for dest in ["from-xz", "from-zip", "sniffed"] {
            XCTAssertEqual(try fixture.listing("out/" + dest), packed, dest)
        }

        try fixture.manifest([ArchiveFixture.entry(gzip, dest: "mislabelled", extract: ["format: zip"])])
        let refused = try fixture.haul(["sync"])
        XCTAssertEqual(refused.exitCode, 1, refused.stdout + refused.stderr)
        XCTAssertTrue(refused.stderr.contains("cannot unpack \"mislabelled\": not a zip archive"), refused.stderr)
        XCTAssertFalse(fixture.directory.exists("out/mislabelled"))
    }

    // MARK: Pins

    /// The tree's digest is what `nix hash path` prints for the same tree, executable bit and symlink included:
    /// nix's digest of the source, pinned alone, is accepted, and nix's digest of the unpacked folder is the same.
    /// The pin is not blind: the same tree with one executable bit less is another digest, and refused.
    func testTheTreeDigestIsNixHashPathOfTheFolder() throws {
        try fixture.source("sdk", Self.sdk)
        let expected = try fixture.nixHash("src/sdk")
        XCTAssertTrue(expected.hasPrefix("sha256-"), expected)
        let url = fixture.publish("/sdk.tar.gz", try fixture.pack("sdk", format: "tar.gz"))
        try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk", extract: ["tree: \(expected)"])])
        try fixture.syncSucceeds()
        XCTAssertEqual(try fixture.nixHash("out/sdk"), expected)
        XCTAssertEqual(try fixture.listing("out/sdk"), try fixture.listing("src/sdk"))

        chmod(fixture.directory.path("src/sdk/bin/tool"), 0o644)
        let other = try fixture.nixHash("src/sdk")
        XCTAssertNotEqual(other, expected, "the executable bit is part of the NAR digest")
        let changed = fixture.publish("/sdk-plain.tar.gz", try fixture.pack("sdk", format: "tar.gz"))
        try fixture.manifest([ArchiveFixture.entry(changed, dest: "sdk-plain", extract: ["tree: \(expected)"])])
        let refused = try fixture.haul(["sync"])
        XCTAssertEqual(refused.exitCode, 1, refused.stdout + refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains(
                "error: sdk-plain: the unpacked tree's digest is \(other), not the pinned \(expected)"),
            refused.stderr)
    }

    /// A tree pinned alone (no archive checksum) is a pin: the archive is not asked for again.
    func testATreePinnedAloneIsVerifiedAndKeptWithoutAskingTheServer() throws {
        try fixture.source("sdk", Self.sdk)
        let tree = try fixture.nixHash("src/sdk")
        let url = fixture.publish("/sdk.tar.zst", try fixture.pack("sdk", format: "tar.zst"))
        try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk", extract: ["tree: \(tree)"])])
        try fixture.syncSucceeds()
        XCTAssertEqual(try fixture.listing("out/sdk"), try fixture.listing("src/sdk"))
        fixture.server.resetLog()
        let again = try fixture.syncSucceeds()
        XCTAssertTrue(again.stdout.contains("Nothing to do"), again.stdout)
        XCTAssertEqual(fixture.server.requests.count, 0)
    }

    func testAWrongTreePinFailsAndLeavesTheOldTreeUntouched() throws {
        try fixture.source("sdk", Self.sdk)
        try fixture.source("sdk2", Self.sdkVersion2)
        let old = try fixture.pack("sdk", format: "tar.gz")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk-1.tar.gz", old), dest: "sdk", sha256: sha256(old))
        ])
        try fixture.syncSucceeds()
        let before = try fixture.listing("out/sdk")

        let wrongTree = try fixture.nixHash("src/sdk")  // version 1's tree, pinned for version 2's archive
        let actual = try fixture.nixHash("src/sdk2")
        let url = fixture.publish("/sdk-2.tar.gz", try fixture.pack("sdk2", format: "tar.gz"))
        try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk", extract: ["tree: \(wrongTree)"])])
        let refused = try fixture.haul(["sync"])
        XCTAssertEqual(refused.exitCode, 1, refused.stdout + refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains("error: sdk: the unpacked tree's digest is \(actual), not the pinned \(wrongTree)"),
            refused.stderr)
        XCTAssertEqual(try fixture.listing("out/sdk"), before)
        fixture.assertNoLitter(destinations: ["sdk"])
    }

    func testAWrongArchiveChecksumFailsAndLeavesTheOldTreeUntouched() throws {
        try fixture.source("sdk", Self.sdk)
        try fixture.source("sdk2", Self.sdkVersion2)
        let old = try fixture.pack("sdk", format: "tar.xz")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk-1.tar.xz", old), dest: "sdk", sha256: sha256(old))
        ])
        try fixture.syncSucceeds()
        let before = try fixture.listing("out/sdk")

        let new = try fixture.pack("sdk2", format: "tar.xz")
        let url = fixture.publish("/sdk-2.tar.xz", new)
        let pinned = sha256(Array("something else".utf8))
        try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk", sha256: pinned)])
        let refused = try fixture.haul(["sync"])
        XCTAssertEqual(refused.exitCode, 1, refused.stdout + refused.stderr)
        XCTAssertTrue(refused.stderr.contains("error: sdk: "), refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains(sha256(new)) && refused.stderr.contains(pinned),
            "the error names the digest received and the one pinned: \(refused.stderr)")
        XCTAssertEqual(try fixture.listing("out/sdk"), before)
        fixture.assertNoLitter(destinations: ["sdk"])
    }

    // MARK: Keeping the tree

    /// A no-op of an unchanged tree judges every member by its identity: no member file is opened (inotify), and
    /// nothing is requested. The check can fail: `--rehash` opens every member.
    func testANoOpOfAnUnchangedTreeOpensNoMemberFile() throws {
        try fixture.source("sdk", Self.sdk)
        let archive = try fixture.pack("sdk", format: "tar.gz")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk.tar.gz", archive), dest: "sdk", sha256: sha256(archive))
        ])
        try fixture.syncSucceeds()
        let folders = [
            "out/sdk", "out/sdk/bin", "out/sdk/lib", "out/sdk/share", "out/sdk/share/doc", "out/sdk/share/empty",
        ]
        let members: Set<String> = [
            "out/sdk/README", "out/sdk/bin/tool", "out/sdk/lib/libx.so", "out/sdk/lib/libx.a",
            "out/sdk/share/doc/guide.md",
        ]
        let watch = try FileOpenWatch(folders: folders.map { fixture.directory.path($0) }, base: fixture.directory.path)
        fixture.server.resetLog()
        for command in [["sync"], ["plan"]] {
            let run = try fixture.haul(command)
            XCTAssertEqual(run.exitCode, 0, "\(command): \(run.stdout)\(run.stderr)")
            XCTAssertEqual(watch.opened().intersection(members), [], "\(command) opened a member")
        }
        XCTAssertEqual(fixture.server.requests.count, 0)
        let rehash = try fixture.haul(["plan", "--rehash"])
        XCTAssertEqual(rehash.exitCode, 0, rehash.stdout + rehash.stderr)
        XCTAssertEqual(watch.opened().intersection(members), members, "--rehash hashes every member")
    }

    func testAnEditedOrRemovedMemberIsRepairedByTheNextSync() throws {
        try fixture.source("sdk", Self.sdk)
        let packed = try fixture.listing("src/sdk")
        let archive = try fixture.pack("sdk", format: "tar.bz2")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk.tar.bz2", archive), dest: "sdk", sha256: sha256(archive))
        ])
        try fixture.syncSucceeds()

        for damage in ["edit", "remove", "unlink the symlink"] {
            switch damage {
            case "edit": try fixture.directory.write("out/sdk/bin/tool", "#!/bin/sh\necho tampered\n")
            case "remove": unlink(fixture.directory.path("out/sdk/share/doc/guide.md"))
            default: unlink(fixture.directory.path("out/sdk/bin/latest"))
            }
            XCTAssertNotEqual(try fixture.listing("out/sdk"), packed, damage)
            let plan = try fixture.haul(["plan"])
            XCTAssertEqual(plan.exitCode, 2, "\(damage): \(plan.stdout)\(plan.stderr)")
            XCTAssertTrue(
                plan.stdout.contains("~ sdk/ (archive, 1 file in it changed since haul unpacked it"),
                "\(damage): \(plan.stdout)")
            try fixture.syncSucceeds()
            XCTAssertEqual(try fixture.listing("out/sdk"), packed, damage)
            let after = try fixture.haul(["plan"])
            XCTAssertEqual(after.exitCode, 0, "\(damage): \(after.stdout)\(after.stderr)")
        }
        fixture.assertNoLitter(destinations: ["sdk"])
    }

    /// The user's own files in the folder are carried into the new tree when the archive changes upstream, and kept
    /// when the entry is pruned, while every member the archive put there goes.
    func testTheUsersOwnFilesSurviveAReplacementAndAPrune() throws {
        try fixture.source("sdk", Self.sdk)
        try fixture.source("sdk2", Self.sdkVersion2)
        let old = try fixture.pack("sdk", format: "zip")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk-1.zip", old), dest: "sdk", sha256: sha256(old))
        ])
        try fixture.syncSucceeds()
        try fixture.directory.write("out/sdk/notes.txt", "mine\n")
        try fixture.directory.write("out/sdk/bin/my-script", "#!/bin/sh\n")
        try fixture.directory.write("out/sdk/mine/deep/data", "deep\n")

        let new = try fixture.pack("sdk2", format: "zip")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/sdk-2.zip", new), dest: "sdk", sha256: sha256(new))
        ])
        let replaced = try fixture.syncSucceeds()
        let mine = [
            "bin/my-script file 10 " + sha256(Array("#!/bin/sh\n".utf8)), "mine/", "mine/deep/",
            "mine/deep/data file 5 " + sha256(Array("deep\n".utf8)), "notes.txt file 5 " + sha256(Array("mine\n".utf8)),
        ]
        let expected = (try fixture.listing("src/sdk2") + mine).sorted {
            Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8))
        }
        XCTAssertEqual(
            try fixture.listing("out/sdk").sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }, expected
        )
        XCTAssertTrue(
            replaced.stderr.contains("notes.txt"),
            "the kept file is named in a warning: \(replaced.stdout)\(replaced.stderr)")

        let other = ArchiveFixture.entry(fixture.publish("/other.txt", Array("other\n".utf8)), dest: "other.txt")
            .replacingOccurrences(of: "    extract: true\n", with: "")
        try fixture.manifest([other])
        let pruned = try fixture.haul(["sync", "--prune"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stdout + pruned.stderr)
        let left = try fixture.listing("out/sdk")
        XCTAssertEqual(left, ["bin/"] + mine, "only the user's files, and the folders that hold them, are left")
        XCTAssertTrue(
            pruned.stderr.contains("notes.txt"), "the kept file is named in a warning: \(pruned.stdout)\(pruned.stderr)"
        )
        fixture.assertNoLitter(destinations: ["other.txt", "sdk"])
    }

    // MARK: JSON

    /// The `done` event of an extract entry says what any fetch says, how many files (and symlinks) the tree
    /// holds, and its digest when the entry pins it (null otherwise: it is computed only to check a pin).
    func testTheDoneEventOfAnExtractEntryCarriesItsFilesAndTree() throws {
        try fixture.source("sdk", Self.sdk)
        let tree = try fixture.nixHash("src/sdk")
        let archive = try fixture.pack("sdk", format: "tar.gz")
        let url = fixture.publish("/sdk.tar.gz", archive)
        try fixture.manifest([ArchiveFixture.entry(url, dest: "sdk", sha256: sha256(archive))])
        let unpinned = try fixture.syncSucceeds(["--json"])
        let first = try XCTUnwrap(
            ArchiveFixture.events(unpinned.stdout).first { $0["event"] as? String == "done" }, unpinned.stdout)
        XCTAssertTrue(first["tree"] is NSNull, "\(first)")
        XCTAssertEqual(first["files"] as? Int, 6, "\(first)")
        try fixture.manifest([
            ArchiveFixture.entry(url, dest: "sdk", sha256: sha256(archive), extract: ["tree: \(tree)"])
        ])
        let sync = try fixture.syncSucceeds(["--json"])
        let done = try XCTUnwrap(
            ArchiveFixture.events(sync.stdout).first { $0["event"] as? String == "done" }, sync.stdout)
        XCTAssertEqual(done["dest"] as? String, "sdk")
        XCTAssertEqual(done["result"] as? String, "fetched")
        XCTAssertEqual(done["url"] as? String, url)
        XCTAssertEqual(done["bytes"] as? Int, archive.count)
        XCTAssertEqual(done["digest"] as? String, "sha256:" + sha256(archive))
        XCTAssertTrue(done["error"] is NSNull, "\(done)")
        // Members: README, bin/tool, bin/latest, lib/libx.so, lib/libx.a, share/doc/guide.md.
        XCTAssertEqual(done["files"] as? Int, 6, "files: the members the tree holds, in \(done)")
        XCTAssertEqual(done["tree"] as? String, tree, "tree: the tree's digest, in \(done)")
    }
}
