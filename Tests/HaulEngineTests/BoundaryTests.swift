import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// Limits at their exact edges, where an off-by-one would hide: the redirect hop limit and the size cap.
final class BoundaryTests: XCTestCase {
    private var temporary: TemporaryDirectory!

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func run(
        _ request: TransferRequest, maxBodyBytes: Int64 = EngineConfiguration.defaultMaxBodyBytes
    ) -> Recorder {
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path), retryPolicy: RetryPolicy(baseDelay: 0.001, jitter: 0),
                maxBodyBytes: maxBodyBytes))
        let recorder = Recorder()
        engine.run([request], delegate: recorder)
        return recorder
    }

    private func request(_ url: String, pinned: [UInt8]? = nil, size: Int64? = nil) -> TransferRequest {
        TransferRequest(
            id: 0, sources: [TransferSource(url: url, displayURL: url)],
            expectedDigest: pinned.map { StreamingHasher.digest($0, algorithm: .sha256) },
            expectedSize: size, retries: 0, stallTimeout: 5)
    }

    /// A chain of 50 redirects: 10 are followed, the 11th is refused; at most 11 requests reach the server.
    func testARedirectChainIsRefusedAfterTenHops() throws {
        let server = try LoopbackHTTPServer { request in
            let hop = Int(request.path.dropFirst()) ?? 0
            return hop < 50 ? .redirect(to: "/\(hop + 1)") : .ok("end")
        }
        defer { server.stop() }
        let recorder = run(request(server.url("/0")))
        guard case .failure(let failure) = recorder.results[0] else {
            return XCTFail("\(String(describing: recorder.results[0]))")
        }
        XCTAssertEqual(failure.attempts.map(\.reason), [.redirectRefused(.tooMany(limit: 10))])
        XCTAssertEqual(server.requests.map(\.path), (0...10).map { "/\($0)" })
    }

    /// Exactly the limit is fine; one byte more fails as too large, with or without an announced length, and for
    /// a pinned size as for `--max-file-size`.
    func testTheSizeCapHoldsAtItsExactBoundary() throws {
        let limit = 4096
        for announced in [true, false] {
            let server = try LoopbackHTTPServer { request in
                let count = request.path == "/over" ? limit + 1 : limit
                let response = ServerResponse.ok([UInt8](repeating: 7, count: count))
                return announced ? response : response.with(fault: .noContentLength)
            }
            defer { server.stop() }
            let what = announced ? "with Content-Length" : "without Content-Length"

            let atLimit = run(request(server.url("/exact")), maxBodyBytes: Int64(limit))
            XCTAssertEqual(try atLimit.results[0]?.get().size, Int64(limit), what)
            let over = run(request(server.url("/over")), maxBodyBytes: Int64(limit))
            guard case .failure(let failure) = over.results[0] else { return XCTFail(what) }
            XCTAssertEqual(failure.attempts.map(\.reason), [.tooLarge(limit: Int64(limit))], what)

            let pinned = [UInt8](repeating: 7, count: limit)
            let pinnedAtLimit = run(request(server.url("/exact"), pinned: pinned, size: Int64(limit)))
            XCTAssertEqual(try pinnedAtLimit.results[0]?.get().size, Int64(limit), what)
            let pinnedOver = run(request(server.url("/over"), pinned: pinned, size: Int64(limit)))
            guard case .failure(let pinnedFailure) = pinnedOver.results[0] else { return XCTFail(what) }
            XCTAssertEqual(pinnedFailure.attempts.map(\.reason), [.tooLarge(limit: Int64(limit))], what)
        }
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: temporary.path).filter {
                // The successful runs leave their verified files for their owner; failures leave nothing.
                (try? FileManager.default.attributesOfItem(atPath: temporary.path + "/" + $0)[.size] as? Int) != limit
            }, [])
    }
}
