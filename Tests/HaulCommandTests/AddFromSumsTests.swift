import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add` with several URLs, and `haul add --from-sums`: a release pinned at once from the checksum list
/// published beside its files, in both list forms, and the result syncs.
final class AddFromSumsTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let tool: [UInt8] = Array("tool binary\n".utf8)
    private let docs: [UInt8] = Array("docs archive\n".utf8)
    private let notes: [UInt8] = Array("release notes\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func hex(_ bytes: [UInt8], _ algorithm: DigestAlgorithm = .sha256) -> String {
        StreamingHasher.digest(bytes, algorithm: algorithm).hex
    }

    private func release(lists: [String: String]) throws -> LoopbackHTTPServer {
        // The test server matches request targets as sent: the space of "manual v2.zip" arrives encoded.
        var files = ["/v2/tool-linux.tar.gz": tool, "/v2/docs/manual%20v2.zip": docs, "/v2/NOTES.txt": notes]
        for (name, text) in lists { files["/v2/" + name] = Array(text.utf8) }
        return try LoopbackHTTPServer(files: files)
    }

    private var manifestText: String { directory.read("haul.yaml").map { String(decoding: $0, as: UTF8.self) } ?? "" }

    func testAGNUListPinsEveryFileAtTheListsFolderAndTheResultSyncs() throws {
        let sums = """
            \(hex(tool))  tool-linux.tar.gz
            \(hex(docs)) *./docs/manual v2.zip

            \(hex(notes))  NOTES.txt
            """
        let server = try release(lists: ["SHA256SUMS": sums])
        defer { server.stop() }
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles: []   # the release\n")

        let add = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS")])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/v2/SHA256SUMS"], "the files themselves are not downloaded")
        XCTAssertTrue(
            add.stdout.contains("Added docs/manual v2.zip (sha256 \(hex(docs).prefix(12))…) to haul.yaml as files[1]"),
            add.stdout)
        XCTAssertTrue(manifestText.contains("url: \(server.url("/v2/docs/manual%20v2.zip"))"), manifestText)
        XCTAssertTrue(manifestText.contains("sha256: \(hex(notes))"), manifestText)
        XCTAssertFalse(manifestText.contains("size:"), "a list gives no size: \(manifestText)")

        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/tool-linux.tar.gz"), tool)
        XCTAssertEqual(directory.read("out/docs/manual v2.zip"), docs)
        XCTAssertEqual(directory.read("out/NOTES.txt"), notes)
    }

    func testABSDListOfSHA512WithAMatchPinsOnlyTheMatchingFiles() throws {
        let sums = """
            SHA512 (tool-linux.tar.gz) = \(hex(tool, .sha512))
            SHA512 (NOTES.txt) = \(hex(notes, .sha512))
            """
        let server = try release(lists: ["sha512.txt": sums])
        defer { server.stop() }
        let add = try directory.haul(["add", "--from-sums", server.url("/v2/sha512.txt"), "--match", "*.tar.gz"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertTrue(add.stdout.hasPrefix("Created haul.yaml with tool-linux.tar.gz (sha512 "), add.stdout)
        XCTAssertTrue(manifestText.contains("sha512: \(hex(tool, .sha512))"), manifestText)
        XCTAssertFalse(manifestText.contains("NOTES"), manifestText)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("tool-linux.tar.gz"), tool)

        let none = try directory.haul(["add", "--from-sums", server.url("/v2/sha512.txt"), "--match", "*.deb"])
        XCTAssertEqual(none.exitCode, 64, none.stderr)
        XCTAssertTrue(none.stderr.contains("matches '*.deb'"), none.stderr)
    }

    func testAMalformedLineIsRefusedWithItsNumberAndTheManifestIsUntouched() throws {
        let sums = """
            \(hex(tool))  tool-linux.tar.gz
            -----BEGIN PGP SIGNATURE-----
            """
        let server = try release(lists: [
            "SHA256SUMS": sums, "SHA1SUMS": "\(hex(tool, .sha1))  tool-linux.tar.gz\n",
            "ESCAPES": "\(hex(tool))  ../outside.tar.gz\n",
        ])
        defer { server.stop() }
        let original = "version: 1\nfiles: []\n"
        try directory.write("haul.yaml", original)

        let refused = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS")])
        XCTAssertEqual(refused.exitCode, 3, refused.stderr)
        XCTAssertTrue(
            refused.stderr.hasPrefix("\(server.url("/v2/SHA256SUMS")):2: error: expected \"HEX  NAME\""), refused.stderr
        )
        XCTAssertTrue(refused.stderr.contains("haul.yaml was not modified"), refused.stderr)
        XCTAssertEqual(manifestText, original)

        let weak = try directory.haul(["add", "--from-sums", server.url("/v2/SHA1SUMS")])
        XCTAssertEqual(weak.exitCode, 3, weak.stderr)
        XCTAssertTrue(weak.stderr.contains(":1: error: a SHA-1 or MD5 checksum cannot pin a file"), weak.stderr)

        let escaping = try directory.haul(["add", "--from-sums", server.url("/v2/ESCAPES")])
        XCTAssertEqual(escaping.exitCode, 3, escaping.stderr)
        XCTAssertTrue(escaping.stderr.contains(":1: error: "), escaping.stderr)
        XCTAssertEqual(manifestText, original)
    }

    func testSeveralURLsArePinnedInOneEditAndADuplicateDestinationChangesNothing() throws {
        let server = try release(lists: [:])
        defer { server.stop() }
        let add = try directory.haul(["add", server.url("/v2/tool-linux.tar.gz"), server.url("/v2/NOTES.txt")])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(
            add.stdout,
            """
            Created haul.yaml with tool-linux.tar.gz (12 B, sha256 \(hex(tool).prefix(12))…) as files[0], line 3.
            Added NOTES.txt (14 B, sha256 \(hex(notes).prefix(12))…) to haul.yaml as files[1], line 7.
            Placed tool-linux.tar.gz, NOTES.txt; the next sync makes no request for them.

            """)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("NOTES.txt"), notes)

        let before = manifestText
        server.resetLog()
        let twice = try directory.haul(["add", server.url("/v2/docs/manual%20v2.zip"), server.url("/v2/NOTES.txt")])
        XCTAssertEqual(twice.exitCode, 3, twice.stderr)
        XCTAssertTrue(twice.stderr.contains("NOTES.txt"), twice.stderr)
        XCTAssertEqual(manifestText, before, "one refused entry leaves the manifest as it was")
        XCTAssertTrue(server.requests.isEmpty, "refused before any download")

        let usage = try directory.haul([
            "add", server.url("/v2/NOTES.txt"), server.url("/v2/tool-linux.tar.gz"), "--dest", "x",
        ])
        XCTAssertEqual(usage.exitCode, 64, usage.stderr)
        XCTAssertTrue(usage.stderr.contains("--dest names one file"), usage.stderr)
    }

    func testAListAddedAgainSkipsWhatIsPinnedAndRefusesAChangedDigestUnlessUpdateAll() throws {
        let sums = "\(hex(tool))  tool-linux.tar.gz\n\(hex(notes))  NOTES.txt\n"
        let server = try release(lists: ["SHA256SUMS": sums])
        defer { server.stop() }
        let list = server.url("/v2/SHA256SUMS")
        XCTAssertEqual(try directory.haul(["add", "--from-sums", list]).exitCode, 0)
        let first = manifestText

        let again = try directory.haul(["add", "--from-sums", list])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertEqual(again.stdout, "2 already pinned: tool-linux.tar.gz, NOTES.txt.\nhaul.yaml was not modified.\n")
        XCTAssertEqual(manifestText, first)

        // The release is rebuilt: the tool's digest changes, and a new file is listed.
        let rebuilt: [UInt8] = Array("tool binary, rebuilt\n".utf8)
        server.files?.set(
            "/v2/SHA256SUMS",
            Array("\(hex(rebuilt))  tool-linux.tar.gz\n\(hex(notes))  NOTES.txt\n\(hex(docs))  docs.zip\n".utf8))
        let refused = try directory.haul(["add", "--from-sums", list])
        XCTAssertEqual(refused.exitCode, 3, refused.stderr)
        XCTAssertEqual(
            refused.stderr,
            """
            error: haul.yaml:3:5: files[0] (tool-linux.tar.gz) is pinned to sha256 \(hex(tool).prefix(12))…; the list now says \
            sha256 \(hex(rebuilt).prefix(12))…
            hint: run "haul add --from-sums \(list) --update-all" to pin it anew; haul.yaml was not modified

            """)
        XCTAssertEqual(manifestText, first)

        let updated = try directory.haul(["add", "--from-sums", list, "--update-all"])
        XCTAssertEqual(updated.exitCode, 0, updated.stderr)
        XCTAssertEqual(
            updated.stdout,
            """
            1 already pinned: NOTES.txt.
            Updated files[0] (tool-linux.tar.gz) in haul.yaml, line 3: sha256 \(hex(tool).prefix(12))… → sha256 \(hex(rebuilt).prefix(12))….
            Added docs.zip (sha256 \(hex(docs).prefix(12))…) to haul.yaml as files[2], line 9.
            Run "haul sync" to put them in place.

            """)
        XCTAssertTrue(
            manifestText.hasPrefix(first.replacingOccurrences(of: hex(tool), with: hex(rebuilt))), manifestText)
        XCTAssertTrue(manifestText.contains("dest: docs.zip"), manifestText)

        // An entry that pins a size (added from its URL) cannot take a digest alone: the old size would stay.
        let sized = manifestText.replacingOccurrences(of: "dest: NOTES.txt\n", with: "dest: NOTES.txt\n    size: 14\n")
        try directory.write("haul.yaml", sized)
        server.files?.set("/v2/SHA256SUMS", Array("\(hex(tool))  NOTES.txt\n".utf8))
        let withSize = try directory.haul(["add", "--from-sums", list, "--update-all"])
        XCTAssertEqual(withSize.exitCode, 3, withSize.stderr)
        XCTAssertEqual(
            withSize.stderr,
            """
            error: haul.yaml:6:5: files[1] (NOTES.txt) pins a size, which the list does not give; run \
            "haul add --update NOTES.txt" to download it and pin both
            haul.yaml was not modified

            """)
        XCTAssertEqual(manifestText, sized)
    }

    func testADestFolderTakesEveryFileOfTheList() throws {
        let sums = "\(hex(tool))  tool-linux.tar.gz\n\(hex(notes))  NOTES.txt\n"
        let server = try release(lists: ["SHA256SUMS": sums])
        defer { server.stop() }
        let list = server.url("/v2/SHA256SUMS")
        let noSlash = try directory.haul(["add", "--from-sums", list, "--dest", "vendor"])
        XCTAssertEqual(noSlash.exitCode, 64, noSlash.stderr)
        XCTAssertTrue(noSlash.stderr.contains("end it with / (--dest vendor/)"), noSlash.stderr)

        let add = try directory.haul(["add", "--from-sums", list, "--dest", "vendor/v2/"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertTrue(manifestText.contains("dest: vendor/v2/tool-linux.tar.gz"), manifestText)
        XCTAssertTrue(manifestText.contains("dest: vendor/v2/NOTES.txt"), manifestText)
        let again = try directory.haul(["add", "--from-sums", list, "--dest", "vendor/v2/"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertTrue(
            again.stdout.hasPrefix("2 already pinned: vendor/v2/tool-linux.tar.gz, vendor/v2/NOTES.txt."), again.stdout)

        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("vendor/v2/tool-linux.tar.gz"), tool)
        XCTAssertEqual(directory.read("vendor/v2/NOTES.txt"), notes)
    }
}

/// `haul add` sends what `sync` would: the manifest's `defaults.headers`, and `-H` over them.
final class AddHeadersTests: XCTestCase {
    func testAddUsesTheManifestsDefaultHeadersAndTheCommandLinesOverThem() throws {
        let directory = try TemporaryDirectory()
        let bytes: [UInt8] = Array("private asset\n".utf8)
        let server = try LoopbackHTTPServer { request in
            request.header("Authorization") == "Bearer t0ken-from-env" ? .ok(bytes) : .status(401)
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            defaults:
              headers: {Authorization: "Bearer ${ASSETS_TOKEN}", X-Team: blue}
            files: []
            """)
        let add = try directory.haul(
            ["add", server.url("/a.bin"), "-H", "X-Team: red"], environment: ["ASSETS_TOKEN": "t0ken-from-env"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(server.requests.map { $0.header("X-Team") }, ["red"], "-H wins over defaults")
        XCTAssertFalse((add.stdout + add.stderr).contains("t0ken-from-env"))
        XCTAssertTrue(
            String(decoding: directory.read("haul.yaml") ?? [], as: UTF8.self).contains("sha256: \(sha256(bytes))"))

        let refused = try directory.haul(["add", server.url("/b.bin")], environment: ["ASSETS_TOKEN": "wrong"])
        XCTAssertEqual(refused.exitCode, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("HTTP 401"), refused.stderr)
        XCTAssertFalse(refused.stderr.contains("wrong"), refused.stderr)
    }
}
