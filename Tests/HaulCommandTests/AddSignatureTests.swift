import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add --from-sums LIST --trusted-key KEY` (not `--key`: that is `--cert`'s private key): the list's signature, made here by the real tools (minisign, ssh-keygen,
/// gpg) and served beside it, is checked before a digest of the list is read; a refused one writes nothing.
final class AddSignatureTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var keys: TemporaryDirectory!
    private var gnupg: [String: String] = [:]
    private let tool: [UInt8] = Array("tool binary\n".utf8)
    private let notes: [UInt8] = Array("release notes\n".utf8)
    private let original = "version: 1\nroot: out\nfiles: []\n"

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        keys = try TemporaryDirectory(prefix: "haul-keys")
    }

    override func tearDown() {
        if !gnupg.isEmpty { _ = try? ProcessRunner.run("gpgconf", ["--kill", "gpg-agent"], environment: gnupg) }
    }

    private func hex(_ bytes: [UInt8]) -> String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    private var sums: String { "\(hex(tool))  tool-linux.tar.gz\n\(hex(notes))  NOTES.txt\n" }

    private var manifestText: String { directory.read("haul.yaml").map { String(decoding: $0, as: UTF8.self) } ?? "" }

    /// Runs a signing tool in the keys' folder; fails the test unless it exits 0.
    @discardableResult
    private func run(
        _ name: String, _ arguments: [String], environment: [String: String] = [:]
    ) throws
        -> ProcessResult
    {
        let result = try ProcessRunner.run(
            try Capability.tool(name), arguments, environment: environment, currentDirectory: keys.path, timeout: 60)
        guard result.exitCode == 0 else {
            XCTFail("\(name) \(arguments.joined(separator: " ")) exited \(result.exitCode): \(result.stderr)")
            throw CancellationError()
        }
        return result
    }

    private func keyFile(_ name: String) throws -> [UInt8] { try XCTUnwrap(keys.read(name), "\(name) was not made") }

    /// A minisign key pair `name.pub`, `name.key`; the public key's line (`RW…`) and its number as minisign prints it.
    private func minisignKey(_ name: String) throws -> (key: String, id: String) {
        try run("minisign", ["-G", "-W", "-p", "\(name).pub", "-s", "\(name).key"])
        let lines = String(decoding: try keyFile("\(name).pub"), as: UTF8.self).split(separator: "\n")
        let id = try XCTUnwrap(lines.first?.split(separator: " ").last.map(String.init))
        return (String(lines[1]), id)
    }

    /// `text` written as `name` in the keys' folder and signed there by minisign's key `key`: the signature's bytes.
    private func minisign(
        _ text: String, as name: String, by key: String, comment: String = "haul 2.0"
    ) throws
        -> [UInt8]
    {
        try keys.write(name, text)
        try run("minisign", ["-S", "-s", "\(key).key", "-m", name, "-t", comment])
        return try keyFile("\(name).minisig")
    }

    private func server(_ files: [String: [UInt8]]) throws -> LoopbackHTTPServer {
        var served = ["/v2/tool-linux.tar.gz": tool, "/v2/NOTES.txt": notes]
        for (name, bytes) in files { served["/v2/" + name] = bytes }
        return try LoopbackHTTPServer(files: served)
    }

    func testAGoodMinisignSignatureFoundByAutoPinsTheEntriesBelowWhereTheyCameFrom() throws {
        let (key, _) = try minisignKey("release")
        let signature = try minisign(sums, as: "SHA256SUMS", by: "release", comment: "haul 2.0 release")
        let server = try server(["SHA256SUMS": Array(sums.utf8), "SHA256SUMS.minisig": signature])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        let add = try directory.haul([
            "add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", key, "--verbose",
        ])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/v2/SHA256SUMS", "/v2/SHA256SUMS.minisig"])
        XCTAssertTrue(add.stdout.contains("Trusted comment: haul 2.0 release"), add.stdout)
        XCTAssertEqual(
            manifestText,
            """
            version: 1
            root: out
            files:
              # from \(server.url("/v2/SHA256SUMS")), signature \(server.url("/v2/SHA256SUMS.minisig")) (minisign), \
            key \(key)
              - url: \(server.url("/v2/tool-linux.tar.gz"))
                dest: tool-linux.tar.gz
                sha256: \(hex(tool))
              - url: \(server.url("/v2/NOTES.txt"))
                dest: NOTES.txt
                sha256: \(hex(notes))

            """)

        // Without --verbose, no trusted comment.
        let again = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", key])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertFalse(again.stdout.contains("Trusted comment"), again.stdout)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/NOTES.txt"), notes)
    }

    func testAnSSHSignatureIsFoundAsSigAndAnExplicitSignatureURLIsFetchedAlone() throws {
        try run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "release@haul.invalid", "-f", "ssh"])
        try keys.write("SHA256SUMS", sums)
        try run("ssh-keygen", ["-Y", "sign", "-f", "ssh", "-n", "file", "SHA256SUMS"])
        let signature = try keyFile("SHA256SUMS.sig")
        let server = try server([
            "SHA256SUMS": Array(sums.utf8), "SHA256SUMS.sig": signature, "signatures/sums.ssh": signature,
        ])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        // The key as a file.
        let found = try directory.haul([
            "add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", keys.path("ssh.pub"),
        ])
        XCTAssertEqual(found.exitCode, 0, found.stderr)
        XCTAssertEqual(
            server.requests.map(\.path), ["/v2/SHA256SUMS", "/v2/SHA256SUMS.minisig", "/v2/SHA256SUMS.sig"])
        XCTAssertTrue(
            manifestText.contains(
                "  # from \(server.url("/v2/SHA256SUMS")), signature \(server.url("/v2/SHA256SUMS.sig")) (SSH), key "
                    + keys.path("ssh.pub") + "\n  - url: \(server.url("/v2/tool-linux.tar.gz"))\n"), manifestText)

        // The key inline; the signature where --signature says, and nowhere else.
        let line = String(decoding: try keyFile("ssh.pub"), as: UTF8.self).trimmingCharacters(in: .newlines)
        let requestsBefore = server.requests.count
        let explicit = try directory.haul([
            "add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", line, "--signature",
            server.url("/v2/signatures/sums.ssh"), "--manifest", "other.yaml",
        ])
        XCTAssertEqual(explicit.exitCode, 0, explicit.stderr)
        XCTAssertEqual(
            server.requests.dropFirst(requestsBefore).map(\.path), ["/v2/SHA256SUMS", "/v2/signatures/sums.ssh"])
        let other = String(decoding: directory.read("other.yaml") ?? [], as: UTF8.self)
        XCTAssertTrue(other.contains("signature \(server.url("/v2/signatures/sums.ssh")) (SSH), key \(line)"), other)
        XCTAssertTrue(other.contains("sha256: \(hex(notes))"), other)
    }

    func testAListChangedAfterSigningIsRefusedAndNothingIsWritten() throws {
        let (key, _) = try minisignKey("release")
        let signature = try minisign(sums, as: "SHA256SUMS", by: "release")
        let changed = sums.replacingOccurrences(of: hex(tool), with: hex(notes))
        let server = try server(["SHA256SUMS": Array(changed.utf8), "SHA256SUMS.minisig": signature])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", key])
        XCTAssertEqual(add.exitCode, 1, add.stderr)
        XCTAssertEqual(
            add.stderr,
            "error: \(server.url("/v2/SHA256SUMS.minisig")): the signature of \(server.url("/v2/SHA256SUMS")) is "
                + "refused: the list does not match its signature: the list (or the signature) changed after signing; "
                + "haul.yaml was not modified\n")
        XCTAssertEqual(manifestText, original)
        XCTAssertFalse(directory.exists("out"), "nothing is placed")

        // --json: the same refusal as the command's error event, and the summary's exit status.
        let json = try directory.haul([
            "add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", key, "--json",
        ])
        XCTAssertEqual(json.exitCode, 1, json.stderr)
        let events = json.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(
            events.contains { $0.contains("\"event\":\"error\"") && $0.contains("does not match its signature") },
            json.stdout)
        XCTAssertTrue(events.last?.contains("\"exit_status\":1") ?? false, json.stdout)
        XCTAssertEqual(manifestText, original)
    }

    func testASignatureByAnotherKeyIsRefusedNamingTheSigner() throws {
        let (trusted, trustedID) = try minisignKey("release")
        _ = try minisignKey("stranger")
        let strangerID = try minisignKey("stranger2").id
        let signature = try minisign(sums, as: "SHA256SUMS", by: "stranger2")
        let server = try server(["SHA256SUMS": Array(sums.utf8), "SHA256SUMS.minisig": signature])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        let add = try directory.haul([
            "add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", trusted, "--trusted-key",
            keys.path("stranger.pub"),
        ])
        XCTAssertEqual(add.exitCode, 1, add.stderr)
        XCTAssertTrue(
            add.stderr.contains(
                "the signature of \(server.url("/v2/SHA256SUMS")) is refused: it is signed by another key "
                    + "(\(strangerID)), not by the key trusted (\(trustedID)); haul.yaml was not modified\n"),
            add.stderr)
        XCTAssertEqual(manifestText, original)
    }

    func testATruncatedSignatureIsRefusedAsGarbled() throws {
        let (key, _) = try minisignKey("release")
        let signature = try minisign(sums, as: "SHA256SUMS", by: "release")
        let server = try server([
            "SHA256SUMS": Array(sums.utf8), "SHA256SUMS.minisig": Array(signature.prefix(signature.count / 2)),
        ])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", key])
        XCTAssertEqual(add.exitCode, 1, add.stderr)
        XCTAssertTrue(
            add.stderr.hasPrefix(
                "error: \(server.url("/v2/SHA256SUMS.minisig")): the signature of \(server.url("/v2/SHA256SUMS")) "
                    + "is refused: the signature is truncated or garbled: "), add.stderr)
        XCTAssertEqual(manifestText, original)
    }

    func testNoSignatureAtAnyAutoURLNamesTheFourURLsTried() throws {
        let (key, _) = try minisignKey("release")
        let server = try server(["SHA256SUMS": Array(sums.utf8)])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", key])
        XCTAssertEqual(add.exitCode, 1, add.stderr)
        let tried = [".minisig", ".sig", ".asc", ".gpg"].map { server.url("/v2/SHA256SUMS" + $0) }
        XCTAssertEqual(
            server.requests.map(\.path),
            ["/v2/SHA256SUMS"] + [".minisig", ".sig", ".asc", ".gpg"].map { "/v2/SHA256SUMS" + $0 })
        XCTAssertTrue(
            add.stderr.hasPrefix(
                "error: \(server.url("/v2/SHA256SUMS")): no signature found at \(tried.joined(separator: ", ")) "
                    + "(each answered 404 or 410); haul.yaml was not modified\n"), add.stderr)
        XCTAssertEqual(manifestText, original)
    }

    func testAClearSignedListIsReadOnlyAsFarAsItIsSigned() throws {
        _ = try Capability.tool("gpg")
        _ = try Capability.tool("gpgv")
        try FileManager.default.createDirectory(atPath: keys.path("gnupg"), withIntermediateDirectories: true)
        _ = chmod(keys.path("gnupg"), 0o700)
        gnupg = ["GNUPGHOME": keys.path("gnupg")]
        func gpg(_ arguments: [String]) throws {
            try run("gpg", ["--batch", "--quiet", "--yes", "--passphrase", ""] + arguments, environment: gnupg)
        }
        try gpg(["--quick-gen-key", "release <release@haul.invalid>", "ed25519", "sign", "never"])
        try gpg(["--output", "release.gpg", "--export", "release@haul.invalid"])
        try keys.write("SHA256SUMS", sums)
        try gpg(["--local-user", "release@haul.invalid", "--clearsign", "--output", "SHA256SUMS.asc", "SHA256SUMS"])
        let evil: [UInt8] = Array("not the release\n".utf8)
        // A line added after the signed part: anyone could, and it must never be read.
        let served = try keyFile("SHA256SUMS.asc") + Array("\(hex(evil))  evil.sh\n".utf8)
        let server = try server(["SHA256SUMS": served])
        defer { server.stop() }
        try directory.write("haul.yaml", original)

        let add = try directory.haul([
            "add", "--from-sums", server.url("/v2/SHA256SUMS"), "--trusted-key", keys.path("release.gpg"),
        ])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(server.requests.map(\.path), ["/v2/SHA256SUMS"], "a clear-signed list has no other signature")
        XCTAssertEqual(
            manifestText,
            """
            version: 1
            root: out
            files:
              # from \(server.url("/v2/SHA256SUMS")), clear-signed (OpenPGP), key \(keys.path("release.gpg"))
              - url: \(server.url("/v2/tool-linux.tar.gz"))
                dest: tool-linux.tar.gz
                sha256: \(hex(tool))
              - url: \(server.url("/v2/NOTES.txt"))
                dest: NOTES.txt
                sha256: \(hex(notes))

            """)
    }

    func testSignatureAndKeyWithoutWhatTheyNeedAreUsageErrors() throws {
        try directory.write("haul.yaml", original)
        let noKey = try directory.haul([
            "add", "--from-sums", "https://example.invalid/SHA256SUMS", "--signature", "auto",
        ])
        XCTAssertEqual(noKey.exitCode, 64, noKey.stderr)
        XCTAssertTrue(
            noKey.stderr.contains("--signature names the list's signature: give the --trusted-key"), noKey.stderr)

        let noList = try directory.haul(["add", "https://example.invalid/tool", "--trusted-key", "RWQ"])
        XCTAssertEqual(noList.exitCode, 64, noList.stderr)
        XCTAssertTrue(noList.stderr.contains("--trusted-key and --signature check the signature of a --from-sums list"))

        let missing = try directory.haul([
            "add", "--from-sums", "https://example.invalid/SHA256SUMS", "--trusted-key", "keys/release.pub",
        ])
        XCTAssertEqual(missing.exitCode, 64, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("--trusted-key \"keys/release.pub\": no such key file"), missing.stderr)
        XCTAssertEqual(manifestText, original)
    }
}
