import HaulManifest
import XCTest

/// Keys and shapes: unknown and duplicate keys, wrong node kinds, required keys, several problems at once.
final class StructureDiagnosticsTests: XCTestCase {
    func testUnknownKeysWithSuggestions() {
        let yaml = """
            version: 1
            file: []
            defaults: {retires: 2, dest: x, colour: red}
            files:
              - url: https://example.com/a
                dest: a
                sah256: abc
                URL: https://example.com/b
                colour: red

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:2:1: error: file: unknown key \"file\"; did you mean \"files\"?",
                "haul.yaml:3:12: error: defaults.retires: unknown key \"retires\"; did you mean \"retries\"?",
                "haul.yaml:3:24: error: defaults.dest: unknown key \"dest\"; defaults can set only retries, timeout, retry_on, mode and headers",
                "haul.yaml:3:33: error: defaults.colour: unknown key \"colour\"",
                "haul.yaml:7:5: error: files[0].sah256: unknown key \"sah256\"; did you mean \"sha256\"?",
                "haul.yaml:8:5: error: files[0].URL: unknown key \"URL\"; did you mean \"url\"?",
                "haul.yaml:9:5: error: files[0].colour: unknown key \"colour\"",
            ])
    }

    func testUnknownKeyWithControlCharactersKeepsTheLineIntact() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: []\n\"a\\nb\": 1\n\"x\\ty\": 1\n"),
            [
                "haul.yaml:3:1: error: unknown key \"a\\nb\"",
                "haul.yaml:4:1: error: unknown key \"x\\ty\"",
            ])
    }

    func testDuplicateKeys() {
        let yaml = """
            version: 1
            files:
              - url: https://example.com/a
                dest: a
                url: https://example.com/b
            version: 1

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:5:5: error: files[0].url: duplicate key \"url\" (first on line 3)",
                "haul.yaml:6:1: error: version: duplicate key \"version\" (first on line 1)",
            ])
    }

    func testDuplicateFilesKeyUsesTheFirst() {
        let yaml = """
            version: 1
            files:
              - {url: "https://example.com/a", dest: a}
            files:
              - {url: "ftp://ignored", dest: /ignored}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml), ["haul.yaml:4:1: error: files: duplicate key \"files\" (first on line 2)"])
    }

    func testDuplicateFilesKeyWhenTheFirstIsNotASequence() {
        let yaml = """
            version: 1
            files: {}
            files:
              - {url: "ftp://ignored", dest: /ignored}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:2:8: error: files: expected a sequence, found a mapping",
                "haul.yaml:3:1: error: files: duplicate key \"files\" (first on line 2)",
            ])
    }

    func testRequiredKeys() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\n"),
            ["haul.yaml:1:1: error: missing required key \"files\" (use \"files: []\" for none)"])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - {}\n  - mode: \"0644\"\n"),
            [
                "haul.yaml:3:5: error: files[0]: missing required key \"url\"",
                "haul.yaml:3:5: error: files[0]: missing required key \"dest\"",
                "haul.yaml:4:5: error: files[1]: missing required key \"url\"",
                "haul.yaml:4:5: error: files[1]: missing required key \"dest\"",
            ])
    }

    func testWrongKinds() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: {a: 1}\n"),
            ["haul.yaml:2:8: error: files: expected a sequence, found a mapping"])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n"),
            ["haul.yaml:2:7: error: files: expected a sequence, found null"])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: none\n"),
            ["haul.yaml:2:8: error: files: expected a sequence, found \"none\""])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\ndefaults: [retries]\nfiles: []\n"),
            ["haul.yaml:2:11: error: defaults: expected a mapping, found a sequence"])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - just-a-string\n  - [a]\n  -\n"),
            [
                "haul.yaml:3:5: error: files[0]: expected a mapping, found \"just-a-string\"",
                "haul.yaml:4:5: error: files[1]: expected a mapping, found a sequence",
                "haul.yaml:5:4: error: files[2]: expected a mapping, found null",
            ])
        let entry = Fixture.entry(
            "url: [https://example.com/a]", "dest: {a: b}", "mirrors: https://m.example.com/a",
            "headers: [X-A]")
        XCTAssertEqual(
            Fixture.diagnostics(entry),
            [
                "haul.yaml:3:10: error: files[0].url: expected a URL, found a sequence",
                "haul.yaml:4:11: error: files[0].dest: expected a file path, found a mapping",
                "haul.yaml:5:14: error: files[0].mirrors: expected a sequence, found \"https://m.example.com/a\"",
                "haul.yaml:6:14: error: files[0].headers: expected a mapping, found a sequence",
            ])
    }

    func testTopLevelMustBeAMapping() {
        XCTAssertEqual(
            Fixture.diagnostics("- version: 1\n"),
            ["haul.yaml:1:1: error: expected a mapping at the top level, found a sequence"])
        XCTAssertEqual(
            Fixture.diagnostics("hello\n"),
            ["haul.yaml:1:1: error: expected a mapping at the top level, found \"hello\""])
    }

    func testEmptyManifest() {
        let message = "haul.yaml:1:1: error: the manifest is empty (expected a mapping with \"version\" and \"files\")"
        XCTAssertEqual(Fixture.diagnostics(""), [message])
        XCTAssertEqual(Fixture.diagnostics("# nothing here\n\n"), [message])
    }

    func testKeysMustBeNames() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: []\n? [a, b]\n: c\n"),
            ["haul.yaml:3:3: error: expected a key name, found a sequence"])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - {url: \"https://e.com/a\", dest: a, ~: b}\n"),
            ["haul.yaml:3:39: error: files[0]: expected a key name, found null"])
    }

    func testEveryProblemAtOnceInFileOrder() {
        let yaml = """
            version: 1
            files:
              - url: ftp://example.com/a
                dest: /a
                sha256: abc
              - url: https://example.com/b
                dest: b
                retries: many
            prune: maybe
            defaults: {timeout: never}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:3:10: error: files[0].url: unsupported URL scheme \"ftp\" (haul fetches http and https)",
                "haul.yaml:4:11: error: files[0].dest: destination \"/a\" is absolute; destinations are relative to root",
                "haul.yaml:5:13: error: files[0].sha256: expected 64 hex digits, found 3",
                "haul.yaml:8:14: error: files[1].retries: expected an integer from 0 to 100, found \"many\"",
                "haul.yaml:9:8: error: prune: expected true or false, found \"maybe\"",
                "haul.yaml:10:21: error: defaults.timeout: expected a duration such as \"30s\", \"5m\", \"1h\", \"250ms\" or a number of seconds, found \"never\"",
            ])
    }

    func testErrorValueCarriesStructuredDiagnostics() throws {
        do {
            _ = try Fixture.load(Fixture.entry("url: https://example.com/a", "dest: a", "size: -1"))
            XCTFail("expected an error")
        } catch {
            let diagnostic = try XCTUnwrap(error.diagnostics.first)
            XCTAssertEqual(diagnostic.severity, .error)
            XCTAssertEqual(diagnostic.file, "haul.yaml")
            XCTAssertEqual(diagnostic.location, SourceLocation(line: 5, column: 11))
            XCTAssertEqual(diagnostic.keyPath, "files[0].size")
            XCTAssertEqual(diagnostic.message, "expected a size in bytes (an integer of 0 or more), found \"-1\"")
            XCTAssertEqual(error.description, diagnostic.description)
        }
    }

    func testLongAndControlValuesAreQuotedSafely() {
        let long = String(repeating: "x", count: 200)
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://example.com/a", "dest: a", "mode: \(long)")),
            [
                "haul.yaml:5:11: error: files[0].mode: expected octal permission bits from \"0000\" to \"7777\" such as \"0644\", found \"\(String(repeating: "x", count: 80))…\""
            ])
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://example.com/a", "dest: a", "mode: \"6\\t\\\"4\\u0001\"")),
            [
                "haul.yaml:5:11: error: files[0].mode: expected octal permission bits from \"0000\" to \"7777\" such as \"0644\", found \"6\\t\\\"4\\u{1}\""
            ])
    }
}
