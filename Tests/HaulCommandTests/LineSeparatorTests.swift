import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

@testable import HaulCommand

/// U+2028 and U+2029 (line and paragraph separator) break a line in many terminals, log viewers and editors, and
/// U+0085 (NEL) is a C1 control: in a destination they could start a line of its own (`a\u{2028}error: FAKE`). Human
/// output shows them escaped like the other controls, on every stream; `--json` writes them as `\u` escapes.
final class LineSeparatorTests: XCTestCase {
    func testLineAndParagraphSeparatorsInANameAreShownEscaped() throws {
        let directory = try TemporaryDirectory()
        let bytes = Array("content\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        let digest = StreamingHasher.digest(bytes, algorithm: .sha256).hex
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/f")), dest: "line\\u2028error: FAKE.bin", sha256: \(digest) }
              - { url: \(server.url("/f")), dest: "para\\u2029graph\\x85.bin", sha256: \(digest) }
              - { url: \(server.url("/gone")), dest: "gone\\u2028error: FAKE.bin", retries: 0 }
            """)
        let sync = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        let output = sync.stdout + sync.stderr
        XCTAssertFalse(
            output.unicodeScalars.contains { [0x85, 0x2028, 0x2029].contains($0.value) }, output.debugDescription)
        let lines = output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains(#"+ line\u{2028}error: FAKE.bin (missing)"#), sync.stdout)
        XCTAssertTrue(lines.contains(#"fetched para\u{2029}graph\u{85}.bin (8 B)"#), sync.stdout)
        XCTAssertTrue(
            lines.contains(#"error: gone\u{2028}error: FAKE.bin: \#(server.url("/gone")): HTTP 404"#), sync.stderr)
        XCTAssertEqual(directory.read("out/line\u{2028}error: FAKE.bin"), bytes, "the file has its real name")

        let json = try directory.haul(["plan", "--json"])
        XCTAssertTrue(json.stdout.contains(#""dest":"gone\u2028error: FAKE.bin""#), json.stdout)
        XCTAssertFalse(json.stdout.unicodeScalars.contains { $0.value == 0x2028 }, json.stdout)
    }

    func testTheSeparatorsAreEscapedLikeControls() {
        XCTAssertEqual(
            TerminalText.escaping("a\u{2028}b\u{2029}c\u{85}d", workflowCommands: false), #"a\u{2028}b\u{2029}c\u{85}d"#
        )
        XCTAssertEqual(
            TerminalText.escaping("a\u{2027}b\u{202F}c", workflowCommands: false), "a\u{2027}b\u{202F}c",
            "their neighbours are printable")
        XCTAssertEqual(JSONValue.string("a\u{2028}b\u{2029}").encoded(), #""a\u2028b\u2029""#)
    }
}
