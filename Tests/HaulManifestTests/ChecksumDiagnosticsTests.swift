import HaulDigest
import HaulManifest
import XCTest

/// Digest keys: exact messages and positions (the value's line and column, 1-based).
final class ChecksumDiagnosticsTests: XCTestCase {
    private func check(_ key: String, _ value: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        Fixture.diagnostics(
            Fixture.entry("url: https://example.com/a", "dest: a", "\(key): \(value)"), file: file, line: line)
    }

    func testHexKeyLengths() {
        XCTAssertEqual(
            check("sha256", String(Fixture.sha256.dropLast())),
            ["haul.yaml:5:13: error: files[0].sha256: expected 64 hex digits, found 63"])
        XCTAssertEqual(
            check("sha384", Fixture.sha256),
            ["haul.yaml:5:13: error: files[0].sha384: expected 96 hex digits, found 64"])
        XCTAssertEqual(
            check("sha512", "ab"),
            ["haul.yaml:5:13: error: files[0].sha512: expected 128 hex digits, found 2"])
        XCTAssertEqual(
            check("sha256", "\"\""),
            ["haul.yaml:5:13: error: files[0].sha256: expected 64 hex digits, found 0"])
    }

    func testHexKeyNamesTheBadCharacter() {
        var digest = Array(Fixture.sha256)
        digest[4] = "g"
        XCTAssertEqual(
            check("sha256", String(digest)),
            ["haul.yaml:5:13: error: files[0].sha256: invalid character \"g\" at position 5 (expected 64 hex digits)"])
        // A bad character is reported even when the length is also wrong: it is the more specific problem.
        XCTAssertEqual(
            check("sha256", "\"abc xyz\""),
            ["haul.yaml:5:13: error: files[0].sha256: invalid character \" \" at position 4 (expected 64 hex digits)"])
        XCTAssertEqual(
            check("sha256", "\"sha256:\(Fixture.sha256)\""),
            ["haul.yaml:5:13: error: files[0].sha256: invalid character \"s\" at position 1 (expected 64 hex digits)"])
    }

    func testPrefixedChecksum() {
        XCTAssertEqual(
            check("checksum", Fixture.sha256),
            [
                "haul.yaml:5:15: error: files[0].checksum: expected \"<algorithm>:<hex digits>\" with algorithm sha256, sha384, sha512, sha1 or md5"
            ])
        XCTAssertEqual(
            check("checksum", "sha3:abcd"),
            [
                "haul.yaml:5:15: error: files[0].checksum: unknown checksum algorithm \"sha3\" (expected sha256, sha384, sha512, sha1 or md5)"
            ])
        XCTAssertEqual(
            check("checksum", "sha512:\(String(repeating: "a", count: 127))"),
            [
                "haul.yaml:5:15: error: files[0].checksum: expected 128 hex digits after \"sha512:\", found 127"
            ])
        // Positions count from the start of the whole value, prefix included.
        XCTAssertEqual(
            check("checksum", "sha256:abz\(String(Fixture.sha256.dropFirst(3)))"),
            [
                "haul.yaml:5:15: error: files[0].checksum: invalid character \"z\" at position 10 (expected 64 hex digits after \"sha256:\")"
            ])
    }

    func testWeakAlgorithmsWarnButLoad() throws {
        for (algorithm, hex) in [
            ("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"), ("md5", "900150983CD24FB0D6963F7D28E17F72"),
        ] {
            let yaml = Fixture.entry("url: https://example.com/a", "dest: a", "checksum: \(algorithm):\(hex)")
            let manifest = try XCTUnwrap(Fixture.manifest(yaml))
            XCTAssertEqual(manifest.files[0].checksum?.algorithm.rawValue, algorithm)
            XCTAssertEqual(manifest.files[0].checksum?.rendered, "\(algorithm):\(hex.lowercased())")
            XCTAssertEqual(
                manifest.warnings.map(\.description),
                [
                    "haul.yaml:5:15: warning: files[0].checksum: \(algorithm) is a weak digest algorithm (collisions are practical); prefer sha256"
                ])
        }
    }

    func testWarningsAccompanyErrors() {
        let yaml = """
            version: 1
            files:
              - {url: "https://e.com/a", dest: a, checksum: "md5:900150983cd24fb0d6963f7d28e17f72"}
              - {url: "ftp://e.com/b", dest: b}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:3:49: warning: files[0].checksum: md5 is a weak digest algorithm (collisions are practical); prefer sha256",
                "haul.yaml:4:11: error: files[1].url: unsupported URL scheme \"ftp\" (haul fetches http and https)",
            ])
    }

    func testSubresourceIntegrity() {
        XCTAssertEqual(
            check("integrity", "sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0="),
            [
                "haul.yaml:5:16: error: files[0].integrity: unsupported integrity algorithm \"sha1\" (Subresource Integrity uses sha256, sha384 or sha512)"
            ])
        XCTAssertEqual(
            check("integrity", "abc"),
            [
                "haul.yaml:5:16: error: files[0].integrity: expected \"<algorithm>-<base64>\" (Subresource Integrity) with algorithm sha256, sha384 or sha512"
            ])
        XCTAssertEqual(
            check("integrity", "sha384-\(String(repeating: "A", count: 63))"),
            [
                "haul.yaml:5:16: error: files[0].integrity: expected 64 base64 characters after \"sha384-\", found 63"
            ])
        XCTAssertEqual(
            check("integrity", "sha384-A!\(String(repeating: "A", count: 62))"),
            [
                "haul.yaml:5:16: error: files[0].integrity: invalid character \"!\" at position 9 (expected 64 base64 characters after \"sha384-\")"
            ])
        XCTAssertEqual(
            check("integrity", "sha256-=\(String(repeating: "A", count: 43))"),
            [
                "haul.yaml:5:16: error: files[0].integrity: invalid base64 padding after \"sha256-\""
            ])
        XCTAssertEqual(
            check("integrity", "sha512-\(String(repeating: "A", count: 88))"),
            [
                "haul.yaml:5:16: error: files[0].integrity: invalid base64 padding after \"sha512-\""
            ])
    }

    func testAtMostOneChecksumKey() {
        let yaml = Fixture.entry(
            "url: https://example.com/a", "dest: a", "sha256: \(Fixture.sha256)",
            "checksum: sha256:\(Fixture.sha256)", "integrity: sha256-x")
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:6:5: error: files[0].checksum: conflicts with sha256 (line 5): give at most one of sha256, sha384, sha512, checksum or integrity",
                "haul.yaml:7:5: error: files[0].integrity: conflicts with sha256 (line 5): give at most one of sha256, sha384, sha512, checksum or integrity",
            ])
    }

    func testDigestMustBeAScalar() {
        XCTAssertEqual(
            check("sha256", "[a, b]"), ["haul.yaml:5:13: error: files[0].sha256: expected a digest, found a sequence"])
        XCTAssertEqual(check("sha256", ""), ["haul.yaml:5:12: error: files[0].sha256: expected a digest, found null"])
    }
}

/// Subresource Integrity with several tokens: the strongest algorithm's tokens count, any of them passes.
final class IntegrityTokensTests: XCTestCase {
    private func digest(_ text: String, _ algorithm: DigestAlgorithm) -> Digest {
        StreamingHasher.digest(Array(text.utf8), algorithm: algorithm)
    }

    private func checksum(_ integrity: String, file: StaticString = #filePath, line: UInt = #line) -> Checksum? {
        Fixture.manifest(
            Fixture.entry("url: https://example.com/a", "dest: a", "integrity: \"\(integrity)\""),
            file: file, line: line)?.files.first?.checksum
    }

    func testTheStrongestAlgorithmsTokensAreCheckedAndAnyOfThemPasses() throws {
        let weak = "sha256-" + digest("a", .sha256).base64
        let first = "sha512-" + digest("b", .sha512).base64, second = "sha512-" + digest("c", .sha512).base64
        let parsed = try XCTUnwrap(checksum("\(weak) \(first) \(second)?ct=application/javascript"))
        XCTAssertEqual(parsed.algorithm, .sha512)
        XCTAssertEqual(parsed.accepted, [digest("b", .sha512), digest("c", .sha512)])
        XCTAssertTrue(parsed.accepts(digest("c", .sha512)))
        XCTAssertFalse(parsed.accepts(digest("a", .sha256)), "a weaker algorithm's token does not count")
        XCTAssertEqual(try XCTUnwrap(checksum(weak)).accepted, [digest("a", .sha256)], "one token is as before")
    }

    func testAMalformedTokenAmongGoodOnesIsStillAnError() {
        let good = "sha384-" + digest("b", .sha384).base64
        XCTAssertEqual(
            Fixture.diagnostics(
                Fixture.entry(
                    "url: https://example.com/a", "dest: a",
                    "integrity: \"\(good) sha3-abc\"")),
            [
                "haul.yaml:5:16: error: files[0].integrity: unsupported integrity algorithm \"sha3\" (Subresource Integrity uses sha256, sha384 or sha512)"
            ])
    }
}
