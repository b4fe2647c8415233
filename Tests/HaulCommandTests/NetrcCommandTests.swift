import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// `--netrc` and `netrc: true`: each request carries the login its own host has in the .netrc file, nothing
/// crosses to another origin on a redirect, and no credential is ever printed.
final class NetrcCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let bytes: [UInt8] = Array("asset bytes".utf8)
    private var digest: String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }
    /// What a request logged in as alice:"s3cret pass" carries.
    private let basic = "Basic " + Data("alice:s3cret pass".utf8).base64EncodedString()

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func manifest(url: String, mirrors: [String] = [], netrcKey: Bool = false) throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            \(netrcKey ? "netrc: true" : "")
            files:
              - url: \(url)
                mirrors: [\(mirrors.joined(separator: ", "))]
                dest: asset.bin
                sha256: \(digest)
            """)
    }

    private func netrc(_ text: String, name: String = "credentials.netrc") throws -> String {
        try directory.write(name, text)
        return directory.path + "/" + name
    }

    func testTheHostsLoginReachesItAndNotAnotherOriginAfterARedirect() throws {
        let target = try LoopbackHTTPServer(files: ["/asset.bin": bytes])
        defer { target.stop() }
        let origin = try LoopbackHTTPServer { _ in .redirect(to: target.url("/asset.bin")) }
        defer { origin.stop() }
        try manifest(url: origin.url("/asset.bin"))
        let file = try netrc(
            """
            # CI's credentials
            machine example.invalid login bob password other
            machine 127.0.0.1
              login alice
              password "s3cret pass"
            """)
        let sync = try directory.haul(["sync", "--netrc", "--verbose"], environment: ["NETRC": file])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/asset.bin"), bytes)
        XCTAssertEqual(origin.requests.map { $0.header("Authorization") }, [basic])
        // Same host, another port: another origin. The redirect carries nothing there.
        XCTAssertEqual(target.requests.count, 1)
        XCTAssertNil(target.requests.first?.header("Authorization"), "credentials crossed a redirect to another origin")
        for output in [sync.stdout, sync.stderr] {
            XCTAssertFalse(output.contains("s3cret"), output)
            XCTAssertFalse(output.contains(String(basic.dropFirst(6))), output)
        }
    }

    func testTheManifestsKeyTurnsItOnAndAnotherHostsLoginIsNeverSent() throws {
        let server = try LoopbackHTTPServer(files: ["/asset.bin": bytes])
        defer { server.stop() }
        try manifest(url: server.url("/asset.bin"))
        let onlyOthers = try netrc("machine example.invalid login bob password other\n", name: "others.netrc")
        // Not asked for: no credentials, even with a matching file.
        let plain = try netrc("default login alice password \"s3cret pass\"\n")
        XCTAssertEqual(try directory.haul(["sync"], environment: ["NETRC": plain]).exitCode, 0)
        XCTAssertNil(server.requests.last?.header("Authorization"))

        try FileManager.default.removeItem(atPath: directory.path("out"))
        try manifest(url: server.url("/asset.bin"), netrcKey: true)
        XCTAssertEqual(try directory.haul(["sync"], environment: ["NETRC": onlyOthers]).exitCode, 0)
        XCTAssertNil(server.requests.last?.header("Authorization"), "another host's login was sent")

        try FileManager.default.removeItem(atPath: directory.path("out"))
        XCTAssertEqual(try directory.haul(["sync"], environment: ["NETRC": plain]).exitCode, 0)
        XCTAssertEqual(server.requests.last?.header("Authorization"), basic, "default applies to every other host")
    }

    func testAnEntrysOwnAuthorizationWinsAndAFailedLoginPrintsNoSecret() throws {
        let server = try LoopbackHTTPServer { _ in
            .status(401, headers: [("WWW-Authenticate", "Basic realm=\"assets\"")])
        }
        defer { server.stop() }
        try manifest(url: server.url("/asset.bin"))
        let file = try netrc("machine 127.0.0.1 login alice password \"s3cret pass\"\n")
        let failed = try directory.haul(["sync", "--netrc", "--verbose"], environment: ["NETRC": file])
        XCTAssertEqual(failed.exitCode, 1, failed.stderr)
        XCTAssertEqual(server.requests.first?.header("Authorization"), basic)
        for output in [failed.stdout, failed.stderr] {
            XCTAssertFalse(output.contains("s3cret"), output)
            XCTAssertFalse(output.contains(String(basic.dropFirst(6))), output)
        }
        XCTAssertTrue(failed.stderr.contains("401"), failed.stderr)

        server.resetLog()
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/asset.bin"))
                headers: {Authorization: "Bearer token"}
                dest: asset.bin
                sha256: \(digest)
            """)
        XCTAssertEqual(try directory.haul(["sync", "--netrc"], environment: ["NETRC": file]).exitCode, 1)
        XCTAssertEqual(server.requests.map { $0.header("Authorization") }.first, "Bearer token")
    }

    func testAMissingOrMalformedNetrcStopsBeforeAnyRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/asset.bin": bytes])
        defer { server.stop() }
        try manifest(url: server.url("/asset.bin"))
        let missing = try directory.haul(["sync", "--netrc"], environment: ["NETRC": directory.path + "/absent"])
        XCTAssertEqual(missing.exitCode, 64, missing.stderr)
        XCTAssertTrue(
            missing.stderr.contains(
                "\(directory.path)/absent: error: cannot read the .netrc file (NETRC): No such file"),
            missing.stderr)

        let malformed = try netrc("machine 127.0.0.1 login alice\n  password s3cret pass\n")
        let refused = try directory.haul(["sync", "--netrc"], environment: ["NETRC": malformed])
        XCTAssertEqual(refused.exitCode, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("credentials.netrc:2:19: error:"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("double quotes"), refused.stderr)
        XCTAssertFalse(refused.stderr.contains("s3cret") || refused.stderr.contains("pass\""), refused.stderr)
        XCTAssertTrue(server.requests.isEmpty)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path + "/out/asset.bin"))

        // Without NETRC, a missing ~/.netrc is no credentials, not an error.
        let none = try directory.haul(["sync", "--netrc"], environment: ["HOME": directory.path + "/nowhere"])
        XCTAssertEqual(none.exitCode, 0, none.stderr)
        XCTAssertNil(server.requests.last?.header("Authorization"))
    }
}
