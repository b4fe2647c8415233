import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// The same URL for several destinations: fetched once, judged for each request against its own pin, each given a
/// file of its own. Counted by the server.
final class SharedDownloadTests: XCTestCase {
    private var temporary: TemporaryDirectory!
    private let bytes: [UInt8] = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13) }

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func engine() -> TransferEngine {
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path),
                retryPolicy: RetryPolicy(baseDelay: 0.001, jitter: 0)))
    }

    private func request(
        _ id: Int, _ urls: [String], pinned: [UInt8]?, mode: UInt32? = nil, retries: Int = 0
    ) -> TransferRequest {
        TransferRequest(
            id: id, sources: urls.map { TransferSource(url: $0, displayURL: $0) },
            expectedDigest: pinned.map { StreamingHasher.digest($0, algorithm: .sha256) },
            expectedSize: pinned.map { Int64($0.count) }, retries: retries, stallTimeout: 5, fileMode: mode)
    }

    private func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { [UInt8]($0) } }

    func testOneRequestServesEveryRequestThatSharesTheURL() throws {
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        var leader = request(0, [server.url("/f")], pinned: bytes)
        leader.sharers = (1..<200).map {
            request($0, [server.url("/f")], pinned: $0 % 2 == 0 ? bytes : nil, mode: 0o640)
        }
        let recorder = Recorder()
        engine().run([leader], delegate: recorder)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(recorder.started.count, 200, "every request's first request went out (the shared one)")
        var paths: Set<String> = []
        for id in 0..<200 {
            let file = try XCTUnwrap(try recorder.results[id]?.get(), "request \(id)")
            XCTAssertEqual(contents(file.temporaryPath), bytes)
            XCTAssertEqual(file.sourceDisplayURL, server.url("/f"))
            paths.insert(file.temporaryPath)
            if id > 0 {
                var info = stat()
                XCTAssertEqual(lstat(file.temporaryPath, &info), 0)
                XCTAssertEqual(info.st_mode & 0o7777, 0o640, "created with its own mode")
                XCTAssertTrue(file.hasFileMode)
                XCTAssertEqual(file.validators != nil, id % 2 == 1, "validators for unpinned files only")
            }
        }
        XCTAssertEqual(paths.count, 200, "a file of its own each")
        XCTAssertTrue(recorder.endedTwice.isEmpty)
    }

    /// A request whose pin the shared bytes do not match fails on its own, or tries its own mirror; the bytes
    /// that were right for the others are theirs.
    func testASharerWhoseChecksumDoesNotMatchGoesOnAlone() throws {
        let other: [UInt8] = Array("another version".utf8)
        let server = try LoopbackHTTPServer(files: ["/f": bytes, "/other": other])
        defer { server.stop() }
        var leader = request(0, [server.url("/f")], pinned: bytes)
        leader.sharers = [
            request(1, [server.url("/f")], pinned: bytes),
            request(2, [server.url("/f")], pinned: other),
            request(3, [server.url("/f"), server.url("/other")], pinned: other),
        ]
        let recorder = Recorder()
        engine().run([leader], delegate: recorder)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[1]?.get()).temporaryPath), bytes)
        guard case .failure(let failure) = recorder.results[2] else {
            return XCTFail("\(String(describing: recorder.results[2]))")
        }
        guard case .sizeMismatch = failure.attempts.last?.reason else { return XCTFail("\(failure)") }
        let mirrored = try XCTUnwrap(try recorder.results[3]?.get())
        XCTAssertEqual(mirrored.sourceDisplayURL, server.url("/other"))
        XCTAssertEqual(contents(mirrored.temporaryPath), other)
        XCTAssertEqual(server.requests.map(\.path).sorted(), ["/f", "/other"], "the shared URL is not asked again")
    }

    /// Bytes the leader's own pin rejects may be exactly what a sharer pinned.
    func testBytesWrongForTheLeaderStillServeTheSharersTheyMatch() throws {
        let stale: [UInt8] = Array("what the leader pinned long ago".utf8)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        var leader = request(0, [server.url("/f")], pinned: stale)
        leader.sharers = [request(1, [server.url("/f")], pinned: bytes)]
        let recorder = Recorder()
        engine().run([leader], delegate: recorder)
        guard case .failure = recorder.results[0] else { return XCTFail("the leader's pin does not match") }
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[1]?.get()).temporaryPath), bytes)
        XCTAssertEqual(server.requests.count, 1)
    }

    /// A shared URL that fails fails for all, still with one request each time it is asked, not one per sharer.
    func testASharedURLThatFailsIsAskedOnceForAll() throws {
        let server = try LoopbackHTTPServer { _ in .status(503) }
        defer { server.stop() }
        var leader = request(0, [server.url("/f")], pinned: bytes, retries: 2)
        leader.sharers = (1..<50).map { request($0, [server.url("/f")], pinned: bytes, retries: 2) }
        let recorder = Recorder()
        engine().run([leader], delegate: recorder)
        XCTAssertEqual(server.requests.count, 3, "retries: 2 means 3 requests, for the whole group")
        for id in 0..<50 {
            guard case .failure(let failure) = recorder.results[id] else { return XCTFail("request \(id)") }
            XCTAssertEqual(failure.lastFailurePerSource.map(\.reason), [.httpStatus(503)], "request \(id)")
        }
    }
}
