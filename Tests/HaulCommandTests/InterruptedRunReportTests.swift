import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// What a run says when it is stopped or cannot say it: after a signal, the usual summary with the real counts
/// (an entry that had already failed is failed, not unfinished); a signal before the command is under way is
/// still taken by haul (said, exit 130/143), not by the default action; standard output that cannot be written
/// fails the run as `cat` does.
final class InterruptedRunReportTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    func testASignalMidRunPrintsTheSummaryAndCountsOnlyWhatItStopped() throws {
        let small = Array("content\n".utf8)
        let large: [UInt8] = (0..<400_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let files = StaticFiles(["/small": small, "/large": large])
        let script = ScriptedResponses(then: files.respond)
        script.enqueueFault(.stallAfter(bytes: 64 * 1024, seconds: 120), for: "/large")
        let server = try LoopbackHTTPServer(handler: script.respond)
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/small")), dest: small.bin, sha256: \(StreamingHasher.digest(small, algorithm: .sha256).hex) }
              - { url: \(server.url("/gone")), dest: gone.bin, retries: 0 }
              - { url: \(server.url("/large")), dest: large.bin, size: \(large.count), sha256: \(StreamingHasher.digest(large, algorithm: .sha256).hex) }
            """)
        let sync = try HaulProcess.start(
            ["sync", "--progress", "plain"], currentDirectory: directory.path,
            outputPath: directory.path("output.txt"))
        let underWay = sync.wait(
            until: {
                sync.output.contains("error: gone.bin: ") && directory.exists("out/small.bin")
                    && server.requests(path: "/large").count == 1
            }, timeout: 30)
        XCTAssertEqual(underWay, .conditionMet, sync.output)
        sync.send(SIGTERM)
        XCTAssertEqual(sync.waitForExit(timeout: 20), 143, sync.output)

        let lines = sync.output.split(separator: "\n").map(String.init)
        XCTAssertTrue(
            lines.contains { $0.hasPrefix("Fetched 1 file (8 B), 0 up to date, 1 failed, 1 interrupted in ") },
            sync.output)
        XCTAssertTrue(
            lines.contains(
                "haul: interrupted by SIGTERM; 1 unfinished entry keeps its old content "
                    + "(partial downloads are kept to resume)"), sync.output)
        XCTAssertEqual(directory.read("out/small.bin"), small)
        XCTAssertFalse(directory.exists("out/large.bin"))
    }

    /// The manifest is a FIFO nobody writes to yet: the run waits in its very first step, before `sync` has set
    /// anything up of its own. The signal is haul's to take even there.
    func testASignalBeforeTheCommandIsUnderWayIsTakenByHaul() throws {
        let manifest = directory.path("manifest.fifo")
        XCTAssertEqual(mkfifo(manifest, 0o600), 0)
        // Held open for writing (and reading, so that opening it does not wait): haul's read waits for a line.
        let writer = open(manifest, O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(writer, 0)
        defer { close(writer) }
        for (signal, expected, name) in [(SIGTERM, Int32(143), "SIGTERM"), (SIGINT, Int32(130), "SIGINT")] {
            let sync = try HaulProcess.start(
                ["sync", "manifest.fifo"], currentDirectory: directory.path,
                outputPath: directory.path("output-\(name).txt"))
            XCTAssertEqual(sync.wait(until: { hasOpened(sync.pid, manifest) }, timeout: 30), .conditionMet, sync.output)
            sync.send(signal)
            XCTAssertEqual(sync.waitForExit(timeout: 20), expected, sync.output)
            XCTAssertEqual(sync.output, "haul: interrupted by \(name)\n", "said by haul, not a death by the signal")
        }
    }

    private func hasOpened(_ pid: pid_t, _ path: String) -> Bool {
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else {
            return false
        }
        return descriptors.contains {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == path
        }
    }

    /// `haul ARGUMENTS > /dev/full`, through a shell.
    private func haulIntoAFullDevice(_ arguments: String) throws -> ProcessResult {
        try ProcessRunner.run(
            "/bin/sh", ["-c", "exec \"$0\" \(arguments) > /dev/full", HaulProcess.executablePath],
            currentDirectory: directory.path, timeout: 60)
    }

    func testStandardOutputThatCannotBeWrittenFailsTheRun() throws {
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
        let message = "error: cannot write to standard output: No space left on device\n"
        let sync = try haulIntoAFullDevice("sync --progress none")
        XCTAssertEqual(sync.exitCode, 74, sync.stderr)
        XCTAssertEqual(sync.stderr, message)
        XCTAssertEqual(directory.read("out/f.bin"), bytes, "the run itself did its work")

        let schema = try haulIntoAFullDevice("schema")
        XCTAssertEqual(schema.exitCode, 74, schema.stderr)
        XCTAssertEqual(schema.stderr, message)

        // A status that already says something went wrong, or what plan found, is kept; the message is said.
        try FileManager.default.removeItem(atPath: directory.path("out"))
        let plan = try haulIntoAFullDevice("plan")
        XCTAssertEqual(plan.exitCode, 2, plan.stderr)
        XCTAssertEqual(plan.stderr, message)

        // A reader that left (`haul … | true`) is no such failure.
        let closed = try ProcessRunner.run(
            "/bin/bash", ["-c", "\"$0\" schema | true; exit ${PIPESTATUS[0]}", HaulProcess.executablePath],
            currentDirectory: directory.path, timeout: 60)
        XCTAssertEqual(closed.exitCode, 0, closed.stderr)
        XCTAssertEqual(closed.stderr, "")
    }
}
