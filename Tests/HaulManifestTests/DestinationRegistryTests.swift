@testable import HaulManifest
import XCTest

/// The registry must answer from the real paths whatever its tables make of them. The paths here were chosen
/// (by brute force) to collide in the 32-bit fingerprints of 64-bit FNV-1a hashes that an earlier registry kept
/// instead of paths: "a" and "a/bv22fba"; "files/f47117" and "files/f47406".
final class DestinationRegistryTests: XCTestCase {
    /// Two folders of one destination with the same fingerprint made the old registry read past its claims (SIGILL).
    func testAFolderCollidingWithAnotherFolderOfTheSamePathIsClaimedOnce() {
        var registry = DestinationRegistry()
        XCTAssertNil(registry.claim("a/bv22fba/x", index: 0, line: 3))
        XCTAssertNil(registry.claim("a/y", index: 1, line: 4))
        XCTAssertNil(registry.claim("a/bv22fba/z", index: 2, line: 5))
        XCTAssertEqual(registry.claim("a/bv22fba", index: 3, line: 6),
                       "\"a/bv22fba\" is needed as a folder for \"a/bv22fba/x\", the destination of files[0] (line 3)")
        XCTAssertEqual(registry.claim("a", index: 3, line: 6),
                       "\"a\" is needed as a folder for \"a/bv22fba/x\", the destination of files[0] (line 3)")
        XCTAssertEqual(registry.claim("a/bv22fba/x/y", index: 3, line: 6),
                       "\"a/bv22fba/x/y\" would be inside \"a/bv22fba/x\", which is the destination of files[0] (line 3)")
        XCTAssertEqual(registry.claim("a/bv22fba/x", index: 3, line: 6),
                       "\"a/bv22fba/x\" is already the destination of files[0] (line 3)")
    }

    func testTheCollidingPairIsTwoDestinationsAndTwoFolders() {
        var registry = DestinationRegistry()
        XCTAssertNil(registry.claim("a", index: 0, line: 1))
        XCTAssertNil(registry.claim("a2/bv22fba", index: 1, line: 2))
        XCTAssertNil(registry.claim("files/f47117", index: 2, line: 3))
        XCTAssertNil(registry.claim("files/f47406", index: 3, line: 4))
        XCTAssertNil(registry.claim("dirs/f47117/x", index: 4, line: 5))
        XCTAssertNil(registry.claim("dirs/f47406/x", index: 5, line: 6))
        let answers = [
            ("files/f47406", "\"files/f47406\" is already the destination of files[3] (line 4)"),
            ("files/f47117", "\"files/f47117\" is already the destination of files[2] (line 3)"),
            ("files/f47406/x", "\"files/f47406/x\" would be inside \"files/f47406\", which is the destination of files[3] (line 4)"),
            ("dirs/f47406", "\"dirs/f47406\" is needed as a folder for \"dirs/f47406/x\", the destination of files[5] (line 6)"),
            ("dirs/f47117", "\"dirs/f47117\" is needed as a folder for \"dirs/f47117/x\", the destination of files[4] (line 5)"),
            ("a/bv22fba", "\"a/bv22fba\" would be inside \"a\", which is the destination of files[0] (line 1)"),
        ]
        for (path, answer) in answers { XCTAssertEqual(registry.claim(path, index: 9, line: 9), answer, path) }
        XCTAssertNil(registry.claim("dirs/f47117/y", index: 6, line: 7))
        XCTAssertNil(registry.claim("bv22fba", index: 7, line: 8))
    }

    func testManyDestinationsAreAllTold() {
        let count = 150_000
        var registry = DestinationRegistry(expectedCount: count)
        for index in 0..<count {
            XCTAssertNil(registry.claim("d\(index % 997)/f\(index)", index: index, line: index + 1))
        }
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

    /// Through the loader, both ways of reading: the crash was at load.
    func testTheCollidingDestinationLoads() throws {
        let manifest = try XCTUnwrap(Fixture.manifest("""
            version: 1
            files:
              - {url: "https://e.com/1", dest: a/one}
              - {url: "https://e.com/2", dest: a/bv22fba/x}
              - {url: "https://e.com/3", dest: a/two}

            """))
        XCTAssertEqual(manifest.files.map(\.destination.description), ["a/one", "a/bv22fba/x", "a/two"])
        XCTAssertEqual(Fixture.diagnostics("""
            version: 1
            files:
              - {url: "https://e.com/1", dest: a/bv22fba/x}
              - {url: "https://e.com/2", dest: a/bv22fba}

            """), [
            "haul.yaml:4:36: error: files[1].dest: \"a/bv22fba\" is needed as a folder for \"a/bv22fba/x\", the destination of files[0] (line 3)",
        ])
    }
}
