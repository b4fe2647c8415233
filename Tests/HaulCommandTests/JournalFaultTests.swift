import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// The ownership journal is what lets a later prune delete a file haul wrote when the state could not be saved.
/// A batch whose lines cannot be appended (a full disk, an I/O error) is not renamed into place: its entries fail,
/// their destinations keep their old content, and nothing haul put in place is unknown to it afterwards.
final class JournalFaultTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private var faults: FaultFileSystem?
    private let names = (0..<6).map { "f\($0).bin" }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: names.map { ("/" + $0, Array("new \($0)\n".utf8)) }))
        faults = try Capability.required { try FaultFileSystem(over: directory, mountPoint: "out", backing: "back") }
    }

    override func tearDown() {
        faults?.unmount()
        server.stop()
        directory = nil
    }

    private func writeManifest(_ listed: [String]) throws {
        let entries = listed.map {
            "  - { url: \(server.url("/" + $0)), dest: data/\($0), sha256: \(sha256(Array("new \($0)\n".utf8))) }\n"
        }
        try directory.write(
            "haul.yaml", "version: 1\nroot: out\nfiles:" + (listed.isEmpty ? " []\n" : "\n" + entries.joined()))
    }

    func testAJournalAppendThatFailsLeavesItsBatchUnrenamedAndNothingUnpruned() throws {
        try writeManifest(names)
        try directory.write("out/data/f0.bin", "old f0\n")
        try faults?.inject(["write .haul/journal ENOSPC"])

        let full = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(full.exitCode, 1, full.stdout + full.stderr)
        let journal = directory.path("out/.haul/journal")
        for name in names {
            XCTAssertTrue(
                full.stderr.contains(
                    "error: data/\(name): cannot record its ownership in \"\(journal)\": "
                        + "No space left on device\n"), full.stderr)
        }
        XCTAssertEqual(
            directory.read("back/data/f0.bin"), Array("old f0\n".utf8), "a destination keeps its old content")
        XCTAssertEqual(directory.list("back/data"), ["f0.bin"], "nothing of the batch was renamed in")
        XCTAssertEqual(directory.list("back/.haul/tmp"), [], "nor left staged")

        try faults?.inject([])
        let after = try directory.haul(["sync"])
        XCTAssertEqual(after.exitCode, 0, after.stderr)
        for name in names { XCTAssertEqual(directory.read("back/data/\(name)"), Array("new \(name)\n".utf8), name) }

        try writeManifest(["f0.bin"])
        let pruned = try directory.haul(["sync", "--prune"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stderr)
        XCTAssertEqual(directory.list("back/data"), ["f0.bin"], "every file haul wrote is pruned:\n\(pruned.stdout)")
    }

    /// The same with the state unsavable too, as on a disk that stays full: the run that writes the files records
    /// them in the journal alone, and a later prune, when the state is saved again, still deletes every one.
    func testFilesJournaledByARunWhoseStateCouldNotBeSavedAreAllPruned() throws {
        try writeManifest(names)
        try faults?.inject(["create .haul/state.new ENOSPC"])
        let unsaved = try directory.haul(["sync"])
        XCTAssertEqual(unsaved.exitCode, 0, unsaved.stderr)
        XCTAssertTrue(unsaved.stderr.contains("warning: the state could not be saved ("), unsaved.stderr)
        XCTAssertTrue(directory.exists("back/.haul/journal"))

        try faults?.inject([])
        try writeManifest([])
        let pruned = try directory.haul(["sync", "--prune", "--force"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stderr)
        XCTAssertEqual(directory.list("back"), [".haul"], pruned.stdout)
        XCTAssertFalse(directory.exists("back/.haul/journal"), "retired by the saved state")
    }
}
