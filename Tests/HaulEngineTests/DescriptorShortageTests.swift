import Foundation
import Glibc
import HaulDigest
import HaulEngine
import HaulFileSystem
import HaulTestSupport
import XCTest

/// Out of file descriptors (EMFILE) is a matter of waiting: a transfer that finds none for its file or its socket
/// waits for another to give its own back, and no request fails for it. The server is nginx, in a process of its
/// own, so that only the engine feels the limit.
final class DescriptorShortageTests: XCTestCase {
    func testTransfersThatFindNoDescriptorWaitForOneAndAllLand() throws {
        let served = try TemporaryDirectory()
        let bodies = (0..<60).map { index in
            Array("file \(index)\n".utf8) + [UInt8](repeating: UInt8(index), count: 3000)
        }
        for (index, body) in bodies.enumerated() { try served.write("f\(index)", body) }
        let authority: TestCertificateAuthority
        let nginx: NginxServer
        do {
            authority = try TestCertificateAuthority()
            nginx = try NginxServer(root: served.path, authority: authority)
        } catch {
            throw Capability.unavailable("nginx is needed to serve from another process: \(error)")
        }
        defer { nginx.stop() }
        let staging = try TemporaryDirectory()
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(staging.path), maxConcurrentTransfers: 12, maxConnectionsPerHost: 12,
                loops: 2))
        let requests = bodies.enumerated().map { index, body in
            TransferRequest(
                id: index, sources: [TransferSource(url: nginx.httpURL("/f\(index)"), displayURL: "f\(index)")],
                expectedDigest: StreamingHasher.digest(body, algorithm: .sha256), expectedSize: Int64(body.count),
                retries: 0, stallTimeout: 30)
        }

        // Room for a few descriptors more than are open now: 12 transfers at once want two each.
        var saved = rlimit()
        XCTAssertEqual(getrlimit(RLIMIT_NOFILE_RESOURCE, &saved), 0)
        var tight = saved
        tight.rlim_cur = rlim_t(DescriptorLimit.raised().inUse + 8)
        XCTAssertEqual(setrlimit(RLIMIT_NOFILE_RESOURCE, &tight), 0)
        let recorder = Recorder()
        engine.run(requests, delegate: recorder)
        XCTAssertEqual(setrlimit(RLIMIT_NOFILE_RESOURCE, &saved), 0)

        XCTAssertEqual(recorder.results.count, bodies.count)
        for (index, body) in bodies.enumerated() {
            let file = try XCTUnwrap(try recorder.results[index]?.get(), "f\(index)")
            XCTAssertEqual(FileManager.default.contents(atPath: file.temporaryPath).map { Array($0) }, body)
        }
        XCTAssertEqual(recorder.attemptFailures.count, 0, "waiting for a descriptor is not a failed attempt")
    }
}

private let RLIMIT_NOFILE_RESOURCE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
