import Foundation
import HaulManifest
import XCTest

/// YAML-level rules: syntax errors, anchors and aliases, documents, tags, encodings.
final class YAMLReaderTests: XCTestCase {
    /// What to fix, in a manifest editor's words, at libyaml's mark; libyaml's own problem follows.
    func testSyntaxErrorsSayWhatToFixThenLibyamlsProblem() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: [\n"),
            [
                "haul.yaml:3:1: error: a value is missing here (a [ or { left open, or a stray \",\") (YAML: did not find "
                    + "expected node content while parsing a flow node at line 3, column 1)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n\t- url: x\n"),
            [
                "haul.yaml:3:1: error: this line is indented with a tab; YAML indents with spaces only (YAML: found "
                    + "character that cannot start any token while scanning for the next token at line 3, column 1)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: []\n  extra: 1\n"),
            [
                "haul.yaml:3:3: error: this line does not line up with the keys above it, or text follows a complete "
                    + "value (a stray bracket or quote): line keys up under each other, and quote a value that has such "
                    + "characters (YAML: did not find expected key while parsing a block mapping at line 1, column 1)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - url: https://h/a: b\n    dest: a\n"),
            [
                "haul.yaml:3:21: error: a value holds \": \" (or a second key follows on the same line): put the value "
                    + "in quotes (YAML: mapping values are not allowed in this context)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - url: https://h/a\n   dest: a\n"),
            [
                "haul.yaml:4:4: error: this line does not line up with the list above it: each item starts with \"-\" at "
                    + "the same column, and an item's keys line up under its first key (YAML: did not find expected '-' "
                    + "indicator while parsing a block collection at line 3, column 3)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - {url: \"https://h/a, dest: a}\n"),
            [
                "haul.yaml:3:11: error: the quote that opens this value is never closed: add its closing quote (YAML: "
                    + "found unexpected end of stream while scanning a quoted scalar)"
            ])
    }

    /// libyaml gives up on an unclosed quote at the end of the file; the place to fix is the quote itself.
    func testUnclosedQuoteIsReportedWhereItOpens() {
        let message =
            "the quote that opens this value is never closed: add its closing quote (YAML: found unexpected "
            + "end of stream while scanning a quoted scalar)"
        let yaml = """
            version: 1
            files:
              - url: "https://example.com/a
                dest: a
              - url: https://example.com/b
                dest: b

            """
        XCTAssertEqual(Fixture.diagnostics(yaml), ["haul.yaml:3:10: error: " + message])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - url: https://example.com/a\n    dest: 'a\n"),
            ["haul.yaml:4:11: error: " + message])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nroot: \"out\nfiles: []\n---\nversion: 1\n"),
            [
                "haul.yaml:2:7: error: the quote that opens this value is never closed: add its closing quote (YAML: "
                    + "found unexpected document indicator while scanning a quoted scalar)"
            ])
    }

    /// A quote left open mid-file runs on to the next quote, which closes it, and YAML goes wrong just after: the
    /// error is reported at the quote that opened the value, naming where YAML went wrong.
    func testQuoteClosedOnlyByALaterValuesQuoteIsReportedWhereItOpens() {
        let block = """
            version: 1
            files:
              - url: "https://example.com/a
                dest: a
              - url: "https://example.com/b"
                dest: b

            """
        XCTAssertEqual(
            Fixture.diagnostics(block),
            [
                "haul.yaml:3:10: error: this quoted value runs on to line 5, where the YAML goes wrong at column 11: if "
                    + "its closing quote is missing, add it (YAML: did not find expected key while parsing a block mapping "
                    + "at line 3, column 5)"
            ])
        let singleQuoted = Fixture.diagnostics(block.replacingOccurrences(of: "\"", with: "'"))
        XCTAssertTrue(
            singleQuoted.first?.hasPrefix("haul.yaml:3:10: error: this quoted value runs on to line 5,") ?? false,
            "\(singleQuoted)")
        let flow =
            "version: 1\nfiles:\n  - {url: \"https://example.com/a, dest: a}\n  - {url: \"https://example.com/b\", dest: b}\n"
        XCTAssertEqual(
            Fixture.diagnostics(flow),
            [
                "haul.yaml:3:11: error: this quoted value runs on to line 4, where the YAML goes wrong at column 12: if "
                    + "its closing quote is missing, add it (YAML: did not find expected ',' or '}' while parsing a flow "
                    + "mapping at line 3, column 5)"
            ])
    }

    /// A quoted value may run over lines; it changes nothing for a valid manifest, nor for a mistake on another line.
    func testQuotedValueOverLinesIsNotTakenForAnUnclosedQuote() throws {
        let manifest = try XCTUnwrap(Fixture.manifest("version: 1\nroot: \"/srv/out\n  dir\"\nfiles: []\n"))
        XCTAssertEqual(manifest.root, "/srv/out dir")
        let elsewhere = Fixture.diagnostics("version: 1\nroot: \"/srv/out\n  dir\"\nfiles: []\n  extra: 1\n")
        XCTAssertTrue(
            elsewhere.first?.hasPrefix("haul.yaml:5:3: error: this line does not line up") ?? false, "\(elsewhere)")
    }

    /// A mistake inside a closed quoted value is still reported where it is.
    func testProblemInsideAQuotedValueKeepsItsPlace() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - url: \"https://h/\\qa\"\n    dest: a\n"),
            [
                "haul.yaml:3:21: error: a value holds characters YAML reads specially: put it in quotes (YAML: "
                    + "found unknown escape character while parsing a quoted scalar at line 3, column 10)"
            ])
    }

    func testSyntaxErrorHidesEntryFindings() {
        // Entries before the syntax error were already checked while streaming; only the syntax error is reported.
        let yaml = "version: 1\nfiles:\n  - {url: \"ftp://x\", dest: a}\n  - {url: [\n"
        XCTAssertEqual(Fixture.diagnostics(yaml).count, 1)
        XCTAssertTrue(Fixture.diagnostics(yaml)[0].hasPrefix("haul.yaml:5:1: error: "), Fixture.diagnostics(yaml)[0])
    }

    func testInvalidUTF8IsReportedWithAPosition() throws {
        var bytes = Array("version: 1\nfiles: []\nx: \"".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\"\n".utf8)
        do {
            _ = try ManifestLoader.parse(bytes: bytes, fileName: "haul.yaml", manifestDirectory: "/", environment: [:])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(
                error.diagnostics.map(\.description),
                [
                    "haul.yaml:3:6: error: the file is not UTF-8 text here; save it as UTF-8 (YAML: invalid trailing UTF-8 octet)"
                ], "the column of the offending octet")
        }
    }

    /// A manifest file is read a chunk at a time, never held whole; the messages that need the text before a
    /// place (a byte offset's line and column, a tab in an indentation) read it again, and say what they say for
    /// the same bytes in memory, however deep into a large file the mistake is.
    func testAManifestFileReadInChunksIsReportedAsTheSameBytesInMemory() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("haul-chunks-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Past libyaml's 16 KiB buffer and the 128 KiB from which a second thread reads.
        let entries = (0..<2_000).map { "  - url: https://example.com/\($0)\n    dest: f\($0)\n" }.joined()
        let prefix = Array(("version: 1\nfiles:\n" + entries).utf8)
        let cases: [[UInt8]] = [
            prefix + Array("  - url: \"https://example.com/x\n    dest: x\n".utf8),  // a quote never closed
            prefix + Array("\t- url: https://example.com/t\n".utf8),  // a tab
            prefix + Array("  - url: \"https://example.com/".utf8) + [0xC3, 0x28] + Array("\"\n    dest: u\n".utf8),
        ]
        for bytes in cases {
            let path = folder + "/haul.yaml"
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            var fromFile: [String] = [], inMemory: [String] = []
            do { _ = try ManifestLoader.load(path: path, environment: [:]) } catch {
                fromFile = error.diagnostics.map(\.description)
            }
            do {
                _ = try ManifestLoader.parse(bytes: bytes, fileName: path, manifestDirectory: folder, environment: [:])
            } catch {
                inMemory = error.diagnostics.map(\.description)
            }
            XCTAssertEqual(fromFile.count, 1, "\(fromFile)")
            XCTAssertEqual(fromFile, inMemory)
            XCTAssertTrue(fromFile.first?.hasPrefix(path + ":4003:") == true, "\(fromFile)")
        }
    }

    func testAnchorsAndAliasesAreRejectedWherePlaced() {
        let yaml = """
            version: 1
            files:
              - &entry {url: "https://example.com/a", dest: a}
              - *entry

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:3:5: error: anchor \"&entry\" is not supported: haul manifests do not use anchors or aliases",
                "haul.yaml:4:5: error: alias \"*entry\" is not supported: haul manifests do not use anchors or aliases",
            ])
    }

    func testAliasInsideAnEntryValue() {
        let yaml = """
            version: 1
            defaults: {timeout: &t 30s}
            files:
              - {url: "https://example.com/a", dest: a, timeout: *t}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:2:21: error: anchor \"&t\" is not supported: haul manifests do not use anchors or aliases",
                "haul.yaml:4:54: error: alias \"*t\" is not supported: haul manifests do not use anchors or aliases",
            ])
    }

    func testAliasBombIsRejectedQuickly() {
        var yaml = "version: 1\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]
        for (previous, name) in zip(names, names.dropFirst()) {
            yaml += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ",") + "]\n"
        }
        yaml += "files: [*i, *i, *i]\n"
        let clock = ContinuousClock()
        var failure: DiagnosticsError?
        let elapsed = clock.measure { failure = Fixture.failure(yaml) }
        XCTAssertLessThan(elapsed, .seconds(1), "aliases are never expanded")
        let diagnostics = failure?.diagnostics.map(\.description) ?? []
        XCTAssertEqual(diagnostics.first, "haul.yaml:2:1: error: a: unknown key \"a\"")
        XCTAssertEqual(
            diagnostics[1],
            "haul.yaml:2:4: error: anchor \"&a\" is not supported: haul manifests do not use anchors or aliases")
        // 9 unknown keys, 9 anchors and 8 × 9 + 3 aliases, of which the first 50 in file order are kept.
        XCTAssertEqual(diagnostics.count, 50)
        XCTAssertEqual(failure?.omitted, 9 + 9 + 8 * 9 + 3 - 50)
        XCTAssertEqual(
            diagnostics.last,
            "haul.yaml:7:11: error: alias \"*e\" is not supported: haul manifests do not use anchors or aliases")
        XCTAssertEqual(diagnostics.filter { $0.contains("alias \"*") }.count, 4 * 9 + 2)
        XCTAssertEqual(diagnostics.filter { $0.contains("anchor \"&") }.count, 6)
    }

    func testASingleDocumentOnly() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: []\n---\nversion: 1\nfiles: []\n"),
            ["haul.yaml:3:1: error: a manifest is a single YAML document; found a second one"])
        XCTAssertNotNil(
            Fixture.manifest("---\nversion: 1\nfiles: []\n...\n"), "explicit markers around one document are fine")
        XCTAssertNotNil(Fixture.manifest("%YAML 1.2\n---\nversion: 1\nfiles: []\n"))
    }

    func testTags() throws {
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://example.com/a", "dest: !!binary aGVsbG8=")),
            ["haul.yaml:4:11: error: unsupported YAML tag \"!!binary\" (haul manifests use plain YAML values)"])
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: !secret https://example.com/a", "dest: a")),
            ["haul.yaml:3:10: error: unsupported YAML tag \"!secret\" (haul manifests use plain YAML values)"])
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://example.com/a", "dest: a", "retries: !!str 5")),
            ["haul.yaml:5:14: error: files[0].retries: expected an integer from 0 to 100, found the string \"5\""])
        let yaml = """
            version: !!int 1
            prune: !!bool false
            files: !!seq
              - !!map {url: !!str "https://example.com/a", dest: ! 2024, retries: !!int 4, mirrors: !!seq []}

            """
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(manifest.files[0].destination.description, "2024")
        XCTAssertEqual(manifest.files[0].retries, 4)
        XCTAssertEqual(manifest.files[0].mirrors, [])
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://example.com/a", "dest: a", "size: !!null 5")),
            ["haul.yaml:5:11: error: files[0].size: expected a size in bytes (an integer of 0 or more), found null"])
    }

    func testBlockScalarsAreText() throws {
        let yaml =
            "version: 1\nfiles:\n  - url: >-\n      https://example.com/folded\n    dest: |-\n      literal.txt\n"
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(manifest.files[0].url.expanded, "https://example.com/folded")
        XCTAssertEqual(manifest.files[0].destination.description, "literal.txt")
    }

    func testByteOrderMarkAndUTF16() throws {
        let text = "version: 1\nfiles:\n  - {url: \"https://example.com/é\", dest: \"é\"}\n"
        let withBOM = [0xEF, 0xBB, 0xBF] + Array(text.utf8)
        XCTAssertEqual(
            try ManifestLoader.parse(bytes: withBOM, fileName: "m", manifestDirectory: "/", environment: [:])
                .files[0].destination.description, "é")
        var utf16: [UInt8] = [0xFF, 0xFE]
        for unit in text.utf16 { utf16 += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        XCTAssertEqual(
            try ManifestLoader.parse(bytes: utf16, fileName: "m", manifestDirectory: "/", environment: [:])
                .files[0].url.expanded, "https://example.com/é")
    }

    func testColumnsCountCharacters() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - {dest: \"ééé\", url: x}\n"),
            ["haul.yaml:3:24: error: files[0].url: expected an absolute http:// or https:// URL, found \"x\""])
    }
}
