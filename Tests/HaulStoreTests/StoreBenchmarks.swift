import Foundation
import Glibc
import HaulDigest
import HaulFileSystem
import HaulManifest
@testable import HaulStore
import HaulTestSupport
import XCTest

/// Sizing checks, not correctness tests: they create 100,000 files, so they run only when asked
/// (`HAUL_STORE_BENCH=1`), preferably in release (`-c release`), and print their timings.
final class StoreBenchmarks: XCTestCase {
    private func requireOptIn() throws {
        guard ProcessInfo.processInfo.environment["HAUL_STORE_BENCH"] == "1" else {
            throw XCTSkip("set HAUL_STORE_BENCH=1 to run store benchmarks")
        }
    }

    private func seconds(_ body: () throws -> Void) rethrows -> Double {
        var start = timespec(), end = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        try body()
        clock_gettime(CLOCK_MONOTONIC, &end)
        return Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
    }

    func testObserveAllHundredThousandSmallFiles() throws {
        try requireOptIn()
        let scratch = try Scratch()
        let count = 100_000
        let content = [UInt8](repeating: 0x61, count: 256)
        let digest = StreamingHasher.digest(content, algorithm: .sha256)
        var requests: [ObservationRequest] = []
        requests.reserveCapacity(count)
        for folder in 0..<100 { try scratch.mkdir("f\(folder)") }
        let created = try seconds {
            for index in 0..<count {
                let name = "f\(index % 100)/file\(index).bin"
                let fd = open(scratch.at(name), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                XCTAssertGreaterThanOrEqual(fd, 0)
                _ = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
                requests.append(ObservationRequest(destination: try dest(name), algorithm: .sha256, expectedSize: 256))
            }
        }
        let observer = LocalObserver(root: scratch.path)
        for concurrency in [1, 2, 4] {
            var results: [ObservedFile] = []
            let elapsed = seconds { results = observer.observeAll(requests, concurrency: concurrency) }
            XCTAssertTrue(results.allSatisfy { $0 == .regularFile(size: 256, digest: digest) })
            print(
                "observeAll \(count) x 256 B, concurrency \(concurrency): \(elapsed) s (creating them took \(created) s)"
            )
        }
        var statOnly = stat()
        let lstatOnly = seconds {
            for request in requests { _ = lstat(scratch.at(request.destination.description), &statOnly) }
        }
        print("bare lstat loop over the same paths: \(lstatOnly) s")
    }

    func testCommitFiveThousandFilesInBatches() throws {
        try requireOptIn()
        let scratch = try Scratch()
        let staging = try StagingArea(root: scratch.path)
        for durability in [Durability.full, .none] {
            let committer = Committer(root: scratch.path, staging: staging, durability: durability)
            var batches: [[CommitRequest]] = []
            for batch in 0..<10 {
                var requests: [CommitRequest] = []
                for index in 0..<500 {
                    let path = try staging.makeTestFile()
                    let fd = open(path, O_WRONLY)
                    _ = Array(repeating: UInt8(index & 0xff), count: 16 * 1024).withUnsafeBytes {
                        write(fd, $0.baseAddress, $0.count)
                    }
                    close(fd)
                    requests.append(
                        CommitRequest(
                            temporaryPath: path,
                            destination: try dest("\(durability)/d\(index % 10)/f\(batch)-\(index)"),
                            mode: FileMode(0o644)))
                }
                batches.append(requests)
            }
            let elapsed = seconds {
                for batch in batches { XCTAssertTrue(committer.commit(batch).allSatisfy { $0.failure == nil }) }
            }
            print("commit 5000 x 16 KiB in 10 batches, \(durability): \(elapsed) s")
        }
    }

    /// The state of a 100,000-file sync written and read back, best of five: what a no-op reads and a first sync
    /// writes, without the files.
    func testStateOfHundredThousandFilesSavedAndLoaded() throws {
        try requireOptIn()
        let scratch = try Scratch()
        let area = try PrivateArea.create(root: scratch.path)
        let origin = Origin(manifestKey: "0123456789abcdef0123456789abcdef")
        var records: [DestinationKey: StateRecord] = [:]
        for index in 0..<100_000 {
            let name = String(format: "d%03d/t%06d.bin", index / 1000, index)
            let digest = StreamingHasher.digest(Array(name.utf8), algorithm: .sha256)
            let time = FileTime(seconds: 1_790_000_000 + Int64(index), nanoseconds: Int32(index * 7919 % 1_000_000_000))
            records[DestinationKey(name)] = StateRecord(
                identity: FileIdentity(
                    device: 2049, inode: UInt64(5_000_000 + index), size: 256, modified: time, changed: time),
                digest: digest, origin: origin)
        }
        let cache = StateCache(records: records)
        var save = Double.infinity, load = Double.infinity
        for _ in 0..<5 {
            save = min(save, try seconds { try cache.save(in: area) })
            var loaded = StateCache()
            load = min(load, seconds { loaded = StateCache.load(area: area).cache })
            XCTAssertEqual(loaded, cache)
        }
        print("state of 100,000 files: save \(save) s, load \(load) s")
    }

    /// The no-op's walk of an extracted tree of 50,500 nodes (500 folders of 100 files) against
    /// `find DIR -printf '%s %T@\n' >/dev/null` over the same tree, interleaved, medians of `HAUL_TREE_WALK_RUNS`
    /// (7). The tree is `HAUL_TREE_WALK_DIR` (benchmarks/tree-walk.sh makes it on tmpfs) or made here.
    func testTreeWalkOfFiftyThousandFilesBesideFind() throws {
        try requireOptIn()
        let environment = ProcessInfo.processInfo.environment
        let scratch = try Scratch()
        let tree = environment["HAUL_TREE_WALK_DIR"] ?? scratch.at("tree")
        if environment["HAUL_TREE_WALK_DIR"] == nil {
            for folder in 0..<500 {
                for file in 0..<100 { try scratch.write("tree/d\(folder)/f\(file)", "\(folder)/\(file)\n") }
            }
        }
        let runs = environment["HAUL_TREE_WALK_RUNS"].flatMap { Int($0) } ?? 7
        let folder = try DirectoryHandle.opening(tree)
        var walks: [Double] = [], finds: [Double] = []
        for _ in 0..<runs {
            var nodes: [TreeNode] = []
            walks.append(try seconds { nodes = try TreeWalk.nodes(under: folder, shownAs: tree).get() })
            XCTAssertEqual(nodes.count, 50_500)
            finds.append(
                try seconds {
                    XCTAssertEqual(try ProcessRunner.runDiscardingOutput("find", [tree, "-printf", "%s %T@\n"]), 0)
                })
        }
        let walk = walks.sorted()[runs / 2], find = finds.sorted()[runs / 2]
        print(
            String(
                format: "tree walk of 50,500 nodes: TreeWalk %.4f s, find %.4f s (medians of %d): %.2fx find",
                walk, find, runs, walk / find))
    }
}
