import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

@testable import HaulCommand
@testable import HaulEngine

/// What people and logs see while files arrive: the plain format when piped, the heartbeat, and the live view on
/// a real terminal (tmux at 80 columns), through the real binary against a real loopback server.
final class ProgressOutputTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func body(_ seed: Int, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) }
    }

    /// `haul.yaml` with one pinned entry per file, served at `/dest`.
    private func writeManifest(_ entries: [(dest: String, bytes: [UInt8])], server: LoopbackHTTPServer) throws {
        var yaml = "version: 1\nroot: ./out\nfiles:\n"
        for (dest, bytes) in entries {
            yaml +=
                "  - url: \(server.url("/" + dest))\n    dest: \(dest)\n    sha256: \(sha256(bytes))\n    size: \(bytes.count)\n"
        }
        try directory.write("haul.yaml", yaml)
    }

    /// Serves `entries`; paths under `/slow/` trickle at about 320 KiB/s (16 KiB every 50 ms).
    private func server(
        _ entries: [(dest: String, bytes: [UInt8])], chunk: Int = 16 * 1024, interval: Double = 0.05,
        failFirst: String? = nil
    ) throws -> LoopbackHTTPServer {
        let files = StaticFiles(Dictionary(uniqueKeysWithValues: entries.map { ("/" + $0.dest, $0.bytes) }))
        let script = ScriptedResponses(then: { request in
            let response = files.respond(to: request)
            return request.path.hasPrefix("/slow/")
                ? response.with(fault: .trickle(bytesPerChunk: chunk, interval: interval)) : response
        })
        if let failFirst { script.enqueue([.status(503)], for: "/" + failFirst) }
        return try LoopbackHTTPServer(handler: script.respond)
    }

    // MARK: Piped: plain

    /// A pipe gets plain progress whether or not `CI` is set: one `fetched` line per file, no escape sequence.
    func testPipedOutputIsPlainOneLinePerFileAndNeverAnEscape() throws {
        let entries = (0..<3).map { (dest: "data/f\($0).bin", bytes: body($0, size: 5000)) }
        let server = try server(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)

        for environment in [[:], ["CI": "true", "TERM": "xterm-256color"], ["TERM": "dumb"]] {
            try? FileManager.default.removeItem(atPath: directory.path("out"))
            let result = try directory.haul(["sync"], environment: environment)
            XCTAssertEqual(result.exitCode, 0, result.stderr)
            XCTAssertFalse(
                (result.stdout + result.stderr).contains("\u{1B}"), "\(environment): \(result.stdout)\(result.stderr)")
            let fetched = result.stdout.split(separator: "\n").filter { $0.hasPrefix("fetched ") }
            XCTAssertEqual(fetched.sorted(), entries.map { "fetched \($0.dest) (4.9 KiB)" }, "\(environment)")
            XCTAssertTrue(result.stdout.contains("Fetched 3 files (14.6 KiB), 0 up to date"), result.stdout)
            XCTAssertEqual(result.stderr, "", "nothing is slow: no heartbeat, no retry")
        }
    }

    /// `--progress none` prints the plan and the summary only; `--quiet`, nothing at all when all goes well.
    func testProgressNoneHasNoFileLinesAndQuietPrintsNothing() throws {
        let entries = (0..<2).map { (dest: "f\($0).bin", bytes: body($0, size: 100)) }
        let server = try server(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)

        let none = try directory.haul(["sync", "--progress", "none"])
        XCTAssertEqual(none.exitCode, 0, none.stderr)
        XCTAssertFalse(none.stdout.contains("fetched"), none.stdout)
        XCTAssertEqual(
            none.stdout.split(separator: "\n").count, 4, "two plan lines, the plan summary, the summary: \(none.stdout)"
        )
        XCTAssertEqual(none.stderr, "")

        try FileManager.default.removeItem(atPath: directory.path("out"))
        let quiet = try directory.haul(["sync", "--quiet", "--progress", "plain"])
        XCTAssertEqual(quiet.exitCode, 0, quiet.stderr)
        XCTAssertEqual(quiet.stdout, "")
        XCTAssertEqual(quiet.stderr, "")
    }

    /// A retry is one line on stderr in plain mode, as it happens, naming the URL that failed.
    func testARetryIsOneLine() throws {
        let entries = [(dest: "a.bin", bytes: body(1, size: 1000))]
        let server = try server(entries, failFirst: "a.bin")
        defer { server.stop() }
        try writeManifest(entries, server: server)

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        let lines = result.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, result.stderr)
        XCTAssertTrue(
            lines.first?.hasPrefix("retry a.bin: \(server.url("/a.bin")): HTTP 503; retrying in ") ?? false,
            result.stderr)
        XCTAssertTrue(lines.first?.hasSuffix(" s") ?? false, result.stderr)
        XCTAssertTrue(result.stdout.contains("fetched a.bin (1000 B)\n"), result.stdout)
    }

    /// A log shows that a long transfer is alive, but not more than once every five seconds for the whole
    /// run: two transfers of about seven seconds give one heartbeat, not one each.
    func testHeartbeatForSlowTransfersAtMostOnceEveryFiveSeconds() throws {
        let entries = (0..<2).map { (dest: "slow/part\($0).bin", bytes: body($0, size: 36 * 32 * 1024)) }
        let server = try server(entries, chunk: 32 * 1024, interval: 0.2)  // 160 KiB/s: about 7 s each
        defer { server.stop() }
        try writeManifest(entries, server: server)

        let started = MonotonicClock.seconds()
        let result = try directory.haul(["sync"], environment: ["CI": "true"])
        let elapsed = MonotonicClock.seconds() - started
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        let beats = result.stderr.split(separator: "\n").filter { $0.hasPrefix("still fetching ") }
        XCTAssertGreaterThanOrEqual(elapsed, 5, "the transfers must outlast one heartbeat interval")
        XCTAssertGreaterThanOrEqual(beats.count, 1, result.stderr)
        XCTAssertLessThanOrEqual(
            beats.count, Int(elapsed / PlainProgress.heartbeatInterval), "\(elapsed) s: \(result.stderr)")
        let pattern = try NSRegularExpression(
            pattern: #"^still fetching slow/part[01]\.bin: [0-9.]+ (B|KiB|MiB) / 1\.1 MiB, [0-9.]+ (B|KiB|MiB)/s$"#)
        for beat in beats {
            let line = String(beat)
            XCTAssertNotNil(pattern.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)), line)
        }
        XCTAssertFalse(result.stderr.contains("\u{1B}"))
        XCTAssertEqual(
            result.stdout.split(separator: "\n").filter { $0.hasPrefix("fetched slow/") }.count, 2, result.stdout)
    }

    // MARK: A real terminal

    /// The live view under tmux at 80×24: while files trickle in, an overall line and per-transfer lines, none
    /// wider than 79 columns (a long name is middle-truncated); after exit, no trace of it, and the summary.
    /// With NO_COLOR, no escape sequence at any time; without it, the plan's markers are coloured.
    func testLiveViewUnderTmuxAt80Columns() throws {
        let tmux = try Tmux()
        defer { tmux.killServer() }
        let longName =
            "a/very/long/directory/name/that/keeps/going/and/going/until/it/cannot/fit/in/eighty/columns/file.bin"
        let entries = [
            (dest: "slow/trickle.bin", bytes: body(1, size: 1_200_000)),
            (dest: "slow/" + longName, bytes: body(2, size: 1_000_000)),
            (dest: "small.txt", bytes: body(3, size: 300)),
        ]
        let server = try server(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)

        // Colour is on by default on a terminal: the plan's `+` is green.
        try tmux.run("plan", in: directory.path, arguments: ["plan"], environment: [:])
        let plan = try tmux.waitForExit("plan")
        XCTAssertTrue(try tmux.capture("plan", escapes: true).contains("\u{1B}[32m+"), plan)

        try tmux.run("sync", in: directory.path, arguments: ["sync"], environment: ["NO_COLOR": "1"])
        let (frame, sawEscape) = try tmux.firstFrame(of: "sync") { lines in
            guard
                let top = lines.firstIndex(where: {
                    $0.range(of: #"^\[\d+/3 files\]"#, options: .regularExpression) != nil
                })
            else { return nil }
            let view = Array(lines[top...].prefix { !$0.isEmpty })
            guard view.contains(where: { $0.contains("slow/trickle.bin") && $0.contains("[#") }),
                view.contains(where: { $0.contains("…columns/file.bin") })
            else { return nil }
            return view
        }
        let lastScreen = try tmux.capture("sync", escapes: false)
        let running = try XCTUnwrap(frame, "no frame with both transfers was seen:\n" + lastScreen)
        print("frame at 80 columns:\n" + running.joined(separator: "\n"))
        for line in running {
            XCTAssertLessThanOrEqual(ProgressFormatting.columns(of: line), 79, "wider than 80 columns - 1: \(line)")
        }
        XCTAssertNotNil(
            running[0].range(of: #"^\[\d/3 files\] [0-9.]+ (B|KiB|MiB) / 2\.1 MiB"#, options: .regularExpression),
            running[0])
        let longRow = try XCTUnwrap(running.first { $0.contains("…columns/file.bin") })
        XCTAssertTrue(longRow.hasPrefix("  slow/a/"), "the name keeps its head and its tail: \(longRow)")

        let finished = try tmux.waitForExit("sync")
        XCTAssertTrue(finished.contains("haul exited 0"), finished)
        let history = try tmux.capture("sync", escapes: true, history: true)
        XCTAssertFalse(history.contains("\u{1B}") || sawEscape, "NO_COLOR: no escape sequence at any time:\n\(history)")
        XCTAssertNil(
            history.range(of: #"(?m)^\[\d+/\d+ files\]"#, options: .regularExpression),
            "the view is erased, and no copy of it is left in the scrollback:\n\(history)")
        XCTAssertFalse(history.contains("slow/trickle.bin  ["), history)
        XCTAssertTrue(history.contains("Fetched 3 files (2.1 MiB), 0 up to date"), history)
        XCTAssertNil(
            history.range(of: "(?m)^fetched ", options: .regularExpression), "the view replaces per-file lines")
    }
}

/// A tmux server of its own (its own socket, `-L`, and no configuration file) for tests that need a terminal.
final class Tmux {
    let socket = "haul-test-\(getpid())-\(UInt32.random(in: 0 ... .max))"

    /// Skips the test when tmux is not installed (scripts/setup-debian.sh installs it).
    init() throws {
        do {
            _ = try ProcessRunner.run("tmux", ["-V"], timeout: 10)
        } catch ProcessRunnerError.spawnFailed {
            throw Capability.unavailable(
                "tmux is not installed; the live-view test needs a terminal (apt-get install tmux)")
        }
    }

    @discardableResult
    private func tmux(_ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run("tmux", ["-L", socket, "-f", "/dev/null"] + arguments, timeout: 20)
    }

    /// Runs haul in a new detached 80×24 session named `name` with a clean environment (the pane's TERM only),
    /// then prints `haul exited <status>` and waits, so the screen can still be read after haul exited.
    func run(_ name: String, in directory: String, arguments: [String], environment: [String: String]) throws {
        let variables = ProcessRunner.minimalEnvironment.merging(environment) { $1 }
            .sorted { $0.key < $1.key }.map { quote("\($0.key)=\($0.value)") }
        let command =
            "env -i TERM=\"$TERM\" \(variables.joined(separator: " ")) \(quote(HaulProcess.executablePath)) "
            + arguments.map(quote).joined(separator: " ") + "; echo \"haul exited $?\"; sleep 600"
        let result = try tmux(["new-session", "-d", "-s", name, "-x", "80", "-y", "24", "-c", directory, command])
        guard result.exitCode == 0 else {
            throw Capability.unavailable("tmux cannot start a session here: \(result.stderr)")
        }
    }

    /// The visible screen (or all history too), wrapped lines joined, with escape sequences for attributes
    /// when `escapes` is true.
    func capture(_ name: String, escapes: Bool, history: Bool = false) throws -> String {
        var arguments = ["capture-pane", "-p", "-J", "-t", name]
        if escapes { arguments.append("-e") }
        if history { arguments += ["-S", "-"] }
        return try tmux(arguments).stdout
    }

    /// Watches session `name` until `match` picks a frame from the screen's rows (or haul exits, or 30 s pass):
    /// that frame, and whether any escape sequence appeared on the screen meanwhile.
    func firstFrame(of name: String, match: ([String]) -> [String]?) throws -> (frame: [String]?, sawEscape: Bool) {
        var sawEscape = false
        let deadline = MonotonicClock.seconds() + 30
        while MonotonicClock.seconds() < deadline {
            let screen = try capture(name, escapes: true)
            sawEscape = sawEscape || screen.contains("\u{1B}")
            if screen.contains("haul exited") { break }
            if let frame = match(screen.components(separatedBy: "\n")) { return (frame, sawEscape) }
            usleep(50_000)
        }
        return (nil, sawEscape)
    }

    func waitForExit(_ name: String, timeout: Double = 60) throws -> String {
        let deadline = MonotonicClock.seconds() + timeout
        while MonotonicClock.seconds() < deadline {
            let screen = try capture(name, escapes: false)
            if screen.contains("haul exited") { return screen }
            usleep(100_000)
        }
        XCTFail("haul did not exit within \(timeout) s")
        return try capture(name, escapes: false)
    }

    /// Ends every session and removes the socket, which tmux leaves behind (in /tmp/tmux-UID: the child's
    /// minimal environment has no TMUX_TMPDIR).
    func killServer() {
        _ = try? tmux(["kill-server"])
        unlink("/tmp/tmux-\(getuid())/\(socket)")
    }

    private func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
