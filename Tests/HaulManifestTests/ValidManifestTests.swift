import HaulDigest
import HaulManifest
import XCTest

/// A manifest using every key, checked field by field after defaults, header merging and expansion.
final class ValidManifestTests: XCTestCase {
    static let sha512Hex =
        "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
    static let sha384Base64 = "ywB1P0WjXou1oD1pmsZQBycsMqsO3tFjGotgWkP/W+2AhgcroefMI1i67KE0yCWn"
    static let md5Hex = "900150983cd24fb0d6963f7d28e17f72"

    static let yaml = """
        version: 1
        root: ./assets/../store/./x
        defaults:
          retries: 5
          timeout: 1.5m
          mode: "0600"
          headers: { Authorization: "Bearer ${ASSETS_TOKEN}", X-Team: core }
        prune: true
        files:
          - url: https://example.com/v1.2/tool.tar.gz
            dest: bin/tool.tar.gz
            sha256: \(Fixture.sha256.uppercased())
            size: 1048576
            mirrors: [https://mirror.example.org/tool.tar.gz, "${MIRROR}/tool.tar.gz"]
            mode: 0755
            headers:
              authorization: Token abc
              X-Extra: "1"
          - url: ${ASSET_BASE}/data.csv
            dest: data//./data.csv
            checksum: sha512:\(sha512Hex)
            retries: 0
            timeout: 250ms
          - url: https://example.com/x.js
            dest: web/x.js
            integrity: sha384-\(sha384Base64)
          - url: https://example.com/feed.json
            dest: feed.json
          - url: https://example.com/old.bin
            dest: old.bin
            checksum: md5:\(md5Hex)

        """

    static let environment = [
        "ASSETS_TOKEN": "s3cr3t-token",
        "ASSET_BASE": "https://assets.internal:8443/base",
        "MIRROR": "http://m.example",
    ]

    func testTopLevel() throws {
        let manifest = try XCTUnwrap(Fixture.manifest(Self.yaml, environment: Self.environment))
        XCTAssertEqual(manifest.sourcePath, "haul.yaml")
        XCTAssertEqual(manifest.version, 1)
        XCTAssertEqual(manifest.root, "/work/project/store/x")
        XCTAssertTrue(manifest.prune)
        XCTAssertEqual(manifest.files.map(\.index), [0, 1, 2, 3, 4])
        XCTAssertEqual(
            manifest.files.map(\.destination.description),
            ["bin/tool.tar.gz", "data/data.csv", "web/x.js", "feed.json", "old.bin"])
    }

    func testEntryWithEveryKey() throws {
        let manifest = try XCTUnwrap(Fixture.manifest(Self.yaml, environment: Self.environment))
        let entry = manifest.files[0]
        XCTAssertEqual(entry.url, TemplatedString(literal: "https://example.com/v1.2/tool.tar.gz"))
        XCTAssertEqual(
            entry.mirrors,
            [
                TemplatedString(literal: "https://mirror.example.org/tool.tar.gz"),
                TemplatedString(template: "${MIRROR}/tool.tar.gz", expanded: "http://m.example/tool.tar.gz"),
            ])
        XCTAssertEqual(
            entry.sources.map(\.expanded),
            [
                "https://example.com/v1.2/tool.tar.gz", "https://mirror.example.org/tool.tar.gz",
                "http://m.example/tool.tar.gz",
            ])
        XCTAssertEqual(entry.destination.components, ["bin", "tool.tar.gz"])
        XCTAssertEqual(entry.checksum?.notation, .hexKey)
        XCTAssertEqual(entry.checksum?.digest, Digest(algorithm: .sha256, hex: Fixture.sha256))
        XCTAssertEqual(entry.checksum?.rendered, Fixture.sha256, "hex is case-insensitive and rendered lowercase")
        XCTAssertEqual(entry.size, 1_048_576)
        XCTAssertEqual(entry.mode, FileMode(0o755), "unquoted 0755 is read as octal text")
        XCTAssertEqual(entry.retries, 5, "from defaults")
        XCTAssertEqual(entry.timeout, Seconds(90), "1.5m from defaults")
        // The entry's `authorization` replaces the default `Authorization` in place; new headers follow.
        XCTAssertEqual(
            entry.headers,
            [
                HeaderField(name: "authorization", value: TemplatedString(literal: "Token abc")),
                HeaderField(name: "X-Team", value: TemplatedString(literal: "core")),
                HeaderField(name: "X-Extra", value: TemplatedString(literal: "1")),
            ])
        XCTAssertEqual(entry.location, SourceLocation(line: 10, column: 5))
    }

    func testEnvironmentExpansionAndDefaults() throws {
        let manifest = try XCTUnwrap(Fixture.manifest(Self.yaml, environment: Self.environment))
        let entry = manifest.files[1]
        XCTAssertEqual(entry.url.template, "${ASSET_BASE}/data.csv")
        XCTAssertEqual(entry.url.expanded, "https://assets.internal:8443/base/data.csv")
        XCTAssertTrue(entry.url.referencesEnvironment)
        XCTAssertEqual(entry.url.description, "${ASSET_BASE}/data.csv", "descriptions show the template")
        XCTAssertEqual("\(entry.url)", "${ASSET_BASE}/data.csv")
        XCTAssertEqual(entry.destination.description, "data/data.csv", "normalized")
        XCTAssertEqual(entry.checksum?.notation, .prefixedHex)
        XCTAssertEqual(entry.checksum?.digest, Digest(algorithm: .sha512, hex: Self.sha512Hex))
        XCTAssertEqual(entry.checksum?.rendered, "sha512:\(Self.sha512Hex)")
        XCTAssertEqual(entry.retries, 0, "an explicit 0 beats the default")
        XCTAssertEqual(entry.timeout, Seconds(0.25))
        XCTAssertEqual(entry.mode, FileMode(0o600), "from defaults")
        XCTAssertNil(entry.size)
        XCTAssertEqual(entry.mirrors, [])
        XCTAssertEqual(entry.headers.map(\.name), ["Authorization", "X-Team"])
        XCTAssertEqual(entry.headers[0].value.template, "Bearer ${ASSETS_TOKEN}")
        XCTAssertEqual(entry.headers[0].value.expanded, "Bearer s3cr3t-token")
        XCTAssertEqual(entry.headers[0].value.description, "Bearer ${ASSETS_TOKEN}")
    }

    func testIntegrityUnpinnedAndWeakEntries() throws {
        let manifest = try XCTUnwrap(Fixture.manifest(Self.yaml, environment: Self.environment))
        let integrity = manifest.files[2]
        XCTAssertEqual(integrity.checksum?.notation, .subresourceIntegrity)
        XCTAssertEqual(integrity.checksum?.algorithm, .sha384)
        XCTAssertEqual(integrity.checksum?.rendered, "sha384-\(Self.sha384Base64)")

        let unpinned = manifest.files[3]
        XCTAssertNil(unpinned.checksum)
        XCTAssertEqual(unpinned.url.expanded, "https://example.com/feed.json")
        XCTAssertEqual(unpinned.destination.components, ["feed.json"])

        let weak = manifest.files[4]
        XCTAssertEqual(weak.checksum?.algorithm, .md5)
        XCTAssertEqual(weak.checksum?.notation, .prefixedHex)
        XCTAssertEqual(
            manifest.warnings.map(\.description),
            [
                "haul.yaml:31:15: warning: files[4].checksum: md5 is a weak digest algorithm (collisions are practical); prefer sha256"
            ])
        XCTAssertEqual(manifest.warnings.first?.severity, .warning)
        XCTAssertEqual(manifest.warnings.first?.keyPath, "files[4].checksum")
    }

    func testBuiltInDefaultsWithoutDefaultsSection() throws {
        let manifest = try XCTUnwrap(Fixture.manifest(Fixture.entry("url: https://example.com/a", "dest: a")))
        let entry = try XCTUnwrap(manifest.files.first)
        XCTAssertEqual(entry.retries, BuiltInDefaults.retries)
        XCTAssertEqual(entry.timeout, BuiltInDefaults.timeout)
        XCTAssertEqual(entry.mode, BuiltInDefaults.mode)
        XCTAssertEqual(entry.headers, [])
        XCTAssertFalse(manifest.prune)
        XCTAssertEqual(manifest.root, "/work/project", "root defaults to the manifest's folder")
        XCTAssertEqual(manifest.warnings, [])
    }

    func testDefaultsMayFollowFiles() throws {
        let yaml = """
            version: 1
            files:
              - {url: "https://example.com/a", dest: a}
              - {url: "https://example.com/b", dest: b, retries: 1, headers: {X-B: b}}
            defaults: {retries: 9, timeout: 2s, mode: "0640", headers: {X-A: a}}

            """
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(manifest.files.map(\.retries), [9, 1])
        XCTAssertEqual(manifest.files.map(\.timeout), [Seconds(2), Seconds(2)])
        XCTAssertEqual(manifest.files.map(\.mode), [FileMode(0o640), FileMode(0o640)])
        XCTAssertEqual(manifest.files.map { $0.headers.map(\.name) }, [["X-A"], ["X-A", "X-B"]])
    }

    func testEmptyFilesListIsValid() throws {
        let manifest = try XCTUnwrap(Fixture.manifest("version: 1\nfiles: []\n"))
        XCTAssertEqual(manifest.files.count, 0)
        XCTAssertEqual(manifest.warnings, [])
    }

    /// A manifest may name the schema editors validate it against; haul reads nothing from it, and only the top
    /// level holds it.
    func testSchemaKeyIsAcceptedAndIgnored() throws {
        let manifest = try XCTUnwrap(
            Fixture.manifest(
                """
                $schema: https://haul.dev/schema/manifest-v1.json
                version: 1
                files:
                  - {url: "https://example.com/a", dest: a}

                """))
        XCTAssertEqual(manifest.files.map(\.destination.description), ["a"])
        XCTAssertEqual(manifest.warnings, [])
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles:\n  - {url: \"https://example.com/a\", dest: a, $schema: x}\n"),
            ["haul.yaml:3:45: error: files[0].$schema: unknown key \"$schema\""])
    }

    func testRootForms() throws {
        func root(_ value: String) throws -> String {
            try XCTUnwrap(Fixture.manifest("version: 1\nroot: \(value)\nfiles: []\n")).root
        }
        XCTAssertEqual(try root("/srv/assets/"), "/srv/assets")
        XCTAssertEqual(try root("/srv//a/./b/../c"), "/srv/a/c")
        XCTAssertEqual(try root("."), "/work/project")
        XCTAssertEqual(try root("../other"), "/work/other")
        XCTAssertEqual(try root("../../../.."), "/", "lexical .. stops at /")
        XCTAssertEqual(try root("\"with space\""), "/work/project/with space")
    }

    func testManifestDirectoryIsNormalized() throws {
        let manifest = try ManifestLoader.parse(
            bytes: Array("version: 1\nfiles: []\n".utf8), fileName: "m.yaml",
            manifestDirectory: "/a/./b//c/..", environment: [:])
        XCTAssertEqual(manifest.root, "/a/b")
    }

    func testAcceptedScalarForms() throws {
        let yaml = """
            version: 1
            prune: False
            files:
              - url: HTTPS://Example.com:8080/a?q=1#frag
                dest: "quoted name.txt"
                mode: "644"
                timeout: 60
              - url: http://[::1]:9/b
                dest: 2024
                mode: 0o777
                timeout: 1.5
                size: 0
                sha384: \(String(repeating: "ab", count: 48))
              - url: http://user:pw@host/c
                dest: c
                timeout: 1h
                retries: 100
                sha512: \(String(repeating: "C", count: 128))

            """
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertFalse(manifest.prune)
        XCTAssertEqual(manifest.files.map(\.mode), [FileMode(0o644), FileMode(0o777), BuiltInDefaults.mode])
        XCTAssertEqual(manifest.files.map(\.timeout), [Seconds(60), Seconds(1.5), Seconds(3600)])
        XCTAssertEqual(manifest.files[1].destination.description, "2024")
        XCTAssertEqual(manifest.files[1].size, 0)
        XCTAssertEqual(manifest.files[1].checksum?.algorithm, .sha384)
        XCTAssertEqual(manifest.files[2].checksum?.algorithm, .sha512)
        XCTAssertEqual(manifest.files[2].retries, 100)
        XCTAssertEqual(manifest.files[2].url.description, "http://***@host/c", "userinfo is redacted in descriptions")
    }

    func testUserinfoIsRedactedWhateverTheCharacters() {
        let cases = [
            "https://usér:pä$$@hôst/ü@x?q=@#@": "https://***@hôst/ü@x?q=@#@",
            "https://a@b@host:8443/x": "https://***@host:8443/x",
            "https://host/path@not-userinfo": "https://host/path@not-userinfo",
            "https://host?x=a@b": "https://host?x=a@b",
            "mailto:someone@example.com": "mailto:someone@example.com",
            "https://ünïcödé.example/ok": "https://ünïcödé.example/ok",
        ]
        for (url, shown) in cases { XCTAssertEqual(Redaction.redactingUserinfo(url), shown, url) }
    }

    func testIntegrityForEachAlgorithm() throws {
        let yaml = """
            version: 1
            files:
              - {url: "https://e.com/1", dest: "1", integrity: "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="}
              - {url: "https://e.com/2", dest: "2", integrity: "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw=="}
              - {url: "https://e.com/3", dest: "3", checksum: "sha1:a9993e364706816aba3e25717850c26c9cd0d89d"}
              - {url: "https://e.com/4", dest: "4", checksum: "SHA256:nope"}

            """
        let diagnostics = Fixture.diagnostics(yaml)
        XCTAssertEqual(
            diagnostics,
            [
                "haul.yaml:5:51: warning: files[2].checksum: sha1 is a weak digest algorithm (collisions are practical); prefer sha256",
                "haul.yaml:6:51: error: files[3].checksum: unknown checksum algorithm \"SHA256\" (expected sha256, sha384, sha512, sha1 or md5)",
            ])
        let fixed = try XCTUnwrap(
            Fixture.manifest(yaml.replacingOccurrences(of: "SHA256:nope", with: "sha256:\(Fixture.sha256)")))
        XCTAssertEqual(fixed.files.map { $0.checksum?.algorithm }, [.sha256, .sha512, .sha1, .sha256])
        XCTAssertEqual(
            fixed.files[0].checksum?.digest,
            Digest(algorithm: .sha256, hex: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        XCTAssertEqual(fixed.warnings.count, 1, "warnings alone do not fail the load")
    }
}
