import Foundation
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// Settings that fail say how to fix them: a proxy that wants credentials, a CA bundle that cannot be used, a
/// certificate no bundle in use trusts, and what a transfer waits for during a backoff.
final class SettingsCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func writeManifest(url: String, bytes: [UInt8], extra: String = "") throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(url)
                dest: f.bin
                sha256: \(sha256(bytes))
            \(extra)
            """)
    }

    // MARK: Proxy

    /// A loopback "proxy" that answers 407 to the credentials given: not retried, and the error says they were
    /// refused and how to give them, with the credentials that were given redacted.
    func testAProxyAskingForCredentialsSaysHowToGiveThem() throws {
        let proxy = try LoopbackHTTPServer { _ in
            .status(407, headers: [("Proxy-Authenticate", "Basic realm=\"corp\"")])
        }
        defer { proxy.stop() }
        try writeManifest(url: "http://assets.invalid/f.bin", bytes: Array("x".utf8), extra: "    retries: 3")
        let proxyURL = "http://alice:wrong-secret@127.0.0.1:\(proxy.port)"
        let sync = try directory.haul(["sync"], environment: ["http_proxy": proxyURL])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertEqual(proxy.requests.count, 1, "a 407 is not retried")
        XCTAssertEqual(proxy.requests.first?.target, "http://assets.invalid/f.bin", "it went through the proxy")
        XCTAssertTrue(
            sync.stderr.contains(
                "the proxy http://***@127.0.0.1:\(proxy.port) (from http_proxy) answered 407: it refused "
                    + "the credentials given in http_proxy; correct them there:"), sync.stderr)
        XCTAssertTrue(sync.stderr.contains("http_proxy=http://user:pass@127.0.0.1:\(proxy.port)"), sync.stderr)
        XCTAssertFalse(sync.stderr.contains("wrong-secret"), sync.stderr)
        XCTAssertFalse(sync.stderr.contains("alice"), sync.stderr)
    }

    /// The same through a tunnel: an https URL goes through the proxy with CONNECT, which the proxy answers 407.
    func testAProxyRefusingATunnelSaysHowToGiveItCredentials() throws {
        let proxy = try LoopbackHTTPServer { _ in
            .status(407, headers: [("Proxy-Authenticate", "Basic realm=\"corp\"")])
        }
        defer { proxy.stop() }
        try writeManifest(url: "https://assets.invalid/f.bin", bytes: Array("x".utf8), extra: "    retries: 3")
        let sync = try directory.haul(["sync"], environment: ["HTTPS_PROXY": "http://127.0.0.1:\(proxy.port)"])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertEqual(proxy.requests.map(\.method), ["CONNECT"], "a 407 is not retried")
        XCTAssertTrue(
            sync.stderr.contains("the proxy http://127.0.0.1:\(proxy.port) (from HTTPS_PROXY) answered 407"),
            sync.stderr)
        XCTAssertTrue(sync.stderr.contains("HTTPS_PROXY=http://user:pass@127.0.0.1:\(proxy.port)"), sync.stderr)
    }

    // MARK: CA bundle

    /// Missing, unreadable, empty or not PEM: one message form and exit 64, from `--ca-file` as from
    /// `HAUL_CA_FILE` (then `CURL_CA_BUNDLE`, then `SSL_CERT_FILE`), for `sync` as for `add`, before any request.
    func testACABundleThatCannotBeUsedIsAUsageErrorBeforeAnyRequest() throws {
        let server = try LoopbackHTTPServer(files: ["/f.bin": Array("x".utf8)])
        defer { server.stop() }
        try writeManifest(url: server.url("/f.bin"), bytes: Array("x".utf8))
        try directory.write("empty.pem", "")
        try directory.write("notpem.pem", "just some text\n")
        try directory.makeDirectory("folder.pem")
        let cases = [
            ("missing.pem", "no such file"), ("empty.pem", "the file is empty"),
            ("notpem.pem", "no PEM certificate in it"), ("folder.pem", "Is a directory"),
        ]
        for (name, why) in cases {
            let path = directory.path(name)
            let runs = [
                (try directory.haul(["sync", "--ca-file", path]), "--ca-file"),
                (try directory.haul(["sync"], environment: ["HAUL_CA_FILE": path]), "HAUL_CA_FILE"),
                (try directory.haul(["add", server.url("/f.bin"), "--print", "--ca-file", path]), "--ca-file"),
                (
                    try directory.haul(["add", server.url("/f.bin"), "--print"], environment: ["HAUL_CA_FILE": path]),
                    "HAUL_CA_FILE"
                ),
                // curl's and OpenSSL's variables, in curl's order of precedence, after haul's own.
                (
                    try directory.haul(
                        ["sync"], environment: ["CURL_CA_BUNDLE": path, "SSL_CERT_FILE": "/nonexistent/b.pem"]),
                    "CURL_CA_BUNDLE"
                ),
                (
                    try directory.haul(["sync"], environment: ["SSL_CERT_FILE": path, "CURL_CA_BUNDLE": ""]),
                    "SSL_CERT_FILE"
                ),
                (
                    try directory.haul(
                        ["sync"], environment: ["HAUL_CA_FILE": path, "CURL_CA_BUNDLE": "/nonexistent/c.pem"]),
                    "HAUL_CA_FILE"
                ),
            ]
            for (result, origin) in runs {
                XCTAssertEqual(result.exitCode, 64, "\(name) \(origin): \(result.stderr)")
                XCTAssertEqual(
                    result.stderr,
                    "error: CA bundle \"\(path)\" (from \(origin)) cannot be used: \(why)"
                        + (why == "no PEM certificate in it" ? " (no \"-----BEGIN CERTIFICATE-----\" line)" : "")
                        + "; give a readable file of PEM certificates\n")
                XCTAssertEqual(result.stdout, "")
            }
        }
        XCTAssertEqual(server.requests.count, 0)
    }

    /// A certificate the system store does not trust: the error names the way to trust a private CA.
    func testATLSVerificationFailureNamesTheWayToTrustAPrivateCA() throws {
        let served = try TemporaryDirectory()
        let bytes: [UInt8] = Array("over https".utf8)
        try served.write("s.txt", bytes)
        let authority = try TestCertificateAuthority()
        let nginx = try NginxServer(root: served.path, authority: authority)
        defer { nginx.stop() }
        try writeManifest(url: nginx.httpsURL("/s.txt"), bytes: bytes)
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: f.bin: \(nginx.httpsURL("/s.txt")): the server's TLS certificate could not be verified"),
            sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains("to trust a private CA, pass --ca-file FILE or set HAUL_CA_FILE"), sync.stderr)
        let json = try directory.haul(["sync", "--json"])
        XCTAssertTrue(
            json.stdout.contains("to trust a private CA, pass --ca-file FILE or set HAUL_CA_FILE"), json.stdout)
    }

    // MARK: Waiting

    /// During a backoff the heartbeat of a log says what the transfer waits for, not "0 B, 0 B/s".
    func testTheHeartbeatDuringABackoffSaysWhatItWaitsFor() throws {
        let bytes = [UInt8](repeating: 5, count: 1000)
        let calls = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            calls.withLock { n in
                n += 1; return n
            } == 1 ? .status(503, headers: [("Retry-After", "7")]) : .ok(bytes)
        }
        defer { server.stop() }
        try writeManifest(url: server.url("/f.bin"), bytes: bytes, extra: "    retries: 2")
        let sync = try directory.haul(["sync"], environment: ["CI": "true"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        let beats = sync.stderr.split(separator: "\n").filter { $0.hasPrefix("still fetching ") }
        XCTAssertFalse(beats.isEmpty, sync.stderr)
        for beat in beats {
            XCTAssertTrue(
                beat.hasPrefix("still fetching f.bin: retry 1 of 2 for \(server.url("/f.bin")) in "), String(beat))
            XCTAssertTrue(beat.hasSuffix(" s"), String(beat))
        }
    }
}
