import Foundation
import Glibc
import HaulTestSupport
import XCTest

/// `lists:` as a nightly mirror uses it: the built `haul` against a loopback server, with lists signed here by
/// minisign. A verified list pins its entries; one that fails pins nothing, says so, and leaves every file as it was.
final class SignedListSyncTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var files: StaticFiles!
    private var server: LoopbackHTTPServer!
    private var minisign = ""

    override func setUpWithError() throws {
        minisign = try Capability.tool("minisign")
        directory = try TemporaryDirectory()
        try sign(["-G", "-W", "-p", "keys/release.pub", "-s", "keys/release.key"], makingKeys: true)
        try sign(["-G", "-W", "-p", "keys/other.pub", "-s", "keys/other.key"])
        files = StaticFiles()
        server = try LoopbackHTTPServer(files: files)
    }

    override func tearDown() {
        server?.stop()
        server = nil
    }

    private func sign(_ arguments: [String], makingKeys: Bool = false) throws {
        if makingKeys {
            try FileManager.default.createDirectory(atPath: directory.path("keys"), withIntermediateDirectories: true)
        }
        let result = try ProcessRunner.run(minisign, arguments, currentDirectory: directory.path, timeout: 60)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
    }

    /// Serves `/dist/NAME` for each file and a list of them, signed by `key`.
    private func publish(_ release: [String: String], signedBy key: String = "keys/release.key") throws {
        var list = ""
        for (name, content) in release.sorted(by: { $0.key < $1.key }) {
            files.set("/dist/\(name)", Array(content.utf8))
            list += "\(sha256(Array(content.utf8)))  \(name)\n"
        }
        try directory.write("SHA256SUMS", list)
        try sign(["-S", "-s", key, "-m", "SHA256SUMS"])
        files.set("/dist/SHA256SUMS", try XCTUnwrap(directory.read("SHA256SUMS")))
        files.set("/dist/SHA256SUMS.minisig", try XCTUnwrap(directory.read("SHA256SUMS.minisig")))
    }

    private func writeManifest() throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: mirror
            lists:
              nightly:
                url: \(server.url("/dist/SHA256SUMS"))
                keys: [keys/release.pub]
            files:
              - url: \(server.url("/dist/tool.tar.gz"))
                dest: tool.tar.gz
                from: nightly
              - url: \(server.url("/dist/notes.txt"))
                dest: notes.txt
                from: nightly
            """)
    }

    private func mirrored(_ name: String) -> String? {
        directory.read("mirror/\(name)").map { String(decoding: $0, as: UTF8.self) }
    }

    func testAVerifiedListPinsItsEntriesAndANewOneReplacesThem() throws {
        try publish(["tool.tar.gz": "tool v1\n", "notes.txt": "notes\n"])
        try writeManifest()
        let first = try directory.haul(["sync", "--require-checksums"])
        XCTAssertEqual(
            first.exitCode, 0, "a signed list pins its entries, for --require-checksums too: \(first.stderr)")
        XCTAssertEqual(mirrored("tool.tar.gz"), "tool v1\n")
        XCTAssertEqual(mirrored("notes.txt"), "notes\n")

        let unchanged = try directory.haul(["plan"])
        XCTAssertEqual(unchanged.exitCode, 0, unchanged.stdout + unchanged.stderr)

        try publish(["tool.tar.gz": "tool v2\n", "notes.txt": "notes\n"])
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, plan.stdout + plan.stderr)
        XCTAssertTrue(plan.stdout.contains("~ tool.tar.gz ("), plan.stdout)
        XCTAssertTrue(plan.stdout.contains("its list pins a new version"), plan.stdout)
        XCTAssertFalse(plan.stdout.contains("notes.txt"), "an entry the new list did not change is kept")
        let json = try directory.haul(["plan", "--json"])
        XCTAssertTrue(json.stdout.contains("\"dest\":\"tool.tar.gz\",\"action\":\"replace\""), json.stdout)
        XCTAssertTrue(json.stdout.contains("\"list_changed\":true"), json.stdout)

        let second = try directory.haul(["sync"])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(mirrored("tool.tar.gz"), "tool v2\n")
        XCTAssertTrue(second.stdout.contains("list \"nightly\": a new version, verified (minisign"), second.stdout)
    }

    /// A list changed after it was signed: nothing of it is trusted, the files stay as they were, exit 1, and the
    /// error names the list and why.
    func testAListThatFailsItsSignatureLeavesEveryFileAsItWas() throws {
        try publish(["tool.tar.gz": "tool v1\n", "notes.txt": "notes\n"])
        try writeManifest()
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)

        files.set("/dist/tool.tar.gz", Array("evil\n".utf8))
        files.set("/dist/SHA256SUMS", Array("\(sha256(Array("evil\n".utf8)))  tool.tar.gz\n".utf8))
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1, result.stdout + result.stderr)
        XCTAssertEqual(mirrored("tool.tar.gz"), "tool v1\n", "the old file is kept")
        XCTAssertEqual(mirrored("notes.txt"), "notes\n")
        XCTAssertTrue(
            result.stderr.contains(
                "error: list \"nightly\" (\(server.url("/dist/SHA256SUMS"))): its signature "
                    + "(\(server.url("/dist/SHA256SUMS.minisig"))) does not check out: the list does not match its "
                    + "signature: the list (or the signature) changed after signing"),
            result.stderr)
        XCTAssertTrue(
            result.stderr.contains("tool.tar.gz: its checksum list \"nightly\" could not be verified this run"),
            result.stderr)

        let annotated = try directory.haul(["sync", "--annotations", "github"])
        XCTAssertEqual(annotated.exitCode, 1, annotated.stderr)
        XCTAssertTrue(
            (annotated.stdout + annotated.stderr).contains(",line=4,col=3::list \"nightly\" ("),
            "an annotation on the list's line:\n\(annotated.stdout)\(annotated.stderr)")

        let json = try directory.haul(["plan", "--json"])
        XCTAssertEqual(json.exitCode, 2, json.stdout)
        let event = try XCTUnwrap(json.stdout.split(separator: "\n").first)
        XCTAssertTrue(event.hasPrefix("{\"event\":\"list\",\"name\":\"nightly\","), String(event))
        XCTAssertTrue(event.contains("\"verified\":false"), String(event))
    }

    /// Pruning with a list that fails: its entries are still listed, so nothing of theirs is pruned; once the list
    /// checks out again and drops a file from the manifest, that file is pruned as any pinned entry's would be.
    func testAFailingListPrunesNothingOfItsEntries() throws {
        try publish(["tool.tar.gz": "tool v1\n", "notes.txt": "notes\n"])
        try writeManifest()
        XCTAssertEqual(try directory.haul(["sync", "--prune"]).exitCode, 0)

        // A new list (a new ETag: the kept copy no longer answers for it) whose signature is cut short.
        let signature = try XCTUnwrap(files.contents("/dist/SHA256SUMS.minisig"))
        files.set("/dist/SHA256SUMS", Array("\(sha256(Array("tool v2\n".utf8)))  tool.tar.gz\n".utf8))
        files.set("/dist/SHA256SUMS.minisig", Array(signature.prefix(60)))
        let refused = try directory.haul(["sync", "--prune", "--verbose"])
        XCTAssertEqual(refused.exitCode, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("the signature is truncated or garbled"), refused.stderr)
        XCTAssertEqual(mirrored("tool.tar.gz"), "tool v1\n")
        XCTAssertEqual(mirrored("notes.txt"), "notes\n")

        try publish(["tool.tar.gz": "tool v1\n", "notes.txt": "notes\n"])
        let manifest = try XCTUnwrap(directory.read("haul.yaml"))
        let shorter = String(decoding: manifest, as: UTF8.self).components(separatedBy: "  - url: ").dropLast()
            .joined(separator: "  - url: ")
        try directory.write("haul.yaml", shorter)
        let pruned = try directory.haul(["sync", "--prune", "--verbose"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stderr)
        XCTAssertNil(mirrored("notes.txt"), "no longer listed: pruned")
        XCTAssertEqual(mirrored("tool.tar.gz"), "tool v1\n")
        XCTAssertTrue(
            pruned.stdout.contains("list \"nightly\": verified (minisign, key ")
                && pruned.stdout.contains("trusted comment:"),
            "--verbose says which key verified the list, and minisign's trusted comment:\n\(pruned.stdout)")
    }

    /// Signed by a key the manifest does not trust: the same refusal, naming the other key.
    func testAListSignedByAnotherKeyIsRefused() throws {
        try publish(["tool.tar.gz": "tool v1\n", "notes.txt": "notes\n"], signedBy: "keys/other.key")
        try writeManifest()
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        XCTAssertNil(mirrored("tool.tar.gz"), "nothing is fetched by a list not trusted")
        XCTAssertTrue(result.stderr.contains("signed by another key"), result.stderr)
        XCTAssertFalse(server.requests.contains { $0.path == "/dist/tool.tar.gz" }, "no file fetched")
    }

    /// The second sync asks for the list with its ETag: a 304, no signature fetched again, nothing changed.
    func testAnUnchangedListCostsOneConditionalRequest() throws {
        try publish(["tool.tar.gz": "tool v1\n", "notes.txt": "notes\n"])
        try writeManifest()
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let before = server.requests.count
        let again = try directory.haul(["sync"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        let requests = server.requests.dropFirst(before)
        XCTAssertEqual(requests.map(\.path), ["/dist/SHA256SUMS"], "the list only, asked conditionally")
        XCTAssertNotNil(requests.first?.header("If-None-Match"))
    }
}
