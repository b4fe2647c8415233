import Foundation
import Glibc
import Synchronization
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add` without a download (`--sha256`, `--sha512`, `--integrity`, with or without `--size`), and
/// `haul add --update`, which pins an entry anew where it stands; all against a real loopback server.
final class AddPinningTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let version1 = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }
    private let version2 = (0..<7000).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 5) }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func hex(_ bytes: [UInt8], _ algorithm: DigestAlgorithm = .sha256) -> String {
        StreamingHasher.digest(bytes, algorithm: algorithm).hex
    }

    private var manifestText: String? { directory.read("haul.yaml").map { String(decoding: $0, as: UTF8.self) } }

    func testAGivenDigestAndSizePinWithoutAnyRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/v1/tool.tgz": version1])
        defer { server.stop() }
        let add = try directory.haul(["add", server.url("/v1/tool.tgz"), "--sha256", hex(version1), "--size", "5000"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertTrue(server.requests.isEmpty, "no request at all: \(server.requests.map(\.method))")
        XCTAssertEqual(
            manifestText,
            """
            version: 1
            files:
              - url: \(server.url("/v1/tool.tgz"))
                dest: tool.tgz
                sha256: \(hex(version1))
                size: 5000

            """)
        XCTAssertEqual(
            add.stdout,
            """
            Created haul.yaml with tool.tgz (4.9 KiB, sha256 \(hex(version1).prefix(12))…) as files[0], line 3.
            Run "haul sync" to put it in place.

            """)
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("tool.tgz"), version1)
    }

    func testWithoutASizeOneHeadRequestGivesIt() throws {
        let server = try LoopbackHTTPServer(files: ["/v1/tool.tgz": version1])
        defer { server.stop() }
        let sri = "sha384-" + Base64.encode(StreamingHasher.digest(version1, algorithm: .sha384).bytes)
        let add = try directory.haul(["add", server.url("/v1/tool.tgz"), "--integrity", sri, "--dest", "bin/tool.tgz"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(server.requests.map(\.method), ["HEAD"])
        XCTAssertTrue(
            manifestText?.contains("    sha384: \(hex(version1, .sha384))\n    size: 5000\n") == true,
            manifestText ?? "")

        // A server that will not answer HEAD: the entry has no size, and the user is told.
        let noHead = try LoopbackHTTPServer { request in request.method == "HEAD" ? .status(405) : .ok([1, 2, 3]) }
        defer { noHead.stop() }
        let unsized = try directory.haul(["add", noHead.url("/x.bin"), "--sha512", hex([1, 2, 3], .sha512)])
        XCTAssertEqual(unsized.exitCode, 0, unsized.stderr)
        XCTAssertEqual(
            unsized.stderr,
            "warning: \(noHead.url("/x.bin")) announces no size; the entry has none (add --size to pin it)\n")
        XCTAssertTrue(
            manifestText?.hasSuffix("    dest: x.bin\n    sha512: \(hex([1, 2, 3], .sha512))\n") == true,
            manifestText ?? "")

        // A URL that is not there is not pinned.
        let missing = try directory.haul(["add", server.url("/v1/gone.tgz"), "--sha256", hex(version1)])
        XCTAssertEqual(missing.exitCode, 1, missing.stderr)
        XCTAssertEqual(missing.stderr, "error: \(server.url("/v1/gone.tgz")): HTTP 404\n")
        XCTAssertFalse(manifestText?.contains("gone.tgz") == true)
    }

    func testADigestThatIsNotOneIsRefusedBeforeAnyRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/v1/tool.tgz": version1])
        defer { server.stop() }
        let short = try directory.haul(["add", server.url("/v1/tool.tgz"), "--sha256", "abc"])
        XCTAssertEqual(short.exitCode, 64, short.stderr)
        XCTAssertEqual(short.stderr, "error: --sha256: expected 64 hex digits, found 3\n")
        let two = try directory.haul([
            "add", server.url("/v1/tool.tgz"), "--sha256", hex(version1), "--sha512", hex(version1, .sha512),
        ])
        XCTAssertEqual(two.exitCode, 64, two.stderr)
        XCTAssertTrue(two.stderr.hasPrefix("error: give one of --sha256, --sha512 and --integrity"), two.stderr)
        let sizeAlone = try directory.haul(["add", server.url("/v1/tool.tgz"), "--size", "5"])
        XCTAssertEqual(sizeAlone.exitCode, 64, sizeAlone.stderr)
        // add places what it downloads, flushing as sync does: a bad level stops it before the download.
        let badLevel = try directory.haul(
            ["add", server.url("/v1/tool.tgz")], environment: ["HAUL_DURABILITY": "bogus"])
        XCTAssertEqual(badLevel.exitCode, 64, badLevel.stderr)
        XCTAssertTrue(
            badLevel.stderr.hasPrefix("error: HAUL_DURABILITY: 'bogus' is not a durability level"), badLevel.stderr)
        XCTAssertTrue(server.requests.isEmpty)
        XCTAssertNil(manifestText, "nothing is created")
    }

    func testUpdatePinsTheEntryAnewWhereItStandsAndPutsTheFileInPlace() throws {
        let current = Mutex(version1)
        let server = try LoopbackHTTPServer { request in
            request.path == "/v1/tool.tgz" ? .ok(current.withLock { $0 }) : .notFound
        }
        defer { server.stop() }
        let manifest = """
            version: 1
            root: out
            files:
              # The tool, pinned by release.
              - url: \(server.url("/v1/tool.tgz"))   # upstream
                dest: bin/tool.tgz
                sha512: \(hex(version1, .sha512))  # v1
                size: 5000   # bytes
              - {url: "\(server.url("/v1/tool.tgz"))", dest: copy.tgz, integrity: sha256-\(Base64.encode(StreamingHasher.digest(version1, algorithm: .sha256).bytes))}
            prune: false

            """
        try directory.write("haul.yaml", manifest)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        current.withLock { $0 = version2 }
        server.resetLog()

        let update = try directory.haul(["add", "--update", "./bin//tool.tgz"])
        XCTAssertEqual(update.exitCode, 0, update.stderr)
        XCTAssertEqual(
            update.stdout,
            """
            Updated files[0] (bin/tool.tgz) in haul.yaml, line 5: sha512 \(hex(version1, .sha512).prefix(12))… → sha512 \(hex(version2, .sha512).prefix(12))…, 6.8 KiB.
            Placed out/bin/tool.tgz; the next sync makes no request for it.

            """)
        XCTAssertEqual(
            manifestText,
            manifest.replacingOccurrences(of: hex(version1, .sha512), with: hex(version2, .sha512))
                .replacingOccurrences(of: "size: 5000", with: "size: 7000"), "only the two values change")
        XCTAssertEqual(directory.read("out/bin/tool.tgz"), version2)
        XCTAssertEqual(directory.read("out/copy.tgz"), version1, "the other entry is not touched")
        XCTAssertEqual(server.requests.count, 1)

        // A flow entry in its own notation, its missing size added inside the braces.
        let flow = try directory.haul(["add", "--update", "copy.tgz"])
        XCTAssertEqual(flow.exitCode, 0, flow.stderr)
        let sri = "sha256-" + Base64.encode(StreamingHasher.digest(version2, algorithm: .sha256).bytes)
        XCTAssertTrue(
            manifestText?.contains("dest: copy.tgz, integrity: \(sri), size: 7000}\n") == true, manifestText ?? "")
        server.resetLog()
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertTrue(server.requests.isEmpty, "both files were put in place by add: \(server.requests.map(\.path))")
        XCTAssertEqual(directory.read("out/copy.tgz"), version2)

        let unchanged = try directory.haul(["add", "--update", "copy.tgz"])
        XCTAssertEqual(unchanged.exitCode, 0, unchanged.stderr)
        XCTAssertTrue(unchanged.stdout.contains("is already pinned to what"), unchanged.stdout)
        let missing = try directory.haul(["add", "--update", "nope.tgz"])
        XCTAssertEqual(missing.exitCode, 64, missing.stderr)
        XCTAssertEqual(missing.stderr, "error: haul.yaml has no entry with dest \"nope.tgz\"\n")
    }
}
