import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// What belongs to one source stays with it, end to end where the rule lives (the reconciler decides what each
/// request carries): the manifest's headers never reach a mirror, and a mirror's validators never go to the
/// primary URL.
final class SourceScopeCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    func testTheManifestsHeadersNeverReachAMirror() throws {
        let bytes: [UInt8] = Array("asset".utf8)
        let primary = try LoopbackHTTPServer(files: [:])
        defer { primary.stop() }
        let mirror = try LoopbackHTTPServer(files: ["/asset.bin": bytes])
        defer { mirror.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            defaults:
              headers: {Authorization: "Bearer ${ASSETS_TOKEN}", X-Team: blue}
            files:
              - url: \(primary.url("/asset.bin"))
                mirrors: [\(mirror.url("/asset.bin"))]
                dest: asset.bin
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
            """)
        let sync = try directory.haul(["sync"], environment: ["ASSETS_TOKEN": "s3cret"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/asset.bin"), bytes)
        XCTAssertEqual(primary.requests.map { $0.header("Authorization") }, ["Bearer s3cret"])
        XCTAssertEqual(mirror.requests.count, 1)
        XCTAssertNil(mirror.requests.first?.header("Authorization"), "a mirror never gets the manifest's headers")
        XCTAssertNil(mirror.requests.first?.header("X-Team"))
    }

    /// A mirror written as `{url, headers}` gets its own headers, and only it: not the primary, not another
    /// mirror; the entry's own headers still go to the primary alone.
    func testAMirrorsOwnHeadersGoToThatMirrorAlone() throws {
        let bytes: [UInt8] = Array("asset".utf8)
        let primary = try LoopbackHTTPServer(files: [:])
        defer { primary.stop() }
        let plainMirror = try LoopbackHTTPServer(files: [:])
        defer { plainMirror.stop() }
        let tokenMirror = try LoopbackHTTPServer(files: ["/asset.bin": bytes])
        defer { tokenMirror.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(primary.url("/asset.bin"))
                headers: {X-Primary: p}
                mirrors:
                  - \(plainMirror.url("/asset.bin"))
                  - url: \(tokenMirror.url("/asset.bin"))
                    headers: {Authorization: "Bearer ${MIRROR_TOKEN}"}
                dest: asset.bin
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
                retries: 0
            """)
        let sync = try directory.haul(["sync", "--verbose"], environment: ["MIRROR_TOKEN": "m1rr0r-s3cret"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/asset.bin"), bytes)
        XCTAssertEqual(primary.requests.map { $0.header("X-Primary") }, ["p"])
        XCTAssertNil(primary.requests.first?.header("Authorization"))
        XCTAssertNil(plainMirror.requests.first?.header("Authorization"))
        XCTAssertNil(plainMirror.requests.first?.header("X-Primary"))
        XCTAssertEqual(tokenMirror.requests.map { $0.header("Authorization") }, ["Bearer m1rr0r-s3cret"])
        XCTAssertNil(tokenMirror.requests.first?.header("X-Primary"))
        XCTAssertFalse((sync.stdout + sync.stderr).contains("m1rr0r-s3cret"))

        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: https://example.com/a
                mirrors: [{url: https://m.example/a, header: {A: b}}, {headers: {A: b}}]
                dest: a
            """)
        let invalid = try directory.haul(["plan"])
        XCTAssertEqual(invalid.exitCode, 3, invalid.stderr)
        XCTAssertTrue(
            invalid.stderr.contains(
                "files[0].mirrors[0].header: unknown key \"header\" (a mirror has url, headers, cert and key)"),
            invalid.stderr)
        XCTAssertTrue(invalid.stderr.contains("files[0].mirrors[1]: missing required key \"url\""), invalid.stderr)
    }

    /// An unpinned file that came from the mirror is revalidated with the mirror's validators at the mirror
    /// only: the primary, asked first, gets a plain request.
    func testAMirrorsValidatorsNeverGoToThePrimary() throws {
        let primaryFiles = StaticFiles([:])
        let primary = try LoopbackHTTPServer(files: primaryFiles)
        defer { primary.stop() }
        let mirrorFiles = StaticFiles(["/feed.json": Array("{\"v\":1}".utf8)])
        let mirror = try LoopbackHTTPServer(files: mirrorFiles)
        defer { mirror.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(primary.url("/feed.json"))
                mirrors: [\(mirror.url("/feed.json"))]
                dest: feed.json
            """)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/feed.json"), Array("{\"v\":1}".utf8))

        primary.resetLog()
        mirror.resetLog()
        let again = try directory.haul(["sync"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertEqual(primary.requests.count, 1)
        XCTAssertNil(primary.requests.first?.header("If-None-Match"), "the mirror's ETag means nothing to the primary")
        XCTAssertNil(primary.requests.first?.header("If-Modified-Since"))
        XCTAssertEqual(mirror.requests.map { $0.header("If-None-Match") }, [mirrorFiles.etag("/feed.json")])
        XCTAssertTrue(again.stdout.contains("1 confirmed by their server"), again.stdout)
    }
}
