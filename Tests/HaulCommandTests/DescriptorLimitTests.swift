import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A low open-file limit (`ulimit -n`) never crashes haul nor fails entries: it raises its soft limit to the hard
/// one, runs as many transfers as fit (saying so once), and waits for a descriptor rather than failing for one.
final class DescriptorLimitTests: XCTestCase {
    private func run(files count: Int, limit: Int, jobs: Int) throws {
        let directory = try TemporaryDirectory()
        let bodies = (0..<count).map { Array("file \($0)\n".utf8) }
        let server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: bodies.enumerated().map { ("/f\($0.offset)", $0.element) }))
        defer { server.stop() }
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for (index, body) in bodies.enumerated() {
            yaml +=
                "  - { url: \(server.url("/f\(index)")), dest: d\(index % 20)/f\(index), "
                + "sha256: \(StreamingHasher.digest(body, algorithm: .sha256).hex) }\n"
        }
        try directory.write("haul.yaml", yaml)
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c", "ulimit -n \(limit) && exec \"$0\" \"$@\"", HaulProcess.executablePath,
                "sync", "haul.yaml", "--jobs", "\(jobs)", "--progress", "none",
            ],
            currentDirectory: directory.path, timeout: 120)
        XCTAssertEqual(result.exitCode, 0, "ulimit -n \(limit), --jobs \(jobs): \(result.stderr.suffix(2000))")
        XCTAssertTrue(
            result.stdout.contains("Fetched \(count) files"),
            "\(result.stdout.suffix(300))\n\(result.stderr.suffix(1500))")
        let warnings =
            result.stderr.components(separatedBy: "warning: the open-file limit (\(limit), see ulimit -n) allows").count
            - 1
        XCTAssertEqual(warnings, 1, "said once: \(result.stderr.prefix(1000))")
        for (index, body) in bodies.enumerated() where index % 97 == 0 {
            XCTAssertEqual(directory.read("out/d\(index % 20)/f\(index)"), body)
        }
        XCTAssertEqual((0..<20).reduce(0) { $0 + directory.list("out/d\($1)").count }, count, "every file landed")
    }

    func testTwoThousandFilesUnderAnOpenFileLimitOfForty() throws {
        try run(files: 2000, limit: 40, jobs: 16)
    }

    func testJobsAboveWhatTheLimitAllowsAreReducedNotFailed() throws {
        try run(files: 500, limit: 128, jobs: 64)
        try run(files: 500, limit: 512, jobs: 256)
    }
}
