import Foundation
import Glibc
import HaulDigest
import HaulManifest
import HaulStore
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
            print("observeAll \(count) x 256 B, concurrency \(concurrency): \(elapsed) s (creating them took \(created) s)")
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
        for durability in [Durability.batched, .none] {
            let committer = Committer(root: scratch.path, staging: staging, durability: durability)
            var batches: [[CommitRequest]] = []
            for batch in 0..<10 {
                var requests: [CommitRequest] = []
                for index in 0..<500 {
                    let path = try staging.makeTestFile()
                    let fd = open(path, O_WRONLY)
                    _ = Array(repeating: UInt8(index & 0xff), count: 16 * 1024).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    close(fd)
                    requests.append(CommitRequest(temporaryPath: path, destination: try dest("\(durability)/d\(index % 10)/f\(batch)-\(index)"),
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
}
