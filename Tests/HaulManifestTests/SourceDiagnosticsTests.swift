import HaulManifest
import XCTest

/// URLs, destinations and headers.
final class SourceDiagnosticsTests: XCTestCase {
    private func url(
        _ value: String, environment: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) -> [String] {
        Fixture.diagnostics(Fixture.entry("url: \(value)", "dest: a"), environment: environment, file: file, line: line)
    }

    private func dest(_ value: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        Fixture.diagnostics(Fixture.entry("url: https://example.com/a", "dest: \(value)"), file: file, line: line)
    }

    // MARK: URLs

    func testUnsupportedSchemes() {
        XCTAssertEqual(
            url("ftp://example.com/a"),
            ["haul.yaml:3:10: error: files[0].url: unsupported URL scheme \"ftp\" (haul fetches http and https)"])
        XCTAssertEqual(
            url("file:///etc/passwd"),
            ["haul.yaml:3:10: error: files[0].url: unsupported URL scheme \"file\" (haul fetches http and https)"])
        XCTAssertEqual(
            url("FTP://example.com/a"),
            ["haul.yaml:3:10: error: files[0].url: unsupported URL scheme \"ftp\" (haul fetches http and https)"])
        XCTAssertEqual(
            url("mailto:someone@example.com"),
            ["haul.yaml:3:10: error: files[0].url: unsupported URL scheme \"mailto\" (haul fetches http and https)"])
    }

    func testURLsMustBeAbsoluteWithAHost() {
        XCTAssertEqual(
            url("assets/x.tar.gz"),
            [
                "haul.yaml:3:10: error: files[0].url: expected an absolute http:// or https:// URL, found \"assets/x.tar.gz\""
            ])
        XCTAssertEqual(
            url("//cdn.example.com/x"),
            [
                "haul.yaml:3:10: error: files[0].url: expected an absolute http:// or https:// URL, found \"//cdn.example.com/x\""
            ])
        XCTAssertEqual(
            url("http:x"),
            ["haul.yaml:3:10: error: files[0].url: expected an absolute http:// or https:// URL, found \"http:x\""])
        XCTAssertEqual(url("http:///x"), ["haul.yaml:3:10: error: files[0].url: URL \"http:///x\" has no host"])
        XCTAssertEqual(
            url("https://user@:80/x"), ["haul.yaml:3:10: error: files[0].url: URL \"https://***@:80/x\" has no host"])
        XCTAssertEqual(
            url("http://h:99999/x"),
            ["haul.yaml:3:10: error: files[0].url: URL \"http://h:99999/x\" has an invalid port"])
        XCTAssertEqual(
            url("http://h:8o/x"), ["haul.yaml:3:10: error: files[0].url: URL \"http://h:8o/x\" has an invalid port"])
        XCTAssertEqual(
            url("http://[::1/x"),
            ["haul.yaml:3:10: error: files[0].url: URL \"http://[::1/x\" has an invalid IPv6 host"])
        XCTAssertEqual(
            url("\"https://example.com/a b\""),
            [
                "haul.yaml:3:10: error: files[0].url: URL \"https://example.com/a b\" contains a space or control character"
            ])
        XCTAssertEqual(
            url("\"\""),
            ["haul.yaml:3:10: error: files[0].url: expected an http:// or https:// URL, found an empty string"])
        XCTAssertEqual(url(""), ["haul.yaml:3:9: error: files[0].url: expected a URL, found null"])
    }

    func testMirrorsAreCheckedLikeURLs() {
        let yaml = Fixture.entry(
            "url: https://example.com/a", "dest: a",
            "mirrors: [https://m1.example.com/a, ftp://m2.example.com/a, \"${M3}/a\", [x]]")
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:5:41: error: files[0].mirrors[1]: unsupported URL scheme \"ftp\" (haul fetches http and https)",
                "haul.yaml:5:65: error: files[0].mirrors[2]: environment variable M3 is not set",
                "haul.yaml:5:76: error: files[0].mirrors[3]: expected a URL, found a sequence",
            ])
    }

    // MARK: Destinations

    func testDestinationShapes() {
        XCTAssertEqual(
            dest("/etc/x"),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"/etc/x\" is absolute; destinations are relative to root"
            ])
        XCTAssertEqual(
            dest("a/../../x"),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"a/../../x\" contains \"..\"; destinations must stay inside root"
            ])
        XCTAssertEqual(
            dest(".."),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"..\" contains \"..\"; destinations must stay inside root"
            ])
        XCTAssertEqual(
            dest("\"\""),
            ["haul.yaml:4:11: error: files[0].dest: expected a file path relative to root, found an empty string"])
        XCTAssertEqual(
            dest("./."),
            ["haul.yaml:4:11: error: files[0].dest: destination \"./.\" names root itself, not a file"])
        XCTAssertEqual(
            dest("bin/"),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"bin/\" ends with \"/\"; a destination names a file (a folder only with extract:)"
            ])
        XCTAssertEqual(
            dest(".haul/state.json"),
            [
                "haul.yaml:4:11: error: files[0].dest: \".haul/state.json\" is inside \".haul\", haul's private folder under root"
            ])
        XCTAssertEqual(
            dest("./.haul"),
            ["haul.yaml:4:11: error: files[0].dest: \".haul\" is haul's private folder under root"])
        XCTAssertEqual(
            dest(".HAUL/state"),
            [
                "haul.yaml:4:11: error: files[0].dest: \".HAUL/state\" is inside \".HAUL\", "
                    + "which on a case-insensitive file system is \".haul\", haul's private folder under root"
            ])
        XCTAssertEqual(
            dest("./.Haul"),
            [
                "haul.yaml:4:11: error: files[0].dest: \"./.Haul\" is inside \".Haul\", "
                    + "which on a case-insensitive file system is \".haul\", haul's private folder under root"
            ])
        XCTAssertEqual(
            dest("${OUT}/a"),
            [
                "haul.yaml:4:11: error: files[0].dest: \"${\" is not allowed here: environment variables expand only in root, url, mirrors and header values"
            ])
        XCTAssertEqual(
            dest("\"a\\0b\""), ["haul.yaml:4:11: error: files[0].dest: destination must not contain a NUL character"])
        XCTAssertEqual(dest(""), ["haul.yaml:4:10: error: files[0].dest: expected a file path, found null"])
    }

    func testDestinationsThatLookOddButAreFine() throws {
        let yaml = """
            version: 1
            files:
              - {url: "https://e.com/1", dest: ".haulish/x"}
              - {url: "https://e.com/2", dest: "x/.haul/y"}
              - {url: "https://e.com/3", dest: "...", mode: "0600"}
              - {url: "https://e.com/4", dest: "dir/$HOME"}
              - {url: "https://e.com/5", dest: "données/été.txt"}

            """
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(
            manifest.files.map(\.destination.description),
            [".haulish/x", "x/.haul/y", "...", "dir/$HOME", "données/été.txt"])
    }

    /// The loader splits ASCII destinations itself (faster); it must agree with `DestinationPath(_:)` everywhere.
    func testDestinationsMatchDestinationPath() throws {
        let samples = [
            "a", "a/b", "a//b", "./a/./b", "a/.", "././x", "a b/c", "...", ".a/..b/b..", "x/.hidden",
            "dir/$HOME", "é/ü.txt", "日本/語", "a\u{301}/b", "tab\there", "trailing.dot.",
        ]
        for sample in samples {
            let quoted = sample.replacingOccurrences(of: "\t", with: "\\t")
            let manifest = Fixture.manifest(Fixture.entry("url: https://e.com/a", "dest: \"\(quoted)\""))
            let destination = try XCTUnwrap(manifest?.files.first?.destination, sample)
            XCTAssertEqual(destination, DestinationPath(sample), sample)
            XCTAssertEqual(destination.description, DestinationPath(sample)?.description, sample)
        }
    }

    func testDuplicateDestinationNamesTheFirst() {
        let yaml = """
            version: 1
            files:
              - url: https://example.com/0
                dest: x
              - url: https://example.com/1
                # the first owner of a/b
                dest: a/b
              - url: https://example.com/2
                dest: y
              - url: https://example.com/3
                dest: a/c
              - url: https://example.com/4
                dest: a//b

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            ["haul.yaml:13:11: error: files[4].dest: \"a/b\" is already the destination of files[1] (line 7)"])
    }

    func testFileAndFolderCollisions() {
        let yaml = """
            version: 1
            files:
              - {url: "https://e.com/0", dest: a/b}
              - {url: "https://e.com/1", dest: a}
              - {url: "https://e.com/2", dest: a/b/c}
              - {url: "https://e.com/3", dest: a/b/c/d}
              - {url: "https://e.com/4", dest: z/y/x}
              - {url: "https://e.com/5", dest: z}
              - {url: "https://e.com/6", dest: z/y}
              - {url: "https://e.com/7", dest: a/c}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:4:36: error: files[1].dest: \"a\" is needed as a folder for \"a/b\", the destination of files[0] (line 3)",
                "haul.yaml:5:36: error: files[2].dest: \"a/b/c\" would be inside \"a/b\", which is the destination of files[0] (line 3)",
                "haul.yaml:6:36: error: files[3].dest: \"a/b/c/d\" would be inside \"a/b\", which is the destination of files[0] (line 3)",
                "haul.yaml:8:36: error: files[5].dest: \"z\" is needed as a folder for \"z/y/x\", the destination of files[4] (line 7)",
                "haul.yaml:9:36: error: files[6].dest: \"z/y\" is needed as a folder for \"z/y/x\", the destination of files[4] (line 7)",
            ])
    }

    func testManyDestinationsInSharedFolders() throws {
        var yaml = "version: 1\nfiles:\n"
        for index in 0..<3000 {
            yaml += "  - {url: \"https://e.com/\(index)\", dest: \"g\(index % 7)/sub\(index % 3)/f\(index)\"}\n"
        }
        yaml += "  - {url: \"https://e.com/x\", dest: \"g3/sub1\"}\n"
        yaml += "  - {url: \"https://e.com/y\", dest: \"g3/sub2/f2999/deeper\"}\n"
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:3003:36: error: files[3000].dest: \"g3/sub1\" is needed as a folder for \"g3/sub1/f10\", the destination of files[10] (line 13)",
                "haul.yaml:3004:36: error: files[3001].dest: \"g3/sub2/f2999/deeper\" would be inside \"g3/sub2/f2999\", which is the destination of files[2999] (line 3002)",
            ])
        let valid = try XCTUnwrap(
            Fixture.manifest(yaml.split(separator: "\n").dropLast(2).joined(separator: "\n") + "\n"))
        XCTAssertEqual(valid.files.count, 3000)
        XCTAssertEqual(valid.files[2999].destination.components, ["g3", "sub2", "f2999"])
    }

    // MARK: Headers

    func testHeaderNamesAndValues() {
        let yaml = """
            version: 1
            files:
              - url: https://example.com/a
                dest: a
                headers:
                  X-A: one
                  x-a: two
                  "Bad Name": x
                  X-Multi: "a\\r\\nInjected: yes"
                  X-Null:
                  X-List: [a]
                  "": x

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:7:7: error: files[0].headers.x-a: duplicate header \"x-a\" (also set as \"X-A\" on line 6)",
                "haul.yaml:8:7: error: files[0].headers: invalid header name \"Bad Name\" (a header name is an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~)",
                "haul.yaml:9:16: error: files[0].headers.X-Multi: header value must not contain CR, LF or NUL",
                "haul.yaml:10:14: error: files[0].headers.X-Null: expected a string, found null",
                "haul.yaml:11:15: error: files[0].headers.X-List: expected a string, found a sequence",
                "haul.yaml:12:7: error: files[0].headers: invalid header name \"\" (a header name is an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~)",
            ])
    }

    func testHeaderTokenCharacters() throws {
        let yaml = Fixture.entry(
            "url: https://example.com/a", "dest: a", "headers: {\"!#$%&'*+-.^_`|~09azAZ\": v, X-Empty: \"\"}")
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(manifest.files[0].headers.map(\.name), ["!#$%&'*+-.^_`|~09azAZ", "X-Empty"])
        XCTAssertEqual(manifest.files[0].headers[1].value.expanded, "")
    }

    func testHeaderMergeIsCaseInsensitiveAndPerFileWins() throws {
        let yaml = """
            version: 1
            defaults:
              headers: {Accept: "*/*", X-Token: "${TOKEN}", User-Agent: haul}
            files:
              - {url: "https://e.com/a", dest: a, headers: {x-token: override, X-New: n}}
              - {url: "https://e.com/b", dest: b}

            """
        let manifest = try XCTUnwrap(Fixture.manifest(yaml, environment: ["TOKEN": "t"]))
        XCTAssertEqual(
            manifest.files[0].headers.map { "\($0.name): \($0.value.expanded)" },
            ["Accept: */*", "x-token: override", "User-Agent: haul", "X-New: n"])
        XCTAssertEqual(
            manifest.files[1].headers.map { "\($0.name): \($0.value.expanded)" },
            ["Accept: */*", "X-Token: t", "User-Agent: haul"])
    }
}
