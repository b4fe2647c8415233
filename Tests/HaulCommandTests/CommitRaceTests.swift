import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// A parent folder swapped for a symlink while the run goes on: the commit reaches each destination's folder from
/// root at the moment it renames, so a file can never land outside root, whenever the swap happens.
final class CommitRaceTests: XCTestCase {
    func testAParentSwappedForASymlinkMidRunFailsThatEntryAndWritesNothingOutside() throws {
        let directory = try TemporaryDirectory()
        let outside = try TemporaryDirectory()
        let first = Array("first\n".utf8), second = Array("second\n".utf8)
        let files = StaticFiles(["/first": first, "/second": second])
        let released = Atomic<Bool>(false)
        let server = try LoopbackHTTPServer { request in
            // d/second is answered only once the test has swapped d.
            if request.path == "/second" {
                while !released.load(ordering: .acquiring) { usleep(10_000) }
            }
            return files.respond(to: request)
        }
        defer {
            released.store(true, ordering: .releasing)
            server.stop()
        }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/first")), dest: d/first, sha256: \(sha256(first)) }
              - { url: \(server.url("/second")), dest: d/second, sha256: \(sha256(second)) }
            """)

        let sync = try HaulProcess.start(
            ["sync", "--jobs", "2", "--progress", "plain"], currentDirectory: directory.path,
            outputPath: directory.path("haul-output.txt"))
        XCTAssertEqual(sync.wait(until: { directory.read("out/d/first") == first }, timeout: 20), .conditionMet)
        XCTAssertEqual(rename(directory.path("out/d"), directory.path("out/d.old")), 0)
        XCTAssertEqual(symlink(outside.path, directory.path("out/d")), 0)
        released.store(true, ordering: .releasing)

        let status = sync.waitForExit(timeout: 30)
        let output = sync.output
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(
            output.contains(
                "error: d/second: cannot write it: parent \"d\" is a symlink to \(outside.path), outside root"),
            output)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: outside.path), [], "nothing lands outside root")
        XCTAssertFalse(output.contains("fetched d/second"), output)
    }
}
