import HaulManifest
import XCTest

/// Typed scalars (durations, retries, size, mode, version, prune): exact messages and positions.
final class ScalarDiagnosticsTests: XCTestCase {
    private func check(_ key: String, _ value: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        Fixture.diagnostics(
            Fixture.entry("url: https://example.com/a", "dest: a", "\(key): \(value)"), file: file, line: line)
    }

    private func entry(_ key: String, _ value: String, file: StaticString = #filePath, line: UInt = #line) -> FileEntry?
    {
        Fixture.manifest(
            Fixture.entry("url: https://example.com/a", "dest: a", "\(key): \(value)"), file: file, line: line)?
            .files.first
    }

    func testDurationForms() {
        XCTAssertEqual(entry("timeout", "60s")?.timeout, Seconds(60))
        XCTAssertEqual(entry("timeout", "5m")?.timeout, Seconds(300))
        XCTAssertEqual(entry("timeout", "1h")?.timeout, Seconds(3600))
        XCTAssertEqual(entry("timeout", "250ms")?.timeout, Seconds(0.25))
        XCTAssertEqual(entry("timeout", "1.5s")?.timeout, Seconds(1.5))
        XCTAssertEqual(entry("timeout", "45")?.timeout, Seconds(45))
        XCTAssertEqual(entry("timeout", "\"0.5\"")?.timeout, Seconds(0.5))
    }

    func testBadDurations() {
        let expectation = "expected a duration such as \"30s\", \"5m\", \"1h\", \"250ms\" or a number of seconds"
        XCTAssertEqual(
            check("timeout", "soon"), ["haul.yaml:5:14: error: files[0].timeout: \(expectation), found \"soon\""])
        XCTAssertEqual(
            check("timeout", "-5s"), ["haul.yaml:5:14: error: files[0].timeout: \(expectation), found \"-5s\""])
        XCTAssertEqual(
            check("timeout", "1e3"), ["haul.yaml:5:14: error: files[0].timeout: \(expectation), found \"1e3\""])
        XCTAssertEqual(
            check("timeout", "5 m"), ["haul.yaml:5:14: error: files[0].timeout: \(expectation), found \"5 m\""])
        XCTAssertEqual(
            check("timeout", "1.s"), ["haul.yaml:5:14: error: files[0].timeout: \(expectation), found \"1.s\""])
        XCTAssertEqual(
            check("timeout", "0s"), ["haul.yaml:5:14: error: files[0].timeout: must be greater than zero, found \"0s\""]
        )
        XCTAssertEqual(
            check("timeout", "0"), ["haul.yaml:5:14: error: files[0].timeout: must be greater than zero, found \"0\""])
        XCTAssertEqual(
            check("timeout", "0.0ms"),
            ["haul.yaml:5:14: error: files[0].timeout: must be greater than zero, found \"0.0ms\""])
        XCTAssertEqual(
            check("timeout", "{s: 1}"),
            ["haul.yaml:5:14: error: files[0].timeout: expected a duration, found a mapping"])
    }

    func testRetries() {
        XCTAssertEqual(entry("retries", "0")?.retries, 0)
        XCTAssertEqual(entry("retries", "100")?.retries, 100)
        let expectation = "expected an integer from 0 to 100"
        XCTAssertEqual(
            check("retries", "101"), ["haul.yaml:5:14: error: files[0].retries: \(expectation), found \"101\""])
        XCTAssertEqual(
            check("retries", "-1"), ["haul.yaml:5:14: error: files[0].retries: \(expectation), found \"-1\""])
        XCTAssertEqual(
            check("retries", "2.5"), ["haul.yaml:5:14: error: files[0].retries: \(expectation), found \"2.5\""])
        XCTAssertEqual(
            check("retries", "\"5\""),
            ["haul.yaml:5:14: error: files[0].retries: \(expectation), found the string \"5\""])
        XCTAssertEqual(check("retries", "~"), ["haul.yaml:5:14: error: files[0].retries: \(expectation), found null"])
    }

    func testSize() {
        XCTAssertEqual(entry("size", "0")?.size, 0)
        XCTAssertEqual(entry("size", "1125899906842624")?.size, 1 << 50, "1 PiB is the largest size accepted")
        let expectation = "expected a size in bytes (an integer of 0 or more)"
        XCTAssertEqual(check("size", "-1"), ["haul.yaml:5:11: error: files[0].size: \(expectation), found \"-1\""])
        XCTAssertEqual(check("size", "1.5"), ["haul.yaml:5:11: error: files[0].size: \(expectation), found \"1.5\""])
        XCTAssertEqual(check("size", "1MB"), ["haul.yaml:5:11: error: files[0].size: \(expectation), found \"1MB\""])
        XCTAssertEqual(
            check("size", "'10'"), ["haul.yaml:5:11: error: files[0].size: \(expectation), found the string \"10\""])
    }

    func testMode() {
        XCTAssertEqual(entry("mode", "\"0644\"")?.mode, FileMode(0o644))
        XCTAssertEqual(entry("mode", "0644")?.mode, FileMode(0o644), "unquoted: the text is read, not a YAML integer")
        XCTAssertEqual(entry("mode", "755")?.mode, FileMode(0o755))
        XCTAssertEqual(entry("mode", "0o640")?.mode, FileMode(0o640))
        XCTAssertEqual(entry("mode", "0")?.mode, FileMode(0))
        XCTAssertEqual(entry("mode", "0777")?.mode, FileMode(0o777))
        XCTAssertEqual(entry("mode", "!!str 0600")?.mode, FileMode(0o600))
        let expectation = "expected octal permission bits from \"0000\" to \"7777\" such as \"0644\""
        XCTAssertEqual(
            check("mode", "\"0800\""), ["haul.yaml:5:11: error: files[0].mode: \(expectation), found \"0800\""])
        XCTAssertEqual(
            check("mode", "10000"), ["haul.yaml:5:11: error: files[0].mode: \(expectation), found \"10000\""])
        XCTAssertEqual(
            check("mode", "rw-r--r--"), ["haul.yaml:5:11: error: files[0].mode: \(expectation), found \"rw-r--r--\""])
        XCTAssertEqual(check("mode", "0o"), ["haul.yaml:5:11: error: files[0].mode: \(expectation), found \"0o\""])
        XCTAssertEqual(
            check("mode", ""),
            ["haul.yaml:5:10: error: files[0].mode: expected octal permission bits such as \"0644\", found null"])
    }

    func testVersion() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 2\nfiles: []\n"),
            ["haul.yaml:1:10: error: version: unsupported manifest version 2 (this haul reads version 1)"])
        XCTAssertEqual(
            Fixture.diagnostics("version: 0\nfiles: []\n"),
            ["haul.yaml:1:10: error: version: unsupported manifest version 0 (this haul reads version 1)"])
        XCTAssertEqual(
            Fixture.diagnostics("version: \"1\"\nfiles: []\n"),
            ["haul.yaml:1:10: error: version: expected an integer, found the string \"1\""])
        XCTAssertEqual(
            Fixture.diagnostics("version: one\nfiles: []\n"),
            ["haul.yaml:1:10: error: version: expected an integer, found \"one\""])
        XCTAssertEqual(
            Fixture.diagnostics("files: []\n"),
            ["haul.yaml:1:1: error: missing required key \"version\" (this haul reads version 1)"])
    }

    func testUnsupportedVersionSilencesTheRest() {
        // A future format may have new keys and entry shapes: reporting them as errors would only be noise.
        let yaml = """
            version: 2
            sources: [a]
            files:
              - {url: "ftp://x", dest: /abs, sah256: x}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            ["haul.yaml:1:10: error: version: unsupported manifest version 2 (this haul reads version 1)"])
    }

    func testMissingVersionStillChecksTheRest() {
        let yaml = "files:\n  - {url: \"ftp://x\", dest: a}\n"
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:1:1: error: missing required key \"version\" (this haul reads version 1)",
                "haul.yaml:2:11: error: files[0].url: unsupported URL scheme \"ftp\" (haul fetches http and https)",
            ])
    }

    func testPrune() {
        XCTAssertEqual(Fixture.manifest("version: 1\nprune: TRUE\nfiles: []\n")?.prune, true)
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nprune: yes\nfiles: []\n"),
            ["haul.yaml:2:8: error: prune: expected true or false, found \"yes\""])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nprune: \"true\"\nfiles: []\n"),
            ["haul.yaml:2:8: error: prune: expected true or false, found the string \"true\""])
    }

    func testDefaultsAreCheckedToo() {
        let yaml = """
            version: 1
            defaults:
              retries: 500
              timeout: 0s
              mode: "9"
              headers: {Bad Name: x}
            files: []

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:3:12: error: defaults.retries: expected an integer from 0 to 100, found \"500\"",
                "haul.yaml:4:12: error: defaults.timeout: must be greater than zero, found \"0s\"",
                "haul.yaml:5:9: error: defaults.mode: expected octal permission bits from \"0000\" to \"7777\" such as \"0644\", found \"9\"",
                "haul.yaml:6:13: error: defaults.headers: invalid header name \"Bad Name\" (a header name is an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~)",
            ])
    }
}
