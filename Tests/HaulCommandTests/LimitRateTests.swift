import HaulDigest
import HaulTestSupport
import XCTest

/// `--limit-rate`: one budget for the whole run, measured where it matters, at the server: three transfers at once
/// together send at the rate, not three times it.
final class LimitRateTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// Bytes per second the server sent in its steady state: between the moments a third and nine tenths of all the
    /// bytes had been taken by its kernel (the first burst only fills the sockets' buffers).
    private func steadyRate(_ writes: [(time: Double, bytes: Int)]) -> Double {
        let total = writes.reduce(0) { $0 + $1.bytes }
        var sent = 0
        var marks: [(time: Double, sent: Int)] = []
        for write in writes.sorted(by: { $0.time < $1.time }) {
            sent += write.bytes
            marks.append((write.time, sent))
        }
        guard let start = marks.first(where: { $0.sent >= total / 3 }),
            let end = marks.first(where: { $0.sent >= total * 9 / 10 }), end.time > start.time
        else { return .infinity }
        return Double(end.sent - start.sent) / (end.time - start.time)
    }

    func testTheWholeRunKeepsToTheRateTheServerMeasures() throws {
        let files = (0..<3).map { index in (0..<(2 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) } }
        let server = try LoopbackHTTPServer { request in
            guard let index = Int(request.path.dropFirst(3).prefix(1)), files.indices.contains(index) else {
                return .notFound
            }
            return ServerResponse.ok(files[index]).with(fault: .metered(bytesPerWrite: 16 * 1024))
        }
        defer { server.stop() }
        let entries = files.indices.map { index in
            """
              - url: \(server.url("/f-\(index).bin"))
                dest: f-\(index).bin
                sha256: \(StreamingHasher.digest(files[index], algorithm: .sha256).hex)
            """
        }
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles:\n\(entries.joined(separator: "\n"))\n")

        let sync = try directory.haul(["sync", "--limit-rate", "1M", "--jobs", "3"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        for (index, file) in files.enumerated() { XCTAssertEqual(directory.read("out/f-\(index).bin"), file) }
        XCTAssertEqual(server.requests.count, 3)
        let rate = steadyRate(server.bodyWrites)
        XCTAssertEqual(rate, Double(1 << 20), accuracy: Double(1 << 20) * 0.2, "bytes per second the server sent")
    }

    func testARateThatIsNotOneIsAUsageError() throws {
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles: []\n")
        let bad = try directory.haul(["sync", "--limit-rate", "fast"])
        XCTAssertEqual(bad.exitCode, 64, bad.stderr)
        XCTAssertTrue(bad.stderr.hasPrefix("error: "), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("--limit-rate"), bad.stderr)
    }

    /// A decimal size is taken as curl takes it: `--limit-rate 2.5M` runs, and `--max-file-size 1.5K` is 1536 bytes
    /// (a body of 1536 passes, one of 1537 is over it).
    func testADecimalSizeIsThatManyUnits() throws {
        let fits = [UInt8](repeating: 1, count: 1536)
        let over = [UInt8](repeating: 2, count: 1537)
        let server = try LoopbackHTTPServer(files: ["/fits.bin": fits, "/over.bin": over])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/fits.bin"))
                dest: fits.bin
                retries: 0
              - url: \(server.url("/over.bin"))
                dest: over.bin
                retries: 0
            """)
        let sync = try directory.haul(["sync", "--limit-rate", "2.5M", "--max-file-size", "1.5K"])
        XCTAssertEqual(sync.exitCode, 1, sync.stderr)
        XCTAssertEqual(directory.read("out/fits.bin"), fits)
        XCTAssertTrue(
            sync.stderr.contains(
                "error: over.bin: \(server.url("/over.bin")): more than 1.5 KiB, the --max-file-size limit"),
            sync.stderr)
    }
}
