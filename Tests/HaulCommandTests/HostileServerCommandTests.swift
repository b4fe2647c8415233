import Foundation
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// A hostile world, end to end through the real binary: inconsistent answers never become files, dead and hung
/// hosts cost one attempt and not a minute per file, and a URL listed for many destinations is fetched once.
final class HostileServerCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// One manifest entry; `extra` lines are added as they are (already indented).
    private func entry(
        _ url: String, dest: String, pinned: [UInt8]?, mirrors: [String] = [], extra: [String] = []
    ) -> String {
        var text = "  - url: \(url)\n    dest: \(dest)\n"
        if let pinned { text += "    sha256: \(sha256(pinned))\n" }
        if !mirrors.isEmpty { text += "    mirrors: [\(mirrors.joined(separator: ", "))]\n" }
        for line in extra { text += "    \(line)\n" }
        return text
    }

    private func writeManifest(_ entries: [String]) throws {
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles:\n" + entries.joined())
    }

    /// Every stdout line as a JSON object.
    private func events(_ stdout: String) throws -> [[String: Any]] {
        try stdout.split(separator: "\n").map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    // MARK: §4 Consistent answers only

    func testConflictingContentLengthsNeverBecomeAFile() throws {
        let server = try LoopbackHTTPServer { _ in
            .raw("HTTP/1.1 200 OK", ["Content-Length: 5", "Content-Length: 3"], body: Array("hello".utf8))
        }
        defer { server.stop() }
        try writeManifest([entry(server.url("/feed"), dest: "feed.txt", pinned: nil)])
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1, sync.stdout + sync.stderr)
        XCTAssertNil(directory.read("out/feed.txt"), "no file of 3 (or 5) bytes")
        XCTAssertTrue(
            sync.stderr.contains(
                "error: feed.txt: \(server.url("/feed")): protocol error: conflicting Content-Length values: 5 and 3"),
            sync.stderr)
        XCTAssertEqual(server.requests.count, 1, "not retried")
    }

    func testAnOddStatusOrAHugeHeaderBlockIsNotRetriedAndTheMirrorServes() throws {
        let good: [UInt8] = Array("good bytes".utf8)
        let filler = (0..<400).map { "X-Filler-\($0): " + String(repeating: "f", count: 1000) }
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/odd": .raw("HTTP/1.1 999 Odd", ["Content-Length: 3"], body: Array("abc".utf8))
            case "/headers": .raw("HTTP/1.1 200 OK", filler + ["Content-Length: 3"], body: Array("abc".utf8))
            default: .ok(good)
            }
        }
        defer { server.stop() }
        try writeManifest([
            entry(
                server.url("/odd"), dest: "a.bin", pinned: good, mirrors: [server.url("/mirror-a")],
                extra: ["retries: 2"]),
            entry(
                server.url("/headers"), dest: "b.bin", pinned: good, mirrors: [server.url("/mirror-b")],
                extra: ["retries: 2"]),
        ])
        let sync = try directory.haul(["sync", "--jobs", "1"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), good)
        XCTAssertEqual(directory.read("out/b.bin"), good)
        XCTAssertEqual(server.requests.map(\.path), ["/odd", "/mirror-a", "/headers", "/mirror-b"])
    }

    /// A resume answered with another range is dropped and fetched from zero at once, without spending a retry.
    func testAResumeAnsweredWithTheWrongRangeStartsOverAtOnce() throws {
        let data = (0..<400_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let served = Mutex(0)
        let server = try LoopbackHTTPServer { request in
            let n = served.withLock { n in
                n += 1; return n
            }
            if n == 1 {
                return ServerResponse.ok(data, headers: [("ETag", "\"v1\"")]).with(fault: .closeAfter(bytes: 100_000))
            }
            if request.header("Range") != nil {
                return ServerResponse(
                    status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 0-9/400000")],
                    body: Array(data[0..<10]))
            }
            return .ok(data, headers: [("ETag", "\"v1\"")])
        }
        defer { server.stop() }
        try writeManifest([entry(server.url("/big"), dest: "big.bin", pinned: data, extra: ["retries: 0"])])
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 1, "the first run is cut and keeps its partial")
        let second = try directory.haul(["sync"])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(directory.read("out/big.bin"), data)
        XCTAssertEqual(server.requests.map { $0.header("Range") }, [nil, "bytes=100000-", nil])
    }

    func testAnEncodingNobodyAskedForIsNamedInTheErrorAndInAWarning() throws {
        let encoded: [UInt8] = [0x1f, 0x8b, 8, 0, 9, 9, 9]
        let server = try LoopbackHTTPServer { _ in .ok(encoded, headers: [("Content-Encoding", "gzip")]) }
        defer { server.stop() }
        try writeManifest([
            entry(server.url("/pinned"), dest: "pinned.txt", pinned: Array("plain".utf8)),
            entry(server.url("/feed"), dest: "feed.json", pinned: nil),
        ])
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: pinned.txt: \(server.url("/pinned")): checksum mismatch: expected \(sha256(Array("plain".utf8)))"
            ),
            sync.stderr)
        XCTAssertTrue(sync.stderr.contains("(served with Content-Encoding: gzip)"), sync.stderr)
        XCTAssertEqual(directory.read("out/feed.json"), encoded, "an unpinned file is stored as served")
        XCTAssertTrue(
            sync.stderr.contains("warning: feed.json: stored as served with Content-Encoding: gzip"), sync.stderr)
    }

    // MARK: §5 A dead host costs one connect

    /// 30 entries whose first URL refuses connections: one connect in the whole run (one job at a time), every
    /// file from the mirror.
    func testADeadFirstURLCostsOneConnectForTheWholeRun() throws {
        let dead = try RefusingPort()
        let files = Dictionary(uniqueKeysWithValues: (0..<30).map { ("/f\($0)", Array("file \($0)".utf8)) })
        let mirror = try LoopbackHTTPServer(files: files)
        defer { mirror.stop() }
        try writeManifest(
            (0..<30).map {
                entry(
                    dead.url("/f\($0)"), dest: "f\($0).txt", pinned: files["/f\($0)"], mirrors: [mirror.url("/f\($0)")])
            })
        let sync = try directory.haul(["sync", "--json", "--jobs", "1"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        let retries = try events(sync.stdout).filter { $0["event"] as? String == "retry" }
        XCTAssertEqual(retries.count, 1, "\(retries)")
        XCTAssertTrue(retries.first?["retry_in"] is NSNull, "the mirror is tried at once")
        XCTAssertEqual(mirror.requests.count, 30)
        for index in 0..<30 { XCTAssertEqual(directory.read("out/f\(index).txt"), files["/f\(index)"]) }
    }

    /// A first URL that accepts and never answers, with `timeout: 1s`: one stall window, then the mirror; the
    /// other entries go to the mirror first.
    func testAHungFirstURLCostsOneStallWindow() throws {
        let silent = try SilentListener()
        let files = Dictionary(uniqueKeysWithValues: (0..<3).map { ("/f\($0)", Array("file \($0)".utf8)) })
        let mirror = try LoopbackHTTPServer(files: files)
        defer { mirror.stop() }
        try writeManifest(
            (0..<3).map {
                entry(
                    silent.url("/f\($0)"), dest: "f\($0).txt", pinned: files["/f\($0)"],
                    mirrors: [mirror.url("/f\($0)")],
                    extra: ["timeout: 1s", "retries: 2"])
            })
        let sync = try directory.haul(["sync", "--json", "--jobs", "1"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        let retries = try events(sync.stdout).filter { $0["event"] as? String == "retry" }
        XCTAssertEqual(retries.map { $0["url"] as? String }, [silent.url("/f0")])
        XCTAssertEqual(retries.first?["next_url"] as? String, mirror.url("/f0"))
    }

    /// The same URL for 10,000 destinations: one request; every destination verified and in place.
    func testTenThousandDestinationsOfOneURLAreOneRequest() throws {
        let bytes: [UInt8] = Array("shared content\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/shared": bytes])
        defer { server.stop() }
        var text = "version: 1\nroot: out\nfiles:\n"
        for index in 0..<10_000 {
            text +=
                "  - {url: \"\(server.url("/shared"))\", dest: \"d\(index % 100)/f\(index)\", sha256: \(sha256(bytes))}\n"
        }
        try directory.write("haul.yaml", text)
        let sync = try directory.haul(["sync", "--progress", "none"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertTrue(sync.stdout.contains("Fetched 10000 files"), sync.stdout)
        for index in stride(from: 0, to: 10_000, by: 997) {
            XCTAssertEqual(directory.read("out/d\(index % 100)/f\(index)"), bytes)
        }
        XCTAssertEqual(directory.list("out/d7").count, 100)
        server.resetLog()
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(server.requests.count, 0, "and every one was recorded as haul's")
    }

    /// One URL asked for with different headers is a different request: one download per distinct set of headers,
    /// each sent with its own, and entries with the same headers share it.
    func testOneURLWithDifferentHeadersIsOneRequestPerSetOfHeaders() throws {
        let bytes: [UInt8] = Array("same body\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/shared": bytes])
        defer { server.stop() }
        try writeManifest([
            entry(server.url("/shared"), dest: "plain-1.txt", pinned: bytes),
            entry(server.url("/shared"), dest: "team-a-1.txt", pinned: bytes, extra: ["headers: {X-Team: a}"]),
            entry(server.url("/shared"), dest: "team-b.txt", pinned: bytes, extra: ["headers: {X-Team: b}"]),
            entry(server.url("/shared"), dest: "team-a-2.txt", pinned: bytes, extra: ["headers: {X-Team: a}"]),
            entry(server.url("/shared"), dest: "plain-2.txt", pinned: bytes),
        ])
        let sync = try directory.haul(["sync", "--jobs", "1"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        for name in ["plain-1", "plain-2", "team-a-1", "team-a-2", "team-b"] {
            XCTAssertEqual(directory.read("out/\(name).txt"), bytes, name)
        }
        let teams = server.requests(path: "/shared").map { request in
            request.headers.first { $0.name.lowercased() == "x-team" }?.value ?? "-"
        }
        XCTAssertEqual(teams.sorted(), ["-", "a", "b"])
    }

    /// A destination whose checksum does not match the shared bytes fails on its own, or tries its own mirror.
    func testADestinationWhoseChecksumDiffersFromTheSharedBytesGoesItsOwnWay() throws {
        let bytes: [UInt8] = Array("version 2\n".utf8), old: [UInt8] = Array("version 1\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/shared": bytes, "/archive": old])
        defer { server.stop() }
        try writeManifest([
            entry(server.url("/shared"), dest: "a.txt", pinned: bytes),
            entry(server.url("/shared"), dest: "b.txt", pinned: bytes),
            entry(server.url("/shared"), dest: "old-with-mirror.txt", pinned: old, mirrors: [server.url("/archive")]),
            entry(server.url("/shared"), dest: "old.txt", pinned: old),
        ])
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertEqual(directory.read("out/a.txt"), bytes)
        XCTAssertEqual(directory.read("out/b.txt"), bytes)
        XCTAssertEqual(directory.read("out/old-with-mirror.txt"), old)
        XCTAssertNil(directory.read("out/old.txt"))
        XCTAssertTrue(
            sync.stderr.contains(
                "error: old.txt: \(server.url("/shared")): the server's bytes differ from the pinned checksum"),
            sync.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/shared", "/archive"])
    }
}
