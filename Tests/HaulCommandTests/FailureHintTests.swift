import Foundation
import HaulTestSupport
import XCTest

/// What a failed or finished entry tells its reader to do next, through the real binary against loopback servers:
/// a file changed upstream said once with the command that pins it anew, the ways to send credentials after a 401
/// or 403, a manifest header `-H` stands in for, a file from the cache and a resumed download as such.
final class FailureHintTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// `entries`: (url, mirrors, dest, pinned bytes or nil); `headers`: the entry's headers, written as given.
    private func writeManifest(
        _ entries: [(url: String, mirrors: [String], dest: String, pinned: [UInt8]?)],
        headers: [String: String] = [:]
    ) throws {
        var text = "version: 1\nroot: out\n"
        if !headers.isEmpty {
            text +=
                "defaults:\n  headers:\n"
                + headers.sorted { $0.key < $1.key }.map { "    \($0.key): \"\($0.value)\"\n" }.joined()
        }
        text += "files:\n"
        for entry in entries {
            text += "  - url: \(entry.url)\n    dest: \(entry.dest)\n"
            if !entry.mirrors.isEmpty { text += "    mirrors:\n" + entry.mirrors.map { "      - \($0)\n" }.joined() }
            if let bytes = entry.pinned { text += "    sha256: \(sha256(bytes))\n" }
        }
        try directory.write("haul.yaml", text)
    }

    private func events(_ stdout: String) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    // MARK: A file changed upstream

    func testAPinnedFileChangedUpstreamIsSaidOnceNamingTheCommandThatPinsItAnew() throws {
        let old: [UInt8] = Array("old\n".utf8), new: [UInt8] = Array("new\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/a.bin": new])
        defer { server.stop() }
        try writeManifest([(server.url("/a.bin"), [], "a.bin", old)])
        let result = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertEqual(
            result.stderr,
            "error: a.bin: \(server.url("/a.bin")): the server's bytes differ from the pinned "
                + "checksum: expected \(sha256(old)), got \(sha256(new)) (if the change upstream is intended, "
                + "`haul add --update a.bin` pins it anew)\n")
        XCTAssertFalse(directory.exists("out/a.bin"))

        let json = try directory.haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 1)
        let said = events(json.stdout).filter { ["warning", "failed"].contains($0["event"] as? String) }
        XCTAssertEqual(said.map { $0["event"] as? String }, ["failed"], "no warning besides the failure")
        XCTAssertEqual(
            said.first?["error"] as? String, String(result.stderr.dropFirst("error: a.bin: ".count).dropLast()))
    }

    /// The command named is the one that works: with another manifest than `haul.yaml`, it names it, and running it
    /// pins the new bytes, after which the sync succeeds.
    func testTheCommandNamedForAChangedFilePinsItAnewInAnotherManifest() throws {
        let old: [UInt8] = Array("old\n".utf8), new: [UInt8] = Array("new\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/a.bin": new])
        defer { server.stop() }
        try writeManifest([(server.url("/a.bin"), [], "a.bin", old)])
        try FileManager.default.moveItem(atPath: directory.path("haul.yaml"), toPath: directory.path("assets.yaml"))
        let failed = try directory.haul(["sync", "assets.yaml"])
        XCTAssertEqual(failed.exitCode, 1)
        let command = "haul add --update a.bin --manifest assets.yaml"
        XCTAssertTrue(
            failed.stderr.hasSuffix("(if the change upstream is intended, `\(command)` pins it anew)\n"), failed.stderr)
        let repinned = try directory.haul(Array(command.split(separator: " ").dropFirst().map(String.init)))
        XCTAssertEqual(repinned.exitCode, 0, repinned.stderr)
        let synced = try directory.haul(["sync", "assets.yaml"])
        XCTAssertEqual(synced.exitCode, 0, synced.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), new)
    }

    /// With mirrors, which URL served which bytes is said once, in the error, not also as a warning per source.
    func testEveryMirrorServingOtherBytesIsSaidOnceInTheError() throws {
        let old: [UInt8] = Array("old\n".utf8), new: [UInt8] = Array("new\n".utf8),
            other: [UInt8] = Array("other\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/a.bin": new, "/m.bin": other])
        defer { server.stop() }
        try writeManifest([(server.url("/a.bin"), [server.url("/m.bin")], "a.bin", old)])
        let result = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertEqual(
            result.stderr,
            """
            error: a.bin: every source served bytes that differ from the pinned checksum (if the change upstream is \
            intended, `haul add --update a.bin` pins it anew):
              \(server.url("/a.bin")): expected \(sha256(old)), got \(sha256(new))
              \(server.url("/m.bin")): expected \(sha256(old)), got \(sha256(other))

            """)
    }

    /// A mirror that serves the right bytes after one that did not: the bad one is still a warning, once.
    func testAWrongMirrorIsStillAWarningWhenAnotherServesThePinnedBytes() throws {
        let right: [UInt8] = Array("right\n".utf8), wrong: [UInt8] = Array("wrong\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/a.bin": wrong, "/m.bin": right])
        defer { server.stop() }
        try writeManifest([(server.url("/a.bin"), [server.url("/m.bin")], "a.bin", right)])
        let result = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(
            result.stderr,
            "warning: a.bin: \(server.url("/a.bin")): checksum mismatch: expected \(sha256(right)), "
                + "got \(sha256(wrong))\n")
        XCTAssertEqual(directory.read("out/a.bin"), right)
    }

    // MARK: --require-checksums

    /// The hint is true: the command it names pins the entry, after which the same run passes.
    func testRequireChecksumsNamesTheCommandThatPinsAnUnpinnedEntry() throws {
        let bytes: [UInt8] = Array("data\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/b": bytes])
        defer { server.stop() }
        try writeManifest([(server.url("/b"), [], "b.bin", nil)])
        let refused = try directory.haul(["sync", "--require-checksums"])
        XCTAssertEqual(refused.exitCode, 3)
        XCTAssertEqual(
            refused.stderr,
            "haul.yaml:4:5: error: files[0]: b.bin has no checksum, and --require-checksums is set "
                + "(`haul add --update b.bin` fetches it and writes its checksum into the manifest)\n")
        XCTAssertEqual(server.requests.count, 0)

        let pinned = try directory.haul(["add", "--update", "b.bin"])
        XCTAssertEqual(pinned.exitCode, 0, pinned.stderr)
        let synced = try directory.haul(["sync", "--require-checksums"])
        XCTAssertEqual(synced.exitCode, 0, synced.stderr)
        XCTAssertEqual(directory.read("out/b.bin"), bytes)
    }

    // MARK: 401 and 403

    func testA401NamesTheWaysToSendCredentials() throws {
        let server = try LoopbackHTTPServer { _ in ServerResponse(status: 401) }
        defer { server.stop() }
        try writeManifest([(server.url("/a.bin"), [], "a.bin", nil)])
        let result = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertEqual(
            result.stderr,
            "error: a.bin: \(server.url("/a.bin")): HTTP 401 (to send credentials: "
                + "-H 'Authorization: …', the manifest's headers:, or --netrc)\n")
        let json = try directory.haul(["sync", "--json"])
        let failed = try XCTUnwrap(events(json.stdout).first { $0["event"] as? String == "failed" })
        let sources = try XCTUnwrap(failed["sources"] as? [[String: Any]])
        XCTAssertEqual(
            sources.first?["error"] as? String,
            "HTTP 401 (to send credentials: -H 'Authorization: …', "
                + "the manifest's headers:, or --netrc)")
    }

    /// The entry's headers stay with their origin: the 403 of the other origin says that they were not sent there.
    func testA403AfterARedirectToAnotherOriginSaysTheHeadersWereNotSentThere() throws {
        let other = try LoopbackHTTPServer { _ in ServerResponse(status: 403) }
        defer { other.stop() }
        let origin = try LoopbackHTTPServer { _ in
            ServerResponse(status: 302, headers: [("Location", other.url("/store/a.bin"))])
        }
        defer { origin.stop() }
        try writeManifest([(origin.url("/a.bin"), [], "a.bin", nil)], headers: ["Authorization": "Bearer t"])
        let result = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertEqual(
            result.stderr,
            "error: a.bin: \(origin.url("/a.bin")): HTTP 403 (the redirect to "
                + "\(other.url("/store/a.bin")) went to another origin, so the entry's headers were not sent there)\n")
        XCTAssertEqual(other.requests.map { $0.header("Authorization") }, [nil])
        let json = try directory.haul(["sync", "--json"])
        let failed = try XCTUnwrap(events(json.stdout).first { $0["event"] as? String == "failed" })
        XCTAssertEqual(
            (failed["sources"] as? [[String: Any]])?.first?["error"] as? String,
            "HTTP 403 (the redirect to \(other.url("/store/a.bin")) went to another origin, so the entry's "
                + "headers were not sent there)")
    }

    // MARK: -H for a header whose variable is unset

    func testACommandLineHeaderStandsInForAManifestHeaderWhoseVariableIsUnset() throws {
        let bytes: [UInt8] = Array("secret\n".utf8)
        let server = try LoopbackHTTPServer { request in
            request.header("Authorization") == "Bearer cli" ? .ok(bytes) : ServerResponse(status: 401)
        }
        defer { server.stop() }
        try writeManifest(
            [(server.url("/a.bin"), [], "a.bin", bytes)],
            headers: ["Authorization": "Bearer ${HAUL_TEST_UNSET_TOKEN}"])
        let refused = try directory.haul(["sync"])
        XCTAssertEqual(refused.exitCode, 3)
        XCTAssertEqual(
            refused.stderr,
            "haul.yaml:5:20: error: defaults.headers.Authorization: environment variable "
                + "HAUL_TEST_UNSET_TOKEN is not set (set it, or give the header on the command line: "
                + "-H 'Authorization: …')\n")
        let json = try directory.haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 3)
        let diagnostic = try XCTUnwrap(events(json.stdout).first { $0["event"] as? String == "diagnostic" })
        XCTAssertEqual(
            diagnostic["message"] as? String,
            "environment variable HAUL_TEST_UNSET_TOKEN is not set (set it, or "
                + "give the header on the command line: -H 'Authorization: …')")
        XCTAssertEqual(server.requests.count, 0)

        let given = try directory.haul(["sync", "-H", "authorization: Bearer cli"])
        XCTAssertEqual(given.exitCode, 0, given.stderr)
        XCTAssertEqual(given.stderr, "")
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }, ["Bearer cli"])

        // `add` reads the same manifest the same way: the -H header stands in there too.
        server.resetLog()
        let added = try directory.haul(["add", server.url("/b.bin"), "-H", "Authorization: Bearer cli"])
        XCTAssertEqual(added.exitCode, 0, added.stderr)
        XCTAssertEqual(directory.read("out/b.bin"), bytes)
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }, ["Bearer cli"])
        let refusedAdd = try directory.haul(["add", server.url("/c.bin")])
        XCTAssertEqual(refusedAdd.exitCode, 3)
        XCTAssertTrue(refusedAdd.stderr.contains("HAUL_TEST_UNSET_TOKEN is not set"), refusedAdd.stderr)
    }

    // MARK: From the cache, resumed

    func testAFileFromTheCacheIsSaidToComeFromTheCache() throws {
        let bytes: [UInt8] = Array("cached\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/a.bin": bytes])
        defer { server.stop() }
        let cache = directory.path("cache")
        try writeManifest([(server.url("/a.bin"), [], "a.bin", bytes)])
        let first = try directory.haul(["sync", "--progress", "plain", "--cache", cache])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        XCTAssertTrue(first.stdout.split(separator: "\n").contains("fetched a.bin (7 B)"), first.stdout)
        try FileManager.default.removeItem(atPath: directory.path("out"))
        server.resetLog()
        let second = try directory.haul(["sync", "--progress", "plain", "--cache", cache])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(server.requests.count, 0)
        let lines = second.stdout.split(separator: "\n")
        XCTAssertTrue(lines.contains("from the cache a.bin (7 B)"), second.stdout)
        XCTAssertFalse(second.stdout.contains("fetched a.bin"), second.stdout)
        XCTAssertTrue(lines.last?.hasPrefix("1 from the cache (7 B), 0 up to date in ") == true, second.stdout)
    }

    /// A download cut after 1 MiB goes on from there in the same run; its line and its `done` event say so.
    func testAResumedDownloadSaysFromWhichByte() throws {
        let bytes = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        let files = StaticFiles(["/big.bin": bytes])
        let script = ScriptedResponses(then: files.respond)
        let server = try LoopbackHTTPServer { script.respond(to: $0) }
        defer { server.stop() }
        try writeManifest([(server.url("/big.bin"), [], "big.bin", bytes)])
        script.enqueueFault(.closeAfter(bytes: 1 << 20), for: "/big.bin")
        let plain = try directory.haul(["sync", "--progress", "plain"])
        XCTAssertEqual(plain.exitCode, 0, plain.stderr)
        XCTAssertEqual(server.requests(path: "/big.bin").map { $0.header("Range") }, [nil, "bytes=\(1 << 20)-"])
        XCTAssertTrue(
            plain.stdout.split(separator: "\n").contains("fetched big.bin (resumed at 1.0 MiB of 4.0 MiB)"),
            plain.stdout)

        try FileManager.default.removeItem(atPath: directory.path("out/big.bin"))
        script.enqueueFault(.closeAfter(bytes: 1 << 20), for: "/big.bin")
        let json = try directory.haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 0, json.stderr)
        let done = try XCTUnwrap(events(json.stdout).first { $0["event"] as? String == "done" })
        XCTAssertEqual(done["resumed_at"] as? Int, 1 << 20)
    }
}
