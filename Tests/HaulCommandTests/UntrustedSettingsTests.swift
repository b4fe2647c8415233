import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// What a config file, a manifest, a checksum list, a server's cache headers, the system clock and the command line
/// can ask of haul, and where haul stops obeying: each through the real binary.
final class UntrustedSettingsTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let bytes = Array("the asset's bytes\n".utf8)
    private var sha256: String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func serve(_ handler: @escaping @Sendable (RecordedRequest) -> ServerResponse) throws -> LoopbackHTTPServer
    {
        let server = try LoopbackHTTPServer(handler: handler)
        addTeardownBlock { server.stop() }
        return server
    }

    // MARK: Rewrite rules

    /// `(a+)+$` takes a backtracking engine minutes on a URL of a few dozen characters that does not match; the
    /// rule is matched in time linear in the URL, so the entry is fetched from its own URL at once.
    func testARegexRuleThatWouldBacktrackForeverCostsNothing() throws {
        let path = "/" + String(repeating: "a", count: 60) + "!"
        let bytes = self.bytes
        let server = try serve { _ in .ok(bytes) }
        try directory.write(
            "haul.yaml", "version: 1\nfiles:\n  - {url: \(server.url(path)), dest: a.bin, sha256: \(sha256)}\n")
        try directory.write(
            "config.yaml",
            """
            rewrites:
              - regex: '^http://127\\.0\\.0\\.1:\\d+/(a+)+$'
                to: 'https://mirror.invalid/$1'
            """)
        let sync = try HaulProcess.run(
            ["sync", "--config", "config.yaml"], currentDirectory: directory.path, timeout: 30)
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("a.bin"), bytes)
    }

    /// A rule only RE2-like syntax can keep linear is refused where it is written, saying why.
    func testABackreferenceIsRefusedAtItsLineAndColumn() throws {
        try directory.write("haul.yaml", "version: 1\nfiles:\n  - {url: https://e.invalid/a, dest: a.bin}\n")
        try directory.write(
            "config.yaml", "rewrites:\n  - regex: '^(https)://(.*)\\1$'\n    to: 'https://m.invalid/$2'\n")
        let plan = try directory.haul(["plan", "--config", "config.yaml"])
        XCTAssertEqual(plan.exitCode, 64, plan.stderr)
        XCTAssertTrue(
            plan.stderr.contains(
                "config.yaml:2:12: error: rewrites[0].regex: invalid regular expression "
                    + "\"^(https)://(.*)\\\\1$\": backreferences (\\1) are not supported"), plan.stderr)
    }

    /// A target with a space or a line break would make every rewritten request fail: refused at load (64), at
    /// its line and column, before any request.
    func testATargetWithASpaceOrALineBreakIsRefusedAtLoad() throws {
        let bytes = self.bytes
        let server = try serve { _ in .ok(bytes) }
        try directory.write(
            "haul.yaml", "version: 1\nfiles:\n  - {url: \(server.url("/a.bin")), dest: a.bin, sha256: \(sha256)}\n")
        for target in ["\"http://127.0.0.1:1/x y/\"", "\"http://127.0.0.1:1/x\\r\\nInjected: 1/\""] {
            try directory.write("config.yaml", "rewrites:\n  - prefix: \(server.baseURL)/\n    to: \(target)\n")
            let sync = try directory.haul(["sync", "--config", "config.yaml"])
            XCTAssertEqual(sync.exitCode, 64, sync.stderr)
            XCTAssertTrue(sync.stderr.hasPrefix("config.yaml:3:9: error: rewrites[0].to: URL "), sync.stderr)
            XCTAssertTrue(sync.stderr.contains("contains a space or control character"), sync.stderr)
            XCTAssertEqual(server.requests.count, 0)
            XCTAssertFalse(directory.exists("a.bin"))
        }
    }

    // MARK: Destinations

    /// On a case-insensitive file system `.HAUL` is haul's own folder: refused from a manifest (3) and from a
    /// checksum list, and nothing is written.
    func testCaseVariantsOfTheFolderHaulKeepsAreRefused() throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - {url: https://e.invalid/a, dest: .HAUL/state, sha256: \(sha256)}
              - {url: https://e.invalid/b, dest: .Haul/journal, sha256: \(sha256)}
            """)
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 3, plan.stderr)
        XCTAssertTrue(
            plan.stderr.contains(
                "haul.yaml:3:38: error: files[0].dest: \".HAUL/state\" is inside \".HAUL\", which "
                    + "on a case-insensitive file system is \".haul\", haul's private folder under root"),
            plan.stderr)
        XCTAssertTrue(plan.stderr.contains("files[1].dest: \".Haul/journal\" is inside \".Haul\""), plan.stderr)

        let list = "\(sha256)  .HAUL/state\n\(sha256)  fine.bin\n"
        let server = try serve { _ in .ok(list) }
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")
        let before = directory.read("haul.yaml")
        let add = try directory.haul(["add", "--from-sums", server.url("/SHA256SUMS")])
        XCTAssertNotEqual(add.exitCode, 0, add.stdout)
        XCTAssertTrue(add.stderr.contains("\".HAUL/state\" is inside \".HAUL\""), add.stderr)
        XCTAssertEqual(directory.read("haul.yaml"), before, "the manifest is not edited")
        XCTAssertFalse(directory.exists(".HAUL"))
    }

    // MARK: Freshness

    /// A manifest of one unpinned entry, fetched from `server`.
    private func unpinned(_ server: LoopbackHTTPServer, refresh: String? = nil) throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: \(server.url("/feed.json"))
                dest: feed.json
                \(refresh.map { "refresh: \($0)" } ?? "")
            """)
    }

    /// haul run with the system clock moved by `offset` (libfaketime: `+30d`, `-1y`); file times are left alone.
    private func haulAtClock(_ offset: String, _ arguments: [String]) throws -> ProcessResult {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/faketime") else {
            throw Capability.unavailable("moving the clock needs Debian's faketime")
        }
        return try ProcessRunner.run(
            "/usr/bin/faketime", ["-f", offset, HaulProcess.executablePath] + arguments,
            environment: ["NO_FAKE_STAT": "1", "DONT_FAKE_MONOTONIC": "1"],
            currentDirectory: directory.path)
    }

    /// `max-age=000000000003600` is an hour (delta-seconds may have leading zeros), not zero.
    func testAMaxAgeWithLeadingZerosIsTheHourItSays() throws {
        let server = try serve { _ in .ok("{}", headers: [("Cache-Control", "max-age=000000000003600")]) }
        try unpinned(server)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout)
        XCTAssertTrue(
            plan.stdout.contains("= feed.json (unpinned; fresh for 1h00m") || plan.stdout.contains("fresh for 59m"),
            plan.stdout)
    }

    /// A server cannot keep haul from asking for more than a year, whatever max-age or Expires it sends.
    func testAServerCannotGrantFreshnessBeyondAYear() throws {
        let server = try serve { _ in
            .ok("{}", headers: [("Cache-Control", "max-age=9999999999"), ("Expires", "Fri, 31 Dec 9999 23:59:59 GMT")])
        }
        try unpinned(server)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(try haulAtClock("+300d", ["plan"]).exitCode, 0, "fresh 300 days on")
        let later = try haulAtClock("+366d", ["plan"])
        XCTAssertEqual(later.exitCode, 2, later.stdout)
        XCTAssertTrue(later.stdout.contains("↻ feed.json"), later.stdout)
    }

    /// Synced while the clock ran 30 days ahead, an entry with `refresh: 10m` is not fresh for a month once the
    /// clock is set right: a confirmation from the future is asked about again.
    func testAConfirmationTakenWhileTheClockRanAheadIsNotFresh() throws {
        let server = try serve { _ in .ok("{}") }
        try unpinned(server, refresh: "10m")
        let ahead = try haulAtClock("+30d", ["sync"])
        XCTAssertEqual(ahead.exitCode, 0, ahead.stderr)
        XCTAssertEqual(try haulAtClock("+30d", ["plan"]).exitCode, 0, "fresh by the clock it was confirmed with")
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, plan.stdout)
        XCTAssertTrue(plan.stdout.contains("↻ feed.json"), plan.stdout)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(server.requests.count, 2, "asked again")
        XCTAssertEqual(try directory.haul(["plan"]).exitCode, 0, "confirmed now: fresh again")
    }

    // MARK: The low-speed floor

    /// A burst, then a trickle under 1 KiB/s: the attempt fails once a `timeout` window holds only the trickle, not
    /// two or three windows later (libcurl's own check averaged over five seconds, then waited a window more).
    func testATrickleFailsAfterOneWindow() throws {
        let body = [UInt8](repeating: 7, count: 24_000)
        let server = try serve { _ in
            ServerResponse.ok(body).with(fault: .burstThenTrickle(burst: 16_384, bytesPerChunk: 100, interval: 0.25))
        }
        try directory.write(
            "haul.yaml", "version: 1\nfiles:\n  - {url: \(server.url("/slow.bin")), dest: slow.bin, retries: 0}\n")
        let started = Date()
        let sync = try directory.haul(["sync", "--timeout", "3s", "--progress", "none"])
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains("slow.bin")
                && sync.stderr.contains(": under 1 KiB/s for 3 s\n"), sync.stderr)
        XCTAssertGreaterThanOrEqual(elapsed, 2.9, "not before the window has passed")
        XCTAssertLessThan(
            elapsed, 5.5, "one window (3 s) after the burst and a callback's second, not two or three windows")
        XCTAssertFalse(directory.exists("slow.bin"))
    }

    // MARK: Numbers on the command line

    /// A refused value says what was expected, not only that it is invalid.
    func testARefusedNumberSaysWhy() throws {
        let cases: [([String], String)] = [
            (["--jobs", "x"], "The value 'x' is invalid for '--jobs <jobs>': expected a whole number from 1 to 256"),
            (["--jobs", "0"], "The value '0' is invalid for '--jobs <jobs>': must be from 1 to 256"),
            (["--retries", "101"], "The value '101' is invalid for '--retries <n>': must be from 0 to 100"),
            (
                ["--timeout", "5q"],
                "The value '5q' is invalid for '--timeout <duration>': expected a duration such as "
                    + "\"30s\", \"5m\", \"1h\", \"250ms\" or a number of seconds, found \"5q\""
            ),
            (
                ["--limit-rate", "2.5.1M"],
                "The value '2.5.1M' is invalid for '--limit-rate <rate>': expected a number of "
                    + "bytes, optionally followed by K, M, G or T (K = 1024), such as 500K, 2.5M or 2G"
            ),
            (
                ["--max-file-size", "0"],
                "The value '0' is invalid for '--max-file-size <size>': must be greater than zero"
            ),
            (
                ["--max-time", "0s"],
                "The value '0s' is invalid for '--max-time <duration>': must be greater than zero, found \"0s\""
            ),
        ]
        for (arguments, message) in cases {
            let result = try directory.haul(["sync"] + arguments)
            XCTAssertEqual(result.exitCode, 64, "\(arguments)")
            XCTAssertTrue(result.stderr.hasPrefix("error: \(message)\n"), "\(arguments): \(result.stderr)")
        }
        let pin = ["add", "https://e.invalid/a.bin", "--sha256", sha256]
        for (size, message) in [("1.5K", "expected a whole number of bytes"), ("-5", "must be 0 or more")] {
            let add = try directory.haul(pin + ["--size=\(size)"])
            XCTAssertEqual(add.exitCode, 64, size)
            XCTAssertTrue(
                add.stderr.hasPrefix("error: The value '\(size)' is invalid for '--size <bytes>': \(message)\n"),
                add.stderr)
        }
        XCTAssertFalse(directory.exists("haul.yaml"), "no manifest is created")
    }
}
