import HaulDigest
import HaulTestSupport
import XCTest

/// On GitHub Actions, manifest diagnostics and failed entries become annotations on the manifest's lines, and the
/// run's summary a table in the step summary: exact lines, as the runner reads them.
final class GitHubAnnotationTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    func testManifestDiagnosticsAreAnnotationsOnTheirLines() throws {
        try directory.write(
            "haul.yaml", "version: 1\nfiles:\n  - url: http://127.0.0.1:9/a\n    dest: a\n    sha256: abc\n")
        let result = try directory.haul(["plan"], environment: ["GITHUB_ACTIONS": "true"])
        XCTAssertEqual(result.exitCode, 3, result.stderr)
        XCTAssertEqual(
            result.stdout, "::error file=haul.yaml,line=5,col=13::files[0].sha256: expected 64 hex digits, found 3\n")
        XCTAssertEqual(
            result.stderr, "haul.yaml:5:13: error: files[0].sha256: expected 64 hex digits, found 3\n",
            "the usual line too")
        let off = try directory.haul(["plan", "--annotations", "none"], environment: ["GITHUB_ACTIONS": "true"])
        XCTAssertEqual(off.stdout, "")
        let forced = try directory.haul(["plan", "--annotations", "github"])
        XCTAssertTrue(forced.stdout.hasPrefix("::error file=haul.yaml,line=5,col=13::"), forced.stdout)
    }

    func testAFailedEntryIsAnnotatedAtItsEntryAndTheSummaryIsATable() throws {
        let bytes: [UInt8] = Array("ok\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/good.bin": bytes])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/good.bin"))
                dest: good.bin
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
              - url: \(server.url("/missing.bin"))
                dest: "odd,name: 100%.bin"
                retries: 0
            """)
        try directory.write("summary.md", "earlier step\n")
        let environment = ["GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": directory.path("summary.md")]
        let sync = try directory.haul(["sync", "--progress", "none"], environment: environment)
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        let annotation =
            "::error file=haul.yaml,line=7,col=5::odd,name: 100%25.bin: \(server.url("/missing.bin")): HTTP 404"
        XCTAssertTrue(sync.stdout.contains(annotation + "\n"), sync.stdout)
        let summary = String(decoding: directory.read("summary.md") ?? [], as: UTF8.self)
        XCTAssertTrue(summary.hasPrefix("earlier step\n### haul sync haul\\.yaml\n"), "appended: \(summary)")
        XCTAssertTrue(
            summary.contains(
                "| fetched | from cache | confirmed (304) | up to date | failed | exit |\n|---|---|---|---|---|---|\n"
                    + "| 1 (3 B) | 0 | 0 | 0 | 1 | 1 |\n"), summary)
        // Every ASCII punctuation character of what the manifest or the server chose is escaped: Markdown reads text.
        let url = #"http\:\/\/127\.0\.0\.1\:"# + "\(server.port)" + #"\/missing\.bin"#
        XCTAssertTrue(summary.contains(#"| odd\,name\: 100\%\.bin | 7 | "# + url + #"\: HTTP 404 |"#), summary)

        // Under --json, standard output stays JSON: the annotations go to standard error.
        let json = try directory.haul(["sync", "--json"], environment: environment)
        XCTAssertTrue(json.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("{") }, json.stdout)
        XCTAssertTrue(json.stderr.contains(annotation), json.stderr)
    }

    func testAnInvalidManifestIsATableInTheStepSummary() throws {
        try directory.write(
            "haul.yaml", "version: 1\nfiles:\n  - url: http://127.0.0.1:9/a\n    dest: a\n    sha256: abc\n")
        try directory.write("summary.md", "earlier step\n")
        let environment = ["GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": directory.path("summary.md")]
        let sync = try directory.haul(["sync"], environment: environment)
        XCTAssertEqual(sync.exitCode, 3, sync.stderr)
        XCTAssertEqual(
            sync.stdout, "::error file=haul.yaml,line=5,col=13::files[0].sha256: expected 64 hex digits, found 3\n")
        XCTAssertEqual(
            String(decoding: directory.read("summary.md") ?? [], as: UTF8.self),
            """
            earlier step
            ### haul: haul\\.yaml is invalid

            | file | line | error |
            |---|---|---|
            | haul\\.yaml | 5 | files\\[0\\]\\.sha256\\: expected 64 hex digits\\, found 3 |

            exit 3


            """)

        // A summary that cannot be written is a warning; the exit status stays 3.
        let folder = try directory.haul(
            ["plan"], environment: ["GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": directory.path])
        XCTAssertEqual(folder.exitCode, 3)
        XCTAssertTrue(
            folder.stderr.hasSuffix(
                "warning: the step summary could not be appended to GITHUB_STEP_SUMMARY "
                    + "(\(directory.path)): Is a directory\n"), folder.stderr)
    }

    func testVerifyAnnotatesEachFileItFindsWrongAndWritesTheStepSummary() throws {
        let first = Array("first\n".utf8), second = Array("second\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/a": first, "/b": second])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/a"))
                dest: a.bin
                sha256: \(StreamingHasher.digest(first, algorithm: .sha256).hex)
              - url: \(server.url("/b"))
                dest: b.bin
                sha256: \(StreamingHasher.digest(second, algorithm: .sha256).hex)
            """)
        XCTAssertEqual(try directory.haul(["sync", "--progress", "none"]).exitCode, 0)
        XCTAssertEqual(unlink(directory.path("out/a.bin")), 0)
        try directory.write("out/b.bin", "changed\n")
        try directory.write("summary.md", "")
        let environment = ["GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": directory.path("summary.md")]
        let verify = try directory.haul(["verify"], environment: environment)
        XCTAssertEqual(verify.exitCode, 1, verify.stderr)
        let annotations = verify.stdout.split(separator: "\n").filter { $0.hasPrefix("::") }
        XCTAssertEqual(annotations.count, 2, verify.stdout)
        XCTAssertEqual(annotations.first, "::error file=haul.yaml,line=4,col=5::missing a.bin")
        XCTAssertTrue(
            annotations.last?.hasPrefix("::error file=haul.yaml,line=7,col=5::differs b.bin (") == true, verify.stdout)
        let summary = String(decoding: directory.read("summary.md") ?? [], as: UTF8.self)
        XCTAssertTrue(
            summary.hasPrefix(
                "### haul verify haul\\.yaml\n\n| verified | unpinned present | problems | exit |\n"
                    + "|---|---|---|---|\n| 0 | 0 | 2 | 1 |\n\n| problem | line |\n|---|---|\n"
                    + "| missing a\\.bin | 4 |\n| differs b\\.bin \\("), summary)

        // Everything in place: no annotation, and the summary says so.
        XCTAssertEqual(try directory.haul(["sync", "--progress", "none"]).exitCode, 0)
        try directory.write("summary.md", "")
        let clean = try directory.haul(["verify"], environment: environment)
        XCTAssertEqual(clean.exitCode, 0, clean.stderr)
        XCTAssertFalse(clean.stdout.contains("::"), clean.stdout)
        XCTAssertEqual(
            String(decoding: directory.read("summary.md") ?? [], as: UTF8.self),
            "### haul verify haul\\.yaml\n\n| verified | unpinned present | problems | exit |\n|---|---|---|---|\n| 2 | 0 | 0 | 0 |\n\n"
        )
    }

    /// GitHub reads `file=` against the workspace: the manifest is named from there when inside it, absolutely when not.
    func testTheAnnotationsFileIsRelativeToTheWorkspace() throws {
        let invalid = "version: 1\nfiles:\n  - url: http://127.0.0.1:9/a\n    dest: a\n    sha256: abc\n"
        try directory.write("workspace/config/haul.yaml", invalid)
        try directory.makeDirectory("elsewhere")
        let message = ",line=5,col=13::files[0].sha256: expected 64 hex digits, found 3\n"
        func plan(_ manifest: String, workspace: String, from folder: String) throws -> String {
            let result = try HaulProcess.run(
                ["plan", manifest], environment: ["GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": workspace],
                currentDirectory: folder)
            XCTAssertEqual(result.exitCode, 3, result.stderr)
            return result.stdout
        }
        let workspace = directory.path("workspace")
        XCTAssertEqual(
            try plan("config/haul.yaml", workspace: workspace, from: workspace),
            "::error file=config/haul.yaml" + message)
        XCTAssertEqual(
            try plan("haul.yaml", workspace: workspace, from: directory.path("workspace/config")),
            "::error file=config/haul.yaml" + message, "a step in a folder of the workspace")
        XCTAssertEqual(
            try plan(
                directory.path("workspace/config/haul.yaml"), workspace: workspace + "/",
                from: directory.path("elsewhere")),
            "::error file=config/haul.yaml" + message)
        XCTAssertEqual(
            try plan("../workspace/./config/haul.yaml", workspace: workspace, from: directory.path("elsewhere")),
            "::error file=config/haul.yaml" + message)
        // Outside the workspace: absolute, with the folders' real names.
        let real = try XCTUnwrap(realpath(directory.path("workspace/config"), nil))
        defer { free(real) }
        XCTAssertEqual(
            try plan("config/haul.yaml", workspace: directory.path("elsewhere"), from: workspace),
            "::error file=\(String(cString: real))/haul.yaml" + message)
    }
}
