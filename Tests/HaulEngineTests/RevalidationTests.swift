import HaulEngine
import HaulTestSupport
import XCTest

/// Conditional requests for unpinned files: the validators a download reports, what a revalidation sends, and
/// that a 304 writes nothing while a 200 is an ordinary download.
final class RevalidationTests: XCTestCase {
    private var temporary: TemporaryDirectory!

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func run(_ sources: [TransferSource]) -> Recorder {
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path),
                retryPolicy: RetryPolicy(baseDelay: 0.01, jitter: 0)))
        let recorder = Recorder()
        engine.run(
            [
                TransferRequest(
                    id: 0, sources: sources, expectedDigest: nil, expectedSize: nil, retries: 0,
                    stallTimeout: 5)
            ], delegate: recorder)
        return recorder
    }

    func testADownloadReportsTheValidatorsItsSourceSent() throws {
        let files = StaticFiles(["/data.csv": Array("a,b\n".utf8)])
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let url = server.url("/data.csv")
        let file = try XCTUnwrap(try run([TransferSource(url: url, displayURL: url)]).results[0]?.get())
        XCTAssertEqual(
            file.validators,
            HTTPValidators(etag: files.etag("/data.csv"), lastModified: files.lastModified("/data.csv")))
        XCTAssertEqual(file.sourceIndex, 0)
        XCTAssertNil(server.requests[0].header("If-None-Match"))
    }

    func testAnUnchangedFileAnswers304AndNothingIsWritten() throws {
        let files = StaticFiles(["/data.csv": Array("a,b\n".utf8)])
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let url = server.url("/data.csv")
        let validators = HTTPValidators(etag: files.etag("/data.csv"), lastModified: files.lastModified("/data.csv"))
        let recorder = run([TransferSource(url: url, displayURL: "shown", conditional: validators)])
        XCTAssertEqual(recorder.notModified[0], "shown")
        XCTAssertNil(recorder.results[0])
        XCTAssertEqual(server.requests.map { $0.header("If-None-Match") }, [files.etag("/data.csv")])
        XCTAssertEqual(server.requests.map { $0.header("If-Modified-Since") }, [files.lastModified("/data.csv")])
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: temporary.path), [], "no temporary file is left")
    }

    func testAChangedFileIsDownloadedWithItsNewValidators() throws {
        let files = StaticFiles(["/data.csv": Array("old\n".utf8)])
        let stale = HTTPValidators(etag: files.etag("/data.csv"), lastModified: files.lastModified("/data.csv"))
        files.set("/data.csv", Array("new\n".utf8))
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let url = server.url("/data.csv")
        let recorder = run([TransferSource(url: url, displayURL: url, conditional: stale)])
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(
            FileManager.default.contents(atPath: file.temporaryPath).map { [UInt8]($0) }, Array("new\n".utf8))
        XCTAssertEqual(file.validators?.etag, files.etag("/data.csv"))
        XCTAssertTrue(recorder.notModified.isEmpty)
    }

    func testValidatorsGoOnlyToTheSourceTheyBelongTo() throws {
        let files = StaticFiles(["/mirror.csv": Array("m\n".utf8)])
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let validators = HTTPValidators(etag: "\"primary-tag\"", lastModified: nil)
        let recorder = run([
            TransferSource(url: server.url("/gone.csv"), displayURL: "primary", conditional: validators),
            TransferSource(url: server.url("/mirror.csv"), displayURL: "mirror"),
        ])
        XCTAssertEqual(try recorder.results[0]?.get().sourceDisplayURL, "mirror")
        XCTAssertEqual(try recorder.results[0]?.get().sourceIndex, 1)
        XCTAssertEqual(server.requests.map { $0.header("If-None-Match") }, ["\"primary-tag\"", nil])
    }

    func testA304ToAnUnconditionalRequestIsAFailureNotAFile() throws {
        let server = try LoopbackHTTPServer { _ in .status(304) }
        defer { server.stop() }
        let url = server.url("/x")
        guard case .failure(let failure) = run([TransferSource(url: url, displayURL: url)]).results[0] else {
            return XCTFail("expected a failure")
        }
        XCTAssertEqual(failure.attempts.map(\.reason), [.httpStatus(304)])
    }
}
