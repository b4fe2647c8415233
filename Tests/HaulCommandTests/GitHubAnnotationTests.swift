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
        try directory.write("haul.yaml", "version: 1\nfiles:\n  - url: http://127.0.0.1:9/a\n    dest: a\n    sha256: abc\n")
        let result = try directory.haul(["plan"], environment: ["GITHUB_ACTIONS": "true"])
        XCTAssertEqual(result.exitCode, 3, result.stderr)
        XCTAssertEqual(result.stdout, "::error file=haul.yaml,line=5,col=13::files[0].sha256: expected 64 hex digits, found 3\n")
        XCTAssertEqual(result.stderr, "haul.yaml:5:13: error: files[0].sha256: expected 64 hex digits, found 3\n", "the usual line too")
        let off = try directory.haul(["plan", "--annotations", "none"], environment: ["GITHUB_ACTIONS": "true"])
        XCTAssertEqual(off.stdout, "")
        let forced = try directory.haul(["plan", "--annotations", "github"])
        XCTAssertTrue(forced.stdout.hasPrefix("::error file=haul.yaml,line=5,col=13::"), forced.stdout)
    }

    func testAFailedEntryIsAnnotatedAtItsEntryAndTheSummaryIsATable() throws {
        let bytes: [UInt8] = Array("ok\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/good.bin": bytes])
        defer { server.stop() }
        try directory.write("haul.yaml", """
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
        let annotation = "::error file=haul.yaml,line=7,col=5::odd,name: 100%25.bin: \(server.url("/missing.bin")): HTTP 404"
        XCTAssertTrue(sync.stdout.contains(annotation + "\n"), sync.stdout)
        let summary = String(decoding: directory.read("summary.md") ?? [], as: UTF8.self)
        XCTAssertTrue(summary.hasPrefix("earlier step\n### haul sync haul\\.yaml\n"), "appended: \(summary)")
        XCTAssertTrue(summary.contains("| fetched | from cache | confirmed (304) | up to date | failed | exit |\n|---|---|---|---|---|---|\n"
                                       + "| 1 (3 B) | 0 | 0 | 0 | 1 | 1 |\n"), summary)
        // Every ASCII punctuation character of what the manifest or the server chose is escaped: Markdown reads text.
        let url = #"http\:\/\/127\.0\.0\.1\:"# + "\(server.port)" + #"\/missing\.bin"#
        XCTAssertTrue(summary.contains(#"| odd\,name\: 100\%\.bin | 7 | "# + url + #"\: HTTP 404 |"#), summary)

        // Under --json, standard output stays JSON: the annotations go to standard error.
        let json = try directory.haul(["sync", "--json"], environment: environment)
        XCTAssertTrue(json.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("{") }, json.stdout)
        XCTAssertTrue(json.stderr.contains(annotation), json.stderr)
    }
}
