import HaulManifest
import XCTest

/// `${VAR}` expansion, and the rule that no expanded value ever reaches a message.
final class EnvironmentTests: XCTestCase {
    private func urlEntry(
        _ url: String, _ environment: [String: String],
        file: StaticString = #filePath, line: UInt = #line
    ) -> FileEntry? {
        Fixture.manifest(Fixture.entry("url: \"\(url)\"", "dest: a"), environment: environment, file: file, line: line)?
            .files.first
    }

    func testExpansion() {
        let entry = urlEntry(
            "${SCHEME}://${HOST}:${PORT}/${_p1}/x",
            ["SCHEME": "https", "HOST": "h.example", "PORT": "8443", "_p1": "v1"])
        XCTAssertEqual(entry?.url.expanded, "https://h.example:8443/v1/x")
        XCTAssertEqual(entry?.url.template, "${SCHEME}://${HOST}:${PORT}/${_p1}/x")
        XCTAssertEqual(entry?.url.description, "${SCHEME}://${HOST}:${PORT}/${_p1}/x")
    }

    func testDollarWithoutBraceIsLiteral() {
        let entry = urlEntry("https://example.com/$HOME/a$/b$$c", [:])
        XCTAssertEqual(entry?.url.expanded, "https://example.com/$HOME/a$/b$$c")
        XCTAssertEqual(entry?.url.referencesEnvironment, false)
    }

    func testValuesAreNotReexpanded() {
        let entry = urlEntry("https://example.com/${A}", ["A": "${B}", "B": "no"])
        XCTAssertEqual(entry?.url.expanded, "https://example.com/${B}")
    }

    func testExpansionProblems() {
        func problems(_ url: String, _ environment: [String: String] = [:], line: UInt = #line) -> [String] {
            Fixture.diagnostics(Fixture.entry("url: \"\(url)\"", "dest: a"), environment: environment, line: line)
        }
        XCTAssertEqual(
            problems("${ASSET_BASE/data.csv"),
            ["haul.yaml:3:10: error: files[0].url: unterminated \"${\" at position 1 (expected \"}\")"])
        XCTAssertEqual(
            problems("https://é.example/${A}/${B"),
            [
                "haul.yaml:3:10: error: files[0].url: environment variable A is not set",
                "haul.yaml:3:10: error: files[0].url: unterminated \"${\" at position 24 (expected \"}\")",
            ])
        XCTAssertEqual(
            problems("https://e.com/${1X}/${}/${A-B}"),
            [
                "haul.yaml:3:10: error: files[0].url: invalid variable reference \"${1X}\" (a name is a letter or _ followed by letters, digits or _; ${NAME:-default} gives a default)",
                "haul.yaml:3:10: error: files[0].url: invalid variable reference \"${}\" (a name is a letter or _ followed by letters, digits or _; ${NAME:-default} gives a default)",
                "haul.yaml:3:10: error: files[0].url: invalid variable reference \"${A-B}\" (a name is a letter or _ followed by letters, digits or _; ${NAME:-default} gives a default)",
            ])
        XCTAssertEqual(
            problems("${BASE}/${FILE}/${BASE}"),
            [
                "haul.yaml:3:10: error: files[0].url: environment variable BASE is not set",
                "haul.yaml:3:10: error: files[0].url: environment variable FILE is not set",
            ])
        XCTAssertEqual(
            problems("${EMPTY}", ["EMPTY": ""]),
            ["haul.yaml:3:10: error: files[0].url: \"${EMPTY}\" expands to an empty URL"])
    }

    func testMissingVariableInHeaderIsNamed() {
        let yaml = Fixture.entry(
            "url: https://example.com/a", "dest: a", "headers: {Authorization: \"Bearer ${ASSETS_TOKEN}\"}")
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:5:30: error: files[0].headers.Authorization: environment variable ASSETS_TOKEN is not set "
                    + "(set it, or give the header on the command line: -H 'Authorization: …')"
            ])
    }

    func testEmptyButSetVariableIsFineInAHeader() throws {
        let yaml = Fixture.entry("url: https://example.com/a", "dest: a", "headers: {X-Token: \"${TOKEN}\"}")
        let manifest = try XCTUnwrap(Fixture.manifest(yaml, environment: ["TOKEN": ""]))
        XCTAssertEqual(
            manifest.files[0].headers,
            [HeaderField(name: "X-Token", value: TemplatedString(template: "${TOKEN}", expanded: ""))])
    }

    func testRootExpandsTheEnvironmentWithDefaults() throws {
        let manifest = { (environment: [String: String]) in
            Fixture.manifest("version: 1\nroot: ${OUTDIR:-build/out}/assets\nfiles: []\n", environment: environment)
        }
        XCTAssertEqual(try XCTUnwrap(manifest(["OUTDIR": "/srv/ci"])).root, "/srv/ci/assets")
        XCTAssertTrue(try XCTUnwrap(manifest([:])).root.hasSuffix("/build/out/assets"), "unset: the default")
        XCTAssertTrue(
            try XCTUnwrap(manifest(["OUTDIR": ""])).root.hasSuffix("/build/out/assets"),
            "empty: the default, as a shell")
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nroot: ${OUTDIR}\nfiles: []\n"),
            [
                "haul.yaml:2:7: error: root: environment variable OUTDIR is not set"
            ])
    }

    func testADefaultServesWhereverAReferenceIsAllowed() throws {
        let yaml = Fixture.entry("url: ${BASE:-https://example.com}/a", "dest: a", "headers: {X-Team: \"${TEAM:-}\"}")
        let manifest = try XCTUnwrap(Fixture.manifest(yaml, environment: ["TEAM": "blue"]))
        XCTAssertEqual(manifest.files[0].url.expanded, "https://example.com/a")
        XCTAssertEqual(manifest.files[0].url.template, "${BASE:-https://example.com}/a", "written back as a template")
        XCTAssertEqual(manifest.files[0].headers.first?.value.expanded, "blue")
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: ${9X:-https://e.com}/a", "dest: a")).first?.hasSuffix(
                "invalid variable reference \"${9X:-https://e.com}\" (a name is a letter or _ followed by letters, digits or _; ${NAME:-default} gives a default)"
            ),
            true)
    }

    func testReferencesOnlyWhereExpanded() {
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://e.com/a", "dest: ${D}"), environment: ["D": "a"]),
            [
                "haul.yaml:4:11: error: files[0].dest: \"${\" is not allowed here: environment variables expand only in root, url, mirrors and header values"
            ])
    }

    /// Values from the environment may be credentials: no diagnostic may contain one, whatever goes wrong.
    func testSecretValuesNeverAppearInDiagnostics() {
        let secret = "S3CRET-9f8e7d"
        let environment = [
            "TOKEN": "Bearer \(secret)",
            "BAD_HEADER": "\(secret)\r\nX-Injected: 1",
            "FTP_BASE": "ftp://\(secret)@files.example.com",
            "NO_SCHEME": "\(secret).example.com",
            "NO_HOST": "https://\(secret)@",
            "SPACEY": "https://example.com/\(secret) x",
            "CREDS": "user:\(secret)",
            "PORT": "\(secret)",
        ]
        let yaml = """
            version: 1
            defaults:
              headers: {Authorization: "${TOKEN}", X-Bad: "${BAD_HEADER}"}
            files:
              - url: ${FTP_BASE}/a
                dest: a
              - url: ${NO_SCHEME}/b
                dest: b
              - url: ${NO_HOST}
                dest: c
              - url: ${SPACEY}
                dest: d
              - url: https://${CREDS}@host:${PORT}/e
                dest: e
                mirrors: ["${FTP_BASE}/e", "${MISSING}"]
              - url: https://example.com/f
                dest: /abs
                sha256: nothex
                headers: {X-T: "${TOKEN}", X-B: "${BAD_HEADER}"}

            """
        let diagnostics = Fixture.diagnostics(yaml, environment: environment)
        XCTAssertEqual(
            diagnostics,
            [
                "haul.yaml:3:47: error: defaults.headers.X-Bad: environment variable BAD_HEADER holds CR, LF or NUL, which a header value cannot contain",
                "haul.yaml:5:10: error: files[0].url: \"${FTP_BASE}/a\" does not expand to an http:// or https:// URL",
                "haul.yaml:7:10: error: files[1].url: expected an absolute http:// or https:// URL, found \"${NO_SCHEME}/b\"",
                "haul.yaml:9:10: error: files[2].url: URL \"${NO_HOST}\" has no host",
                "haul.yaml:11:10: error: files[3].url: URL \"${SPACEY}\" contains a space or control character once environment variables are expanded",
                "haul.yaml:13:10: error: files[4].url: URL \"https://***@host:${PORT}/e\" has an invalid port",
                "haul.yaml:15:15: error: files[4].mirrors[0]: \"${FTP_BASE}/e\" does not expand to an http:// or https:// URL",
                "haul.yaml:15:32: error: files[4].mirrors[1]: environment variable MISSING is not set",
                "haul.yaml:17:11: error: files[5].dest: destination \"/abs\" is absolute; destinations are relative to root",
                "haul.yaml:18:13: error: files[5].sha256: invalid character \"n\" at position 1 (expected 64 hex digits)",
                "haul.yaml:19:37: error: files[5].headers.X-B: environment variable BAD_HEADER holds CR, LF or NUL, which a header value cannot contain",
            ])
        for diagnostic in diagnostics {
            XCTAssertFalse(diagnostic.contains(secret), diagnostic)
        }
    }
}
