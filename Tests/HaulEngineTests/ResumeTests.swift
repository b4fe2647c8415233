import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// Resume, against a server with real Range / If-Range / ETag semantics and injected faults.
final class ResumeTests: XCTestCase {
    private var temporary: TemporaryDirectory!
    private var partials: String { temporary.path + "/partial" }

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
        try temporary.makeDirectory("tmp")
        try temporary.makeDirectory("partial")
    }

    private func engine() -> TransferEngine {
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path + "/tmp"),
                retryPolicy: RetryPolicy(baseDelay: 0.001, jitter: 0),
                partialDirectory: heldOpen(partials)))
    }

    private func body(_ seed: UInt64, count: Int = 300_000) -> [UInt8] {
        var generator = SplitMix(seed: seed)
        return (0..<count / 8).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
    }

    private func fetch(_ url: String, pinned: [UInt8]?, retries: Int = 0) -> Recorder {
        let recorder = Recorder()
        engine().run(
            [
                TransferRequest(
                    id: 0, sources: [TransferSource(url: url, displayURL: url)],
                    expectedDigest: pinned.map { StreamingHasher.digest($0, algorithm: .sha256) },
                    expectedSize: pinned.map { Int64($0.count) }, retries: retries, stallTimeout: 5)
            ],
            delegate: recorder)
        return recorder
    }

    private func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { [UInt8]($0) } }

    /// A server that serves `files` properly but cuts the first `cuts` bodies after `cutAt` bytes.
    private func server(_ files: StaticFiles, cuts: Int, cutAt: Int) throws -> LoopbackHTTPServer {
        let served = Mutex(0)
        return try LoopbackHTTPServer { request in
            let n = served.withLock { n in
                n += 1; return n
            }
            let response = files.respond(to: request)
            return n <= cuts ? response.with(fault: .closeAfter(bytes: cutAt)) : response
        }
    }

    func testCutTransferResumesInTheSameRunWithRangeAndIfRange() throws {
        let data = body(1)
        let files = StaticFiles(["/f": data])
        let server = try server(files, cuts: 1, cutAt: 100_000)
        defer { server.stop() }
        let recorder = fetch(server.url("/f"), pinned: data, retries: 1)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), data)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertNil(server.requests[0].header("Range"))
        XCTAssertEqual(server.requests[1].header("Range"), "bytes=100000-")
        XCTAssertEqual(server.requests[1].header("If-Range"), files.etag("/f"))
        XCTAssertTrue(
            file.temporaryPath.hasPrefix(temporary.path + "/tmp/"), "the verified file gets a name of its own")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: partials), [],
            "the digest-named partial and its metadata are gone once the file is verified")
    }

    func testInterruptedPartialIsKeptAndTheNextRunResumesIt() throws {
        let data = body(2)
        let files = StaticFiles(["/f": data])
        let server = try server(files, cuts: 1, cutAt: 120_000)
        defer { server.stop() }
        let secretURL = server.url("/f") + "?token=hunter2"

        guard case .failure = fetch(secretURL, pinned: data).results[0] else { return XCTFail("the first run is cut") }
        let partial = partials + "/sha256-\(StreamingHasher.digest(data, algorithm: .sha256).hex).part"
        XCTAssertEqual(contents(partial)?.count, 120_000, "the partial keeps what arrived")
        let metadata = String(decoding: try XCTUnwrap(contents(partial + ".meta")), as: UTF8.self)
        XCTAssertTrue(metadata.contains(try XCTUnwrap(files.etag("/f"))))
        XCTAssertFalse(metadata.contains("hunter2"), "URLs (which may carry secrets) are not written to disk")

        let second = fetch(secretURL, pinned: data)
        let file = try XCTUnwrap(try second.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), data)
        XCTAssertEqual(server.requests.last?.header("Range"), "bytes=120000-")
        XCTAssertTrue(second.attemptFailures.isEmpty)
    }

    func testChangedETagMeansTheWholeNewVersionNeverASplice() throws {
        let old = body(3), new = body(4)
        let files = StaticFiles(["/f": old])
        let server = try server(files, cuts: 1, cutAt: 100_000)
        defer { server.stop() }
        guard case .failure = fetch(server.url("/f"), pinned: new).results[0] else { return XCTFail("cut") }
        files.set("/f", new)  // a new version with a new ETag

        let recorder = fetch(server.url("/f"), pinned: new)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), new)
        XCTAssertNotNil(server.requests.last?.header("If-Range"), "the resume was validated")
        XCTAssertTrue(recorder.attemptFailures.isEmpty, "the 200 was taken whole from byte 0, no mismatch, no refetch")
        XCTAssertEqual(server.requests.count, 2)
    }

    func testServerIgnoringRangeIsTakenAsTheWholeBody() throws {
        let data = body(5)
        let etag = "\"v1\""
        let served = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            let n = served.withLock { n in
                n += 1; return n
            }
            let response = ServerResponse.ok(data, headers: [("ETag", etag)])
            return n == 1 ? response.with(fault: .closeAfter(bytes: 50_000)) : response
        }
        defer { server.stop() }
        let recorder = fetch(server.url("/f"), pinned: data, retries: 1)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), data)
        XCTAssertEqual(server.requests[1].header("Range"), "bytes=50000-")
    }

    func testPartialContentStartingElsewhereIsRefusedAndRefetchedFromZero() throws {
        let data = body(6)
        let served = Mutex(0)
        let server = try LoopbackHTTPServer { request in
            let n = served.withLock { n in
                n += 1; return n
            }
            switch n {
            case 1:
                return ServerResponse.ok(data, headers: [("ETag", "\"v1\"")]).with(fault: .closeAfter(bytes: 80_000))
            case 2:
                return ServerResponse(
                    status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 0-299999/300000")], body: data)
            default: return .ok(data, headers: [("ETag", "\"v1\"")])
            }
        }
        defer { server.stop() }
        let recorder = fetch(server.url("/f"), pinned: data, retries: 2)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), data)
        guard case .resumeRejected = recorder.attemptFailures[1].failure.reason else {
            return XCTFail("\(recorder.attemptFailures)")
        }
        XCTAssertNil(server.requests[2].header("Range"), "after a refused resume the retry starts from zero")
    }

    func testDigestMismatchAfterAResumeDiscardsThePartialAndFetchesOnceInFull() throws {
        let data = body(7), impostor = body(8)
        let served = Mutex(0)
        let server = try LoopbackHTTPServer { request in
            let n = served.withLock { n in
                n += 1; return n
            }
            switch n {
            case 1:
                return ServerResponse.ok(data, headers: [("ETag", "\"v1\"")]).with(fault: .closeAfter(bytes: 100_000))
            case 2:  // A server that lies: same ETag, other bytes.
                return ServerResponse(
                    status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 100000-299999/300000")],
                    body: Array(impostor[100_000...]))
            default: return .ok(data, headers: [("ETag", "\"v1\"")])
            }
        }
        defer { server.stop() }
        let recorder = fetch(server.url("/f"), pinned: data, retries: 1)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), data)
        XCTAssertEqual(server.requests.map { $0.header("Range") }, [nil, "bytes=100000-", nil])
        guard case .digestMismatch = recorder.attemptFailures.last?.failure.reason else {
            return XCTFail("\(recorder.attemptFailures)")
        }
    }

    /// Two entries with the same content share the digest-named slot one after the other; neither may see the
    /// other's bytes, even when the second one's transfer is cut.
    func testEntriesWithTheSameDigestNeverShareBytes() throws {
        let data = body(11)
        let files = StaticFiles(["/one": data, "/two": data])
        let served = Mutex(0)
        let server = try LoopbackHTTPServer { request in
            let n = served.withLock { n in
                n += 1; return n
            }
            let response = files.respond(to: request)
            return n == 2 ? response.with(fault: .closeAfter(bytes: 1_000)) : response
        }
        defer { server.stop() }
        let digest = StreamingHasher.digest(data, algorithm: .sha256)
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path + "/tmp"), maxConcurrentTransfers: 1,
                partialDirectory: heldOpen(partials)))
        let recorder = Recorder()
        engine.run(
            [0, 1].map { id in
                TransferRequest(
                    id: id, sources: [TransferSource(url: server.url(id == 0 ? "/one" : "/two"), displayURL: "x")],
                    expectedDigest: digest, expectedSize: Int64(data.count), retries: 0, stallTimeout: 5)
            }, delegate: recorder)
        let first = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(first.temporaryPath), data, "the finished file is untouched by the second transfer")
        guard case .failure = recorder.results[1] else { return XCTFail("the second transfer was cut") }
    }

    func testUnpinnedFilesAreNeverResumedOrKept() throws {
        let data = body(9)
        let files = StaticFiles(["/f": data])
        let server = try server(files, cuts: 1, cutAt: 100_000)
        defer { server.stop() }
        let recorder = fetch(server.url("/f"), pinned: nil, retries: 1)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), data)
        XCTAssertEqual(server.requests.map { $0.header("Range") }, [nil, nil])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: partials), [])
    }

    func testACompletePartialIsVerifiedFromDiskWithoutARequest() throws {
        let data = body(10)
        let files = StaticFiles(["/f": data])
        let server = try server(files, cuts: 0, cutAt: 0)
        defer { server.stop() }
        let digest = StreamingHasher.digest(data, algorithm: .sha256)
        let partial = partials + "/sha256-\(digest.hex).part"
        try temporary.write("partial/sha256-\(digest.hex).part", data)
        try temporary.write(
            "partial/sha256-\(digest.hex).part.meta",
            "source \(StreamingHasher.digest(Array(server.url("/f").utf8), algorithm: .sha256).hex)\netag \"x\"\n")
        let recorder = fetch(server.url("/f"), pinned: data)
        let file = try XCTUnwrap(try recorder.results[0]?.get())
        XCTAssertEqual(contents(file.temporaryPath), data)
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial))
        XCTAssertEqual(server.requests.count, 0)
    }
}

extension ResumeTests {
    /// A 206 that does not start where the resume asked is treated like a 200 to a resume: the partial goes and
    /// the same URL is asked for the whole file at once, without spending a retry or waiting out a backoff.
    func testPartialContentAtTheWrongRangeRestartsFromZeroWithoutSpendingARetry() throws {
        let data = body(12)
        let served = Mutex(0)
        let server = try LoopbackHTTPServer { _ in
            let n = served.withLock { n in
                n += 1; return n
            }
            switch n {
            case 1:
                return ServerResponse.ok(data, headers: [("ETag", "\"v1\"")]).with(fault: .closeAfter(bytes: 80_000))
            case 2:
                // Also a hostile Content-Range: it reaches the message only as safe text.
                return ServerResponse(
                    status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 7-9/300000\u{1B}[2J")],
                    body: Array(data[7...9]))
            default: return .ok(data, headers: [("ETag", "\"v1\"")])
            }
        }
        defer { server.stop() }
        // One retry: the cut body takes it; the wrong range must not need another.
        let recorder = fetch(server.url("/f"), pinned: data, retries: 1)
        XCTAssertEqual(
            contents(try XCTUnwrap(try recorder.results[0]?.get(), "\(recorder.attemptFailures)").temporaryPath), data)
        XCTAssertEqual(server.requests.map { $0.header("Range") }, [nil, "bytes=80000-", nil])
        guard case .resumeRejected(let offset, let range) = recorder.attemptFailures[1].failure.reason else {
            return XCTFail("\(recorder.attemptFailures)")
        }
        XCTAssertEqual(offset, 80000)
        XCTAssertEqual(range, "bytes 7-9/300000?[2J", "the server's text made safe")
        XCTAssertNil(recorder.attemptFailures[1].retryIn, "at once, no backoff")
    }

    /// A partial written from one URL is never resumed from another: it came from another server, maybe another
    /// version of the file.
    func testAPartialFromOneURLIsNeverResumedFromAnother() throws {
        let data = body(13)
        let primary = try server(StaticFiles(["/f": data]), cuts: 1, cutAt: 100_000)
        defer { primary.stop() }
        let mirror = try LoopbackHTTPServer(files: ["/f": data])
        defer { mirror.stop() }
        // In the same run: the cut moves to the mirror, which gets a plain request.
        let recorder = Recorder()
        engine().run(
            [
                TransferRequest(
                    id: 0,
                    sources: [primary.url("/f"), mirror.url("/f")].map { TransferSource(url: $0, displayURL: $0) },
                    expectedDigest: StreamingHasher.digest(data, algorithm: .sha256),
                    expectedSize: Int64(data.count), retries: 1, stallTimeout: 5)
            ], delegate: recorder)
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), data)
        XCTAssertEqual(mirror.requests.map { $0.header("Range") }, [nil])

        // Across runs: a partial from the primary, then a run that starts at the mirror.
        primary.resetLog()
        mirror.resetLog()
        let cut = try server(StaticFiles(["/f": data]), cuts: 1, cutAt: 100_000)
        defer { cut.stop() }
        guard case .failure = fetch(cut.url("/f"), pinned: data).results[0] else {
            return XCTFail("the first run is cut")
        }
        let second = fetch(mirror.url("/f"), pinned: data)
        XCTAssertEqual(contents(try XCTUnwrap(try second.results[0]?.get()).temporaryPath), data)
        XCTAssertEqual(
            mirror.requests.map { $0.header("Range") }, [nil], "the partial from the other URL is not resumed")
    }
}
