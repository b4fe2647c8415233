import Foundation
import HaulDigest
import HaulCommand
import HaulTestSupport
import Synchronization
import XCTest

/// `--json`: the exact event sequence of a scripted run, parsed line by line, and nothing else on stdout.
final class JSONEventsTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// Every stdout line is one JSON object; returns them in order.
    private func events(_ stdout: String, file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]]
    {
        try stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { text in
            let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
            return try XCTUnwrap(object as? [String: Any], "not an object: \(text)", file: file, line: line)
        }
    }

    func testAScriptedSyncProducesTheDocumentedEventSequence() throws {
        let good: [UInt8] = Array("good\n".utf8), flaky: [UInt8] = Array("flaky\n".utf8),
            mirrored: [UInt8] = Array("mirrored\n".utf8)
        let flakyCalls = Mutex(0)
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/good": return .ok(good)
            case "/flaky":
                let call = flakyCalls.withLock { count in
                    defer { count += 1 }; return count
                }
                return call == 0 ? .status(503) : .ok(flaky)
            case "/mirror": return .ok(mirrored)
            default: return .notFound
            }
        }
        defer { server.stop() }
        try directory.write("out/present.bin", good)
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - {url: "\(server.url("/good"))", dest: present.bin, sha256: \(sha256(good))}
              - {url: "\(server.url("/good"))", dest: good.bin, sha256: \(sha256(good)), size: \(good.count)}
              - {url: "\(server.url("/flaky"))", dest: flaky.bin, sha256: \(sha256(flaky))}
              - url: "\(server.url("/missing"))"
                mirrors: ["\(server.url("/mirror"))"]
                dest: mirrored.bin
                sha256: \(sha256(mirrored))
              - url: "\(server.url("/missing"))"
                dest: lost.bin
                sha256: \(sha256(good))
            """)
        let result = try HaulProcess.run(["sync", "--json", "--jobs", "1"], currentDirectory: directory.path)
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let events = try events(result.stdout).filter { $0["event"] as? String != "progress" }
        // Transfers overlap and commits are batched: the order is fixed per file, not across files.
        XCTAssertEqual(events.first?["event"] as? String, "plan")
        XCTAssertEqual(events.last?["event"] as? String, "summary")
        var perFile: [String: [[String: Any]]] = [:]
        for event in events.dropFirst().dropLast() {
            perFile[try XCTUnwrap(event["dest"] as? String), default: []].append(event)
        }
        XCTAssertEqual(
            perFile.mapValues { $0.map { $0["event"] as? String ?? "?" } },
            [
                "good.bin": ["start", "done"], "flaky.bin": ["start", "retry", "done"],
                "mirrored.bin": ["start", "retry", "done"], "lost.bin": ["start", "failed"],
            ])

        let plan = events[0]
        XCTAssertEqual(plan["version"] as? Int, 1)
        XCTAssertEqual(plan["download"] as? Int, 4)
        XCTAssertEqual(plan["up_to_date"] as? Int, 1)
        XCTAssertEqual(plan["bytes"] as? Int, good.count, "only pinned sizes are known")
        let changes = try XCTUnwrap(plan["changes"] as? [[String: Any]])
        XCTAssertEqual(changes.map { $0["dest"] as? String }, ["good.bin", "flaky.bin", "mirrored.bin", "lost.bin"])
        XCTAssertEqual(changes.map { $0["action"] as? String }, ["download", "download", "download", "download"])

        let done = try XCTUnwrap(perFile["good.bin"]?.last)
        XCTAssertEqual(done["result"] as? String, "fetched")
        XCTAssertEqual(done["bytes"] as? Int, good.count)
        XCTAssertEqual(done["digest"] as? String, "sha256:" + sha256(good))
        XCTAssertEqual(done["url"] as? String, server.url("/good"))

        let retry = try XCTUnwrap(perFile["flaky.bin"]?[1])
        XCTAssertEqual(retry["error"] as? String, "HTTP 503")
        XCTAssertEqual(retry["next_url"] as? String, server.url("/flaky"))
        XCTAssertNotNil(retry["retry_in"] as? Double)

        let hop = try XCTUnwrap(perFile["mirrored.bin"]?[1])
        XCTAssertEqual(hop["url"] as? String, server.url("/missing"))
        XCTAssertEqual(hop["next_url"] as? String, server.url("/mirror"))
        XCTAssertTrue(hop["retry_in"] is NSNull, "a mirror is tried at once")
        XCTAssertEqual(perFile["mirrored.bin"]?[2]["url"] as? String, server.url("/mirror"))

        let failed = try XCTUnwrap(perFile["lost.bin"]?.last)
        XCTAssertEqual(
            failed["error"] as? String, "\(server.url("/missing")): HTTP 404",
            "the destination is in dest, not repeated")
        let sources = try XCTUnwrap(failed["sources"] as? [[String: Any]])
        XCTAssertEqual(sources.map { $0["error"] as? String }, ["HTTP 404"])

        let summary = try XCTUnwrap(events.last)
        XCTAssertEqual(summary["fetched"] as? Int, 3)
        XCTAssertEqual(summary["bytes"] as? Int, good.count + flaky.count + mirrored.count)
        XCTAssertEqual(summary["up_to_date"] as? Int, 1)
        XCTAssertEqual(summary["failed"] as? Int, 1)
        XCTAssertEqual(summary["exit_status"] as? Int, 1)
        XCTAssertTrue(summary["interrupted"] is NSNull)
        XCTAssertNotNil(summary["seconds"] as? Double)
    }

    /// A manifest that does not validate, under `--json`: one `diagnostic` event per problem on stdout, then exit 3.
    func testManifestDiagnosticsAreJSONEvents() throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: ftp://example.com/a
                dest: a
                sha256: abc
            """)
        for command in ["sync", "plan", "verify"] {
            let result = try HaulProcess.run([command, "--json"], currentDirectory: directory.path)
            XCTAssertEqual(result.exitCode, 3, result.stderr)
            let events = try events(result.stdout)
            XCTAssertEqual(events.count, 2, result.stdout)
            XCTAssertEqual(events.map { $0["event"] as? String }, ["diagnostic", "diagnostic"])
            XCTAssertEqual(events.map { $0["line"] as? Int }, [3, 5])
            XCTAssertEqual(events.map { $0["path"] as? String }, ["files[0].url", "files[0].sha256"])
            XCTAssertEqual(events[1]["column"] as? Int, 13)
            XCTAssertEqual(events[1]["severity"] as? String, "error")
            XCTAssertEqual(events[1]["file"] as? String, "haul.yaml")
            XCTAssertEqual(events[1]["message"] as? String, "expected 64 hex digits, found 3")
        }
    }

    /// A plan too large to hold whole is still one `plan` event on one line, every change in it.
    func testALargePlanIsOneEventOnOneLine() throws {
        let count = 20_000
        var yaml = "version: 1\nfiles:\n"
        for index in 0..<count {
            yaml +=
                "  - {url: \"http://127.0.0.1:9/f\(index)\", dest: \"d/f\(index).bin\", sha256: \(String(repeating: "ab", count: 32))}\n"
        }
        try directory.write("haul.yaml", yaml)
        let plan = try HaulProcess.run(["plan", "--json"], currentDirectory: directory.path)
        XCTAssertEqual(plan.exitCode, 2, plan.stderr)
        let lines = plan.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 2, "one line and its newline")
        XCTAssertGreaterThan(lines[0].utf8.count, 10 * (64 << 10), "larger than many pieces")
        let events = try events(plan.stdout)
        XCTAssertEqual(events.count, 1)
        let changes = try XCTUnwrap(events[0]["changes"] as? [[String: Any]])
        XCTAssertEqual(changes.count, count)
        XCTAssertEqual(changes.map { $0["dest"] as? String }, (0..<count).map { "d/f\($0).bin" })
        XCTAssertEqual(events[0]["download"] as? Int, count)
    }

    func testPlanAndANoOpSyncInJSON() throws {
        let bytes: [UInt8] = [1, 2, 3]
        let server = try LoopbackHTTPServer(files: ["/a": bytes])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - {url: "\(server.url("/a"))", dest: a.bin, sha256: \(sha256(bytes))}
            """)
        let plan = try HaulProcess.run(["plan", "--json"], currentDirectory: directory.path)
        XCTAssertEqual(plan.exitCode, 2)
        XCTAssertEqual(try events(plan.stdout).map { $0["event"] as? String }, ["plan"])
        XCTAssertEqual(try HaulProcess.run(["sync", "--json"], currentDirectory: directory.path).exitCode, 0)
        let noop = try HaulProcess.run(["sync", "--json"], currentDirectory: directory.path)
        let events = try events(noop.stdout)
        XCTAssertEqual(events.map { $0["event"] as? String }, ["plan", "summary"])
        XCTAssertEqual((events[0]["changes"] as? [Any])?.count, 0)
        XCTAssertEqual(events[1]["up_to_date"] as? Int, 1)
        XCTAssertEqual(events[1]["exit_status"] as? Int, 0)
    }
}

/// Who served the bytes: after mirrors and redirects, with a redirect's query hidden, and over which HTTP version.
final class ServedByTests: XCTestCase {
    func testDoneSaysWhichURLServedTheBytesAndOverWhichHTTP() throws {
        let directory = try TemporaryDirectory()
        let bytes: [UInt8] = Array("redirected\n".utf8)
        let storage = try LoopbackHTTPServer(files: ["/blob": bytes])
        defer { storage.stop() }
        let origin = try LoopbackHTTPServer { _ in .redirect(to: storage.url("/blob?X-Signature=s3cret-sig")) }
        defer { origin.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: \(origin.url("/a.bin"))
                dest: a.bin
                sha256: \(sha256(bytes))
            """)
        let json = try directory.haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 0, json.stderr)
        let done = try XCTUnwrap(json.stdout.split(separator: "\n").first { $0.contains("\"event\":\"done\"") })
        XCTAssertTrue(done.contains("\"url\":\"\(origin.url("/a.bin"))\""), String(done))
        XCTAssertTrue(
            done.contains("\"served_by\":\"\(storage.url("/blob"))?…\",\"http_version\":\"1.1\""), String(done))
        XCTAssertFalse(json.stdout.contains("s3cret-sig"))

        try FileManager.default.removeItem(atPath: directory.path("a.bin"))
        let verbose = try directory.haul(["sync", "--verbose", "--progress", "none"])
        XCTAssertTrue(
            verbose.stdout.contains(
                "fetched a.bin (11 B) from \(origin.url("/a.bin")), served by \(storage.url("/blob"))?… over HTTP/1.1\n"
            ),
            verbose.stdout)
    }
}
