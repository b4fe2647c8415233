@testable import HaulManifest
import XCTest

/// The registry keeps 32-bit fingerprints rather than paths; these tests drive it past fingerprint collisions,
/// which real manifests of this size hit, to show that answers still come from the real paths.
final class DestinationRegistryTests: XCTestCase {
    func testFingerprintCollisionsNeverConfuseDistinctPaths() {
        let count = 150_000
        var registry = DestinationRegistry(expectedCount: count)
        for index in 0..<count {
            XCTAssertNil(registry.claim("d\(index % 997)/f\(index)", index: index, line: index + 1))
        }
        XCTAssertGreaterThan(registry.fallbackCount, 0, "this many paths must include fingerprint collisions")
        for index in 0..<count {
            let duplicate = registry.claim("d\(index % 997)/f\(index)", index: count + index, line: 0)
            if duplicate != "\"d\(index % 997)/f\(index)\" is already the destination of files[\(index)] (line \(index + 1))" {
                XCTFail("wrong answer for d\(index % 997)/f\(index): \(duplicate ?? "accepted")")
                return
            }
        }
        XCTAssertEqual(registry.claim("d5", index: 0, line: 0),
                       "\"d5\" is needed as a folder for \"d5/f5\", the destination of files[5] (line 6)")
        XCTAssertEqual(registry.claim("d5/f5/x", index: 0, line: 0),
                       "\"d5/f5/x\" would be inside \"d5/f5\", which is the destination of files[5] (line 6)")
    }

    func testHashIndexKeepsTheFirstValueAndGrows() {
        var index = HashIndex(minimumCapacity: 1)
        for hash in 1...10_000 as ClosedRange<UInt64> {
            XCTAssertTrue(index.insertIfAbsent(hash &* 0x9E37_79B9_7F4A_7C15, Int32(hash)))
        }
        XCTAssertFalse(index.insertIfAbsent(0x9E37_79B9_7F4A_7C15, -1))
        XCTAssertEqual(index[0x9E37_79B9_7F4A_7C15], 1)
        XCTAssertEqual(index[10_000 &* 0x9E37_79B9_7F4A_7C15], 10_000)
        XCTAssertNil(index[10_001 &* 0x9E37_79B9_7F4A_7C15])
        XCTAssertTrue(index.insertIfAbsent(0, 0), "a zero hash is storable")
        XCTAssertEqual(index[0], 0)
    }
}
