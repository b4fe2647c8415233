import HaulDigest
import HaulTestSupport
import XCTest

/// `-H`, `-A`, `--retries` and `--timeout`: the command line over the manifest, with `-H` scoped as the manifest's
/// own headers are (the entry's url only: no mirror, no other origin after a redirect).
final class RequestOptionsTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let bytes: [UInt8] = Array("asset\n".utf8)
    private var digest: String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func manifest(_ entries: [(url: String, mirrors: [String], dest: String)], defaults: String = "") throws {
        let files = entries.map { entry in
            """
              - url: \(entry.url)
                mirrors: [\(entry.mirrors.joined(separator: ", "))]
                dest: \(entry.dest)
                sha256: \(digest)
            """
        }.joined(separator: "\n")
        try directory.write("haul.yaml", "version: 1\nroot: out\n\(defaults)files:\n\(files)\n")
    }

    func testHeadersGoToEachURLsOriginOnlyAndTheUserAgentToEveryRequest() throws {
        let target = try LoopbackHTTPServer(files: ["/b.bin": bytes])
        defer { target.stop() }
        let bytes = bytes
        let primary = try LoopbackHTTPServer { request in
            request.path == "/a.bin"
                ? .ok(bytes) : request.path == "/moved.bin" ? .redirect(to: target.url("/b.bin")) : .notFound
        }
        defer { primary.stop() }
        let mirror = try LoopbackHTTPServer(files: ["/c.bin": bytes])
        defer { mirror.stop() }
        try manifest(
            [
                (primary.url("/a.bin"), [], "a.bin"), (primary.url("/moved.bin"), [], "b.bin"),
                (primary.url("/gone.bin"), [mirror.url("/c.bin")], "c.bin"),
            ],
            defaults: "defaults:\n  headers: {X-Team: blue, X-Token: manifest}\n")
        let sync = try directory.haul([
            "sync", "-H", "X-Token: s3cret-cli", "--header", "X-Extra:two", "-A", "ci-bot/1.0",
            "--verbose",
        ])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        for request in primary.requests {
            XCTAssertEqual(
                request.header("X-Token"), "s3cret-cli", "the command line wins over defaults: \(request.path)")
            XCTAssertEqual(request.header("X-Team"), "blue")
            XCTAssertEqual(request.header("X-Extra"), "two")
        }
        for request in target.requests + mirror.requests {
            XCTAssertNil(request.header("X-Token"), "\(request.path): a redirect's other origin and a mirror get none")
            XCTAssertNil(request.header("X-Extra"))
        }
        XCTAssertFalse(target.requests.isEmpty || mirror.requests.isEmpty)
        for request in primary.requests + target.requests + mirror.requests {
            XCTAssertEqual(request.header("User-Agent"), "ci-bot/1.0", request.path)
        }
        XCTAssertFalse((sync.stdout + sync.stderr).contains("s3cret-cli"))
    }

    func testRetriesAndTimeoutFromTheCommandLineWinOverTheManifest() throws {
        let failing = try LoopbackHTTPServer { _ in .status(503) }
        defer { failing.stop() }
        try manifest([(failing.url("/a.bin"), [], "a.bin")], defaults: "defaults:\n  retries: 5\n")
        let once = try directory.haul(["sync", "--retries", "0"])
        XCTAssertEqual(once.exitCode, 1, once.stderr)
        XCTAssertEqual(failing.requests.count, 1, "--retries 0: one request, not six")

        let bytes = bytes
        let stalling = try LoopbackHTTPServer { _ in
            ServerResponse.ok(bytes).with(fault: .stallAfter(bytes: 2, seconds: 30))
        }
        defer { stalling.stop() }
        try manifest([(stalling.url("/a.bin"), [], "a.bin")], defaults: "defaults:\n  timeout: 60s\n  retries: 0\n")
        let stalled = try directory.haul(["sync", "--timeout", "500ms"])
        XCTAssertEqual(stalled.exitCode, 1, stalled.stderr)
        XCTAssertTrue(
            stalled.stderr.contains("error: a.bin: \(stalling.url("/a.bin")): no data for 0.5 s"), stalled.stderr)
        XCTAssertFalse(directory.exists("out/a.bin"))

        let bad = try directory.haul(["sync", "-H", "NoColonHere"])
        XCTAssertEqual(bad.exitCode, 64, bad.stderr)
        XCTAssertTrue(bad.stderr.hasPrefix("error: -H \"NoColonHere\": expected \"Name: value\""), bad.stderr)
        let owned = try directory.haul(["sync", "-H", "Range: bytes=0-"])
        XCTAssertEqual(owned.exitCode, 64, owned.stderr)
        XCTAssertTrue(owned.stderr.contains("haul sets Range itself"), owned.stderr)
    }
}

/// A body past its limit names what set the limit: the entry's `size`, or `--max-file-size`.
final class SizeLimitMessageTests: XCTestCase {
    func testTheLimitIsNamedAfterWhatSetIt() throws {
        let directory = try TemporaryDirectory()
        let big = [UInt8](repeating: 7, count: 4096)
        let server = try LoopbackHTTPServer(files: ["/big.bin": big])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/big.bin"))
                dest: sized.bin
                sha256: \(sha256(big))
                size: 1000
                retries: 0
              - url: \(server.url("/big.bin"))
                dest: unsized.bin
                retries: 0
            """)
        let sync = try directory.haul(["sync", "--max-file-size", "2K"])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains("error: sized.bin: \(server.url("/big.bin")): more than the 1000 bytes its size says"),
            sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: unsized.bin: \(server.url("/big.bin")): more than 2.0 KiB, the --max-file-size limit"),
            sync.stderr)
    }
}

/// libcurl's low-speed abort, in haul's words: the floor and the window, as the manifest's `timeout` says it.
final class LowSpeedMessageTests: XCTestCase {
    func testATrickleIsUnderTheFloorInHaulsWords() throws {
        let directory = try TemporaryDirectory()
        // 250 B/s for 8 s: under the floor, and short enough that the server's handler ends soon after haul hangs up.
        let bytes = [UInt8](repeating: 1, count: 2_000)
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok(bytes).with(fault: .trickle(bytesPerChunk: 50, interval: 0.2))
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: \(server.url("/slow.bin"))
                dest: slow.bin
                timeout: 1s
                retries: 0
            """)
        let sync = try directory.haul(["sync", "--progress", "none"])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains("error: slow.bin: \(server.url("/slow.bin")): under 1 KiB/s for 1 s\n"), sync.stderr)
        XCTAssertFalse(sync.stderr.contains("Operation too slow"), sync.stderr)
    }
}
