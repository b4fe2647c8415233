import HaulManifest
import XCTest

final class ShardTests: XCTestCase {
    private func path(_ text: String) throws -> DestinationPath {
        try XCTUnwrap(DestinationPath(text))
    }

    func testKOfNIsReadAsSplitAndJestWriteIt() {
        XCTAssertEqual(Shard("2/4").map { [$0.index, $0.count] }, [2, 4])
        XCTAssertEqual(Shard("1/1").map { [$0.index, $0.count] }, [1, 1])
        XCTAssertEqual(Shard("1048576/1048576")?.count, 1_048_576)
        for bad in [
            "0/4", "5/4", "1/0", "0/0", "a/b", "2", "", "/", "1/", "/2", "1/2/3", "-1/2", "+1/2", " 1/2", "1/2 ",
            "1/1048577", "99999999999999999999/2",
        ] {
            XCTAssertNil(Shard(bad), bad)
        }
        XCTAssertEqual(Shard("3/8")?.description, "3/8")
    }

    /// The documented function, checked against a digest computed elsewhere: SHA-256("abc") begins ba7816bf8f01cfea,
    /// and 0xba78… · 4 / 2⁶⁴ = 2 (0xba = 0b1011_1010: the top two bits are 10), so "abc" is in shard 3 of 4.
    func testTheShardIsTheDocumentedFunctionOfThePath() throws {
        XCTAssertEqual(Shard.position(of: "abc"), 0xba78_16bf_8f01_cfea)
        XCTAssertTrue(try XCTUnwrap(Shard(index: 3, count: 4)).contains(try path("abc")))
        XCTAssertTrue(try XCTUnwrap(Shard(index: 2, count: 2)).contains(try path("abc")))
        XCTAssertTrue(try XCTUnwrap(Shard(index: 6, count: 8)).contains(try path("abc")), "0xba >> 5 = 5")
        // The normalized path is what counts: `./a//abc` is `a/abc`.
        let spelled = try path("./a//abc"), normal = try path("a/abc")
        for count in 1...9 {
            for index in 1...count {
                let shard = try XCTUnwrap(Shard(index: index, count: count))
                XCTAssertEqual(shard.contains(spelled), shard.contains(normal))
            }
        }
    }

    func testEveryDestinationIsInExactlyOneShardAndTheSharesAreEven() throws {
        let destinations = try (0..<4000).map { try path("assets/\($0 % 7)/file-\($0).bin") }
        for count in [1, 2, 3, 4, 7, 16] {
            let shards = (1...count).compactMap { Shard(index: $0, count: count) }
            var sizes = [Int](repeating: 0, count: count)
            for destination in destinations {
                let owners = shards.filter { $0.contains(destination) }
                XCTAssertEqual(owners.count, 1, "\(destination) in \(count)")
                if let owner = owners.first { sizes[owner.index - 1] += 1 }
            }
            let expected = Double(destinations.count) / Double(count)
            for size in sizes {
                XCTAssertEqual(Double(size), expected, accuracy: expected * 0.25, "\(count): \(sizes)")
            }
        }
    }

    /// Halving N splits each shard in two: a destination of 3/8 is in 2/4, and in 1/2 — what lets lock ranges of
    /// different N stand for the same destinations.
    func testShardsOfDifferentCountsNestAsTheirIntervalsDo() throws {
        let destinations = try (0..<2000).map { try path("n/\($0)") }
        for destination in destinations {
            for count in [2, 4, 8] {
                guard
                    let fine = (1...(count * 2)).compactMap({ Shard(index: $0, count: count * 2) }).first(where: {
                        $0.contains(destination)
                    })
                else { return XCTFail("no shard") }
                let coarse = try XCTUnwrap(Shard(index: (fine.index + 1) / 2, count: count))
                XCTAssertTrue(coarse.contains(destination), "\(destination): \(fine) inside \(coarse)")
            }
        }
    }

    func testLockRangesOverlapExactlyWhenTheShardsShareDestinations() throws {
        var shards: [Shard] = []
        for count in 1...12 {
            for index in 1...count { shards.append(try XCTUnwrap(Shard(index: index, count: count))) }
        }
        for a in shards {
            XCTAssertFalse(a.lockRange.isEmpty)
            XCTAssertTrue(a.lockRange.lowerBound >= 0 && a.lockRange.upperBound <= Shard.lockSpace)
            for b in shards {
                // Intervals [(k-1)/n, k/n) overlap iff (a.k-1)·b.n < b.k·a.n and (b.k-1)·a.n < a.k·b.n.
                let share = (a.index - 1) * b.count < b.index * a.count && (b.index - 1) * a.count < a.index * b.count
                XCTAssertEqual(a.lockRange.overlaps(b.lockRange), share, "\(a) and \(b)")
            }
        }
        let first = try XCTUnwrap(Shard(index: 1, count: 1_048_576)),
            last = try XCTUnwrap(Shard(index: 1_048_576, count: 1_048_576))
        XCTAssertEqual(first.lockRange.lowerBound, 0)
        XCTAssertEqual(last.lockRange.upperBound, Shard.lockSpace)
    }
}
