import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// Colour only where a person reads a terminal that wants it: never with `CI` set (a CI runner may give haul a
/// pseudo-terminal whose output ends up in a log), `NO_COLOR` set, or `TERM=dumb` — even on a real terminal (tmux).
final class ColourRuleTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// One file to download (a green `+` in the plan) and one that answers 404 (a red `error:`).
    private func writeManifest(server: LoopbackHTTPServer) throws {
        let bytes = Array("content\n".utf8)
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/a.bin")), dest: a.bin, sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }
              - { url: \(server.url("/gone.bin")), dest: gone.bin }
            """)
    }

    func testNoColourEscapeOnATerminalWhenCIOrNOCOLOROrDumbTerminalSaySo() throws {
        let tmux = try Tmux()
        defer { tmux.killServer() }
        let server = try LoopbackHTTPServer(files: ["/a.bin": Array("content\n".utf8)])
        defer { server.stop() }
        try writeManifest(server: server)

        // The control: on the same terminal with nothing set, the plan's marker is coloured.
        try tmux.run("coloured", in: directory.path, arguments: ["plan"], environment: [:])
        _ = try tmux.waitForExit("coloured")
        XCTAssertTrue(try tmux.capture("coloured", escapes: true).contains("\u{1B}[32m+"))

        for (name, environment) in [("ci", ["CI": "1"]), ("nocolor", ["NO_COLOR": "1"]), ("dumb", ["TERM": "dumb"])] {
            for (command, status) in [("plan", 2), ("sync", 1)] {
                let session = "\(name)-\(command)"
                // `env -i TERM="$TERM" …` in the session: a TERM given here comes after, and wins.
                try tmux.run(session, in: directory.path, arguments: [command], environment: environment)
                let screen = try tmux.waitForExit(session)
                XCTAssertTrue(screen.contains("haul exited \(status)"), "\(session): \(screen)")
                let history = try tmux.capture(session, escapes: true, history: true)
                XCTAssertFalse(history.contains("\u{1B}["), "\(session): no escape sequence at all:\n\(history)")
                if command == "plan" { XCTAssertTrue(history.contains("+ a.bin (missing)"), history) }
                if command == "sync" { XCTAssertTrue(history.contains("error: gone.bin: "), history) }
            }
            try? FileManager.default.removeItem(atPath: directory.path("out"))
        }
    }
}
