import Foundation
import Glibc
import HaulDigest
import HaulFileSystem
import HaulManifest
import HaulTestSupport
import XCTest

@testable import HaulStore

/// A tree staged in `.haul/tmp` replaces its destination folder whole: the new tree or the old one, the user's own
/// files carried across, ownership journaled first, and what a killed run leaves swept.
final class TreeCommitTests: XCTestCase {
    private let origin = Origin(manifestKey: "haul.yaml")
    /// The engine's form of a staging name (`<run prefix>-<counter>.part`), enough for the sweep's grammar here.
    private let isOwnName: (String) -> Bool = { $0.hasPrefix("1f-") && $0.hasSuffix(".part") }
    private let isLoopFolder: (String) -> Bool = { $0.hasPrefix("loop-") }

    // MARK: - Helpers

    /// A tree as the unpacker leaves it in the staging folder: `files` (path: text) and `symlinks` (path: target).
    private func stage(
        _ staging: StagingArea, _ folderName: String = "1f-1.tree", files: [String: String],
        symlinks: [String: String] = [:]
    ) throws {
        let base = staging.temporary.path + "/" + folderName
        XCTAssertEqual(mkdir(base, 0o755), 0)
        for (path, text) in files {
            let full = base + "/" + path
            try FileManager.default.createDirectory(
                atPath: FileSystemPath.parent(full), withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: full, contents: Data(text.utf8)))
        }
        for (path, target) in symlinks {
            let full = base + "/" + path
            try FileManager.default.createDirectory(
                atPath: FileSystemPath.parent(full), withIntermediateDirectories: true)
            XCTAssertEqual(symlink(target, full), 0)
        }
    }

    /// The request for a tree staged by `stage`, its members' ownership computed from `files`.
    private func request(
        _ folderName: String = "1f-1.tree", to destination: String, files: [String: String],
        carried: [String] = []
    ) throws -> CommitRequest {
        let members = try files.keys.sorted().map { path in
            (
                destination: try dest(destination + "/" + path),
                ownership: Ownership(
                    digest: StreamingHasher.digest(Array(files[path, default: ""].utf8), algorithm: .sha256),
                    origin: origin)
            )
        }
        return CommitRequest(
            tree: StagedTree(folderName: folderName, members: members, carried: carried),
            destination: try dest(destination))
    }

    /// Everything under `path`, by relative path: `file <text>`, `link <target>` or `dir`; symlinks not followed.
    private func snapshot(_ path: String) -> [String: String] {
        var found: [String: String] = [:]
        func walk(_ relative: String) {
            let full = relative.isEmpty ? path : path + "/" + relative
            for name in (try? FileManager.default.contentsOfDirectory(atPath: full)) ?? [] {
                let child = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(path + "/" + child, &info) == 0 else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    found[child] = "dir"
                    walk(child)
                case S_IFLNK:
                    found[child] =
                        "link "
                        + ((try? FileManager.default.destinationOfSymbolicLink(atPath: path + "/" + child)) ?? "?")
                default:
                    found[child] =
                        "file "
                        + String(
                            decoding: FileManager.default.contents(atPath: path + "/" + child) ?? Data(), as: UTF8.self)
                }
            }
        }
        walk("")
        return found
    }

    private func writeFile(_ path: String, _ text: String) throws {
        try FileManager.default.createDirectory(atPath: FileSystemPath.parent(path), withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
    }

    private func inode(_ path: String) -> ino_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_ino : nil
    }

    // MARK: - Switching

    func testATreeGoesWhereNothingWas() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        let staging = try StagingArea(root: root)
        let files = ["README": "read me", "bin/tool": "#!/bin/sh\n", "lib/deep/a.so": "elf"]
        try stage(staging, files: files, symlinks: ["lib/current": "deep"])
        let results = Committer(root: root, staging: staging).commit([try request(to: "vendor/sdk", files: files)])
        XCTAssertEqual(
            try results[0].get(), Committed(identity: nil), "a tree has no identity of its own; nothing to report")
        XCTAssertEqual(
            snapshot(scratch.at("root/vendor/sdk")),
            [
                "README": "file read me", "bin": "dir", "bin/tool": "file #!/bin/sh\n", "lib": "dir", "lib/deep": "dir",
                "lib/deep/a.so": "file elf", "lib/current": "link deep",
            ])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: staging.temporary.path), [])
    }

    func testATreeReplacesTheOldOneWhole() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        try scratch.write("root/sdk/only-old.txt", "old")
        try scratch.write("root/sdk/shared.txt", "old shared")
        try scratch.write("root/sdk/gone/deep.txt", "old deep")
        let staging = try StagingArea(root: root)
        let files = ["shared.txt": "new shared", "only-new.txt": "new", "sub/x": "x"]
        try stage(staging, files: files)
        let results = Committer(root: root, staging: staging).commit([try request(to: "sdk", files: files)])
        XCTAssertNil(results[0].failure)
        XCTAssertEqual(
            snapshot(scratch.at("root/sdk")),
            [
                "shared.txt": "file new shared", "only-new.txt": "file new", "sub": "dir", "sub/x": "file x",
            ])
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: staging.temporary.path), [],
            "the old tree is removed once the switch is synced")
    }

    /// The user's own files in the old tree (a file, a file in folders of its own, a symlink) are in the new tree:
    /// the files as the same inodes (hard links, so nothing is copied and nothing can be lost), the symlink with the
    /// same target.
    func testTheUsersFilesAreCarriedIntoTheNewTree() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        try scratch.write("root/sdk/member.txt", "old member")
        try scratch.write("root/sdk/notes.txt", "my notes")
        try scratch.write("root/sdk/mine/deep/keep.cfg", "my config")
        try scratch.write("root/sdk/lib/local.patch", "my patch")
        try scratch.symlink("root/sdk/latest", to: "member.txt")
        let inodes = ["notes.txt", "mine/deep/keep.cfg", "lib/local.patch"].map { inode(scratch.at("root/sdk/" + $0)) }
        let staging = try StagingArea(root: root)
        let files = ["member.txt": "new member", "lib/a.so": "elf"]
        try stage(staging, files: files)
        let results = Committer(root: root, staging: staging).commit([
            try request(
                to: "sdk", files: files,
                carried: [
                    "notes.txt", "mine/deep/keep.cfg", "lib/local.patch", "latest",
                    "vanished.txt",
                ])
        ])
        XCTAssertNil(results[0].failure, "a carried file the user removed since is nothing to keep")
        XCTAssertEqual(
            snapshot(scratch.at("root/sdk")),
            [
                "member.txt": "file new member", "lib": "dir", "lib/a.so": "file elf",
                "lib/local.patch": "file my patch",
                "notes.txt": "file my notes", "mine": "dir", "mine/deep": "dir", "mine/deep/keep.cfg": "file my config",
                "latest": "link member.txt",
            ])
        XCTAssertEqual(
            ["notes.txt", "mine/deep/keep.cfg", "lib/local.patch"].map { inode(scratch.at("root/sdk/" + $0)) }, inodes)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: staging.temporary.path), [])
    }

    /// A user's file where the new tree has a member of the same name is never overwritten: the request fails,
    /// naming it, before anything is visible, and the old tree stays whole.
    func testACarriedFileThatCollidesWithAMemberFailsAndLeavesTheOldTreeWhole() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        try scratch.write("root/sdk/member.txt", "old member")
        try scratch.write("root/sdk/notes.txt", "my notes")
        try scratch.write("root/sdk/mine/a.txt", "mine")
        let before = snapshot(scratch.at("root/sdk"))
        let staging = try StagingArea(root: root)
        let committer = Committer(root: root, staging: staging)

        let clashing = ["member.txt": "new", "notes.txt": "the archive's notes"]
        try stage(staging, "1f-1.tree", files: clashing)
        var failure = try XCTUnwrap(
            committer.commit([
                try request("1f-1.tree", to: "sdk", files: clashing, carried: ["notes.txt"])
            ])[0].failure)
        XCTAssertEqual(
            failure.description,
            "cannot carry into the new tree \"sdk/notes.txt\": the new tree has a member "
                + "of that name; the old tree is left as it was")
        XCTAssertEqual(snapshot(scratch.at("root/sdk")), before)

        let blocking = ["member.txt": "new", "mine": "a file where the user has a folder"]
        try stage(staging, "1f-2.tree", files: blocking)
        failure = try XCTUnwrap(
            committer.commit([
                try request("1f-2.tree", to: "sdk", files: blocking, carried: ["mine/a.txt"])
            ])[0].failure)
        XCTAssertEqual(
            failure.description,
            "cannot carry into the new tree \"sdk/mine/a.txt\": the new tree has \"mine\", "
                + "which is not a folder; the old tree is left as it was")
        XCTAssertEqual(snapshot(scratch.at("root/sdk")), before)
        XCTAssertEqual(
            snapshot(staging.temporary.path + "/1f-2.tree"),
            ["member.txt": "file new", "mine": "file a file where the user has a folder"],
            "the staged tree is the caller's to discard")
        staging.discardTree("1f-1.tree")
        staging.discardTree("1f-2.tree")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: staging.temporary.path), [])
        XCTAssertEqual(
            snapshot(scratch.at("root/sdk")), before, "discarding the staged tree takes nothing from the old one")
    }

    func testAnythingButAFolderAtTheDestinationFailsUntouched() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        let root = scratch.at("root")
        try scratch.write("root/file", "a file")
        try outside.write("folder/precious", "precious")
        try scratch.symlink("root/link", to: outside.at("folder"))
        XCTAssertEqual(mkfifo(scratch.at("root/fifo"), 0o600), 0)
        let staging = try StagingArea(root: root)
        let files = ["a": "new"]
        var requests: [CommitRequest] = []
        for (number, name) in ["file", "link", "fifo"].enumerated() {
            try stage(staging, "1f-\(number).tree", files: files)
            requests.append(try request("1f-\(number).tree", to: name, files: files))
        }
        let results = Committer(root: root, staging: staging).commit(requests)
        XCTAssertEqual(
            results.map { $0.failure?.description },
            [
                "cannot rename into \"file\": a regular file is in the way",
                "cannot rename into \"link\": a symlink is in the way",
                "cannot rename into \"fifo\": a FIFO is in the way",
            ])
        XCTAssertEqual(scratch.read("root/file"), Array("a file".utf8))
        XCTAssertTrue(isSymlink(scratch.linkStatus("root/link")))
        XCTAssertEqual(scratch.linkStatus("root/fifo").map { $0.st_mode & S_IFMT }, S_IFIFO)
        XCTAssertEqual(snapshot(outside.at("folder")), ["precious": "file precious"])
    }

    func testASymlinkedParentLeadingOutsideRootIsRefused() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        try scratch.mkdir("root")
        try scratch.symlink("root/out", to: outside.path)
        let staging = try StagingArea(root: scratch.at("root"))
        let files = ["a": "new"]
        try stage(staging, files: files)
        let failure = try XCTUnwrap(
            Committer(root: scratch.at("root"), staging: staging).commit([
                try request(to: "out/sdk", files: files)
            ])[0].failure)
        XCTAssertEqual(
            failure.description,
            "cannot write \"out/sdk\": parent \"out\" is a symlink to \(outside.path), outside root")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing lands outside root")
    }

    /// A destination inside a tree the same batch replaces would be switched away with the old tree: refused. So is
    /// a member the journal would record outside the tree's destination.
    func testNothingOfTheSameBatchGoesInsideATreeAndMembersStayInsideIt() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        let staging = try StagingArea(root: root)
        let files = ["a": "new"]
        try stage(staging, "1f-1.tree", files: files)
        try stage(staging, "1f-2.tree", files: files)
        let temporary = try staging.makeTestFile()
        var stray = try request("1f-2.tree", to: "other", files: files)
        stray.tree?.members.append(
            (try dest("elsewhere/b"), Ownership(digest: StreamingHasher.digest([], algorithm: .sha256), origin: origin))
        )
        let results = Committer(root: root, staging: staging).commit([
            try request("1f-1.tree", to: "sdk", files: files),
            CommitRequest(temporaryPath: temporary, destination: try dest("sdk/extra/file.txt"), mode: FileMode(0o644)),
            stray,
        ])
        XCTAssertNil(results[0].failure)
        XCTAssertEqual(
            results[1].failure?.description,
            "cannot write \"sdk/extra/file.txt\": it is inside \"sdk\", which the same commit replaces whole")
        XCTAssertEqual(
            results[2].failure?.description,
            "cannot record its ownership in \"other\": its member \"elsewhere/b\" is not inside it")
        XCTAssertEqual(snapshot(scratch.at("root/sdk")), ["a": "file new"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.at("root/other")))
    }

    // MARK: - Journal

    /// The members' ownership is in the journal before the switch: read back after a commit, and after a switch
    /// the kernel refused (the destination's folder is another mount: EXDEV) with the old tree left in place.
    func testTheJournalHoldsTheMembersBeforeTheSwitch() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        try scratch.mkdir("root/mnt")
        let area = try PrivateArea.create(root: root)
        let staging = try StagingArea(area: area)
        let committer = Committer(root: root, staging: staging.temporary, journal: OwnershipJournal(area: area))
        let files = ["bin/tool": "tool", "README": "read me"]
        try stage(staging, "1f-1.tree", files: files)
        XCTAssertNil(committer.commit([try request("1f-1.tree", to: "sdk", files: files)])[0].failure)
        var records = try XCTUnwrap(OwnershipJournal.read(in: area).records)
        XCTAssertEqual(Set(records.keys), ["sdk/bin/tool", "sdk/README"])
        XCTAssertEqual(records["sdk/bin/tool"]?.digest, StreamingHasher.digest(Array("tool".utf8), algorithm: .sha256))
        XCTAssertEqual(records["sdk/README"]?.origin?.manifestKey, "haul.yaml")

        let mount: TestMount
        do {
            mount = try TestMount.tmpfs(at: scratch.at("root/mnt"), size: 1 << 20)
        } catch let unavailable as FaultUnavailable {
            throw Capability.unavailable("no second file system to make the switch fail: \(unavailable)")
        }
        defer { mount.unmount() }
        try scratch.write("root/mnt/sdk/old.txt", "old")
        try stage(staging, "1f-2.tree", files: ["new.txt": "new"])
        let failure = try XCTUnwrap(
            committer.commit([try request("1f-2.tree", to: "mnt/sdk", files: ["new.txt": "new"])])[0].failure)
        XCTAssertEqual(failure.errno, EXDEV)
        XCTAssertEqual(
            failure.description,
            "cannot rename into \"mnt/sdk\": its folder is on another mount than haul's "
                + "staging area \(staging.temporary.path) (rename(2) cannot cross mounts)")
        records = try XCTUnwrap(OwnershipJournal.read(in: area).records)
        XCTAssertEqual(
            Set(records.keys), ["sdk/bin/tool", "sdk/README", "mnt/sdk/new.txt"], "journaled before the switch")
        XCTAssertEqual(snapshot(scratch.at("root/mnt/sdk")), ["old.txt": "file old"])
    }

    // MARK: - Sweep and removal

    /// Trees a killed run left (staged, old, set aside) go whole at the next run's start, without following a
    /// symlink out of them; names the staging grammar does not know stay.
    func testTheSweepRemovesLeftoverTreesAndNothingElse() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        try outside.write("sentinel/precious.txt", "precious")
        let root = scratch.at("root")
        let staging = try StagingArea(root: root)
        let tmp = staging.temporary.path
        for leftover in ["1f-1.tree", "1f-2.tree.aside"] {
            try writeFile(tmp + "/\(leftover)/a/b/c/file.txt", "member")
            XCTAssertEqual(symlink(outside.at("sentinel"), tmp + "/\(leftover)/a/out"), 0)
            XCTAssertEqual(symlink(outside.at("sentinel/precious.txt"), tmp + "/\(leftover)/a/b/file-out"), 0)
        }
        for kept in ["notes.tree", "1f-3.tree.old", "1f-4.tree.aside.aside"] {
            XCTAssertEqual(mkdir(tmp + "/" + kept, 0o755), 0)
        }
        XCTAssertEqual(symlink(outside.at("sentinel"), tmp + "/1f-5.tree"), 0, "a leftover name that is a symlink")
        // A transfer loop's folder: its own files go; what someone else put there stays, and the folder with it.
        try writeFile(tmp + "/loop-1/1f-8.part", "staged")
        try writeFile(tmp + "/loop-1/notes.txt", "mine")
        try writeFile(tmp + "/other/1f-9.part", "not a loop's folder")
        staging.sweep(keepingPartials: [], isOwnName: isOwnName, isLoopFolder: isLoopFolder)
        XCTAssertEqual(
            Set(try FileManager.default.contentsOfDirectory(atPath: tmp)),
            ["notes.tree", "1f-3.tree.old", "1f-4.tree.aside.aside", "loop-1", "other"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmp + "/loop-1"), ["notes.txt"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmp + "/other"), ["1f-9.part"])
        XCTAssertEqual(snapshot(outside.path), ["sentinel": "dir", "sentinel/precious.txt": "file precious"])

        // The same when nothing is fetched, in a shard's folder and its loops' folders too.
        try writeFile(tmp + "/shard-1-of-2/1f-6.tree/x/y", "member")
        try writeFile(tmp + "/shard-1-of-2/loop-2/1f-a.part", "staged")
        try writeFile(tmp + "/1f-7.tree/z", "member")
        try writeFile(tmp + "/loop-1/1f-b.part", "staged")
        StagingArea.sweepLeftovers(
            in: try PrivateArea.create(root: root), isOwnName: isOwnName, isLoopFolder: isLoopFolder)
        XCTAssertEqual(
            Set(try FileManager.default.contentsOfDirectory(atPath: tmp)),
            ["notes.tree", "1f-3.tree.old", "1f-4.tree.aside.aside", "shard-1-of-2", "loop-1", "other"])
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: tmp + "/shard-1-of-2"), [],
            "an emptied loop folder goes")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmp + "/loop-1"), ["notes.txt"])

        // At the end of a run: the loops' folders that are empty go, the others stay for the next sweep.
        XCTAssertEqual(mkdir(tmp + "/loop-3", 0o700), 0)
        staging.removeLoopFolders(isLoopFolder: isLoopFolder)
        XCTAssertEqual(
            Set(try FileManager.default.contentsOfDirectory(atPath: tmp)),
            ["notes.tree", "1f-3.tree.old", "1f-4.tree.aside.aside", "shard-1-of-2", "loop-1", "other"])
    }

    func testATreeFolderIsNamedAfterItsDownloadAndKnownByTheSameGrammar() {
        XCTAssertEqual(StagedTree.folderName(forTemporaryName: "1f-a.part"), "1f-a.tree")
        XCTAssertTrue(StagedTree.isLeftover(StagedTree.folderName(forTemporaryName: "1f-a.part"), isOwnName: isOwnName))
        XCTAssertTrue(StagedTree.isLeftover("1f-a.tree.aside", isOwnName: isOwnName))
        XCTAssertFalse(StagedTree.isLeftover("1f-a.part", isOwnName: isOwnName), "a download is a file, not a tree")
        XCTAssertFalse(StagedTree.isLeftover(".tree", isOwnName: { _ in true }))
        XCTAssertFalse(StagedTree.isLeftover("2e-a.tree", isOwnName: isOwnName))
    }

    /// Deeper than the folders it holds open, through names that are not UTF-8, past symlinks to a folder and a
    /// file outside: all of the tree goes, nothing outside it.
    func testTreeRemovalNeverFollowsASymlinkAndHoldsFewFolders() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        try outside.write("sentinel/precious.txt", "precious")
        var deep = "tree"
        for level in 0..<(TreeRemoval.defaultHeldLimit * 2) {
            deep += "/\(level)"
            try scratch.write(deep + "/file", "level \(level)")
            XCTAssertEqual(symlink(outside.at("sentinel"), scratch.at(deep + "/out")), 0)
        }
        XCTAssertEqual(symlink(outside.at("sentinel/precious.txt"), scratch.at("tree/file-out")), 0)
        let invalid: [CChar] =
            Array(scratch.at("tree/0/").utf8CString.dropLast()) + [CChar(bitPattern: 0xFF), CChar(bitPattern: 0xFE), 0]
        XCTAssertEqual(mkdir(invalid, 0o755), 0)
        XCTAssertEqual(chmod(scratch.at("tree/0/1"), 0o555), 0, "a folder whose owner may not change it")
        let folder = try DirectoryHandle.opening(scratch.path)
        XCTAssertNil(folder.removeTree("tree", holdingAtMost: TreeRemoval.defaultHeldLimit / 2))
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.at("tree")))
        XCTAssertEqual(snapshot(outside.path), ["sentinel": "dir", "sentinel/precious.txt": "file precious"])
        XCTAssertNil(folder.removeTree("tree"), "a missing tree is nothing to remove")
        try scratch.write("plain", "a file")
        XCTAssertNil(folder.removeTree("plain"))
        XCTAssertNil(scratch.linkStatus("plain"))
    }

    /// A file system mounted inside a tree is not the tree's: it is not entered, and its files stay.
    func testTreeRemovalDoesNotEnterAMount() throws {
        let scratch = try Scratch()
        try scratch.write("tree/a/file", "member")
        try scratch.mkdir("tree/a/mounted")
        let mount: TestMount
        do {
            mount = try TestMount.tmpfs(at: scratch.at("tree/a/mounted"), size: 1 << 20)
        } catch let unavailable as FaultUnavailable {
            throw Capability.unavailable("no mount for the removal to stop at: \(unavailable)")
        }
        defer { mount.unmount() }
        try scratch.write("tree/a/mounted/theirs", "not the tree's")
        let failure = try XCTUnwrap(try DirectoryHandle.opening(scratch.path).removeTree("tree"))
        XCTAssertEqual(
            failure.description,
            scratch.at("tree/a/mounted") + ": another file system is mounted there; it is left as it is")
        XCTAssertEqual(scratch.read("tree/a/mounted/theirs"), Array("not the tree's".utf8))
        XCTAssertNil(scratch.linkStatus("tree/a/file"), "the rest goes")
    }

    // MARK: - Without RENAME_EXCHANGE

    /// FUSE file systems on libfuse 2 (as `faultfs.py`) take no renameat2 flag at all: the kernel answers EINVAL to
    /// RENAME_EXCHANGE and RENAME_NOREPLACE alike. There a tree goes in by plain renames (the old tree set aside
    /// first), carried files included; a failed folder sync still removes the old tree and says `notDurable`; a
    /// failed first rename leaves the destination as it was.
    func testWithoutRenameExchangeATreeIsSwitchedByTwoRenames() throws {
        let directory = try TemporaryDirectory()
        let faults = try Capability.required {
            try FaultFileSystem(over: directory, mountPoint: "out", backing: "back")
        }
        defer { faults.unmount() }
        let root = directory.path("out")
        try directory.write("out/data/sdk/old.txt", "old")
        try directory.write("out/data/sdk/notes.txt", "my notes")
        let staging = try StagingArea(root: root)
        let committer = Committer(root: root, staging: staging)
        try directory.makeDirectory("out/data/probe")
        let data = try DirectoryHandle.opening(directory.path("out/data"))
        XCTAssertEqual(
            data.exchange("sdk", with: "probe", in: data)?.errno, EINVAL,
            "this FUSE mount refuses RENAME_EXCHANGE; without that this test covers nothing")
        try FileManager.default.removeItem(atPath: directory.path("out/data/probe"))

        let noted = inode(directory.path("back/data/sdk/notes.txt"))
        try stage(staging, "1f-1.tree", files: ["new.txt": "new"])
        try stage(staging, "1f-2.tree", files: ["fresh.txt": "fresh"])
        var results = committer.commit([
            try request("1f-1.tree", to: "data/sdk", files: ["new.txt": "new"], carried: ["notes.txt"]),
            try request("1f-2.tree", to: "data/fresh", files: ["fresh.txt": "fresh"]),
        ])
        XCTAssertNil(results[0].failure)
        XCTAssertNil(results[1].failure)
        XCTAssertEqual(
            snapshot(directory.path("back/data/sdk")), ["new.txt": "file new", "notes.txt": "file my notes"])
        XCTAssertEqual(inode(directory.path("back/data/sdk/notes.txt")), noted, "carried as a link, not a copy")
        XCTAssertEqual(snapshot(directory.path("back/data/fresh")), ["fresh.txt": "file fresh"])
        XCTAssertEqual(directory.list("back/.haul/tmp"), [])

        try faults.inject(["fsyncdir data"])
        try stage(staging, "1f-3.tree", files: ["newer.txt": "newer"])
        results = committer.commit([try request("1f-3.tree", to: "data/sdk", files: ["newer.txt": "newer"])])
        XCTAssertEqual(
            try results[0].get().notDurable?.description,
            "cannot sync the directory of \"data/sdk\": Input/output error")
        XCTAssertEqual(snapshot(directory.path("back/data/sdk")), ["newer.txt": "file newer"])
        XCTAssertEqual(directory.list("back/.haul/tmp"), [], "the old tree goes even when the folder's sync failed")

        try faults.inject(["rename aside"])
        try stage(staging, "1f-4.tree", files: ["newest.txt": "newest"])
        let failure = try XCTUnwrap(
            committer.commit([try request("1f-4.tree", to: "data/sdk", files: ["newest.txt": "newest"])])[0].failure)
        XCTAssertEqual(failure.description, "cannot rename into \"data/sdk\": Input/output error")
        XCTAssertEqual(snapshot(directory.path("back/data/sdk")), ["newer.txt": "file newer"])
    }
}
