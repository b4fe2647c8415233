import HaulDigest
import HaulManifest
import XCTest

/// `extract:` as the loader reads it: every accepted form with the values it makes, every refusal with its exact
/// text and place, and the rules across an entry's keys (`dest` a folder, no `mode`, what counts as pinned).
final class ExtractRuleTests: XCTestCase {
    private static let url = "url: https://example.com/sdk-1.2.tar.gz"

    /// The entry with `lines` after its url and dest (`dest: sdk/`), which starts on line 3; `lines` begin on line 5.
    private func yaml(dest: String = "sdk/", _ lines: [String]) -> String {
        "version: 1\nfiles:\n  - \(Self.url)\n    dest: \(dest)\n" + lines.map { "    " + $0 + "\n" }.joined()
    }

    private func entry(
        dest: String = "sdk/", _ lines: String..., file: StaticString = #filePath,
        line: UInt = #line
    ) -> FileEntry? {
        Fixture.manifest(yaml(dest: dest, lines), file: file, line: line)?.files.first
    }

    private func rule(_ lines: String..., file: StaticString = #filePath, line: UInt = #line) -> ExtractRule? {
        let entry = Fixture.manifest(yaml(lines), file: file, line: line)?.files.first
        XCTAssertNotNil(entry?.extract, "the entry unpacks", file: file, line: line)
        return entry?.extract
    }

    private func diagnostics(
        dest: String = "sdk/", _ lines: String..., file: StaticString = #filePath,
        line: UInt = #line
    ) -> [String] {
        Fixture.diagnostics(yaml(dest: dest, lines), file: file, line: line)
    }

    private let tree = "sha256-n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="
    private var treeDigest: Digest { Digest(algorithm: .sha256, hex: Fixture.sha256)! }

    // MARK: Accepted forms

    func testTrueUnpacksWithEveryDefaultAndTheFolderIsKeptWithoutItsSlash() throws {
        let entry = try XCTUnwrap(entry("extract: true"))
        XCTAssertEqual(entry.extract, ExtractRule())
        XCTAssertEqual(entry.extract?.format, nil)
        XCTAssertEqual(entry.extract?.strip, 0)
        XCTAssertEqual(entry.extract?.maxUnpackedBytes, nil)
        XCTAssertEqual(entry.destination.description, "sdk")
        XCTAssertEqual(entry.destination, DestinationPath("sdk"))
        XCTAssertEqual(self.entry(dest: "tools//sdk/./", "extract: true")?.destination.description, "tools/sdk")
        XCTAssertEqual(
            self.entry(dest: "sdk", "extract: True")?.destination.description, "sdk", "the slash is optional")
        XCTAssertEqual(rule("extract: {}"), ExtractRule(), "an empty mapping is extract: true")
    }

    func testFalseOrNoExtractIsAPlainFile() throws {
        XCTAssertNil(try XCTUnwrap(entry(dest: "sdk.tar.gz", "extract: false")).extract)
        XCTAssertNil(try XCTUnwrap(entry(dest: "sdk.tar.gz", "mode: \"0755\"")).extract)
        XCTAssertEqual(entry(dest: "sdk.tar.gz", "extract: FALSE", "mode: \"0755\"")?.mode, FileMode(0o755))
    }

    func testEveryKeyInBlockForm() throws {
        let rule = try XCTUnwrap(
            rule(
                "extract:",
                "  format: tar.zst",
                "  strip: 1",
                "  include: \"bin/*\"",
                "  exclude: [\"**/*.a\", docs/]",
                "  tree: \(tree)",
                "  max_unpacked: 2G"))
        XCTAssertEqual(rule.format, .tarZstd)
        XCTAssertEqual(rule.strip, 1)
        XCTAssertEqual(rule.include, ["bin/*"])
        XCTAssertEqual(rule.exclude, ["**/*.a", "docs/"])
        XCTAssertEqual(rule.tree, treeDigest)
        XCTAssertEqual(rule.maxUnpackedBytes, 2 << 30)
        XCTAssertEqual(
            rule,
            ExtractRule(
                format: .tarZstd, strip: 1, include: ["bin/*"], exclude: ["**/*.a", "docs/"],
                tree: treeDigest, maxUnpackedBytes: 2 << 30))
    }

    func testEveryFormatByItsName() {
        for format in ArchiveFormat.allCases {
            XCTAssertEqual(rule("extract: {format: \"\(format.rawValue)\"}")?.format, format)
        }
        XCTAssertEqual(rule("extract: {format: 7z}")?.format, .sevenZip, "unquoted, 7z is text too")
    }

    func testPatternsAsAListInBlockForm() {
        XCTAssertEqual(
            rule("extract:", "  include:", "    - lib/**", "    - \"*.so\"", "  exclude: []")?.include,
            ["lib/**", "*.so"])
        XCTAssertEqual(rule("extract: {exclude: []}")?.exclude, [], "an empty list excludes nothing")
    }

    func testMaxUnpackedTakesBytesAndBinaryUnits() {
        let cases: [(String, Int64)] = [
            ("1048576", 1_048_576), ("512K", 512 << 10), ("500M", 500 << 20), ("2G", 2 << 30),
            ("1T", 1 << 40), ("2GiB", 2 << 30), ("3gb", 3 << 30), ("\"64M\"", 64 << 20),
        ]
        for (written, bytes) in cases {
            XCTAssertEqual(rule("extract: {max_unpacked: \(written)}")?.maxUnpackedBytes, bytes, written)
        }
    }

    /// Without `format:`, a URL that names no format is accepted: the bytes will tell.
    func testAURLThatNamesNoFormatNeedsNone() throws {
        let manifest = try XCTUnwrap(
            Fixture.manifest(
                """
                version: 1
                files:
                  - {url: "https://example.com/download?id=3", dest: sdk, extract: true}
                  - {url: "https://example.com/latest", dest: tools, extract: {format: zip}}

                """))
        XCTAssertEqual(manifest.files.map { $0.extract?.format }, [nil, .zip])
    }

    func testAnEntryMayPinTheArchiveTheTreeBothOrNeither() throws {
        let manifest = try XCTUnwrap(
            Fixture.manifest(
                """
                version: 1
                files:
                  - {url: "https://e.com/a.tgz", dest: a, sha256: \(Fixture.sha256), extract: true}
                  - {url: "https://e.com/b.tgz", dest: b, extract: {tree: "\(tree)"}}
                  - {url: "https://e.com/c.tgz", dest: c, integrity: "\(tree)", extract: {tree: "\(tree)"}}
                  - {url: "https://e.com/d.tgz", dest: d, extract: true}
                  - {url: "https://e.com/e", dest: e}

                """))
        XCTAssertEqual(manifest.files.map(\.isPinned), [true, true, true, false, false])
        XCTAssertEqual(manifest.files.map { $0.extract?.tree }, [nil, treeDigest, treeDigest, nil, nil])
        XCTAssertEqual(manifest.files.map { $0.checksum != nil }, [true, false, true, false, false])
    }

    /// `mode` of `defaults:` is for plain files; an archive entry is not refused for it.
    func testADefaultModeDoesNotConcernArchives() {
        XCTAssertNotNil(
            Fixture.manifest(
                "version: 1\ndefaults: {mode: \"0600\"}\nfiles:\n"
                    + "  - {url: \"https://e.com/a.tgz\", dest: a/, extract: true}\n"))
    }

    // MARK: Refusals

    func testAValueThatIsNeitherABooleanNorAMapping() {
        let expected = "expected true, false or a mapping of format, strip, include, exclude, tree and max_unpacked"
        XCTAssertEqual(
            diagnostics("extract: yes"), ["haul.yaml:5:14: error: files[0].extract: \(expected), found \"yes\""])
        XCTAssertEqual(
            diagnostics("extract: \"true\""),
            ["haul.yaml:5:14: error: files[0].extract: \(expected), found the string \"true\""])
        XCTAssertEqual(
            diagnostics("extract: [strip]"), ["haul.yaml:5:14: error: files[0].extract: \(expected), found a sequence"])
        // `dest: sdk/` is not refused as well: whatever the mistake, the entry means to unpack.
        XCTAssertEqual(diagnostics("extract:"), ["haul.yaml:5:13: error: files[0].extract: \(expected), found null"])
    }

    func testUnknownAndRepeatedKeys() {
        XCTAssertEqual(
            diagnostics("extract:", "  stirp: 1", "  tree: \(tree)", "  tree: \(tree)", "  into: x"),
            [
                "haul.yaml:6:7: error: files[0].extract.stirp: unknown key \"stirp\"; did you mean \"strip\"?",
                "haul.yaml:8:7: error: files[0].extract.tree: duplicate key \"tree\" (first on line 7)",
                "haul.yaml:9:7: error: files[0].extract.into: unknown key \"into\"",
            ])
        XCTAssertEqual(
            diagnostics("extract: {max_unpack: 1G}"),
            [
                "haul.yaml:5:15: error: files[0].extract.max_unpack: unknown key \"max_unpack\"; did you mean \"max_unpacked\"?"
            ])
    }

    func testFormat() {
        let list = "tar, tar.gz, tar.bz2, tar.xz, tar.zst, zip or 7z"
        XCTAssertEqual(
            diagnostics("extract: {format: rar}"),
            ["haul.yaml:5:23: error: files[0].extract.format: unknown archive format \"rar\" (expected \(list))"])
        XCTAssertEqual(
            diagnostics("extract: {format: tgz}"),
            ["haul.yaml:5:23: error: files[0].extract.format: unknown archive format \"tgz\"; did you mean \"tar.gz\"?"]
        )
        XCTAssertEqual(
            diagnostics("extract: {format: TAR.ZST}"),
            [
                "haul.yaml:5:23: error: files[0].extract.format: unknown archive format \"TAR.ZST\"; did you mean \"tar.zst\"?"
            ])
        XCTAssertEqual(
            diagnostics("extract: {format: [tar]}"),
            ["haul.yaml:5:23: error: files[0].extract.format: expected an archive format (\(list)), found a sequence"])
    }

    func testStrip() {
        let expected = "expected a whole number of leading folders to drop, from 0 to 4095"
        XCTAssertEqual(rule("extract: {strip: 4095}")?.strip, 4095)
        XCTAssertEqual(
            diagnostics("extract: {strip: -1}"),
            ["haul.yaml:5:22: error: files[0].extract.strip: \(expected), found \"-1\""])
        XCTAssertEqual(
            diagnostics("extract: {strip: 1.5}"),
            ["haul.yaml:5:22: error: files[0].extract.strip: \(expected), found \"1.5\""])
        XCTAssertEqual(
            diagnostics("extract: {strip: 4096}"),
            ["haul.yaml:5:22: error: files[0].extract.strip: \(expected), found \"4096\""])
        XCTAssertEqual(
            diagnostics("extract: {strip: \"2\"}"),
            ["haul.yaml:5:22: error: files[0].extract.strip: \(expected), found the string \"2\""])
    }

    func testPatternsAreCheckedWhereTheyAreWritten() {
        XCTAssertEqual(
            diagnostics("extract: {include: \"\"}"),
            ["haul.yaml:5:24: error: files[0].extract.include: \"\" is not a valid pattern: it is empty"])
        XCTAssertEqual(
            diagnostics("extract:", "  exclude:", "    - ok/*", "    - \"a**b\"", "    - \"[abc\""),
            [
                "haul.yaml:8:11: error: files[0].extract.exclude[1]: \"a**b\" is not a valid pattern: \"**\" stands for any folders "
                    + "only as a whole component (as in \"**/x\", \"a/**\", \"a/**/b\"); within a name, use \"*\" (at character 2)",
                "haul.yaml:9:11: error: files[0].extract.exclude[2]: \"[abc\" is not a valid pattern: \"[\" is not closed by \"]\" "
                    + "(write \"\\[\" for the character itself) (at character 1)",
            ])
        XCTAssertEqual(
            diagnostics("extract: {include: {bin: x}}"),
            [
                "haul.yaml:5:24: error: files[0].extract.include: expected a pattern or a list of patterns, found a mapping"
            ])
        XCTAssertEqual(
            diagnostics("extract: {exclude: ~}"),
            ["haul.yaml:5:24: error: files[0].extract.exclude: expected a pattern or a list of patterns, found null"])
        XCTAssertEqual(
            diagnostics("extract: {include: [bin, ~, [x]]}"),
            [
                "haul.yaml:5:30: error: files[0].extract.include[1]: expected a pattern, found null",
                "haul.yaml:5:33: error: files[0].extract.include[2]: expected a pattern, found a sequence",
            ])
    }

    func testTree() {
        XCTAssertEqual(
            diagnostics("extract: {tree: \"sha512-\(String(repeating: "A", count: 86))==\"}"),
            [
                "haul.yaml:5:21: error: files[0].extract.tree: a tree digest is SHA-256 only (\"sha256-<base64>\", as "
                    + "`nix hash path` prints it), found \"sha512\""
            ])
        XCTAssertEqual(
            diagnostics("extract: {tree: \"\(tree.dropLast(2))=\"}"),
            ["haul.yaml:5:21: error: files[0].extract.tree: expected 44 base64 characters after \"sha256-\", found 43"])
        XCTAssertEqual(
            diagnostics("extract: {tree: \"sha256-\(String(repeating: "A", count: 42))!=\"}"),
            [
                "haul.yaml:5:21: error: files[0].extract.tree: invalid character \"!\" at position 50 (expected 44 base64 "
                    + "characters after \"sha256-\")"
            ])
        let expectation = "expected \"sha256-<base64>\", the SHA-256 of the unpacked tree as `nix hash path` prints it"
        XCTAssertEqual(
            diagnostics("extract: {tree: \(Fixture.sha256)}"),
            [
                "haul.yaml:5:21: error: files[0].extract.tree: \(expectation); for this hex digest write \"\(tree)\""
            ])
        XCTAssertEqual(
            diagnostics("extract: {tree: \"sha256:\(Fixture.sha256)\"}"),
            [
                "haul.yaml:5:21: error: files[0].extract.tree: \(expectation); for this hex digest write \"\(tree)\""
            ])
        XCTAssertEqual(
            diagnostics("extract: {tree: 1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s}"),
            [
                "haul.yaml:5:21: error: files[0].extract.tree: \(expectation), found \"1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s\""
            ])
        XCTAssertEqual(
            diagnostics("extract: {tree: ~}"),
            ["haul.yaml:5:21: error: files[0].extract.tree: expected a digest, found null"])
    }

    func testMaxUnpacked() {
        let expected =
            "expected a whole number of bytes, optionally followed by K, M, G or T (K = 1024), such as 500K or 2G"
        XCTAssertEqual(
            diagnostics("extract: {max_unpacked: 2X}"),
            ["haul.yaml:5:29: error: files[0].extract.max_unpacked: \(expected), found \"2X\""])
        XCTAssertEqual(
            diagnostics("extract: {max_unpacked: 1.5G}"),
            ["haul.yaml:5:29: error: files[0].extract.max_unpacked: \(expected), found \"1.5G\""])
        XCTAssertEqual(
            diagnostics("extract: {max_unpacked: 0}"),
            ["haul.yaml:5:29: error: files[0].extract.max_unpacked: must be greater than zero, found \"0\""])
        XCTAssertEqual(
            diagnostics("extract: {max_unpacked: 9999999T}"),
            ["haul.yaml:5:29: error: files[0].extract.max_unpacked: too large: at most 8 exabytes, found \"9999999T\""])
        XCTAssertEqual(
            diagnostics("extract: {max_unpacked: {}}"),
            ["haul.yaml:5:29: error: files[0].extract.max_unpacked: expected a size in bytes, found a mapping"])
    }

    /// Every mistake of an entry at once, each at its place; the entry is not kept.
    func testSeveralMistakesAreReportedTogether() {
        XCTAssertEqual(
            diagnostics("extract: {format: rar, strip: x, include: \"a//b\", tree: abc}"),
            [
                "haul.yaml:5:23: error: files[0].extract.format: unknown archive format \"rar\" (expected tar, tar.gz, "
                    + "tar.bz2, tar.xz, tar.zst, zip or 7z)",
                "haul.yaml:5:35: error: files[0].extract.strip: expected a whole number of leading folders to drop, from 0 "
                    + "to 4095, found \"x\"",
                "haul.yaml:5:47: error: files[0].extract.include: \"a//b\" is not a valid pattern: it has an empty component "
                    + "(\"//\") (at character 3)",
                "haul.yaml:5:61: error: files[0].extract.tree: expected \"sha256-<base64>\", the SHA-256 of the unpacked tree "
                    + "as `nix hash path` prints it, found \"abc\"",
            ])
    }

    // MARK: Rules across keys

    func testATrailingSlashIsForFoldersAnArchiveUnpacksInto() {
        XCTAssertEqual(
            diagnostics(dest: "sdk/", "extract: false"),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"sdk/\" ends with \"/\"; a destination names a file "
                    + "(a folder only with extract:)"
            ])
        XCTAssertEqual(
            diagnostics(dest: "./", "extract: true"),
            ["haul.yaml:4:11: error: files[0].dest: destination \"./\" names root itself, not a folder under it"])
        XCTAssertEqual(
            diagnostics(dest: ".haul/", "extract: true"),
            ["haul.yaml:4:11: error: files[0].dest: \".haul\" is haul's private folder under root"])
        XCTAssertEqual(
            diagnostics(dest: "~", "extract: true"),
            ["haul.yaml:4:11: error: files[0].dest: expected a folder path, found null"])
    }

    /// Whatever order the keys come in: `extract` after `dest` and `mode` still decides how they are read.
    func testModeIsRefusedWithExtract() {
        XCTAssertEqual(
            diagnostics("mode: \"0755\"", "extract: {strip: 1}"),
            [
                "haul.yaml:5:5: error: files[0].mode: cannot be set for an entry with extract (each member of the archive "
                    + "keeps its own executable bit)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics(
                "version: 1\nfiles:\n  - {extract: true, mode: \"0755\", url: \"https://e.com/a\", dest: a/}\n"),
            [
                "haul.yaml:3:21: error: files[0].mode: cannot be set for an entry with extract (each member of the archive "
                    + "keeps its own executable bit)"
            ])
    }

    /// Each archive entry says `extract:` itself: a default would turn every other entry into a folder.
    func testExtractIsNotADefault() {
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\ndefaults: {extract: true}\nfiles: []\n"),
            [
                "haul.yaml:2:12: error: defaults.extract: unknown key \"extract\"; defaults can set only retries, timeout, retry_on, mode and headers"
            ])
    }
}
