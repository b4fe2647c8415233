import Glibc
import HaulTestSupport
import XCTest

/// `--proxy`, `--noproxy`, `--connect-timeout`, `--retry-on-http` and `--cert`/`--key` as a curl user types them,
/// against loopback servers; and a proxy that fails named as the proxy, not the origin.
final class ConnectionOptionsTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// One unpinned entry, no retries unless `retries` says.
    private func manifest(_ url: String, dest: String = "a.bin", retries: Int = 0) throws {
        try directory.write(
            "haul.yaml", "version: 1\nroot: out\nfiles:\n  - url: \(url)\n    dest: \(dest)\n    retries: \(retries)\n")
    }

    func testTheProxyOptionWinsOverTheEnvironmentAndNoproxyGoesDirect() throws {
        let origin = try LoopbackHTTPServer(files: ["/a.bin": Array("direct\n".utf8)])
        defer { origin.stop() }
        let proxy = try LoopbackHTTPServer { request in
            request.target == origin.url("/a.bin") ? .ok(Array("via the proxy\n".utf8)) : .notFound
        }
        defer { proxy.stop() }
        let dead = try RefusingPort()
        try manifest(origin.url("/a.bin"))
        let environment = ["http_proxy": dead.url(""), "no_proxy": "example.com"]

        let proxied = try directory.haul(["sync", "--proxy", proxy.url("")], environment: environment)
        XCTAssertEqual(proxied.exitCode, 0, proxied.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), Array("via the proxy\n".utf8))
        XCTAssertEqual(proxy.requests.map(\.target), [origin.url("/a.bin")])
        XCTAssertTrue(origin.requests.isEmpty)

        try manifest(origin.url("/a.bin"), dest: "b.bin")
        let direct = try directory.haul(
            ["sync", "--proxy", proxy.url(""), "--noproxy", "example.com, 127.0.0.1"],
            environment: environment)
        XCTAssertEqual(direct.exitCode, 0, direct.stderr)
        XCTAssertEqual(directory.read("out/b.bin"), Array("direct\n".utf8))
        XCTAssertEqual(proxy.requests.count, 1, "no second request through the proxy")
    }

    /// A proxy nobody listens on is named, from where it was set, with its password hidden; the origin is not blamed.
    func testAProxyThatCannotBeReachedIsNamedAsTheProxy() throws {
        let origin = try LoopbackHTTPServer(files: ["/a.bin": Array("x".utf8)])
        defer { origin.stop() }
        let dead = try RefusingPort()
        try manifest(origin.url("/a.bin"))
        let proxyURL = "http://alice:s3cret@127.0.0.1:\(dead.port)"
        let sync = try directory.haul(["sync", "--proxy", proxyURL])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: a.bin: \(origin.url("/a.bin")): the proxy http://***@127.0.0.1:\(dead.port) "
                    + "(from --proxy) could not be reached (refused, or no route to it)"), sync.stderr)
        XCTAssertFalse((sync.stdout + sync.stderr).contains("s3cret"))
        XCTAssertTrue(origin.requests.isEmpty)

        let fromEnvironment = try directory.haul(["sync"], environment: ["http_proxy": dead.url("")])
        XCTAssertEqual(fromEnvironment.exitCode, 1, fromEnvironment.stderr)
        XCTAssertTrue(
            fromEnvironment.stderr.contains("the proxy \(dead.url("")) (from http_proxy) could not be reached"),
            fromEnvironment.stderr)
    }

    /// A proxy that will not open a tunnel to an https origin answers its CONNECT; that answer is the proxy's.
    func testAProxyThatRefusesTheTunnelIsNamedAsTheProxy() throws {
        let proxy = try LoopbackHTTPServer { request in request.method == "CONNECT" ? .status(403) : .notFound }
        defer { proxy.stop() }
        try manifest("https://127.0.0.1:1/a.bin")
        let sync = try directory.haul(["sync", "--proxy", proxy.url("")])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: a.bin: https://127.0.0.1:1/a.bin: the proxy \(proxy.url("")) (from --proxy) "
                    + "answered 403 to CONNECT"), sync.stderr)
        XCTAssertEqual(proxy.requests.map(\.method), ["CONNECT"], "a 403 is not retried")
    }

    /// A 407 to credentials that were given says they were refused, not that some are wanted.
    func testAProxyThatRefusesTheCredentialsGivenSaysSo() throws {
        let proxy = try LoopbackHTTPServer { _ in
            .status(407, headers: [("Proxy-Authenticate", "Basic realm=\"proxy\"")])
        }
        defer { proxy.stop() }
        try manifest("http://127.0.0.1:1/a.bin")
        let sync = try directory.haul(["sync", "--proxy", "http://alice:wrong@127.0.0.1:\(proxy.port)"])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertTrue(
            sync.stderr.contains(
                "the proxy http://***@127.0.0.1:\(proxy.port) (from --proxy) answered 407: it refused "
                    + "the credentials given in --proxy"), sync.stderr)
        XCTAssertFalse(sync.stderr.contains("wrong"), sync.stderr)
        XCTAssertNotNil(proxy.requests.first?.header("Proxy-Authorization"), "the credentials were sent")

        let without = try directory.haul(["sync", "--proxy", proxy.url("")])
        XCTAssertTrue(
            without.stderr.contains(
                "(from --proxy) answered 407: it wants credentials; give them in the proxy's URL: "
                    + "--proxy http://user:pass@127.0.0.1:\(proxy.port)"), without.stderr)
    }

    /// The connection phase (here a TLS handshake nobody answers) is bound by --connect-timeout; a slow body after
    /// it is not.
    func testTheConnectTimeoutBindsTheConnectionOnly() throws {
        let silent = try SilentListener()
        try manifest("https://127.0.0.1:\(silent.port)/a.bin")
        let stuck = try directory.haul(["sync", "--connect-timeout", "1", "--timeout", "60s"])
        XCTAssertEqual(stuck.exitCode, 1, stuck.stderr)
        XCTAssertTrue(
            stuck.stderr.contains("error: a.bin: https://127.0.0.1:\(silent.port)/a.bin: could not connect within 1 s"),
            stuck.stderr)

        let bytes = [UInt8](repeating: 3, count: 300)
        let slow = try LoopbackHTTPServer { _ in
            ServerResponse.ok(bytes).with(fault: .trickle(bytesPerChunk: 50, interval: 0.3))
        }
        defer { slow.stop() }
        try manifest(slow.url("/a.bin"))
        let sync = try directory.haul(["sync", "--connect-timeout", "0.5", "--timeout", "30s"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
    }

    /// A status named by --retry-on-http is retried with backoff as a 503 is; without it, a 404 is final.
    func testAStatusNamedIsRetried() throws {
        let bytes = Array("published\n".utf8)
        let script = ScriptedResponses { _ in .ok(bytes) }
        script.enqueue([.status(404)])
        let server = try LoopbackHTTPServer(handler: script.respond)
        defer { server.stop() }
        try manifest(server.url("/a.bin"), retries: 2)
        let sync = try directory.haul(["sync", "--retry-on-http", "400-404,429"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        XCTAssertEqual(server.requests.count, 2)

        let plainScript = ScriptedResponses { _ in .ok(bytes) }
        plainScript.enqueue([.status(404)])
        let plain = try LoopbackHTTPServer(handler: plainScript.respond)
        defer { plain.stop() }
        try manifest(plain.url("/b.bin"), dest: "b.bin", retries: 2)
        let once = try directory.haul(["sync"])
        XCTAssertEqual(once.exitCode, 1, once.stderr)
        XCTAssertEqual(plain.requests.count, 1)

        // The manifest's retry_on: does as much for its entries.
        let manifestScript = ScriptedResponses { _ in .ok(bytes) }
        manifestScript.enqueue([.status(404)])
        let fromManifest = try LoopbackHTTPServer(handler: manifestScript.respond)
        defer { fromManifest.stop() }
        try directory.write(
            "haul.yaml",
            "version: 1\nroot: out\ndefaults: {retry_on: 404}\nfiles:\n"
                + "  - {url: \(fromManifest.url("/c.bin")), dest: c.bin, retries: 2}\n")
        let retried = try directory.haul(["sync"])
        XCTAssertEqual(retried.exitCode, 0, retried.stderr)
        XCTAssertEqual(directory.read("out/c.bin"), bytes)
        XCTAssertEqual(fromManifest.requests.count, 2)

        let bad = try directory.haul(["sync", "--retry-on-http", "404,6000"])
        XCTAssertEqual(bad.exitCode, 64, bad.stderr)
        XCTAssertTrue(
            bad.stderr.hasPrefix(
                "error: The value '404,6000' is invalid for '--retry-on-http <codes>': expected HTTP "
                    + "statuses from 100 to 599, comma-separated, each alone or as a range such as "
                    + "500-504, found \"6000\"\n"), bad.stderr)
    }

    /// A certificate or key that cannot be read is refused before any request, naming the file.
    func testAnUnreadableClientCertificateIsRefusedUpFront() throws {
        let server = try LoopbackHTTPServer(files: ["/a.bin": Array("x".utf8)])
        defer { server.stop() }
        try manifest(server.url("/a.bin"))
        let missing = try directory.haul(["sync", "--cert", "client.pem"])
        XCTAssertEqual(missing.exitCode, 64, missing.stderr)
        XCTAssertEqual(
            missing.stderr,
            "error: client certificate \"client.pem\" (from --cert) cannot be used: no such file; "
                + "give a readable PEM file\n")
        try directory.write("client.pem", "-----BEGIN CERTIFICATE-----\n")
        let key = try directory.haul(["sync", "--cert", "client.pem", "--key", "nowhere/client.key"])
        XCTAssertEqual(key.exitCode, 64, key.stderr)
        XCTAssertTrue(
            key.stderr.hasPrefix("error: private key \"nowhere/client.key\" (from --key) cannot be used: no such file"),
            key.stderr)
        XCTAssertTrue(server.requests.isEmpty)
    }

    /// Against an nginx that verifies clients (`ssl_verify_client on`): with --cert and --key the sync succeeds;
    /// without, it fails naming the URL and saying that the server wants a client certificate.
    func testAClientCertificateOpensAServerThatVerifiesClients() throws {
        let authority = try TestCertificateAuthority()
        let client = try authority.issueClientCertificate()
        let served = try TemporaryDirectory(prefix: "haul-test-served")
        chmod(served.path, 0o755)
        let bytes = Array("for clients with a certificate\n".utf8)
        try served.write("a.bin", bytes)
        let nginx = try ConfiguredNginx { port, folder in
            """
            \(geteuid() == 0 ? "user root;" : "")
            master_process on;
            worker_processes 1;
            pid "\(folder)/nginx.pid";
            error_log "\(folder)/error.log" notice;
            events { worker_connections 64; }
            http {
                access_log off;
                client_body_temp_path "\(folder)/body";
                proxy_temp_path "\(folder)/proxy";
                fastcgi_temp_path "\(folder)/fastcgi";
                uwsgi_temp_path "\(folder)/uwsgi";
                scgi_temp_path "\(folder)/scgi";
                server {
                    listen 127.0.0.1:\(port) ssl;
                    ssl_certificate "\(authority.serverCertificatePath)";
                    ssl_certificate_key "\(authority.serverKeyPath)";
                    ssl_client_certificate "\(authority.caCertificatePath)";
                    ssl_verify_client on;
                    root "\(served.path)";
                    location / { }
                }
            }

            """
        }
        defer { nginx.stop() }
        let url = "https://127.0.0.1:\(nginx.port)/a.bin"
        try manifest(url)

        let without = try directory.haul(["sync", "--ca-file", authority.caCertificatePath])
        XCTAssertEqual(without.exitCode, 1, without.stderr)
        // nginx finishes the handshake and answers 400 ("No required SSL certificate was sent"): said in haul's words.
        XCTAssertTrue(
            without.stderr.contains(
                "error: a.bin: \(url): the server wants a client certificate (mutual TLS); give "
                    + "one with --cert (and --key)"), without.stderr)
        XCTAssertFalse(directory.exists("out/a.bin"))

        let strangers = try TestCertificateAuthority()
        let stranger = try strangers.issueClientCertificate()
        let untrusted = try directory.haul([
            "sync", "--ca-file", authority.caCertificatePath, "--cert", stranger.certificate,
            "--key", stranger.key,
        ])
        XCTAssertEqual(untrusted.exitCode, 1, untrusted.stderr)
        XCTAssertTrue(
            untrusted.stderr.contains(
                "error: a.bin: \(url): the server refused the client certificate it was given (--cert, or the manifest's cert:)"
            ),
            untrusted.stderr)

        let with = try directory.haul([
            "sync", "--ca-file", authority.caCertificatePath, "--cert", client.certificate,
            "--key", client.key,
        ])
        XCTAssertEqual(with.exitCode, 0, with.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
    }

    /// A server that ends the TLS handshake for want of a client certificate (OpenSSL's `s_server -Verify`, as Go
    /// and Envoy do) is said to want one; with one it signed, the same server serves.
    func testAServerThatEndsTheHandshakeForACertificateSaysItWantsOne() throws {
        let authority = try TestCertificateAuthority()
        let client = try authority.issueClientCertificate()
        let openssl = try ExternalTool.locate("openssl", package: "openssl")
        let port = try RefusingPort().port  // released at once, for s_server to bind
        let server = try BackgroundProcess(
            openssl,
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", authority.serverCertificatePath, "-key",
                authority.serverKeyPath,
                "-CAfile", authority.caCertificatePath, "-Verify", "1", "-tls1_3", "-www",
            ], currentDirectory: directory.path, outputPath: directory.path("s_server.log"))
        defer { server.send(SIGKILL); _ = server.waitForExit() }
        XCTAssertEqual(server.wait(until: { server.output.contains("ACCEPT") }), .conditionMet, server.output)
        let url = "https://127.0.0.1:\(port)/a.bin"
        try manifest(url)

        let without = try directory.haul(["sync", "--ca-file", authority.caCertificatePath])
        XCTAssertEqual(without.exitCode, 1, without.stderr)
        XCTAssertTrue(
            without.stderr.contains(
                "error: a.bin: \(url): the server wants a client certificate (mutual TLS); give one "
                    + "with --cert (and --key)"), without.stderr)

        let with = try directory.haul([
            "sync", "--ca-file", authority.caCertificatePath, "--cert", client.certificate,
            "--key", client.key,
        ])
        XCTAssertEqual(with.exitCode, 0, with.stderr)
        XCTAssertTrue(directory.exists("out/a.bin"))

        // The manifest's cert: and key:, relative to its folder, for the entry's url.
        try directory.makeDirectory("m/certs")
        try directory.write(
            "m/certs/client.pem", [UInt8](try XCTUnwrap(FileManager.default.contents(atPath: client.certificate))))
        try directory.write(
            "m/certs/client.key", [UInt8](try XCTUnwrap(FileManager.default.contents(atPath: client.key))))
        try directory.write(
            "m/haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(url)
                dest: a.bin
                retries: 0
                cert: certs/client.pem
                key: certs/client.key

            """)
        let fromManifest = try directory.haul(["sync", "m/haul.yaml", "--ca-file", authority.caCertificatePath])
        XCTAssertEqual(fromManifest.exitCode, 0, fromManifest.stderr)
        XCTAssertTrue(directory.exists("m/out/a.bin"))

        // A mirror's own cert: and key:, for that mirror alone: the url (refusing) has none, the mirror serves.
        let dead = try RefusingPort()
        try directory.write(
            "m/haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(dead.url("/a.bin"))
                dest: b.bin
                retries: 0
                mirrors:
                  - url: \(url)
                    cert: certs/client.pem
                    key: certs/client.key

            """)
        let fromMirror = try directory.haul(["sync", "m/haul.yaml", "--ca-file", authority.caCertificatePath])
        XCTAssertEqual(fromMirror.exitCode, 0, fromMirror.stderr)
        XCTAssertTrue(directory.exists("m/out/b.bin"))
    }

    /// A manifest's cert or key that cannot be read refuses the manifest (exit 3) at its place, naming the file.
    func testAManifestsUnreadableCertificateIsRefusedWhereItStands() throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: https://127.0.0.1:1/a.bin
                dest: a.bin
                cert: certs/missing.pem
              - url: https://127.0.0.1:1/b.bin
                dest: b.bin
                key: b.key

            """)
        try directory.write("b.key", "-----BEGIN PRIVATE KEY-----\n")
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 3, sync.stderr)
        XCTAssertEqual(
            sync.stderr,
            """
            haul.yaml:5:11: error: files[0].cert: cannot read "\(directory.path("certs/missing.pem"))": no such file
            haul.yaml:8:5: error: files[1].key: a key needs its certificate: give cert as well

            """)
    }
}
