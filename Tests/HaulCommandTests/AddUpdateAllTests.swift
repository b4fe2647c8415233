import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add --update A --update B` and `--update-all`: every entry named (or every pinned one) is downloaded and
/// pinned anew, the manifest rewritten once and only when every download succeeded; and re-adding a destination
/// already listed points to `--update`.
final class AddUpdateAllTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let old: [UInt8] = Array("version 1\n".utf8)
    private let new: [UInt8] = Array("version 2, longer\n".utf8)
    private let same: [UInt8] = Array("unchanged upstream\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func hex(_ bytes: [UInt8]) -> String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    private var manifestText: String { directory.read("haul.yaml").map { String(decoding: $0, as: UTF8.self) } ?? "" }

    /// a.bin and b.bin pinned to `old`, c.bin to `same`; the server now serves `new` for a and b.
    private func releaseChangedUpstream() throws -> LoopbackHTTPServer {
        let server = try LoopbackHTTPServer(files: ["/a.bin": new, "/b.bin": new, "/c.bin": same])
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/a.bin"))
                dest: a.bin
                sha256: \(hex(old))   # keep this comment
                size: \(old.count)
              - url: \(server.url("/b.bin"))
                dest: b.bin
                sha256: \(hex(old))
              - url: \(server.url("/c.bin"))
                dest: c.bin
                sha256: \(hex(same))

            """)
        return server
    }

    func testRepeatedUpdateRepinsEveryNamedEntry() throws {
        let server = try releaseChangedUpstream()
        defer { server.stop() }
        let update = try directory.haul(["add", "--update", "a.bin", "--update", "b.bin"])
        XCTAssertEqual(update.exitCode, 0, update.stderr)
        XCTAssertEqual(Set(server.requests.map(\.path)), ["/a.bin", "/b.bin"])
        XCTAssertFalse(manifestText.contains(hex(old)), manifestText)
        XCTAssertTrue(
            manifestText.contains("sha256: \(hex(new))   # keep this comment\n    size: \(new.count)\n"), manifestText)
        XCTAssertTrue(
            manifestText.contains("dest: b.bin\n    sha256: \(hex(new))\n    size: \(new.count)\n"), manifestText)
        XCTAssertTrue(
            update.stdout.contains(
                "Updated files[0] (a.bin) in haul.yaml, line 4: sha256 \(hex(old).prefix(12))… → "
                    + "sha256 \(hex(new).prefix(12))…, 18 B."), update.stdout)
        XCTAssertTrue(update.stdout.contains("Updated files[1] (b.bin) in haul.yaml, line 8:"), update.stdout)
        XCTAssertEqual(directory.read("out/a.bin"), new)
        XCTAssertEqual(directory.read("out/b.bin"), new)

        let missing = try directory.haul(["add", "--update", "a.bin", "--update", "nope.bin", "--update", "gone.bin"])
        XCTAssertEqual(missing.exitCode, 64, missing.stderr)
        XCTAssertEqual(
            missing.stderr,
            "error: haul.yaml has no entry with dest \"nope.bin\"\n"
                + "error: haul.yaml has no entry with dest \"gone.bin\"\n")
    }

    func testUpdateAllRepinsWhatChangedLeavesTheRestAndSaysWhichIsWhich() throws {
        let server = try releaseChangedUpstream()
        defer { server.stop() }
        let before = manifestText
        let update = try directory.haul(["add", "--update-all"])
        XCTAssertEqual(update.exitCode, 0, update.stderr)
        XCTAssertEqual(Set(server.requests.map(\.path)), ["/a.bin", "/b.bin", "/c.bin"])
        XCTAssertEqual(
            update.stdout,
            """
            files[2] (c.bin) is already pinned to what \(server.url("/c.bin")) serves.
            Updated files[0] (a.bin) in haul.yaml, line 4: sha256 \(hex(old).prefix(12))… → sha256 \(hex(new).prefix(12))…, 18 B.
            Updated files[1] (b.bin) in haul.yaml, line 8: sha256 \(hex(old).prefix(12))… → sha256 \(hex(new).prefix(12))…, 18 B.
            Placed out/a.bin, out/b.bin, out/c.bin; the next sync makes no request for them.

            """)
        let expected = before.replacingOccurrences(
            of: "sha256: \(hex(old))   # keep this comment\n    size: \(old.count)",
            with: "sha256: \(hex(new))   # keep this comment\n    size: \(new.count)"
        )
        .replacingOccurrences(
            of: "dest: b.bin\n    sha256: \(hex(old))\n",
            with: "dest: b.bin\n    sha256: \(hex(new))\n    size: \(new.count)\n")
        XCTAssertEqual(manifestText, expected)

        server.resetLog()
        let again = try directory.haul(["add", "--update-all"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertTrue(
            again.stdout.hasPrefix(
                "3 already pinned to what their URLs serve: a.bin, b.bin, c.bin; haul.yaml was not modified.\n"),
            again.stdout)
        XCTAssertEqual(manifestText, expected)
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(server.requests.count, 3, "only add's own downloads: \(server.requests.map(\.path))")
    }

    func testUpdateAllWithOneFailedDownloadLeavesTheManifestUntouched() throws {
        let server = try releaseChangedUpstream()
        defer { server.stop() }
        server.files?.remove("/b.bin")
        let before = manifestText
        let update = try directory.haul(["add", "--update-all"])
        XCTAssertEqual(update.exitCode, 1, update.stderr)
        XCTAssertTrue(update.stderr.contains("error: \(server.url("/b.bin")): HTTP 404"), update.stderr)
        XCTAssertTrue(
            update.stderr.hasSuffix("error: files[1] (b.bin) could not be pinned anew; haul.yaml was not modified\n"),
            update.stderr)
        XCTAssertEqual(manifestText, before)
        XCTAssertNil(directory.read("out/a.bin"), "nothing is put in place")
    }

    func testReAddingADestinationPointsToUpdate() throws {
        let server = try releaseChangedUpstream()
        defer { server.stop() }
        let before = manifestText
        let again = try directory.haul(["add", server.url("/a.bin"), "--dest", "a.bin"])
        XCTAssertEqual(again.exitCode, 3, again.stderr)
        XCTAssertTrue(again.stderr.contains("\"a.bin\" is already the destination of files[0]"), again.stderr)
        XCTAssertTrue(
            again.stderr.hasSuffix(
                "hint: to pin it anew from its own url, run \"haul add --update a.bin\"; or choose "
                    + "another destination with --dest\n"), again.stderr)
        XCTAssertEqual(manifestText, before)
        XCTAssertTrue(server.requests.isEmpty)
    }
}
