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
        XCTAssertEqual(
            registry.claim("a/bv22fba", index: 3, line: 6),
            "\"a/bv22fba\" is needed as a folder for \"a/bv22fba/x\", the destination of files[0] (line 3)")
        XCTAssertEqual(
            registry.claim("a", index: 3, line: 6),
            "\"a\" is needed as a folder for \"a/bv22fba/x\", the destination of files[0] (line 3)")
        XCTAssertEqual(
            registry.claim("a/bv22fba/x/y", index: 3, line: 6),
            "\"a/bv22fba/x/y\" would be inside \"a/bv22fba/x\", which is the destination of files[0] (line 3)")
        XCTAssertEqual(
            registry.claim("a/bv22fba/x", index: 3, line: 6),
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
            (
                "files/f47406/x",
                "\"files/f47406/x\" would be inside \"files/f47406\", which is the destination of files[3] (line 4)"
            ),
            (
                "dirs/f47406",
                "\"dirs/f47406\" is needed as a folder for \"dirs/f47406/x\", the destination of files[5] (line 6)"
            ),
            (
                "dirs/f47117",
                "\"dirs/f47117\" is needed as a folder for \"dirs/f47117/x\", the destination of files[4] (line 5)"
            ),
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
            if duplicate
                != "\"d\(index % 997)/f\(index)\" is already the destination of files[\(index)] (line \(index + 1))"
            {
                XCTFail("wrong answer for d\(index % 997)/f\(index): \(duplicate ?? "accepted")")
                return
            }
        }
        XCTAssertEqual(
            registry.claim("d5", index: 0, line: 0),
            "\"d5\" is needed as a folder for \"d5/f5\", the destination of files[5] (line 6)")
        XCTAssertEqual(
            registry.claim("d5/f5/x", index: 0, line: 0),
            "\"d5/f5/x\" would be inside \"d5/f5\", which is the destination of files[5] (line 6)")
    }

    /// Through the loader, both ways of reading: the crash was at load.
    func testTheCollidingDestinationLoads() throws {
        let manifest = try XCTUnwrap(
            Fixture.manifest(
                """
                version: 1
                files:
                  - {url: "https://e.com/1", dest: a/one}
                  - {url: "https://e.com/2", dest: a/bv22fba/x}
                  - {url: "https://e.com/3", dest: a/two}

                """))
        XCTAssertEqual(manifest.files.map(\.destination.description), ["a/one", "a/bv22fba/x", "a/two"])
        XCTAssertEqual(
            Fixture.diagnostics(
                """
                version: 1
                files:
                  - {url: "https://e.com/1", dest: a/bv22fba/x}
                  - {url: "https://e.com/2", dest: a/bv22fba}

                """),
            [
                "haul.yaml:4:36: error: files[1].dest: \"a/bv22fba\" is needed as a folder for \"a/bv22fba/x\", the destination of files[0] (line 3)"
            ])
    }

    // MARK: Folders an archive is unpacked into

    /// Nothing may lie inside a folder an archive becomes, whichever entry comes first, and an extract folder is a
    /// destination like any other for the rules that were already there.
    func testNothingMayLieInsideAFolderAnArchiveIsUnpackedInto() {
        var registry = DestinationRegistry()
        XCTAssertNil(registry.claim("sdk", index: 1, line: 4, unpacks: true))
        XCTAssertEqual(
            registry.claim("sdk/bin/x", index: 3, line: 9),
            "\"sdk/bin/x\" is inside \"sdk\", which files[1] (line 4) extracts an archive into")
        XCTAssertEqual(
            registry.claim("sdk/lib", index: 3, line: 9, unpacks: true),
            "\"sdk/lib\" is inside \"sdk\", which files[1] (line 4) extracts an archive into")
        XCTAssertEqual(
            registry.claim("sdk", index: 3, line: 9), "\"sdk\" is already the destination of files[1] (line 4)")
        XCTAssertEqual(
            registry.claim("sdk", index: 3, line: 9, unpacks: true),
            "\"sdk\" is already the destination of files[1] (line 4)")
        // Beside it, or sharing its first letters, is fine.
        XCTAssertNil(registry.claim("sdk2/x", index: 4, line: 10))
        XCTAssertNil(registry.claim("sdk-tools", index: 5, line: 11, unpacks: true))
        XCTAssertNil(registry.claim("sdk.tar.gz", index: 6, line: 12))
        // The refused claims left nothing behind.
        XCTAssertNil(registry.claim("x/sdk/bin", index: 7, line: 13))

        var nested = DestinationRegistry()
        XCTAssertNil(nested.claim("opt/a/b", index: 0, line: 3))
        XCTAssertEqual(
            nested.claim("opt/a", index: 1, line: 4, unpacks: true),
            "\"opt/a\", which this entry extracts an archive into, would hold \"opt/a/b\", the destination of "
                + "files[0] (line 3)")
        XCTAssertEqual(
            nested.claim("opt", index: 1, line: 4, unpacks: true),
            "\"opt\", which this entry extracts an archive into, would hold \"opt/a/b\", the destination of "
                + "files[0] (line 3)")
        XCTAssertEqual(
            nested.claim("opt/a/b/c", index: 1, line: 4, unpacks: true),
            "\"opt/a/b/c\" would be inside \"opt/a/b\", which is the destination of files[0] (line 3)")
        XCTAssertNil(nested.claim("opt/c", index: 2, line: 5, unpacks: true))
        XCTAssertEqual(
            nested.claim("opt/c/d", index: 3, line: 6),
            "\"opt/c/d\" is inside \"opt/c\", which files[2] (line 5) extracts an archive into")
        XCTAssertEqual(
            nested.claim("opt", index: 3, line: 6),
            "\"opt\" is needed as a folder for \"opt/a/b\", the destination of files[0] (line 3)")
    }

    /// After a claim in the same folder (the registry's shortcut), a path inside an extract folder is still seen.
    func testTheSameFolderShortcutDoesNotHideAnExtractFolder() {
        var registry = DestinationRegistry()
        XCTAssertNil(registry.claim("a/x", index: 0, line: 3))
        XCTAssertNil(registry.claim("a/sdk", index: 1, line: 4, unpacks: true))
        XCTAssertEqual(
            registry.claim("a/sdk/y", index: 2, line: 5),
            "\"a/sdk/y\" is inside \"a/sdk\", which files[1] (line 4) extracts an archive into")
        XCTAssertNil(registry.claim("a/z", index: 3, line: 6))
        XCTAssertEqual(
            registry.claim("a/sdk/w", index: 4, line: 7),
            "\"a/sdk/w\" is inside \"a/sdk\", which files[1] (line 4) extracts an archive into")
    }

    /// Two spellings of one folder on a file system that ignores normalization, said as the other conflicts say it.
    func testAnExtractFolderSpelledInAnotherNormalization() {
        var registry = DestinationRegistry()
        XCTAssertNil(registry.claim("caf\u{e9}", index: 0, line: 3, unpacks: true))
        XCTAssertEqual(
            registry.claim("cafe\u{301}/x", index: 1, line: 4),
            "\"cafe\u{301}/x\" is inside \"cafe\u{301}\", which files[0] (line 3) extracts an archive into, on file "
                + "systems that ignore Unicode normalization, such as macOS's (\"cafe\\u{301}\" here, \"caf\\u{e9}\" there)"
        )
        var other = DestinationRegistry()
        XCTAssertNil(other.claim("cafe\u{301}/x", index: 0, line: 3))
        XCTAssertEqual(
            other.claim("caf\u{e9}", index: 1, line: 4, unpacks: true),
            "\"caf\u{e9}\", which this entry extracts an archive into, would hold \"cafe\u{301}/x\", the destination "
                + "of files[0] (line 3), on file systems that ignore Unicode normalization, such as macOS's "
                + "(\"caf\\u{e9}\" here, \"cafe\\u{301}\" there)")
    }

    func testManyPlainDestinationsBesideExtractFoldersAreAllTold() {
        let count = 100_000
        var registry = DestinationRegistry(expectedCount: count)
        for index in 0..<count {
            let unpacks = index % 1000 == 0
            XCTAssertNil(registry.claim("d\(index % 97)/f\(index)", index: index, line: index + 1, unpacks: unpacks))
        }
        for index in stride(from: 0, to: count, by: 1000) {
            XCTAssertEqual(
                registry.claim("d\(index % 97)/f\(index)/x", index: count, line: 0),
                "\"d\(index % 97)/f\(index)/x\" is inside \"d\(index % 97)/f\(index)\", which files[\(index)] "
                    + "(line \(index + 1)) extracts an archive into")
        }
    }

    /// Through the loader: the later entry is named at its dest, with the earlier one.
    func testOverlapsThroughTheLoader() {
        XCTAssertEqual(
            Fixture.diagnostics(
                """
                version: 1
                files:
                  - {url: "https://e.com/a", dest: readme}
                  - {url: "https://e.com/sdk.tgz", dest: sdk/, extract: true}
                  - {url: "https://e.com/b", dest: other}
                  - {url: "https://e.com/x", dest: sdk/bin/x}
                  - {url: "https://e.com/y", dest: tools/y}
                  - {url: "https://e.com/tools.zip", dest: tools/, extract: {strip: 1}}

                """),
            [
                "haul.yaml:6:36: error: files[3].dest: \"sdk/bin/x\" is inside \"sdk\", which files[1] (line 4) extracts an "
                    + "archive into",
                "haul.yaml:8:44: error: files[5].dest: \"tools\", which this entry extracts an archive into, would hold "
                    + "\"tools/y\", the destination of files[4] (line 7)",
            ])
    }
}
