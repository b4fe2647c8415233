import Foundation
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// The CLI contract, end to end: the real `haul` binary, a real loopback server, real files.
final class SyncCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func body(_ i: Int, size: Int = 4096) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }
    }

    /// Writes `haul.yaml` with one pinned entry per file: `dest` → served at `/dest`.
    private func writeManifest(
        _ entries: [(dest: String, bytes: [UInt8])], server: LoopbackHTTPServer, extra: String = "",
        header: String = ""
    ) throws {
        var yaml = "version: 1\nroot: ./out\n\(header)files:\n"
        for (dest, bytes) in entries {
            yaml +=
                "  - url: \(server.url("/" + dest))\n    dest: \(dest)\n    sha256: \(sha256(bytes))\n    size: \(bytes.count)\n"
        }
        try directory.write("haul.yaml", yaml + extra)
    }

    private func outFile(_ dest: String) -> [UInt8]? { directory.read("out/" + dest) }

    func testSyncFetchesEveryFileThenASecondSyncMakesNoRequest() throws {
        let entries = (0..<40).map { (dest: "dir\($0 % 4)/file\($0).bin", bytes: body($0)) }
        let server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: entries.map { ("/" + $0.dest, $0.bytes) }))
        defer { server.stop() }
        try writeManifest(entries, server: server)

        let first = try directory.haul(["sync", "--jobs", "8"])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        for (dest, bytes) in entries { XCTAssertEqual(outFile(dest), bytes, dest) }
        XCTAssertTrue(first.stdout.contains("Fetched 40 files"), first.stdout)
        XCTAssertEqual(server.requests.count, 40)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/tmp")
        XCTAssertEqual(leftovers, [], "no temporary file is left behind")

        server.resetLog()
        let second = try directory.haul(["sync"])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(server.requests.count, 0, "a second sync makes no request")
        XCTAssertTrue(second.stdout.contains("Nothing to do: 40 files up to date"), second.stdout)
    }

    func testCorruptedLocalFileIsReplaced() throws {
        let good = body(1)
        let server = try LoopbackHTTPServer(files: ["/a.bin": good])
        defer { server.stop() }
        try writeManifest([("a.bin", good)], server: server)
        try directory.write("out/a.bin", [UInt8](repeating: 0, count: good.count))

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2)
        let have = StreamingHasher.digest([UInt8](repeating: 0, count: good.count), algorithm: .sha256).hex
        XCTAssertEqual(
            plan.stdout,
            """
            ~ a.bin (checksum differs: have \(have.prefix(20))…, want \(sha256(good).prefix(20))…)
            Plan: 1 to replace (4.0 KiB), 0 up to date.

            """)

        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(outFile("a.bin"), good)
    }

    func testNotFoundLeavesTheOldFileAndExits1WhileOthersSucceed() throws {
        let good = body(2)
        let server = try LoopbackHTTPServer(files: ["/ok.bin": good])
        defer { server.stop() }
        let wanted = body(3)
        try writeManifest([("ok.bin", good), ("gone.bin", wanted)], server: server)
        let old: [UInt8] = Array("old content".utf8)
        try directory.write("out/gone.bin", old)

        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertEqual(outFile("gone.bin"), old, "a failed entry keeps its old content")
        XCTAssertEqual(outFile("ok.bin"), good, "one failure does not stop the others")
        XCTAssertTrue(sync.stderr.contains("error: gone.bin: \(server.url("/gone.bin")): HTTP 404"), sync.stderr)
    }

    func testWrongChecksumLeavesTheOldFileAndNamesBothDigests() throws {
        let served: [UInt8] = Array("what the server has".utf8)
        let wanted: [UInt8] = Array("what the manifest wants".utf8)
        let server = try LoopbackHTTPServer(files: ["/x.txt": served])
        defer { server.stop() }
        let sha512 = StreamingHasher.digest(wanted, algorithm: .sha512).hex
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/x.txt"))
                dest: x.txt
                checksum: sha512:\(sha512)
            """)
        let old: [UInt8] = Array("previous".utf8)
        try directory.write("out/x.txt", old)

        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertEqual(outFile("x.txt"), old)
        let actual = StreamingHasher.digest(served, algorithm: .sha512).hex
        XCTAssertTrue(
            sync.stderr.contains(
                "error: x.txt: \(server.url("/x.txt")): the server's bytes differ from the pinned checksum: "
                    + "expected sha512:\(sha512), got sha512:\(actual)"),
            sync.stderr)
    }

    func testPlanExitCodesAndPlanMakesNoRequest() throws {
        let bytes = body(4)
        let server = try LoopbackHTTPServer(files: ["/p.bin": bytes])
        defer { server.stop() }
        try writeManifest([("p.bin", bytes)], server: server)

        let pending = try directory.haul(["plan"])
        XCTAssertEqual(pending.exitCode, 2)
        XCTAssertEqual(pending.stdout, "+ p.bin (missing)\nPlan: 1 to download (4.0 KiB), 0 up to date.\n")
        let dryRun = try directory.haul(["sync", "--dry-run"])
        XCTAssertEqual(dryRun.exitCode, 0)
        XCTAssertEqual(dryRun.stdout, pending.stdout)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: directory.path + "/out"), "plan and dry-run touch nothing")

        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        let clean = try directory.haul(["plan"])
        XCTAssertEqual(clean.exitCode, 0)
        XCTAssertEqual(clean.stdout, "No changes: 1 file up to date.\n")
    }

    func testInvalidManifestExits3TouchesNothingAndMakesNoRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1]])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/a"))
                dest: a
                sha256: abc
              - url: \(server.url("/b"))
                dest: ../escape
            """)
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 3)
        XCTAssertTrue(
            result.stderr.contains("haul.yaml:6:13: error: files[0].sha256: expected 64 hex digits, found 3"),
            result.stderr)
        XCTAssertTrue(result.stderr.contains("haul.yaml:8:11: error: files[1].dest"), result.stderr)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path + "/out"))
    }

    func testVerifyHashesLocalFilesWithoutNetwork() throws {
        let bytes = body(5)
        let server = try LoopbackHTTPServer(files: ["/v.bin": bytes])
        defer { server.stop() }
        try writeManifest([("v.bin", bytes)], server: server)
        XCTAssertEqual(try directory.haul(["verify"]).exitCode, 1, "missing file")
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        server.resetLog()
        let ok = try directory.haul(["verify"])
        XCTAssertEqual(ok.exitCode, 0, ok.stdout)
        XCTAssertEqual(ok.stdout, "Verified 1 file.\n")
        try directory.write("out/v.bin", Array("tampered".utf8))
        let bad = try directory.haul(["verify"])
        XCTAssertEqual(bad.exitCode, 1)
        XCTAssertTrue(bad.stdout.contains("differs v.bin (size differs: have 8 bytes, want 4096)"), bad.stdout)
        XCTAssertEqual(server.requests.count, 0)
    }

    func testModeIsAppliedAndSecretsFromTheEnvironmentNeverAppear() throws {
        let bytes: [UInt8] = Array("#!/bin/sh\necho hi\n".utf8)
        let server = try LoopbackHTTPServer { request in
            request.path == "/tool.sh" && request.header("Authorization") == "Bearer hunter2-secret"
                ? .ok(bytes) : .status(401)
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            defaults:
              headers: { Authorization: "Bearer ${TOKEN}" }
            files:
              - url: \(server.url("/tool.sh"))
                dest: bin/tool.sh
                sha256: \(sha256(bytes))
                mode: "0750"
              - url: \(server.url("/denied"))
                dest: denied
            """)
        let result = try directory.haul(["sync", "--verbose"], environment: ["TOKEN": "hunter2-secret"])
        XCTAssertEqual(result.exitCode, 1, "the second entry answers 401")
        XCTAssertEqual(outFile("bin/tool.sh"), bytes)
        var info = stat()
        XCTAssertEqual(stat(directory.path + "/out/bin/tool.sh", &info), 0)
        XCTAssertEqual(info.st_mode & 0o7777, 0o750)
        XCTAssertFalse(result.stdout.contains("hunter2"), result.stdout)
        XCTAssertFalse(result.stderr.contains("hunter2"), result.stderr)
        XCTAssertTrue(result.stderr.contains("error: denied: \(server.url("/denied")): HTTP 401"), result.stderr)

        let missing = try directory.haul(["sync"])
        XCTAssertEqual(missing.exitCode, 3)
        XCTAssertTrue(missing.stderr.contains("environment variable TOKEN is not set"), missing.stderr)
    }

    /// A file's mode is the manifest's exactly, whatever umask haul runs under (the temporary file is created
    /// with it, and set by descriptor when the umask narrowed it).
    func testModesAreExactUnderARestrictiveUmask() throws {
        let a = body(21), b = body(22), c = body(23)
        let server = try LoopbackHTTPServer(files: ["/a": a, "/b": b, "/c": c])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: "\(server.url("/a"))", dest: a.bin, sha256: \(sha256(a)), size: 4096, mode: "0644" }
              - { url: "\(server.url("/b"))", dest: b.sh, sha256: \(sha256(b)), size: 4096, mode: "0755" }
              - { url: "\(server.url("/c"))", dest: c.key, sha256: \(sha256(c)), mode: "0600" }
            """)
        // (Sized small files get a fresh temporary file; c, unsized, a resumable partial: both ways are covered.)
        let previous = umask(0o077)  // inherited by the haul process
        let result = try directory.haul(["sync"])
        umask(previous)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        for (name, mode) in [("a.bin", 0o644), ("b.sh", 0o755), ("c.key", 0o600)] {
            var info = stat()
            XCTAssertEqual(stat(directory.path + "/out/" + name, &info), 0, name)
            XCTAssertEqual(Int(info.st_mode & 0o7777), mode, name)
        }
    }

    func testSymlinkedParentLeadingOutsideRootFailsThatEntryOnly() throws {
        let outside = try TemporaryDirectory()
        let a = body(6), b = body(7)
        let server = try LoopbackHTTPServer(files: ["/link/a.bin": a, "/b.bin": b])
        defer { server.stop() }
        try writeManifest([("link/a.bin", a), ("b.bin", b)], server: server)
        try FileManager.default.createDirectory(atPath: directory.path + "/out", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: directory.path + "/out/link", withDestinationPath: outside.path)

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertTrue(result.stderr.contains("error: link/a.bin:"), result.stderr)
        XCTAssertNil(outside.read("a.bin"), "nothing is written outside root")
        XCTAssertEqual(outFile("b.bin"), b)
    }

    /// A sibling whose path begins with root's (`out-evil` beside `out`) is outside root all the same: the rule
    /// compares whole components, not a string prefix.
    func testSymlinkedParentLeadingToASiblingThatSharesRootsPrefixIsRefused() throws {
        let a = body(8), b = body(9)
        let server = try LoopbackHTTPServer(files: ["/link/a.bin": a, "/b.bin": b])
        defer { server.stop() }
        try writeManifest([("link/a.bin", a), ("b.bin", b)], server: server)
        try FileManager.default.createDirectory(atPath: directory.path + "/out", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory.path + "/out-evil", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: directory.path + "/out/link", withDestinationPath: directory.path + "/out-evil")

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertTrue(result.stderr.contains("error: link/a.bin: "), result.stderr)
        XCTAssertTrue(
            result.stderr.contains("parent \"link\" is a symlink to \(directory.path)/out-evil, outside root"),
            result.stderr)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out-evil"), [],
            "nothing is written into the sibling")
        XCTAssertEqual(outFile("b.bin"), b)
    }

    /// An integrity value listing several tokens of its strongest algorithm accepts content matching any of them
    /// (Subresource Integrity), and only those.
    func testIntegrityWithSeveralTokensAcceptsAnyOfTheStrongest() throws {
        let served = body(10), other = body(11), weak = body(12)
        let server = try LoopbackHTTPServer(files: ["/a.bin": served, "/b.bin": served])
        defer { server.stop() }
        func token(_ bytes: [UInt8], _ algorithm: DigestAlgorithm) -> String {
            "\(algorithm.rawValue)-" + StreamingHasher.digest(bytes, algorithm: algorithm).base64
        }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: ./out
            files:
              - url: \(server.url("/a.bin"))
                dest: a.bin
                integrity: "\(token(weak, .sha256)) \(token(other, .sha384)) \(token(served, .sha384))"
              - url: \(server.url("/b.bin"))
                dest: b.bin
                integrity: "\(token(served, .sha256)) \(token(other, .sha384))"
            """)
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        XCTAssertEqual(outFile("a.bin"), served, "the second sha384 token matches")
        XCTAssertNil(outFile("b.bin"), "a sha256 token does not count beside a sha384 one")
        XCTAssertTrue(result.stderr.contains("b.bin"), result.stderr)
        XCTAssertEqual(
            try directory.haul(["plan"]).stdout.contains("a.bin"), false, "and a.bin is up to date afterwards")
    }

    func testUsageErrorsExit64AndVersionPrints() throws {
        let jobs = try directory.haul(["sync", "--jobs", "0"])
        XCTAssertEqual(jobs.exitCode, 64)
        // Like every other error line of haul's: `error:`, lower case, then the usage on stderr; nothing on stdout.
        XCTAssertTrue(
            jobs.stderr.hasPrefix(
                "error: The value '0' is invalid for '--jobs <jobs>': must be from 1 to 256\n"
                    + "Help:  --jobs <jobs>  (sync) Transfers to run at once (1-256). (default: 16)\n"
                    + "Usage: haul sync"), jobs.stderr)
        XCTAssertEqual(jobs.stdout, "")
        let unknown = try directory.haul(["frobnicate"])
        XCTAssertEqual(unknown.exitCode, 64)
        XCTAssertTrue(unknown.stderr.hasPrefix("error: Unexpected argument 'frobnicate'"), unknown.stderr)
        let help = try directory.haul(["sync", "--help"])
        XCTAssertEqual(help.exitCode, 0)
        XCTAssertTrue(help.stdout.hasPrefix("OVERVIEW: "), help.stdout)
        XCTAssertEqual(help.stderr, "")
        let version = try directory.haul(["--version"])
        XCTAssertEqual(version.exitCode, 0)
        let lines = version.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, version.stdout)
        XCTAssertTrue(lines.first?.hasPrefix("haul 0.") == true, version.stdout)
        // What a bug report needs: the libraries this binary runs with, and whether HTTP/2 is there.
        XCTAssertNotNil(
            version.stdout.firstMatch(of: /\nlibcurl \d+\.\d+\.\d+, [^\n]*(HTTP\/2 \(nghttp2\/|no HTTP\/2)/),
            version.stdout)
        XCTAssertNotNil(version.stdout.firstMatch(of: /\nlibyaml \d+\.\d+\.\d+\n$/), version.stdout)
    }

    func testSchemaCommandPrintsTheSchemaFile() throws {
        let result = try directory.haul(["schema"])
        XCTAssertEqual(result.exitCode, 0)
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let file = try String(
            contentsOf: repository.appendingPathComponent("schema/haul-manifest.schema.json"), encoding: .utf8)
        XCTAssertEqual(result.stdout.trimmingCharacters(in: .newlines), file.trimmingCharacters(in: .newlines))
    }
}

extension SyncCommandTests {
    /// An interrupted run leaves the destination alone and its partial in haul's area; the next run resumes it.
    func testAnInterruptedSyncResumesInTheNextRun() throws {
        let data = (0..<400_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let files = StaticFiles(["/big.bin": data])
        let cut = Mutex(true)
        let server = try LoopbackHTTPServer { request in
            let response = files.respond(to: request)
            return cut.withLock { $0 } ? response.with(fault: .resetAfter(bytes: 150_000)) : response
        }
        defer { server.stop() }
        try writeManifest([("big.bin", data)], server: server, header: "defaults:\n  retries: 0\n")
        let old: [UInt8] = Array("old".utf8)
        try directory.write("out/big.bin", old)

        let first = try directory.haul(["sync"])
        XCTAssertEqual(first.exitCode, 1)
        XCTAssertEqual(outFile("big.bin"), old, "the destination is never half a file")
        let partials = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/partial")
        XCTAssertEqual(partials.filter { $0.hasSuffix(".part") }.count, 1)

        cut.withLock { $0 = false }
        let second = try directory.haul(["sync"])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(outFile("big.bin"), data)
        XCTAssertEqual(server.requests.last?.header("Range"), "bytes=150000-")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/partial"), [])
    }
}

extension SyncCommandTests {
    /// Proxies come from the usual environment variables (libcurl's own handling, which haul keeps on).
    func testProxyFromTheEnvironmentIsUsedAndNoProxyBypassesIt() throws {
        let bytes: [UInt8] = Array("through the proxy".utf8)
        let origin = try LoopbackHTTPServer(files: ["/p.txt": bytes])
        defer { origin.stop() }
        let originURL = origin.url("/p.txt")
        let proxy = try LoopbackHTTPServer { request in
            request.target == originURL ? .ok(bytes) : .status(502)
        }
        defer { proxy.stop() }
        try writeManifest([("p.txt", bytes)], server: origin)

        let proxied = try directory.haul(["sync"], environment: ["http_proxy": proxy.baseURL])
        XCTAssertEqual(proxied.exitCode, 0, proxied.stderr)
        XCTAssertEqual(outFile("p.txt"), bytes)
        XCTAssertEqual(
            proxy.requests.map(\.target), [originURL], "the request went through the proxy, in absolute form")
        XCTAssertEqual(origin.requests.count, 0)

        try FileManager.default.removeItem(atPath: directory.path + "/out/p.txt")
        let direct = try directory.haul(["sync"], environment: ["http_proxy": proxy.baseURL, "no_proxy": "127.0.0.1"])
        XCTAssertEqual(direct.exitCode, 0, direct.stderr)
        XCTAssertEqual(origin.requests.count, 1, "no_proxy sends it direct")
        XCTAssertEqual(proxy.requests.count, 1)
    }
}

extension SyncCommandTests {
    /// A value from the environment in a URL stays out of every output, including libcurl's own error text.
    func testSecretsInURLsNeverAppearEvenInLibcurlErrors() throws {
        let closed = try LoopbackHTTPServer(files: [:])
        let port = String(closed.port)
        closed.stop()
        let token = "tok-\(UUID().uuidString)"
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: http://127.0.0.1:${PORT}/x?token=${TOKEN}
                dest: x
                retries: 0
            """)
        let result = try directory.haul(["sync", "--verbose"], environment: ["PORT": port, "TOKEN": token])
        XCTAssertEqual(result.exitCode, 1)
        XCTAssertTrue(result.stderr.contains("error: x: http://127.0.0.1:${PORT}/x?token=${TOKEN}: "), result.stderr)
        for output in [result.stdout, result.stderr] {
            XCTAssertFalse(output.contains(token), output)
            XCTAssertFalse(output.contains("port \(port)"), output)
            XCTAssertFalse(output.contains(":\(port)"), output)
        }
    }
}

extension SyncCommandTests {
    /// TLS is always verified: against the system store by default, against a bundle named by `--ca-file` or
    /// `HAUL_CA_FILE` for internal mirrors.
    func testTLSIsVerifiedAgainstTheCABundleFromTheFlagOrTheEnvironment() throws {
        let served = try TemporaryDirectory()
        let bytes: [UInt8] = Array("over https".utf8)
        try served.write("s.txt", bytes)
        let authority = try TestCertificateAuthority()
        let nginx = try NginxServer(root: served.path, authority: authority)
        defer { nginx.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(nginx.httpsURL("/s.txt"))
                dest: s.txt
                sha256: \(sha256(bytes))
                retries: 3
            """)

        let untrusted = try directory.haul(["sync"])
        XCTAssertEqual(untrusted.exitCode, 1)
        XCTAssertTrue(
            untrusted.stderr.contains(
                "error: s.txt: \(nginx.httpsURL("/s.txt")): the server's TLS certificate could not be verified"),
            untrusted.stderr)
        XCTAssertNil(outFile("s.txt"))

        let viaEnvironment = try directory.haul(["sync"], environment: ["HAUL_CA_FILE": authority.caCertificatePath])
        XCTAssertEqual(viaEnvironment.exitCode, 0, viaEnvironment.stderr)
        XCTAssertEqual(outFile("s.txt"), bytes)

        try FileManager.default.removeItem(atPath: directory.path + "/out/s.txt")
        let viaFlag = try directory.haul(["sync", "--ca-file", authority.caCertificatePath])
        XCTAssertEqual(viaFlag.exitCode, 0, viaFlag.stderr)
        XCTAssertEqual(outFile("s.txt"), bytes)

        let missing = try directory.haul(["sync", "--ca-file", directory.path + "/nope.pem"])
        XCTAssertEqual(missing.exitCode, 64)
        XCTAssertTrue(
            missing.stderr.contains(
                "error: CA bundle \"\(directory.path)/nope.pem\" (from --ca-file) cannot be used: no such file"),
            missing.stderr)
    }
}
