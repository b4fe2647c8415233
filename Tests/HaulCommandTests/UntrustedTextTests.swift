import Foundation
import Glibc
import Haul
import HaulDigest
import HaulEngine
import HaulTestSupport
import XCTest

@testable import HaulCommand

/// Destinations are the manifest's to choose, and may hold ESC, CR, LF, C1 controls or bidi overrides: printed
/// raw, `cr\rerror: FAKE` would print a fake error over its own line, `clear\e[2J.bin` would clear the screen and
/// `bidi-\u202Etxt.exe` would read as `bidi-exe.txt`. In every human view (plan, fetched, retry and error lines,
/// verify, the live view on a real terminal) they are shown escaped — `\r`, `\n`, `\u{1b}`, `\u{202e}` — while
/// `--json` carries the exact string.
final class UntrustedTextTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// A destination as written in the manifest (a double-quoted YAML scalar), as Swift holds it, and as people
    /// must see it.
    private struct Name {
        let yaml: String
        let real: String
        let shown: String
        let path: String
    }

    private let crName = Name(
        yaml: #""cr\rerror: FAKE""#, real: "cr\rerror: FAKE", shown: #"cr\rerror: FAKE"#, path: "/cr")
    private let bidiName = Name(
        yaml: #""bidi-\u202Etxt.exe""#, real: "bidi-\u{202E}txt.exe", shown: #"bidi-\u{202e}txt.exe"#,
        path: "/bidi")
    private let clearName = Name(
        yaml: #""clear\e[2J.bin""#, real: "clear\u{1B}[2J.bin", shown: #"clear\u{1b}[2J.bin"#,
        path: "/clear")
    private let c1Name = Name(
        yaml: #""c1-\u009B31m.bin""#, real: "c1-\u{9B}31m.bin", shown: #"c1-\u{9b}31m.bin"#, path: "/c1")
    /// Served 404.
    private let goneName = Name(
        yaml: #""gone\e[31m\nerror: red""#, real: "gone\u{1B}[31m\nerror: red",
        shown: #"gone\u{1b}[31m\nerror: red"#, path: "/gone")

    private var names: [Name] { [crName, bidiName, clearName, c1Name, goneName] }

    private func body(_ name: Name) -> [UInt8] {
        // The two slow ones are large enough to be seen in the live view (about 2 s each at 320 KiB/s).
        let size = name.path == "/bidi" || name.path == "/clear" ? 600_000 : 100
        return (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ name.path.utf8.count) }
    }

    /// Serves every name but `gone`; `/bidi` and `/clear` trickle; `/clear` answers 503 once first (a retry line).
    private func startServer() throws -> LoopbackHTTPServer {
        let files = StaticFiles(
            Dictionary(uniqueKeysWithValues: names.filter { $0.path != "/gone" }.map { ($0.path, body($0)) }))
        let script = ScriptedResponses(then: { request in
            let response = files.respond(to: request)
            return request.path == "/bidi" || request.path == "/clear"
                ? response.with(fault: .trickle(bytesPerChunk: 16 * 1024, interval: 0.05)) : response
        })
        script.enqueue([.status(503)], for: "/clear")
        return try LoopbackHTTPServer(handler: script.respond)
    }

    private func writeManifest(server: LoopbackHTTPServer) throws {
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for name in names {
            let digest = StreamingHasher.digest(body(name), algorithm: .sha256).hex
            yaml += "  - url: \(server.url(name.path))\n    dest: \(name.yaml)\n    sha256: \(digest)\n"
        }
        try directory.write("haul.yaml", yaml)
    }

    /// No scalar a terminal would obey rather than show: C0 controls but the line breaks between lines, DEL, C1
    /// controls, bidi controls.
    private func assertNothingRaw(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let raw = text.unicodeScalars.filter { scalar in
            (scalar.value < 0x20 && scalar != "\n") || (0x7F...0x9F).contains(scalar.value)
                || scalar.properties.isBidiControl
        }
        XCTAssertEqual(
            raw.map { String(format: "U+%04X", $0.value) }, [], "\(what): \(text.debugDescription)",
            file: file, line: line)
    }

    private func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    func testPlanSyncErrorsAndVerifyShowUntrustedNamesEscapedAndJSONCarriesThemExactly() throws {
        let server = try startServer()
        defer { server.stop() }
        try writeManifest(server: server)

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, plan.stderr)
        assertNothingRaw(plan.stdout + plan.stderr, "plan")
        XCTAssertEqual(Array(lines(plan.stdout).prefix(names.count)), names.map { "+ \($0.shown) (missing)" })

        let sync = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        assertNothingRaw(sync.stdout + sync.stderr, "sync --progress plain")
        let fetched = Set(lines(sync.stdout).filter { $0.hasPrefix("fetched ") })
        XCTAssertEqual(
            fetched,
            Set([
                "fetched \(crName.shown) (100 B)", "fetched \(bidiName.shown) (585.9 KiB)",
                "fetched \(clearName.shown) (585.9 KiB)", "fetched \(c1Name.shown) (100 B)",
            ]))
        let errors = lines(sync.stderr)
        XCTAssertTrue(errors.contains("error: \(goneName.shown): \(server.url("/gone")): HTTP 404"), sync.stderr)
        XCTAssertTrue(
            errors.contains {
                $0.hasPrefix("retry \(clearName.shown): \(server.url(clearName.path)): HTTP 503; retrying in ")
            },
            sync.stderr)
        XCTAssertFalse(errors.contains { $0.hasPrefix("error: FAKE") || $0.hasPrefix("error: red") }, sync.stderr)
        for name in names where name.path != "/gone" {
            XCTAssertEqual(directory.read("out/" + name.real), body(name), "the file itself has its real name")
        }

        // verify: one file changed, one deleted, the 404 one never fetched.
        try directory.write("out/" + clearName.real, "changed")
        try FileManager.default.removeItem(atPath: directory.path("out/" + bidiName.real))
        let verify = try directory.haul(["verify"])
        XCTAssertEqual(verify.exitCode, 1, verify.stderr)
        assertNothingRaw(verify.stdout + verify.stderr, "verify")
        let problems = lines(verify.stdout)
        XCTAssertTrue(problems.contains("missing \(bidiName.shown)"), verify.stdout)
        XCTAssertTrue(problems.contains("missing \(goneName.shown)"), verify.stdout)
        XCTAssertTrue(problems.contains { $0.hasPrefix("differs \(clearName.shown) (checksum differs") }, verify.stdout)

        // --json: the exact strings, JSON-escaped (no raw control or bidi scalar either), parsed back intact.
        try FileManager.default.removeItem(atPath: directory.path("out"))
        let json = try directory.haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 1, json.stderr)
        XCTAssertEqual(json.stderr, "")
        assertNothingRaw(json.stdout, "--json")
        let events = try lines(json.stdout).map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
        }
        let changes = try XCTUnwrap(events.first?["changes"] as? [[String: Any]])
        XCTAssertEqual(changes.map { $0["dest"] as? String }, names.map(\.real))
        let done = events.filter { $0["event"] as? String == "done" }.compactMap { $0["dest"] as? String }
        XCTAssertEqual(Set(done), Set(names.filter { $0.path != "/gone" }.map(\.real)))
        let failed = try XCTUnwrap(events.first { $0["event"] as? String == "failed" })
        XCTAssertEqual(failed["dest"] as? String, goneName.real)
        XCTAssertEqual(failed["error"] as? String, "\(server.url("/gone")): HTTP 404")
    }

    /// The live view on a real terminal (tmux, 80×24, `--progress bar`, NO_COLOR so that any escape sequence in the
    /// captured screen is one the names smuggled in): rows show the escaped names, the error above the view too.
    func testTheLiveViewOnATerminalShowsUntrustedNamesEscaped() throws {
        let tmux = try Tmux()
        defer { tmux.killServer() }
        let server = try startServer()
        defer { server.stop() }
        try writeManifest(server: server)

        try tmux.run(
            "sync", in: directory.path, arguments: ["sync", "--progress", "bar"], environment: ["NO_COLOR": "1"])
        let (frame, sawEscape) = try tmux.firstFrame(of: "sync") { rows in
            rows.contains(where: { $0.hasPrefix("  \(bidiName.shown)") })
                && rows.contains(where: { $0.hasPrefix("  \(clearName.shown)") })
                ? rows : nil
        }
        let last = try tmux.capture("sync", escapes: false)
        XCTAssertNotNil(frame, "no frame showed both slow transfers by their escaped names:\n" + last)
        let finished = try tmux.waitForExit("sync")
        XCTAssertTrue(finished.contains("haul exited 1"), finished)
        let history = try tmux.capture("sync", escapes: true, history: true)
        XCTAssertFalse(sawEscape || history.contains("\u{1B}"), "no escape sequence reached the screen:\n\(history)")
        assertNothingRaw(history, "the terminal's history")
        let shown = lines(history)
        XCTAssertTrue(shown.contains("error: \(goneName.shown): \(server.url("/gone")): HTTP 404"), history)
        XCTAssertFalse(shown.contains { $0.hasPrefix("error: FAKE") || $0.hasPrefix("error: red") }, history)
    }
}
