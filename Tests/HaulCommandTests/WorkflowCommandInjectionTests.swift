import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

@testable import HaulCommand

/// On a GitHub Actions runner every line a step prints is also read for workflow commands: `##[name …]` anywhere in
/// a line, `::name …::` at its start (`##[set-output name=x;]y` sets an output, `::add-mask::` hides text,
/// `::stop-commands::` silences the rest). What a server or a manifest chose (a `Content-Encoding`, a destination, a
/// checksum list's names) reaches haul's lines, its annotations and the step summary; there it is shown, never
/// obeyed: in every line under `GITHUB_ACTIONS=true`, whatever `--annotations` says, and in the summary's Markdown.
final class WorkflowCommandInjectionTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private let command = "##[set-output name=x;]y"
    /// `command` as haul shows it on a runner: the one scalar that would complete it written as an escape.
    private let shownCommand = #"##\u{5b}set-output name=x;]y"#
    /// A destination with a command, a Markdown link, HTML, a table cell break and code in it.
    private let hostileName = "##[add-mask]x [a](https:/evil.example/) <b> | c | `d`.bin"
    private let shownHostileName = #"##\u{5b}add-mask]x [a](https:/evil.example/) <b> | c | `d`.bin"#
    /// The same in the step summary's Markdown: every ASCII punctuation character backslash-escaped.
    private let markdownHostileName =
        ##"\#\#\[add\-mask\]x \[a\]\(https\:\/evil\.example\/\) \<b\> \| c \| \`d\`\.bin"##

    /// Every line of `output` is free of `##[`, and a line that starts with `::` (after blanks) is one of haul's own
    /// annotations on the manifest.
    private func assertNoWorkflowCommand(
        _ output: String, _ what: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        for text in output.split(separator: "\n") {
            XCTAssertFalse(text.contains("##["), "\(what): \(text)", file: file, line: line)
            let start = text.drop { $0.isWhitespace }
            if start.hasPrefix("::") {
                XCTAssertTrue(
                    start.hasPrefix("::error file=haul.yaml,line="), "\(what): \(text)", file: file, line: line)
            }
        }
    }

    private func lines(_ text: String) -> [String] { text.split(separator: "\n").map(String.init) }

    func testServerAndManifestTextInLinesAnnotationsAndTheStepSummaryIsShownNotObeyed() throws {
        let right = Array("right\n".utf8)
        let command = command
        let server = try LoopbackHTTPServer(handler: { request in
            switch request.path {
            case "/unpinned": .ok("data\n", headers: [("Content-Encoding", command)])
            case "/pinned": .ok("wrong\n", headers: [("Content-Encoding", command)])
            default: .notFound
            }
        })
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/unpinned"))
                dest: encoded.bin
              - url: \(server.url("/pinned"))
                dest: "\(hostileName)"
                sha256: \(StreamingHasher.digest(right, algorithm: .sha256).hex)
                retries: 0
            """)
        let warning =
            "warning: encoded.bin: stored as served with Content-Encoding: \(shownCommand) "
            + "(haul asks for no encoding; the file holds the encoded bytes)"
        let failure = "\(server.url("/pinned")): checksum mismatch"
        let runner = ["GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": directory.path("summary.md")]

        // Annotations off: haul's lines are still read by the runner.
        let plain = try directory.haul(["sync", "--progress", "plain", "--annotations", "none"], environment: runner)
        XCTAssertEqual(plain.exitCode, 1, plain.stderr)
        assertNoWorkflowCommand(plain.stdout + plain.stderr, "--annotations none")
        XCTAssertTrue(lines(plain.stderr).contains(warning), plain.stderr)
        let errorLine = try XCTUnwrap(lines(plain.stderr).first { $0.hasPrefix("error: ") }, plain.stderr)
        XCTAssertTrue(errorLine.hasPrefix("error: \(shownHostileName): \(failure)"), errorLine)
        XCTAssertTrue(errorLine.contains("served with Content-Encoding: \(shownCommand)"), errorLine)
        XCTAssertNil(directory.read("summary.md"), "no step summary without annotations")
        XCTAssertEqual(directory.read("out/encoded.bin"), Array("data\n".utf8), "the file itself is stored as served")

        // Annotations on: the annotation and the step summary too.
        try FileManager.default.removeItem(atPath: directory.path("out"))
        let annotated = try directory.haul(["sync", "--progress", "plain"], environment: runner)
        XCTAssertEqual(annotated.exitCode, 1, annotated.stderr)
        assertNoWorkflowCommand(annotated.stdout + annotated.stderr, "annotations")
        XCTAssertTrue(lines(annotated.stderr).contains(warning), annotated.stderr)
        let annotation = try XCTUnwrap(lines(annotated.stdout).first { $0.hasPrefix("::error ") }, annotated.stdout)
        XCTAssertTrue(
            annotation.hasPrefix("::error file=haul.yaml,line=6,col=5::\(shownHostileName): \(failure)"), annotation)
        let summary = String(decoding: directory.read("summary.md") ?? [], as: UTF8.self)
        let row = try XCTUnwrap(lines(summary).first { $0.hasPrefix("| \\#") }, summary)
        XCTAssertTrue(row.hasPrefix("| \(markdownHostileName) | 6 | "), row)
        XCTAssertTrue(row.contains(##" with Content\-Encoding\: \#\#\[set\-output name\=x\;\]y"##), row)
        XCTAssertEqual(
            row.replacingOccurrences(of: "\\|", with: "").filter { $0 == "|" }.count, 4,
            "three cells, whatever the name holds: \(row)")

        // --json: the exact strings, with no command in the line.
        try FileManager.default.removeItem(atPath: directory.path("out"))
        let json = try directory.haul(["sync", "--json"], environment: runner)
        XCTAssertEqual(json.exitCode, 1, json.stderr)
        assertNoWorkflowCommand(json.stdout, "--json")
        assertNoWorkflowCommand(json.stderr, "--json's annotations")
        let events = try lines(json.stdout).map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
        }
        let warningEvent = try XCTUnwrap(
            events.first { $0["event"] as? String == "warning" && $0["dest"] as? String == "encoded.bin" })
        XCTAssertEqual(
            warningEvent["message"] as? String,
            "stored as served with Content-Encoding: \(command) (haul asks for no encoding; the file holds the encoded bytes)"
        )
        let failedEvent = try XCTUnwrap(events.first { $0["event"] as? String == "failed" })
        XCTAssertEqual(failedEvent["dest"] as? String, hostileName)

        // Elsewhere than on a runner, the same lines are as they were.
        try FileManager.default.removeItem(atPath: directory.path("out"))
        let local = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertTrue(
            lines(local.stderr).contains(warning.replacingOccurrences(of: shownCommand, with: command)), local.stderr)
    }

    func testAChecksumListsNamesAreShownNotObeyed() throws {
        let digest = StreamingHasher.digest(Array("x".utf8), algorithm: .sha256).hex
        let server = try LoopbackHTTPServer(files: ["/release/SHA256SUMS": Array("\(digest)  \(command)\n".utf8)])
        defer { server.stop() }
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles: []\n")
        let runner = ["GITHUB_ACTIONS": "true"]
        let add = try directory.haul(["add", "--from-sums", server.url("/release/SHA256SUMS")], environment: runner)
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        assertNoWorkflowCommand(add.stdout + add.stderr, "add --from-sums")
        XCTAssertTrue(add.stdout.contains(shownCommand), add.stdout)

        for arguments in [
            ["plan"], ["sync", "--progress", "plain"], ["sync", "--progress", "plain", "--annotations", "none"],
        ] {
            let run = try directory.haul(arguments, environment: runner)
            assertNoWorkflowCommand(run.stdout + run.stderr, arguments.joined(separator: " "))
            XCTAssertTrue((run.stdout + run.stderr).contains(shownCommand), run.stdout + run.stderr)
        }
    }

    // MARK: The rules themselves

    func testTheRunnersCommandsAreEscapedWhereTheyWouldStart() {
        let escaped = { TerminalText.escaping($0, workflowCommands: true) }
        XCTAssertEqual(escaped("a ##[set-output name=x;]y"), #"a ##\u{5b}set-output name=x;]y"#)
        XCTAssertEqual(escaped("###[x] and #[y] and # [z]"), #"###\u{5b}x] and #[y] and # [z]"#)
        XCTAssertEqual(escaped("::add-mask::secret"), #":\u{3a}add-mask::secret"#)
        XCTAssertEqual(
            escaped("  ::stop-commands::t"), #"  :\u{3a}stop-commands::t"#, "after blanks, which the runner trims")
        XCTAssertEqual(escaped("\t::x::y"), #"\t::x::y"#, "a tab is shown as `\\t`, which is no blank")
        XCTAssertEqual(escaped("\u{A0}\u{3000}::x::y"), "\u{A0}\u{3000}:\\u{3a}x::y", "Unicode blanks too")
        XCTAssertEqual(escaped("error: a::b ::c"), "error: a::b ::c", "`::` only counts at the start")
        XCTAssertEqual(escaped("#\u{1B}#[x"), #"#\u{1b}#[x"#, "an escape between the two # breaks the run")
        XCTAssertEqual(escaped("plain/name.txt"), "plain/name.txt")
        XCTAssertEqual(TerminalText.escaping("a ##[x]", workflowCommands: false), "a ##[x]", "no runner, no change")
    }

    func testMarkdownCellsHoldNoLinkImageHTMLCodeOrCellBreak() {
        XCTAssertEqual(
            GitHubAnnotations.markdownCell(
                "[a](http://e.x/) ![i](j) <img src=x> `c` | d *e* _f_ ~g~ &amp; www.e.x a@b.c"),
            #"\[a\]\(http\:\/\/e\.x\/\) \!\[i\]\(j\) \<img src\=x\> \`c\` \| d \*e\* \_f\_ \~g\~ \&amp\; www\.e\.x a\@b\.c"#
        )
        XCTAssertEqual(GitHubAnnotations.markdownCell("line\nbreak\r\u{2028}é"), #"line\\nbreak\\r\\u\{2028\}é"#)
        XCTAssertEqual(GitHubAnnotations.markdownCell("data/a b.bin"), #"data\/a b\.bin"#)
    }
}
