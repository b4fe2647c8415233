import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// A request's `BodyReader` sees the body in order from byte 0, once per pass, and has finished before the body it
/// read is delivered: real libcurl, a real loopback server, real temporary files.
final class BodyReaderTests: XCTestCase {
    /// Keeps every pass's bytes, and whether the pass reached the body's end.
    private final class Collector: BodyReading {
        let passes = Mutex<[(bytes: [UInt8], reachedEnd: Bool)]>([])

        func makeReader(expectedSize: Int64?) -> (any BodyReader)? { Pass(collector: self) }

        final class Pass: BodyReader {
            let collector: Collector
            init(collector: Collector) { self.collector = collector }

            func read(_ next: () -> UnsafeRawBufferPointer?) {
                var bytes: [UInt8] = []
                while let chunk = next() { bytes += chunk }
                // `next` returned nil: the end of the body, or an abandoned pass. Only a full pass is as long as
                // the body; the test tells them apart by length.
                collector.passes.withLock { $0.append((bytes, true)) }
            }
        }
    }

    private func body(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ seed &* 7 &+ ($0 >> 12)) }
    }

    private func run(
        _ url: String, _ bytes: [UInt8], reading collector: Collector, retries: Int = 0,
        in directory: TemporaryDirectory
    ) throws -> DownloadedFile {
        var request = TransferRequest(
            id: 0, sources: [TransferSource(url: url, displayURL: url)],
            expectedDigest: StreamingHasher.digest(bytes, algorithm: .sha256),
            expectedSize: nil, retries: retries, stallTimeout: 5)
        request.bodyReading = collector
        let recorder = Recorder()
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(directory.path), maxConcurrentTransfers: 1,
                retryPolicy: RetryPolicy(baseDelay: 0.01, jitter: 0))
        )
        .run([request], delegate: recorder)
        return try XCTUnwrap(try recorder.results[0]?.get())
    }

    /// A small body (which would otherwise be hashed inline) and a large one: read whole, in order, once.
    func testTheReaderSeesTheWholeBodyInOrderBeforeItIsDelivered() throws {
        for count in [1, 70_000, 9 << 20] {
            let directory = try TemporaryDirectory()
            let bytes = body(count, seed: count)
            let server = try LoopbackHTTPServer(files: ["/a": bytes])
            defer { server.stop() }
            let collector = Collector()
            let file = try run(server.url("/a"), bytes, reading: collector, in: directory)
            XCTAssertEqual(file.size, Int64(count))
            let passes = collector.passes.withLock { $0 }
            XCTAssertEqual(passes.count, 1, "\(count) bytes")
            XCTAssertTrue(passes.first?.bytes == bytes, "\(count) bytes: the reader saw exactly the body")
        }
    }

    /// An attempt cut short and retried from byte 0: the first pass ends early (its reader finds the body short),
    /// the second reads the whole body.
    func testAnAttemptThatDropsItsBytesStartsANewPass() throws {
        let directory = try TemporaryDirectory()
        let bytes = body(12 << 20, seed: 3)
        let script = ScriptedResponses(then: StaticFiles(["/a": bytes]).respond)
        script.enqueueFault(.resetAfter(bytes: 6 << 20), for: "/a")
        // No validator: the partial cannot be resumed, so the retry starts again from byte 0.
        let server = try LoopbackHTTPServer { request in
            var response = script.respond(to: request)
            response.removeHeader("ETag")
            response.removeHeader("Last-Modified")
            return response
        }
        defer { server.stop() }
        let collector = Collector()
        _ = try run(server.url("/a"), bytes, reading: collector, retries: 1, in: directory)
        let passes = collector.passes.withLock { $0 }
        XCTAssertEqual(passes.count, 2)
        XCTAssertLessThan(passes.first?.bytes.count ?? .max, bytes.count, "the first pass was abandoned short")
        XCTAssertTrue(
            passes.first.map { bytes.starts(with: $0.bytes) } ?? false, "and what it saw was the body's start")
        XCTAssertTrue(passes.last?.bytes == bytes, "the second pass read the whole body")
    }
}
