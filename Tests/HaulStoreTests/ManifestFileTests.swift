import Foundation
import Glibc
import HaulFailures
@testable import HaulStore
import XCTest

/// `ManifestFile`: the user's manifest is replaced whole, keeps its mode, and a symlink to it stays a symlink.
final class ManifestFileTests: XCTestCase {
    func testReadGivesNilForAMissingFile() throws {
        let scratch = try Scratch()
        XCTAssertNil(try ManifestFile.read(scratch.at("none.yaml")))
        try scratch.write("m.yaml", "version: 1\n")
        XCTAssertEqual(try ManifestFile.read(scratch.at("m.yaml")), Array("version: 1\n".utf8))
    }

    func testReplaceKeepsTheModeAndLeavesNoTemporaryFile() throws {
        let scratch = try Scratch()
        try scratch.write("m.yaml", "old\n")
        chmod(scratch.at("m.yaml"), 0o600)
        try ManifestFile.replace(scratch.at("m.yaml"), with: Array("new\n".utf8))
        XCTAssertEqual(scratch.read("m.yaml"), Array("new\n".utf8))
        var info = stat()
        XCTAssertEqual(stat(scratch.at("m.yaml"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o7777, 0o600)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path), ["m.yaml"])
    }

    func testANewFileGetsTheUmasksMode() throws {
        let scratch = try Scratch()
        let previous = umask(0o027)
        defer { umask(previous) }
        try ManifestFile.replace(scratch.at("new.yaml"), with: Array("x\n".utf8))
        var info = stat()
        XCTAssertEqual(stat(scratch.at("new.yaml"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o7777, 0o640)
    }

    func testASymlinkedManifestStaysASymlink() throws {
        let scratch = try Scratch()
        try scratch.write("real/m.yaml", "old\n")
        XCTAssertEqual(symlink("real/m.yaml", scratch.at("link.yaml")), 0)
        try ManifestFile.replace(scratch.at("link.yaml"), with: Array("new\n".utf8))
        XCTAssertEqual(
            try FileManager.default.destinationOfSymbolicLink(atPath: scratch.at("link.yaml")), "real/m.yaml")
        XCTAssertEqual(scratch.read("real/m.yaml"), Array("new\n".utf8))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.at("real")), ["m.yaml"])
    }

    func testAFailedReplaceNamesThePathAndCreatesNothing() throws {
        let scratch = try Scratch()
        XCTAssertThrowsError(try ManifestFile.replace(scratch.at("missing/m.yaml"), with: Array("new\n".utf8))) {
            error in
            XCTAssertEqual(
                (error as? StoreError)?.description,
                "cannot create a temporary file beside \"\(scratch.at("missing/m.yaml"))\": No such file or directory")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path), [])
    }

    func testWhatIsNotARegularFileIsNeitherReadNorReplaced() throws {
        let scratch = try Scratch()
        XCTAssertEqual(mkfifo(scratch.at("fifo.yaml"), 0o644), 0)
        XCTAssertEqual(symlink("fifo.yaml", scratch.at("link.yaml")), 0)
        try FileManager.default.createDirectory(atPath: scratch.at("folder.yaml"), withIntermediateDirectories: false)
        for (name, kind) in [("fifo.yaml", "a FIFO"), ("link.yaml", "a FIFO"), ("folder.yaml", "a directory")] {
            let expected =
                "cannot edit \"\(scratch.at(name))\": it is \(kind), not a regular file (haul add edits a regular "
                + "file or makes a new one)"
            XCTAssertThrowsError(try ManifestFile.read(scratch.at(name))) {
                XCTAssertEqual(($0 as? StoreError)?.description, expected)
            }
            XCTAssertThrowsError(try ManifestFile.replace(scratch.at(name), with: Array("x\n".utf8))) {
                XCTAssertEqual(($0 as? StoreError)?.description, expected)
            }
        }
        var info = stat()
        XCTAssertEqual(lstat(scratch.at("fifo.yaml"), &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted(),
            ["fifo.yaml", "folder.yaml", "link.yaml"])
    }

    /// Only names of the temporary form, and only those whose writer is gone (their lock is free), are removed.
    func testReplaceRemovesOnlyTheTemporaryFilesOfWritersThatAreGone() throws {
        let scratch = try Scratch()
        try scratch.write("m.yaml", "old\n")
        let names = [
            ".m.yaml.haul-dead0", ".m.yaml.haul-live1", ".m.yaml.haul-UPPER", ".m.yaml.haul-", ".other.yaml.haul-dead2",
            ".m.yaml.haul-0123456789abcd",
        ]
        for name in names { try scratch.write(name, "half") }
        let held = open(scratch.at(".m.yaml.haul-live1"), O_RDWR)
        defer { close(held) }
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        XCTAssertEqual(fcntl(held, 37 /* F_OFD_SETLK */, &request), 0)

        try ManifestFile.replace(scratch.at("m.yaml"), with: Array("new\n".utf8))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted(),
            [
                ".m.yaml.haul-", ".m.yaml.haul-0123456789abcd", ".m.yaml.haul-UPPER", ".m.yaml.haul-live1",
                ".other.yaml.haul-dead2", "m.yaml",
            ])
        XCTAssertEqual(scratch.read("m.yaml"), Array("new\n".utf8))
    }

    /// A scratch folder is removed when its lock file is there and free; one whose maker holds the lock, one
    /// without a lock file (its maker may be about to make it) and names of other forms are kept.
    func testScratchFoldersOfMakersThatAreGoneAreRemoved() throws {
        let scratch = try Scratch()
        for name in ["haul-add.dead01", "haul-add.live02", "haul-add.nolock", "haul-add.toolong3", "haul-test.dead04"] {
            try scratch.write("\(name)/part", "bytes")
            if name != "haul-add.nolock" { try scratch.write("\(name)/\(ScratchDirectory.lockName)", "") }
        }
        try scratch.write("haul-add.dead01/sha256/ab/abcd", "kept download")
        let held = open(scratch.at("haul-add.live02/lock"), O_RDWR)
        defer { close(held) }
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        XCTAssertEqual(fcntl(held, 37 /* F_OFD_SETLK */, &request), 0)

        ScratchDirectory.removeAbandoned(in: scratch.path, prefix: "haul-add")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted(),
            ["haul-add.live02", "haul-add.nolock", "haul-add.toolong3", "haul-test.dead04"])
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: scratch.at("haul-add.live02")).sorted(),
            ["lock", "part"])
    }
}
