import Foundation
import Glibc
import HaulStore
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
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: scratch.at("link.yaml")), "real/m.yaml")
        XCTAssertEqual(scratch.read("real/m.yaml"), Array("new\n".utf8))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.at("real")), ["m.yaml"])
    }

    func testAFailedReplaceNamesThePathAndCreatesNothing() throws {
        let scratch = try Scratch()
        XCTAssertThrowsError(try ManifestFile.replace(scratch.at("missing/m.yaml"), with: Array("new\n".utf8))) { error in
            XCTAssertEqual("\(error)",
                           "cannot create a temporary file beside \"\(scratch.at("missing/m.yaml"))\": No such file or directory")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path), [])
    }
}
