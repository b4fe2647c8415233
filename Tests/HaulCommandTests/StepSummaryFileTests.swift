import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// `GITHUB_STEP_SUMMARY` is the environment's to choose. A FIFO there (with or without a reader) must not hold the
/// run, and a summary that cannot be appended is said once, naming the file and why; the run's exit status is what
/// it would have been.
final class StepSummaryFileTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let bytes = Array("content\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(files: ["/f": bytes])
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/f")), dest: f.bin, sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }
            """)
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }

    /// A sync on a runner whose step summary is `path`: bounded, so that a run that waits forever fails the test.
    private func sync(summary path: String, _ extra: [String] = []) throws -> ProcessResult {
        try? FileManager.default.removeItem(atPath: directory.path("out"))
        return try HaulProcess.run(
            ["sync", "--progress", "none"] + extra,
            environment: ["GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": path],
            currentDirectory: directory.path, timeout: 30)
    }

    private func warning(_ path: String, _ why: String) -> String {
        "warning: the step summary could not be appended to GITHUB_STEP_SUMMARY (\(path)): \(why)"
    }

    private func warnings(_ stderr: String) -> [String] {
        stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix("warning: ") }
    }

    func testAFIFONobodyReadsIsRefusedWithoutWaiting() throws {
        let fifo = directory.path("summary.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let result = try sync(summary: fifo)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(warnings(result.stderr), [warning(fifo, "it is a FIFO, not a regular file")])
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertTrue(result.stdout.contains("Fetched 1 file"), "the run's own summary still comes: \(result.stdout)")
    }

    func testAFIFOWithAReaderIsRefusedToo() throws {
        let fifo = directory.path("summary.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        let result = try sync(summary: fifo)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(warnings(result.stderr), [warning(fifo, "it is a FIFO, not a regular file")])
        var count: Int32 = 0
        XCTAssertEqual(ioctl(reader, UInt(FIONREAD), &count), 0)
        XCTAssertEqual(count, 0, "nothing was written into it")
    }

    func testASummaryThatCannotBeWrittenIsSaidOnceAndLeavesTheExitStatusAlone() throws {
        let missing = directory.path("no-such-folder/summary.md")
        let result = try sync(summary: missing)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(warnings(result.stderr), [warning(missing, "No such file or directory")])

        try directory.makeDirectory("a-folder")
        let folder = directory.path("a-folder")
        let intoFolder = try sync(summary: folder)
        XCTAssertEqual(intoFolder.exitCode, 0, intoFolder.stderr)
        XCTAssertEqual(warnings(intoFolder.stderr), [warning(folder, "Is a directory")])

        // A failed entry keeps its exit status 1; under --json the warning is an event before the summary, still last.
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/missing")), dest: gone.bin, retries: 0 }
            """)
        let failed = try sync(summary: missing)
        XCTAssertEqual(failed.exitCode, 1, failed.stderr)
        XCTAssertEqual(warnings(failed.stderr), [warning(missing, "No such file or directory")])
        let json = try sync(summary: missing, ["--json", "--annotations", "github"])
        XCTAssertEqual(json.exitCode, 1, json.stderr)
        let events = try json.stdout.split(separator: "\n").map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
        }
        XCTAssertEqual(events.map { $0["event"] as? String }.suffix(2), ["warning", "summary"])
        XCTAssertEqual(
            events.dropLast().last?["message"] as? String,
            "the step summary could not be appended to GITHUB_STEP_SUMMARY (\(missing)): No such file or directory")
    }

    func testASummaryOnAReadOnlyFileSystemIsAWarningNotAFailure() throws {
        try directory.write("readonly/summary.md", "earlier step\n")
        let mount = try Capability.required { try TestMount.readOnlyBind(at: directory.path("readonly")) }
        defer { mount.unmount() }
        let summary = directory.path("readonly/summary.md")
        let result = try sync(summary: summary)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(warnings(result.stderr), [warning(summary, "Read-only file system")])
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertEqual(directory.read("readonly/summary.md"), Array("earlier step\n".utf8))
    }

    func testADeviceIsRefusedAndAFullDiskIsSaid() throws {
        let device = try sync(summary: "/dev/full")
        XCTAssertEqual(device.exitCode, 0, device.stderr)
        XCTAssertEqual(warnings(device.stderr), [warning("/dev/full", "it is a character device, not a regular file")])

        // A regular file on a file system with no room left.
        try directory.makeDirectory("full")
        let mount = try Capability.required { try TestMount.tmpfs(at: directory.path("full"), size: 64 << 10) }
        defer { mount.unmount() }
        let filler = fopen(directory.path("full/filler"), "w")
        let block = [UInt8](repeating: 0x2E, count: 4096)
        while fwrite(block, 1, block.count, filler) == block.count, fflush(filler) == 0 {}
        fclose(filler)
        let summary = directory.path("full/summary.md")
        let full = try sync(summary: summary)
        XCTAssertEqual(full.exitCode, 0, full.stderr)
        XCTAssertEqual(warnings(full.stderr), [warning(summary, "No space left on device")])
    }
}
