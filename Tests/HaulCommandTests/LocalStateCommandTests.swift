import Dispatch
import Foundation
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// One run at a time per root, and what interrupted runs leave behind is cleaned up by the next.
final class LocalStateCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func haul(_ arguments: [String]) throws -> ProcessResult {
        try HaulProcess.run(arguments, currentDirectory: directory.path)
    }

    private func writeManifest(url: String, bytes: [UInt8], dest: String = "f.bin") throws {
        try directory.write("haul.yaml", """
            version: 1
            root: out
            files:
              - url: \(url)
                dest: \(dest)
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
            """)
    }

    func testASecondConcurrentSyncExits4NamingTheHolderAndWaitWaits() throws {
        let bytes = [UInt8](repeating: 5, count: 10_000)
        let first = Mutex(true)
        let server = try LoopbackHTTPServer { _ in
            let isFirst = first.withLock { value in defer { value = false }; return value }
            // The first request stalls for a while, so the first sync holds the lock meanwhile.
            return isFirst ? ServerResponse.ok(bytes).with(fault: .stallAfter(bytes: 0, seconds: 2)) : .ok(bytes)
        }
        defer { server.stop() }
        try writeManifest(url: server.url("/f"), bytes: bytes)

        let holder = Mutex<ProcessResult?>(nil)
        let done = DispatchSemaphore(value: 0)
        let path = directory.path
        DispatchQueue.global().async {
            let result = try? HaulProcess.run(["sync"], currentDirectory: path)
            holder.withLock { $0 = result }
            done.signal()
        }
        // The lock is taken before the first request: once the server has seen it, the root is busy.
        let deadline = Date().addingTimeInterval(10)
        while server.requests.isEmpty && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.requests.count, 1)

        let busy = try haul(["sync"])
        XCTAssertEqual(busy.exitCode, 4)
        XCTAssertTrue(busy.stderr.contains("another haul is syncing"), busy.stderr)
        XCTAssertTrue(busy.stderr.contains("pid "), "the message names the holder: \(busy.stderr)")
        XCTAssertEqual(server.requests.count, 1, "the refused run made no request")

        let waited = try haul(["sync", "--wait"])
        XCTAssertEqual(waited.exitCode, 0, waited.stderr)
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(holder.withLock { $0?.exitCode }, 0)
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertTrue(waited.stdout.contains("Nothing to do"), "the waiting run found the work done: \(waited.stdout)")
    }

    /// (That partials of wanted files survive the sweep is shown by SyncCommandTests.testAnInterruptedSyncResumesInTheNextRun.)
    func testLeftoversOfInterruptedRunsAreSwept() throws {
        let bytes = [UInt8](repeating: 6, count: 300_000)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        try writeManifest(url: server.url("/f"), bytes: bytes)
        try directory.write("out/.haul/tmp/1234abcd.part", Array("stale temporary".utf8))
        try directory.write("out/.haul/partial/sha256-\(String(repeating: "0", count: 64)).part", Array("orphan".utf8))
        try directory.write("out/.haul/partial/sha256-\(String(repeating: "0", count: 64)).part.meta", Array("source x\netag \"y\"\n".utf8))

        let result = try haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/tmp"), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/partial"), [])
    }
}
