import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// `--max-time` bounds a whole run, for cron: a server trickling just above the low-speed floor would otherwise keep
/// it alive for ever. What is not finished by then fails, named; what is finished stays.
final class TimeLimitTests: XCTestCase {
    func testUnfinishedEntriesFailAtTheTimeLimitAndFinishedOnesStay() throws {
        let directory = try TemporaryDirectory()
        let quick = Array("quick\n".utf8), slow = [UInt8](repeating: 7, count: 400_000)
        let files = StaticFiles(["/quick": quick, "/slow": slow])
        // 2 KiB a second: above the 1 KiB/s floor, so only a time limit ends it (the whole body would take minutes).
        let server = try LoopbackHTTPServer { request in
            let answer = files.respond(to: request)
            return request.path == "/slow" ? answer.with(fault: .trickle(bytesPerChunk: 2048, interval: 1)) : answer
        }
        defer { server.stop() }
        try directory.write("out/slow.bin", "the old content")
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/quick")), dest: quick.txt, sha256: \(sha256(quick)) }
              - { url: \(server.url("/slow")), dest: slow.bin, sha256: \(sha256(slow)) }
            """)
        let started = monotonicSeconds()
        let result = try HaulProcess.run(
            ["sync", "--max-time", "2s", "--progress", "plain"], currentDirectory: directory.path,
            timeout: 60)
        let took = monotonicSeconds() - started
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        XCTAssertLessThan(took, 10, "the run ends at its limit, not when the trickle does")
        XCTAssertEqual(directory.read("out/quick.txt"), quick, "finished entries stay")
        XCTAssertEqual(
            directory.read("out/slow.bin"), Array("the old content".utf8), "unfinished ones keep their old content")
        XCTAssertTrue(
            result.stderr.contains("error: slow.bin: ")
                && result.stderr.contains("stopped: the run's time limit (--max-time 2s) was reached"),
            result.stderr)
    }

    func testATimeLimitReachedWhileWaitingForTheLockEndsTheRunNamingIt() throws {
        let directory = try TemporaryDirectory()
        try directory.write(
            "haul.yaml", "version: 1\nroot: out\nfiles:\n  - { url: \"http://127.0.0.1:1/a\", dest: a }\n")
        try directory.makeDirectory("out/.haul")
        let lock = open(directory.path("out/.haul/lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        XCTAssertTrue(RootLock.take(lock))
        defer { close(lock) }
        let started = monotonicSeconds()
        let result = try HaulProcess.run(
            ["sync", "--wait", "--max-time", "1s"], currentDirectory: directory.path, timeout: 30)
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        XCTAssertLessThan(monotonicSeconds() - started, 5)
        XCTAssertTrue(
            result.stderr.contains(
                "error: the run's time limit (--max-time 1s) was reached before anything was changed"),
            result.stderr)
    }

    func testAnUnreadableTimeLimitIsAUsageError() throws {
        let directory = try TemporaryDirectory()
        let result = try HaulProcess.run(["sync", "--max-time", "soon"], currentDirectory: directory.path)
        XCTAssertEqual(result.exitCode, 64, result.stderr)
    }
}
