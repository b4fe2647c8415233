import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// SIGTERM and SIGINT are obeyed within a second wherever a sync is, including the stretches where it changes
/// nothing yet: waiting for another run's lock, and hashing local files.
final class SignalTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    private func start(_ arguments: [String]) throws -> BackgroundProcess {
        try HaulProcess.start(
            arguments, currentDirectory: directory.path, outputPath: directory.path("output-\(UUID().uuidString).txt"))
    }

    /// `/proc/<pid>/io`'s count of bytes read.
    private func bytesRead(by pid: pid_t) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("rchar:") {
            return Int(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }

    /// Whether a run is queued behind the root's lock, which the test holds.
    private func isWaitingForTheLock() -> Bool {
        RootLock.hasWaiters(path: directory.path("out/.haul/lock"))
    }

    private func stopsPromptly(
        _ process: BackgroundProcess, after signal: Int32, file: StaticString = #filePath,
        line: UInt = #line
    ) -> Int32? {
        process.send(signal)
        let sent = monotonicSeconds()
        let status = process.waitForExit(timeout: 10)
        XCTAssertLessThan(monotonicSeconds() - sent, 1.0, "stopped within a second", file: file, line: line)
        return status
    }

    func testAWaitingSyncObeysSIGTERMAndSIGINTAndLeavesTheHolderAlone() throws {
        let bytes = Array("content\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/f")), dest: f.bin, sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }
            """)
        try directory.makeDirectory("out/.haul")
        let lock = open(directory.path("out/.haul/lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(lock, 0)
        defer { close(lock) }
        XCTAssertTrue(RootLock.take(lock), "the test holds the root as another run would")

        for (signal, expected) in [(SIGTERM, Int32(143)), (SIGINT, Int32(130))] {
            let waiting = try start(["sync", "--wait"])
            XCTAssertEqual(waiting.wait(until: { isWaitingForTheLock() }, timeout: 20), .conditionMet, waiting.output)
            XCTAssertEqual(stopsPromptly(waiting, after: signal), expected, waiting.output)
            XCTAssertTrue(
                waiting.output.contains(
                    "interrupted by \(signal == SIGTERM ? "SIGTERM" : "SIGINT") before anything was changed"),
                waiting.output)
        }
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(directory.exists("out/f.bin"))
    }

    func testSIGTERMWhileHashingLocalFilesStopsAtOnce() throws {
        // A sparse file of 8 GiB: seconds of hashing, no disk. Its pinned digest is wrong on purpose, so that the
        // run would otherwise go on to fetch it.
        try directory.makeDirectory("out")
        let big = directory.path("out/big.bin")
        let fd = open(big, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        XCTAssertEqual(ftruncate(fd, 8 << 30), 0)
        close(fd)
        let before = try XCTUnwrap(OnDiskIdentity.of(big))
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: "http://127.0.0.1:1/big", dest: big.bin, sha256: \(String(repeating: "ab", count: 32)) }
            """)
        let sync = try start(["sync"])
        XCTAssertEqual(
            sync.wait(until: { bytesRead(by: sync.pid) > 256 << 20 }, timeout: 30), .conditionMet, sync.output)
        XCTAssertEqual(stopsPromptly(sync, after: SIGTERM), 143, sync.output)
        XCTAssertEqual(OnDiskIdentity.of(big), before, "the file is as it was")
    }
}
