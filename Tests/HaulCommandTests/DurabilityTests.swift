import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// `--durability` and `HAUL_DURABILITY`, and what the default level does beyond flushing before each rename (what
/// each level does at a crash is in `CrashConsistencyTests`).
final class DurabilityTests: XCTestCase {
    private static let size = 48 << 20
    private static let stallAt = 40 << 20

    func testAnUnknownLevelIsAUsageErrorNamingWhereItCameFrom() throws {
        let directory = try TemporaryDirectory()
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")
        let option = try directory.haul(["sync", "--durability", "fast"])
        XCTAssertEqual(option.exitCode, 64, option.stderr)
        XCTAssertTrue(
            option.stderr.contains("--durability: 'fast' is not a durability level: use full or none"), option.stderr)
        let environment = try directory.haul(["sync"], environment: ["HAUL_DURABILITY": "off"])
        XCTAssertEqual(environment.exitCode, 64, environment.stderr)
        XCTAssertTrue(
            environment.stderr.contains("HAUL_DURABILITY: 'off' is not a durability level: use full or none"),
            environment.stderr)
        let overridden = try directory.haul(["sync", "--durability", "none"], environment: ["HAUL_DURABILITY": "off"])
        XCTAssertEqual(overridden.exitCode, 0, "the option wins over the environment: \(overridden.stderr)")
    }

    /// At the default level a large download is written to disk while it arrives, a step behind the writer, so that
    /// the flush before its rename finds little left to write. Seen in the page cache itself (cachestat(2)): while
    /// the server holds the body back, the staged file's pages are already clean at the default level and still
    /// dirty with `--durability none`.
    func testALargeDownloadIsWrittenToDiskWhileItArrives() throws {
        let directory = try TemporaryDirectory()
        if let kind = memoryFileSystem(at: directory.path) {
            throw XCTSkip("\(directory.path) is on \(kind): its pages are never written back")
        }
        var generator = SplitMix(seed: 14)
        var body = [UInt8](repeating: 0, count: Self.size)
        body.withUnsafeMutableBytes { raw in
            for offset in stride(from: 0, to: raw.count, by: 8) {
                raw.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
            }
        }
        let served = body
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok(served).with(fault: .stallAfter(bytes: Self.stallAt, seconds: 60))
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/big.bin"))
                dest: big.bin
                sha256: \(StreamingHasher.digest(body, algorithm: .sha256).hex)
                size: \(Self.size)

            """)

        // Without flushing, the kernel keeps the bytes dirty (for 30 s by default): the baseline that shows the
        // page cache can be seen at all here.
        let unflushed = try pagesWhileStalled(directory, arguments: ["--durability", "none"]) { _ in true }
        guard let unflushed else { throw XCTSkip("no cachestat(2) here (Linux 6.5 or later)") }
        guard unflushed.dirtyBytes >= UInt64(Self.stallAt / 2) else {
            throw XCTSkip("the kernel wrote the pages back on its own (\(unflushed)): nothing to compare with")
        }

        // At the default level, at most a step or two of the 40 MiB may still be dirty.
        let bound = UInt64(16 << 20)
        let flushed = try pagesWhileStalled(directory, arguments: []) { $0.dirtyBytes < bound }
        let status = try XCTUnwrap(flushed)
        XCTAssertLessThan(
            status.dirtyBytes, bound,
            "the staged file was not written back while it arrived: \(status) "
                + "(with --durability none: \(unflushed))")
        XCTAssertGreaterThanOrEqual(
            status.cachedBytes, UInt64(Self.stallAt / 2), "the file's bytes are still cached: \(status)")
    }

    /// Runs `haul sync` until the server stalls the body, then waits (up to 10 s) for `settled` of the staged
    /// file's pages, and stops haul. The last status seen; nil when the page cache cannot be read.
    private func pagesWhileStalled(
        _ directory: TemporaryDirectory, arguments: [String],
        settled: (PageCacheStatus) -> Bool
    ) throws -> PageCacheStatus? {
        let root = directory.path("out")
        let sync = try HaulProcess.start(
            ["sync", "--quiet"] + arguments, currentDirectory: directory.path,
            outputPath: directory.path("sync-output.txt"))
        defer {
            sync.send(SIGINT)
            _ = sync.waitForExit()
            RootInspection.stagedFiles(root: root).forEach { unlink(root + "/.haul/" + $0.name) }
        }
        XCTAssertEqual(
            sync.wait(until: { RootInspection.stagedSizes(root: root) == [Int64(Self.stallAt)] }), .conditionMet,
            "the transfer reached the stall: \(RootInspection.stagedSizes(root: root))\n\(sync.output)")
        let staged = try XCTUnwrap(RootInspection.stagedFiles(root: root).first).name
        guard let watch = PageCacheWatch(root + "/.haul/" + staged) else { return nil }
        var last = watch.status()
        _ = sync.wait(
            until: {
                last = watch.status()
                return last.map(settled) ?? true
            }, timeout: 10)
        return last
    }
}
