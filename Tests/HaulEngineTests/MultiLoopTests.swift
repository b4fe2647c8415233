import Dispatch
import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import XCTest

/// Several libcurl loops in one run (`EngineConfiguration.loops`): each request starts once and ends once, the
/// run's limits hold in total, and loops do not step on each other's files.
final class MultiLoopTests: XCTestCase {
    private var temporary: TemporaryDirectory!

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func configuration(loops: Int, jobs: Int, perHost: Int, partials: String? = nil) -> EngineConfiguration {
        EngineConfiguration(
            temporaryDirectory: heldOpen(temporary.path), maxConcurrentTransfers: jobs, maxConnectionsPerHost: perHost,
            retryPolicy: RetryPolicy(baseDelay: 0.01, jitter: 0), partialDirectory: partials.map(heldOpen), loops: loops
        )
    }

    private func request(_ id: Int, _ url: String, bytes: [UInt8]) -> TransferRequest {
        TransferRequest(
            id: id, sources: [TransferSource(url: url, displayURL: url)],
            expectedDigest: StreamingHasher.digest(bytes, algorithm: .sha256), expectedSize: Int64(bytes.count),
            retries: 0, stallTimeout: 30)
    }

    private func contents(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    func testLimitsAreSplitExactlyAndNeverIntoEmptyLoops() {
        func shares(_ loops: Int, _ jobs: Int, _ perHost: Int) -> [[Int]] {
            configuration(loops: loops, jobs: jobs, perHost: perHost).loopShares.map {
                [$0.transfers, $0.connectionsPerHost]
            }
        }
        XCTAssertEqual(shares(2, 16, 16), [[8, 8], [8, 8]])
        XCTAssertEqual(shares(2, 5, 3), [[3, 2], [2, 1]])
        XCTAssertEqual(shares(4, 16, 2), [[8, 1], [8, 1]], "--per-host 2 allows two loops, not four")
        XCTAssertEqual(shares(2, 1, 16), [[1, 16]], "--jobs 1 is one loop")
        XCTAssertEqual(shares(1, 16, 16), [[16, 16]])
        XCTAssertEqual(shares(0, 0, 0), [[1, 1]])
    }

    func testTwoLoopsFetchEveryFileOnceWithinTheRunsLimits() throws {
        var files: [String: [UInt8]] = [:]
        for i in 0..<300 {
            files["/f\(i)"] = (0..<(i % 7 * 3_001 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ i) }
        }
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let recorder = Recorder()
        TransferEngine(configuration: configuration(loops: 2, jobs: 6, perHost: 4))
            .run((0..<300).map { request($0, server.url("/f\($0)"), bytes: files["/f\($0)"]!) }, delegate: recorder)

        XCTAssertEqual(recorder.endedTwice, [])
        XCTAssertEqual(Set(recorder.started.keys), Set(0..<300))
        let results = recorder.results
        XCTAssertEqual(results.count, 300)
        for i in 0..<300 {
            let file = try XCTUnwrap(try results[i]?.get(), "transfer \(i)")
            XCTAssertEqual(contents(file.temporaryPath), files["/f\(i)"], "transfer \(i)")
        }
        XCTAssertEqual(
            Set(results.values.compactMap { try? $0.get().temporaryPath }).count, 300, "every transfer has its own file"
        )
        XCTAssertEqual(server.requests.count, 300, "no request is made twice")
        XCTAssertLessThanOrEqual(server.connectionCount, 4, "--per-host holds for the run, not per loop")
    }

    /// With several loops, each creates its files in a folder of its own in the staging folder (`loop-K`), and
    /// says which: the owner reaches a file by that folder and its name. One loop writes in the staging folder.
    func testEachLoopStagesInAFolderOfItsOwnAndSaysWhich() throws {
        var files: [String: [UInt8]] = [:]
        for i in 0..<40 { files["/f\(i)"] = Array("file \(i)".utf8) }
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let requests = (0..<40).map { request($0, server.url("/f\($0)"), bytes: files["/f\($0)"]!) }
        let recorder = Recorder()
        TransferEngine(configuration: configuration(loops: 2, jobs: 4, perHost: 4)).run(requests, delegate: recorder)

        XCTAssertEqual(recorder.results.count, 40)
        for (id, result) in recorder.results {
            let file = try XCTUnwrap(try? result.get(), "transfer \(id)")
            let folder = try XCTUnwrap(file.temporaryFolder, "transfer \(id) says where it lies")
            XCTAssertTrue([temporary.path + "/loop-1", temporary.path + "/loop-2"].contains(folder.path), folder.path)
            XCTAssertEqual(file.temporaryPath, folder.displayPath(of: file.temporaryName))
            XCTAssertEqual(contents(folder.path + "/" + file.temporaryName), files["/f\(id)"], "transfer \(id)")
        }
        let staged = try FileManager.default.contentsOfDirectory(atPath: temporary.path)
        XCTAssertEqual(staged.filter { $0.hasSuffix(".part") }, [], "nothing in the staging folder itself")
        XCTAssertTrue(staged.allSatisfy(TransferEngine.isLoopFolderName), "\(staged)")

        let single = try TemporaryDirectory()
        let alone = Recorder()
        TransferEngine(configuration: EngineConfiguration(temporaryDirectory: heldOpen(single.path), loops: 1))
            .run([requests[0]], delegate: alone)
        let file = try XCTUnwrap(try alone.results[0]?.get())
        XCTAssertEqual(file.temporaryFolder?.path, single.path)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: single.path), [file.temporaryName])
    }

    func testLoopFolderNamesAreKnownByTheirGrammarOnly() {
        XCTAssertEqual(TransferEngine.loopFolderName(2), "loop-2")
        for name in ["loop-1", "loop-2", "loop-16"] { XCTAssertTrue(TransferEngine.isLoopFolderName(name), name) }
        for name in ["loop-", "loop-0", "loop-01", "loop-1a", "loop-12345", "loops-1", "shard-1-of-2", "1f-2.part"] {
            XCTAssertFalse(TransferEngine.isLoopFolderName(name), name)
            XCTAssertFalse(TransferEngine.isStagingName(TransferEngine.loopFolderName(1)))
        }
    }

    /// The digest-named partial file is one per content: two loops fetching the same content at once must not
    /// write into the same file.
    func testTheSameContentInSeveralLoopsGetsAFileEach() throws {
        let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let server = try LoopbackHTTPServer(files: ["/same": body])
        defer { server.stop() }
        let partials = temporary.path + "/partial"
        XCTAssertEqual(mkdir(partials, 0o700), 0)
        let recorder = Recorder()
        TransferEngine(configuration: configuration(loops: 2, jobs: 4, perHost: 4, partials: partials))
            .run((0..<6).map { request($0, server.url("/same"), bytes: body) }, delegate: recorder)
        let files = try (0..<6).map { try XCTUnwrap(try recorder.results[$0]?.get(), "transfer \($0)") }
        XCTAssertEqual(Set(files.map(\.temporaryPath)).count, 6)
        for file in files { XCTAssertEqual(contents(file.temporaryPath), body) }
    }

    func testCancellingStopsEveryLoopAndEndsEveryRequestOnce() throws {
        // Every response stalls after its first bytes: only the cancellation can end the run early.
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok([UInt8](repeating: 5, count: 50_000)).with(fault: .stallAfter(bytes: 1_000, seconds: 30))
        }
        defer { server.stop() }
        let cancellation = Cancellation()
        let recorder = Recorder()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { cancellation.cancel() }
        TransferEngine(configuration: configuration(loops: 2, jobs: 6, perHost: 6))
            .run(
                (0..<40).map { request($0, server.url("/f\($0)"), bytes: [UInt8](repeating: 5, count: 50_000)) },
                delegate: recorder, cancellation: cancellation)

        XCTAssertEqual(recorder.endedTwice, [])
        let results = recorder.results
        XCTAssertEqual(Set(results.keys), Set(0..<40), "started or still queued, every request ends")
        for (id, result) in results {
            guard case .failure(let failure) = result else { return XCTFail("transfer \(id) cannot have finished") }
            XCTAssertEqual(failure.attempts.last?.reason, .interrupted, "transfer \(id)")
        }
        XCTAssertEqual(recorder.started.count, 6, "the six that were running, in both loops; the rest never started")
        let left = try FileManager.default.subpathsOfDirectory(atPath: temporary.path).filter {
            !TransferEngine.isLoopFolderName($0)
        }
        XCTAssertEqual(left, [], "no temporary file is left (the loops' folders stay, to be used again)")
    }
}
