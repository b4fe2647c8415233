import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A reader that stops reading (a pipe nobody drains, a stalled log shipper, a terminal stopped with Ctrl-S) holds
/// haul's output up, but never its end: SIGTERM and SIGINT still stop the run, promptly, with every destination old
/// or new and the state in step with them, so that the root's lock is not held for as long as the reader stalls.
final class BlockedOutputTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    private func content(_ index: Int) -> [UInt8] { Array("file \(index)\n".utf8) }
    private let slowContent: [UInt8] = (0..<400_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    private let fastCount = 60
    /// Long URLs make long `--verbose` lines: the plan fits in the pipe, the lines of the files fetched do not.
    private func fastPath(_ index: Int) -> String {
        "/" + String(repeating: "long-path-segment/", count: 8) + "f\(index).bin"
    }

    /// 60 small files served at once, and `slow.bin`, whose answer stalls after 64 KiB each time the test queues
    /// a stall (`stallSlowFile`), and is served whole otherwise.
    private func startServer() throws -> (LoopbackHTTPServer, ScriptedResponses) {
        var bodies = ["/slow.bin": slowContent]
        for index in 0..<fastCount { bodies[fastPath(index)] = content(index) }
        let script = ScriptedResponses(then: StaticFiles(bodies).respond)
        return (try LoopbackHTTPServer(handler: script.respond), script)
    }

    private func stallSlowFile(_ script: ScriptedResponses) {
        script.enqueueFault(.stallAfter(bytes: 64 * 1024, seconds: 120), for: "/slow.bin")
    }

    private func writeManifest(_ server: LoopbackHTTPServer) throws {
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for index in 0..<fastCount {
            yaml +=
                "  - { url: \(server.url(fastPath(index))), dest: f\(index).bin, "
                + "sha256: \(StreamingHasher.digest(content(index), algorithm: .sha256).hex) }\n"
        }
        yaml +=
            "  - { url: \(server.url("/slow.bin")), dest: slow.bin, size: \(slowContent.count), "
            + "sha256: \(StreamingHasher.digest(slowContent, algorithm: .sha256).hex) }\n"
        try directory.write("haul.yaml", yaml)
    }

    /// Sends `signal` and waits, boundedly, for the run to end: a run that cannot end is a failure, not a hang.
    private func stop(
        _ process: BackgroundProcess, with signal: Int32, file: StaticString = #filePath, line: UInt = #line
    ) -> Int32? {
        process.send(signal)
        let status = process.waitForExit(timeout: 20)
        XCTAssertNotNil(
            status, "the run ended after the signal, though nobody reads its output", file: file, line: line)
        return status
    }

    func testASignalEndsASyncWhoseOutputNobodyReadsAndLeavesItsFilesAndStateWhole() throws {
        let (server, script) = try startServer()
        defer { server.stop() }
        try writeManifest(server)
        for (signal, expected) in [(SIGTERM, Int32(143)), (SIGINT, Int32(130))] {
            try? FileManager.default.removeItem(atPath: directory.path("out"))
            try? FileManager.default.removeItem(atPath: directory.path("output"))
            server.resetLog()
            stallSlowFile(script)
            let pipe = try StalledPipe(path: directory.path("output"))
            let sync = try HaulProcess.start(
                ["sync", "--progress", "plain", "--verbose"], currentDirectory: directory.path,
                outputPath: pipe.path)
            // Changing things: the small files are in place (the pipe holds the plan, not their lines too), the slow
            // one is under way.
            let underWay = sync.wait(
                until: {
                    pipe.buffered > 0 && server.requests(path: "/slow.bin").count == 1
                        && (0..<fastCount).allSatisfy { directory.exists("out/f\($0).bin") }
                }, timeout: 30)
            XCTAssertEqual(
                underWay, .conditionMet,
                "the run got as far as the slow transfer: \(pipe.buffered) bytes in the pipe, "
                    + "\(server.requests(path: "/slow.bin").count) requests of slow.bin, "
                    + "\((0..<fastCount).filter { directory.exists("out/f\($0).bin") }.count) small files in place")
            XCTAssertEqual(stop(sync, with: signal), expected)

            let shown = pipe.drain()
            XCTAssertTrue(
                shown.hasPrefix("+ f0.bin (missing)\n"),
                "what the pipe took is the run's output, from its start: \(shown)")
            for index in 0..<fastCount {
                XCTAssertEqual(directory.read("out/f\(index).bin"), content(index), "f\(index).bin is whole")
            }
            XCTAssertFalse(directory.exists("out/slow.bin"), "the stopped transfer left no file in its place")

            // The next run, read by someone, finds the state in step with the files: it fetches only slow.bin.
            server.resetLog()
            let next = try directory.haul(["sync", "--progress", "none"])
            XCTAssertEqual(next.exitCode, 0, next.stderr)
            XCTAssertEqual(server.requests.map(\.path), ["/slow.bin"], "nothing fetched twice: \(next.stdout)")
            XCTAssertEqual(directory.read("out/slow.bin"), slowContent)
            let again = try directory.haul(["sync", "--progress", "none"])
            XCTAssertTrue(
                again.stdout.hasPrefix("Nothing to do: \(fastCount + 1) files up to date"), again.stdout + again.stderr)
        }
    }

    /// A terminal stopped with Ctrl-S before haul writes a byte: the plan cannot be shown, and a signal still ends
    /// the run at once, before anything is changed.
    func testASignalEndsASyncWhoseTerminalIsStopped() throws {
        let (server, _) = try startServer()
        defer { server.stop() }
        try writeManifest(server)
        let terminal = try StoppedTerminal()
        let sync = try HaulProcess.start(
            ["sync", "--progress", "plain"], environment: ["NO_COLOR": "1"],
            currentDirectory: directory.path, outputPath: terminal.path)
        // Blocked on the terminal: its lock is taken, and it has written nothing the terminal shows.
        XCTAssertEqual(sync.wait(until: { isWaitingToWrite(sync.pid) }, timeout: 30), .conditionMet)
        XCTAssertEqual(stop(sync, with: SIGTERM), 143)
        XCTAssertEqual(server.requests.count, 0, "nothing was fetched")
        XCTAssertFalse(directory.exists("out/f0.bin"))
        let shown = terminal.resumeAndRead()
        XCTAssertFalse(shown.contains("Fetched") || shown.contains("fetched"), "nothing was fetched: \(shown)")
    }

    /// Whether the process's main thread waits in `poll` or `write` for a reader (its `wchan`), its root locked.
    private func isWaitingToWrite(_ pid: pid_t) -> Bool {
        guard let wchan = try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8) else { return false }
        return
            (wchan.contains("poll") || wchan.contains("tty_write") || wchan.contains("n_tty")
            || wchan.contains("wait_woken"))
            && directory.exists("out/.haul/lock")
    }
}
