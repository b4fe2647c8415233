import Foundation
import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import XCTest

/// The real libcurl engine against a real nginx: certificate verification against a private CA, ALPN to
/// HTTP/2 with multiplexing, and redirect rules across TLS origins. The hand-written loopback server speaks
/// neither TLS nor HTTP/2, so these are the only tests that see what production servers do there.
final class TLSTransferTests: XCTestCase {
    /// What one test needs on disk and on the wire; every part is private to that test.
    private struct Fixture {
        let served: TemporaryDirectory
        let staging: TemporaryDirectory
        let authority: TestCertificateAuthority
        let server: NginxServer
        /// "/file0" ... in request order.
        let paths: [String]
        let bodies: [String: [UInt8]]
    }

    /// Sizes from 1 byte to ~120 KB, so some bodies span many HTTP/2 DATA frames and flow-control windows.
    private func makeFixture(files: Int = 1, extraLocations: String = "") throws -> Fixture {
        let served = try TemporaryDirectory(prefix: "haul-test-served")
        var bodies: [String: [UInt8]] = [:]
        var generator = SplitMix(seed: 7)
        let paths = (0..<files).map { "/file\($0)" }
        for (index, path) in paths.enumerated() {
            let body = (0..<(index * 3_001 + 1)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            bodies[path] = body
            try served.write(path, body)
        }
        let authority = try TestCertificateAuthority()
        let server = try NginxServer(root: served.path, authority: authority, extraLocations: extraLocations)
        return Fixture(
            served: served, staging: try TemporaryDirectory(prefix: "haul-test-staging"),
            authority: authority, server: server, paths: paths, bodies: bodies)
    }

    private func engine(_ fixture: Fixture, jobs: Int = 8, trustTestCA: Bool = true) -> TransferEngine {
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(fixture.staging.path), maxConcurrentTransfers: jobs,
                caFile: trustTestCA ? fixture.authority.caCertificatePath : nil,
                retryPolicy: RetryPolicy(baseDelay: 0.01, jitter: 0)))
    }

    private func request(
        _ id: Int, _ urls: [String], expecting body: [UInt8]?, retries: Int = 0,
        headers: [HTTPHeader] = []
    ) -> TransferRequest {
        TransferRequest(
            id: id, sources: urls.map { TransferSource(url: $0, displayURL: $0, headers: headers) },
            expectedDigest: body.map { StreamingHasher.digest($0, algorithm: .sha256) },
            expectedSize: body.map { Int64($0.count) }, retries: retries, stallTimeout: 5)
    }

    private func contents(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    func testManyFilesOverHTTPSAreVerifiedAndMultiplexedOverOneHTTP2Connection() throws {
        let fixture = try makeFixture(files: 40)
        defer { fixture.server.stop() }
        let recorder = Recorder()
        let requests = fixture.paths.enumerated().map { index, path in
            request(index, [fixture.server.httpsURL(path)], expecting: fixture.bodies[path])
        }
        engine(fixture, jobs: 8).run(requests, delegate: recorder)

        XCTAssertEqual(recorder.results.count, 40)
        for (index, path) in fixture.paths.enumerated() {
            let file = try XCTUnwrap(try recorder.results[index]?.get(), "transfer \(index)")
            XCTAssertEqual(contents(file.temporaryPath), fixture.bodies[path], path)
        }
        XCTAssertTrue(recorder.attemptFailures.isEmpty, "\(recorder.attemptFailures)")

        let log = fixture.server.accessLog(atLeast: 40)
        XCTAssertEqual(log.count, 40, "one request per file, no retries: \(log.map(\.uri))")
        XCTAssertEqual(Set(log.map(\.uri)), Set(fixture.paths))
        XCTAssertEqual(Set(log.map(\.protocolVersion)), ["HTTP/2.0"], "ALPN must pick HTTP/2")
        XCTAssertEqual(Set(log.map(\.status)), [200])
        XCTAssertEqual(
            Set(log.map(\.connection)).count, 1,
            "8 concurrent transfers to one origin share one multiplexed connection: \(log.map(\.connection))")
        XCTAssertEqual(log.map(\.connectionRequest).sorted(), Array(1...40))
    }

    /// `--limit-rate` pauses transfers from the write callback; over one multiplexed HTTP/2 connection a paused stream
    /// must lose no byte and hold up no other, and the whole still keeps to the rate.
    func testRateLimitedStreamsOfOneHTTP2ConnectionArriveWholeAtTheRate() throws {
        let served = try TemporaryDirectory(prefix: "haul-test-served")
        let bodies = (0..<4).map { index in (0..<(256 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) } }
        for (index, body) in bodies.enumerated() { try served.write("/big\(index)", body) }
        let authority = try TestCertificateAuthority()
        let server = try NginxServer(root: served.path, authority: authority)
        defer { server.stop() }
        let staging = try TemporaryDirectory(prefix: "haul-test-staging")
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(staging.path), maxConcurrentTransfers: 4,
                caFile: authority.caCertificatePath,
                maxBytesPerSecond: 512 << 10))
        let recorder = Recorder()
        let started = MonotonicClock.seconds()
        engine.run(
            bodies.indices.map { request($0, [server.httpsURL("/big\($0)")], expecting: bodies[$0]) },
            delegate: recorder)
        let elapsed = MonotonicClock.seconds() - started

        for (index, body) in bodies.enumerated() {
            let file = try XCTUnwrap(try recorder.results[index]?.get(), "transfer \(index)")
            XCTAssertEqual(contents(file.temporaryPath), body)
        }
        XCTAssertTrue(recorder.attemptFailures.isEmpty, "\(recorder.attemptFailures)")
        XCTAssertEqual(Set(server.accessLog(atLeast: 4).map(\.protocolVersion)), ["HTTP/2.0"])
        // 1 MiB at 512 KiB/s, less the tenth of a second the budget starts with.
        XCTAssertGreaterThan(elapsed, 1.8, "the rate limit held the run to 512 KiB/s")
    }

    func testUntrustedCertificateFailsOnceWithPeerVerificationError() throws {
        let fixture = try makeFixture()
        defer { fixture.server.stop() }
        let recorder = Recorder()
        let url = fixture.server.httpsURL("/file0")
        engine(fixture, trustTestCA: false).run(
            [request(0, [url], expecting: fixture.bodies["/file0"], retries: 3)],
            delegate: recorder)

        guard case .failure(let failure) = recorder.results[0] else {
            return XCTFail("the system store must not trust the test CA: \(String(describing: recorder.results[0]))")
        }
        XCTAssertEqual(failure.attempts.count, 1, "\(failure)")
        guard case .network(let code, let message) = failure.attempts.first?.reason else {
            return XCTFail("a TLS verification failure is client-side: \(failure)")
        }
        XCTAssertEqual(code, .peerFailedVerification, message)
        XCTAssertFalse(message.isEmpty)
        // A failed handshake never reaches nginx's access log, so the attempts are counted on the client side.
        XCTAssertEqual(recorder.attemptFailures.count, 1, "a TLS failure is permanent: retries: 3 makes no retry")
        XCTAssertNil(recorder.attemptFailures.first?.retryIn)
        XCTAssertEqual(recorder.attemptFailures.first?.failure.sourceDisplayURL, url)
        XCTAssertEqual(fixture.server.accessLog(), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fixture.staging.path), [])
    }

    func testRedirectFromHTTPSDownToHTTPIsRefused() throws {
        let fixture = try makeFixture(
            extraLocations: "location = /down { return 302 http://127.0.0.1:{HTTP_PORT}/file0; }")
        defer { fixture.server.stop() }
        let recorder = Recorder()
        engine(fixture).run(
            [
                request(
                    0, [fixture.server.httpsURL("/down")], expecting: fixture.bodies["/file0"],
                    retries: 3)
            ], delegate: recorder)

        guard case .failure(let failure) = recorder.results[0] else {
            return XCTFail("a downgrade must fail: \(String(describing: recorder.results[0]))")
        }
        XCTAssertEqual(failure.attempts.map(\.reason), [.redirectRefused(.downgrade)])
        let log = fixture.server.accessLog(atLeast: 1)
        XCTAssertEqual(log.map(\.uri), ["/down"])
        XCTAssertEqual(log.first?.status, 302)
        XCTAssertEqual(log.first?.scheme, "https")
        XCTAssertEqual(
            log.filter { $0.port == fixture.server.httpPort }, [], "nothing may reach the plain-HTTP listener")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fixture.staging.path), [])
    }

    func testAuthorizationReachesItsHTTPSOriginButNotAnotherOriginAfterARedirect() throws {
        // /same stays on https://127.0.0.1:PORT (nginx makes the Location absolute from the Host it was sent);
        // /cross leaves it for https://localhost:PORT: same server, same port, a different origin by host.
        let fixture = try makeFixture(
            extraLocations: """
                location = /same { return 302 /cross; }
                location = /cross { return 302 https://localhost:{HTTPS_PORT}/file0; }
                """)
        defer { fixture.server.stop() }
        let recorder = Recorder()
        let auth = [HTTPHeader(name: "Authorization", value: "Bearer s3cret")]
        engine(fixture).run(
            [
                request(
                    0, [fixture.server.httpsURL("/same")], expecting: fixture.bodies["/file0"],
                    headers: auth)
            ], delegate: recorder)

        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), fixture.bodies["/file0"])
        let log = fixture.server.accessLog(atLeast: 3)
        XCTAssertEqual(log.map(\.uri), ["/same", "/cross", "/file0"])
        XCTAssertEqual(log.map(\.host), ["127.0.0.1", "127.0.0.1", "localhost"])
        XCTAssertEqual(log.map(\.status), [302, 302, 200])
        XCTAssertEqual(
            log.map(\.authorization), ["Bearer s3cret", "Bearer s3cret", nil],
            "the header goes to its own origin only, never across a redirect to another one")
        XCTAssertEqual(Set(log.map(\.protocolVersion)), ["HTTP/2.0"])
    }
}
