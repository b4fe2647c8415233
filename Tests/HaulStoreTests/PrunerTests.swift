import Foundation
import Glibc
import HaulStore
import HaulTestSupport
import XCTest

/// The pruner's own last check: it deletes a file only if it is still exactly the one observed, whatever the plan
/// decided a moment before.
final class PrunerTests: XCTestCase {
    func testAFileChangedSinceItWasObservedIsKept() throws {
        let scratch = try Scratch()
        try scratch.write("root/old/a.bin", "written by haul")
        let observed = try XCTUnwrap(FileIdentity.of(path: scratch.at("root/old/a.bin")))
        // The user edits it between the observation and the deletion (same size, so only the identity tells).
        FileClock.waitForATick()
        try scratch.write("root/old/a.bin", "edited by user!")

        let result = Pruner(root: scratch.at("root")).delete(try dest("old/a.bin"), expected: observed)
        let failure = try XCTUnwrap(result.failure)
        XCTAssertEqual(failure.description, "cannot delete \"old/a.bin\": it changed since it was observed; kept")
        XCTAssertEqual(scratch.read("root/old/a.bin"), Array("edited by user!".utf8))
    }

    func testAnUnchangedFileIsDeletedWithTheFoldersItLeavesEmpty() throws {
        let scratch = try Scratch()
        try scratch.write("root/old/deep/a.bin", "written by haul")
        try scratch.write("root/old/other.bin", "still listed")
        let observed = try XCTUnwrap(FileIdentity.of(path: scratch.at("root/old/deep/a.bin")))

        XCTAssertNil(Pruner(root: scratch.at("root")).delete(try dest("old/deep/a.bin"), expected: observed).failure)
        XCTAssertNil(scratch.linkStatus("root/old/deep"), "the emptied folder goes")
        XCTAssertEqual(
            scratch.read("root/old/other.bin"), Array("still listed".utf8), "a folder with anything in it stays")
    }
}
