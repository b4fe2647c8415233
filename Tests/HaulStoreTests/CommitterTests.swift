import Foundation
import Glibc
import HaulCommand
import HaulDigest
import HaulFailures
import HaulManifest
import HaulStore
import HaulTestSupport
import XCTest

final class CommitterTests: XCTestCase {
    /// A verified temporary file as the engine would leave it.
    private func staged(_ staging: StagingArea, _ text: String) throws -> String {
        let path = try staging.makeTestFile()
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) else { throw POSIXError(.EIO) }
        return path
    }

    func testStagingDirectoriesArePrivate() throws {
        let scratch = try Scratch()
        let root = scratch.at("not-yet/root")
        let staging = try StagingArea(root: root)
        XCTAssertEqual(staging.temporary.path, root + "/.haul/tmp")
        XCTAssertEqual(staging.partial.path, root + "/.haul/partial")
        XCTAssertEqual(permissions(scratch.linkStatus("not-yet/root/.haul/tmp")), 0o700)
        XCTAssertEqual(permissions(scratch.linkStatus("not-yet/root/.haul/partial")), 0o700)
        XCTAssertEqual(permissions(scratch.linkStatus("not-yet/root/.haul")), 0o700)

    }

    /// Temporary files carry their final mode before they are verified: staging folders found open to others
    /// (made by hand, by an older tool) are closed before anything is written in them.
    func testStagingClosesFoldersFoundOpenToOthers() throws {
        let scratch = try Scratch()
        for folder in ["root/.haul/tmp", "root/.haul/partial"] {
            try scratch.mkdir(folder)
            XCTAssertEqual(chmod(scratch.at(folder), 0o755), 0)
        }
        XCTAssertEqual(chmod(scratch.at("root/.haul"), 0o777), 0)
        _ = try StagingArea(root: scratch.at("root"))
        for folder in ["root/.haul", "root/.haul/tmp", "root/.haul/partial"] {
            XCTAssertEqual(permissions(scratch.linkStatus(folder)), 0o700, folder)
        }
        XCTAssertEqual(permissions(scratch.linkStatus("root")), 0o755, "root itself is the user's")
    }

    func testStagingRefusesASymlinkedHaulDirectory() throws {
        let scratch = try Scratch()
        try scratch.mkdir("root")
        try scratch.mkdir("elsewhere")
        try scratch.symlink("root/.haul", to: scratch.at("elsewhere"))
        XCTAssertThrowsError(try StagingArea(root: scratch.at("root"))) { error in
            XCTAssertEqual(
                (error as? PrivateAreaError).map(StoreWording.sentence),
                "\(scratch.at("root/.haul")) is a symlink to \(scratch.at("elsewhere")); "
                    + "haul's folder must be a real directory inside root")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.at("elsewhere")), [])
    }

    func testCommitCreatesParentsAndPlacesContent() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        let staging = try StagingArea(root: root)
        let committer = Committer(root: root, staging: staging)
        let temporary = try staged(staging, "payload")
        let results = committer.commit([
            CommitRequest(
                temporaryPath: temporary, destination: try dest("a/b/c/file.txt"),
                mode: FileMode(0o644))
        ])
        XCTAssertNil(results[0].failure)
        XCTAssertEqual(scratch.read("root/a/b/c/file.txt"), Array("payload".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: temporary))
        XCTAssertEqual(scratch.linkStatus("root/a/b").map { $0.st_mode & S_IFMT }, S_IFDIR)
        // The identity the state will record is the destination's as the commit left it (after mode and rename).
        let identity = try XCTUnwrap(try results[0].get().identity)
        XCTAssertEqual(identity, FileIdentity.of(path: scratch.at("root/a/b/c/file.txt")))
    }

    func testModeIsExactRegardlessOfUmask() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        let staging = try StagingArea(root: root)
        let committer = Committer(root: root, staging: staging)
        let previous = umask(0o077)
        defer { umask(previous) }
        var results = committer.commit([
            CommitRequest(
                temporaryPath: try staged(staging, "x"), destination: try dest("exec.sh"),
                mode: FileMode(0o755))
        ])
        XCTAssertNil(results[0].failure)
        XCTAssertEqual(permissions(scratch.linkStatus("root/exec.sh")), 0o755)

        umask(0)
        results = committer.commit([
            CommitRequest(
                temporaryPath: try staged(staging, "y"), destination: try dest("private.key"),
                mode: FileMode(0o600))
        ])
        XCTAssertNil(results[0].failure)
        XCTAssertEqual(permissions(scratch.linkStatus("root/private.key")), 0o600)
    }

    func testSymlinkAtDestinationIsReplacedNotWrittenThrough() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        try outside.write("target.txt", "precious")
        try scratch.mkdir("root")
        try scratch.symlink("root/d.txt", to: outside.at("target.txt"))
        let staging = try StagingArea(root: scratch.at("root"))
        let results = Committer(root: scratch.at("root"), staging: staging).commit([
            CommitRequest(
                temporaryPath: try staged(staging, "new"), destination: try dest("d.txt"), mode: FileMode(0o644))
        ])
        XCTAssertNil(results[0].failure)
        XCTAssertTrue(isRegular(scratch.linkStatus("root/d.txt")))
        XCTAssertEqual(scratch.read("root/d.txt"), Array("new".utf8))
        XCTAssertEqual(outside.read("target.txt"), Array("precious".utf8))
    }

    func testDirectoryAtDestinationFailsThatRequestOnly() throws {
        let scratch = try Scratch()
        try scratch.mkdir("root/data/taken")
        let staging = try StagingArea(root: scratch.at("root"))
        let blocked = try staged(staging, "one")
        let results = Committer(root: scratch.at("root"), staging: staging).commit([
            CommitRequest(temporaryPath: blocked, destination: try dest("data/taken"), mode: FileMode(0o644)),
            CommitRequest(
                temporaryPath: try staged(staging, "two"), destination: try dest("data/fine.txt"), mode: FileMode(0o644)
            ),
        ])
        let failure = try XCTUnwrap(results[0].failure)
        XCTAssertEqual(failure.errno, EISDIR)
        XCTAssertEqual(failure.description, "cannot rename into \"data/taken\": a directory is in the way")
        XCTAssertNil(results[1].failure)
        XCTAssertEqual(scratch.read("root/data/fine.txt"), Array("two".utf8))
        XCTAssertEqual(scratch.linkStatus("root/data/taken").map { $0.st_mode & S_IFMT }, S_IFDIR)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: blocked), "the caller discards a failed request's temp file")
    }

    func testParentSymlinkInsideRootIsUsedOutsideIsRefused() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        try scratch.mkdir("root/real")
        try scratch.symlink("root/alias", to: "real")
        try scratch.symlink("root/out", to: outside.path)
        let staging = try StagingArea(root: scratch.at("root"))
        let escaping = try staged(staging, "evil")
        let results = Committer(root: scratch.at("root"), staging: staging).commit([
            CommitRequest(temporaryPath: escaping, destination: try dest("out/x.txt"), mode: FileMode(0o644)),
            CommitRequest(
                temporaryPath: try staged(staging, "ok"), destination: try dest("alias/y.txt"), mode: FileMode(0o644)),
            CommitRequest(
                temporaryPath: try staged(staging, "deep"), destination: try dest("out/new/z.txt"),
                mode: FileMode(0o644)),
        ])
        let failure = try XCTUnwrap(results[0].failure)
        XCTAssertEqual(failure.errno, 0)
        XCTAssertTrue(
            failure.description.hasPrefix("cannot write \"out/x.txt\": parent \"out\" is a symlink to "),
            failure.description)
        XCTAssertTrue(failure.description.hasSuffix(", outside root"), failure.description)
        XCTAssertNil(results[1].failure)
        XCTAssertNotNil(results[2].failure)
        XCTAssertEqual(scratch.read("root/real/y.txt"), Array("ok".utf8))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing may be created outside root"
        )
        XCTAssertTrue(FileManager.default.fileExists(atPath: escaping))
    }

    func testHaulsOwnAreaIsNotADestination() throws {
        let scratch = try Scratch()
        let staging = try StagingArea(root: scratch.path)
        let results = Committer(root: scratch.path, staging: staging).commit([
            CommitRequest(
                temporaryPath: try staged(staging, "x"), destination: try dest(".haul/tmp/other.part"),
                mode: FileMode(0o644))
        ])
        XCTAssertEqual(results[0].failure?.errno, 0)
    }

    /// Tests run as root in CI, which bypasses permission bits: there the same guarantee is checked with a fault
    /// root cannot override (the parent is a regular file).
    func testUnwritableParentFailsNamingThePath() throws {
        let scratch = try Scratch()
        let staging = try StagingArea(root: scratch.path)
        let committer = Committer(root: scratch.path, staging: staging)
        let temporary = try staged(staging, "new")
        if geteuid() != 0 {
            try scratch.write("ro/a.txt", "old")
            XCTAssertEqual(chmod(scratch.at("ro"), 0o555), 0)
            defer { chmod(scratch.at("ro"), 0o755) }
            let failure = try XCTUnwrap(
                committer.commit([
                    CommitRequest(temporaryPath: temporary, destination: try dest("ro/a.txt"), mode: FileMode(0o644))
                ])[0].failure)
            XCTAssertEqual(failure.errno, EACCES)
            XCTAssertEqual(failure.description, "cannot rename into \"ro/a.txt\": Permission denied")
            XCTAssertEqual(scratch.read("ro/a.txt"), Array("old".utf8))
        } else {
            try scratch.write("plain", "a file, not a folder")
            let failure = try XCTUnwrap(
                committer.commit([
                    CommitRequest(temporaryPath: temporary, destination: try dest("plain/a.txt"), mode: FileMode(0o644))
                ])[0].failure)
            XCTAssertEqual(failure.errno, ENOTDIR)
            XCTAssertEqual(failure.description, "cannot write \"plain/a.txt\": parent \"plain\" is not a directory")
            XCTAssertEqual(scratch.read("plain"), Array("a file, not a folder".utf8))
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: temporary))
    }

    /// A rename that the kernel refuses must leave the old bytes in place. Unprivileged: a 0555 parent. As root:
    /// the destination's folder is another mount (a tmpfs), which rename(2) refuses with EXDEV for anyone.
    func testFailedRenameLeavesOldContentByteIdentical() throws {
        let scratch = try Scratch()
        var generator = SystemRandomNumberGenerator()
        let old = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        try scratch.mkdir("data")
        let staging = try StagingArea(root: scratch.path)
        let committer = Committer(root: scratch.path, staging: staging)
        let temporary = try staging.makeTestFile()
        let expectedErrno: Int32
        var mount: TestMount?
        if geteuid() != 0 {
            expectedErrno = EACCES
        } else {
            do {
                mount = try TestMount.tmpfs(at: scratch.at("data"), size: 1 << 20)
            } catch let unavailable as FaultUnavailable {
                throw Capability.unavailable("no second file system to make rename(2) fail as root: \(unavailable)")
            }
            expectedErrno = EXDEV
        }
        defer {
            chmod(scratch.at("data"), 0o755)
            mount?.unmount()
        }
        try scratch.write("data/a.bin", old)
        if geteuid() != 0 { XCTAssertEqual(chmod(scratch.at("data"), 0o555), 0) }
        XCTAssertTrue(FileManager.default.createFile(atPath: temporary, contents: Data("replacement".utf8)))

        let results = committer.commit([
            CommitRequest(temporaryPath: temporary, destination: try dest("data/a.bin"), mode: FileMode(0o644))
        ])
        let failure = try XCTUnwrap(results[0].failure)
        XCTAssertEqual(failure.errno, expectedErrno)
        XCTAssertEqual(failure.path, "data/a.bin")
        XCTAssertTrue(failure.description.hasPrefix("cannot rename into \"data/a.bin\": "), failure.description)
        XCTAssertEqual(scratch.read("data/a.bin"), old)
    }

    func testMissingTemporaryFileFailsBeforeAnyRename() throws {
        let scratch = try Scratch()
        try scratch.write("a.txt", "old")
        let staging = try StagingArea(root: scratch.path)
        let gone = staging.temporary.path + "/never-made.part"
        let failure = try XCTUnwrap(
            Committer(root: scratch.path, staging: staging).commit([
                CommitRequest(temporaryPath: gone, destination: try dest("a.txt"), mode: FileMode(0o644))
            ])[0].failure)
        XCTAssertEqual(failure.errno, ENOENT)
        XCTAssertEqual(failure.description, "cannot set mode 0644 on \"\(gone)\": No such file or directory")
        XCTAssertEqual(scratch.read("a.txt"), Array("old".utf8))
    }

    func testManyFilesInBatchesAcrossFolders() throws {
        let scratch = try Scratch()
        let root = scratch.at("root")
        let staging = try StagingArea(root: root)
        let committer = Committer(root: root, staging: staging)
        for batch in 0..<4 {
            var requests: [CommitRequest] = []
            for index in 0..<100 {
                let number = batch * 100 + index
                requests.append(
                    CommitRequest(
                        temporaryPath: try staged(staging, "file \(number)"),
                        destination: try dest("folder\(number % 10)/f\(number).txt"),
                        mode: FileMode(0o644)))
            }
            XCTAssertTrue(committer.commit(requests).allSatisfy { $0.failure == nil })
        }
        for number in [0, 57, 399] {
            XCTAssertEqual(scratch.read("root/folder\(number % 10)/f\(number).txt"), Array("file \(number)".utf8))
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: staging.temporary.path), [])
    }

    /// Each batch reaches its folders afresh: one removed since the last batch is simply made again.
    func testFolderRemovedBetweenBatchesIsRecreated() throws {
        let scratch = try Scratch()
        let staging = try StagingArea(root: scratch.path)
        let committer = Committer(root: scratch.path, staging: staging, durability: .none)
        XCTAssertNil(
            committer.commit([
                CommitRequest(
                    temporaryPath: try staged(staging, "1"), destination: try dest("d/a"),
                    mode: FileMode(0o644))
            ])[0].failure)
        try FileManager.default.removeItem(atPath: scratch.at("d"))
        XCTAssertNil(
            committer.commit([
                CommitRequest(
                    temporaryPath: try staged(staging, "2"), destination: try dest("d/b"),
                    mode: FileMode(0o644))
            ])[0].failure)
        XCTAssertEqual(scratch.read("d/b"), Array("2".utf8))
    }

    /// A folder committed into earlier in the run and then swapped for a symlink leading outside root: the next
    /// commit there fails that entry and writes nothing outside (the folder is reached again at commit time).
    func testAParentSwappedForASymlinkDuringTheRunCannotSendAFileOutside() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        let staging = try StagingArea(root: scratch.at("root"))
        let committer = Committer(root: scratch.at("root"), staging: staging, durability: .none)
        XCTAssertNil(
            committer.commit([
                CommitRequest(
                    temporaryPath: try staged(staging, "first"), destination: try dest("d/first"),
                    mode: FileMode(0o644))
            ])[0].failure)
        XCTAssertEqual(rename(scratch.at("root/d"), scratch.at("root/d.old")), 0)
        try scratch.symlink("root/d", to: outside.path)

        let second = committer.commit([
            CommitRequest(
                temporaryPath: try staged(staging, "second"), destination: try dest("d/second"),
                mode: FileMode(0o644))
        ])[0]
        let failure = try XCTUnwrap(second.failure)
        XCTAssertEqual(
            failure.description, "cannot write \"d/second\": parent \"d\" is a symlink to \(outside.path), outside root"
        )
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing lands outside root")
        XCTAssertNil(scratch.read("root/d.old/second"), "nor in the folder that was moved away")
    }

    func testStoreErrorDescription() {
        XCTAssertEqual(
            StoreError(operation: .renameInto, path: "data/a.csv", errno: EACCES).description,
            "cannot rename into \"data/a.csv\": Permission denied")
    }
}
