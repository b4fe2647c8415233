import HaulManifest
import XCTest

/// A destination is its UTF-8 bytes, as the kernel names files; two spellings of one name under Unicode
/// normalization are refused together, because file systems that ignore normalization (macOS's) make them one file.
final class DestinationIdentityTests: XCTestCase {
    private let composed = "caf\u{e9}"
    private let decomposed = "cafe\u{301}"

    private func manifest(_ destinations: [String]) -> String {
        "version: 1\nfiles:\n"
            + destinations.enumerated()
            .map { "  - {url: \"https://e.com/\($0.offset)\", dest: \"\($0.element)\"}\n" }.joined()
    }

    func testPathsEqualOnlyUnderNormalizationAreDifferentPaths() throws {
        let nfc = try XCTUnwrap(DestinationPath(composed)), nfd = try XCTUnwrap(DestinationPath(decomposed))
        XCTAssertEqual(composed, decomposed, "String's == is canonical equivalence")
        XCTAssertNotEqual(nfc, nfd)
        XCTAssertEqual(Set([nfc, nfd, nfc]).count, 2)
        XCTAssertEqual(Dictionary([(nfc, 1), (nfd, 2)], uniquingKeysWith: +)[nfd], 2)
        // Byte order: "e" (0x65) before "é" (0xc3 0xa9).
        XCTAssertTrue(nfd < nfc)
        XCTAssertFalse(nfc < nfd)
        XCTAssertFalse(nfc < nfc)
    }

    func testTheLaterOfTwoNormalizationFormsIsRefusedNamingTheEarlier() {
        XCTAssertEqual(
            Fixture.diagnostics(manifest(["x", composed, decomposed])),
            [
                "haul.yaml:5:36: error: files[2].dest: \"\(decomposed)\" differs from \"\(composed)\", the destination of "
                    + "files[1] (line 4), only in Unicode normalization (\"cafe\\u{301}\" here, \"caf\\u{e9}\" there): one "
                    + "file on file systems that ignore Unicode normalization, such as macOS's"
            ])
        XCTAssertEqual(
            Fixture.diagnostics(manifest(["d/" + decomposed, "d/" + composed])),
            [
                "haul.yaml:4:36: error: files[1].dest: \"d/\(composed)\" differs from \"d/\(decomposed)\", the destination of "
                    + "files[0] (line 3), only in Unicode normalization (\"d/caf\\u{e9}\" here, \"d/cafe\\u{301}\" there): one "
                    + "file on file systems that ignore Unicode normalization, such as macOS's"
            ])
    }

    func testTheSameBytesTwiceAreAnExactDuplicate() {
        XCTAssertEqual(
            Fixture.diagnostics(manifest([decomposed, "b", decomposed])),
            [
                "haul.yaml:5:36: error: files[2].dest: \"\(decomposed)\" is already the destination of files[0] (line 3)"
            ])
    }

    /// KELVIN SIGN decomposes to the letter K: an ASCII destination has a non-ASCII equivalent, whichever comes first.
    func testAnASCIIDestinationAndItsNonASCIIEquivalentConflictInEitherOrder() {
        XCTAssertEqual(
            Fixture.diagnostics(manifest(["a/K", "a/\u{212A}"])),
            [
                "haul.yaml:4:36: error: files[1].dest: \"a/\u{212A}\" differs from \"a/K\", the destination of files[0] "
                    + "(line 3), only in Unicode normalization (\"a/\\u{212a}\" here, \"a/K\" there): one file on file "
                    + "systems that ignore Unicode normalization, such as macOS's"
            ])
        XCTAssertEqual(
            Fixture.diagnostics(manifest(["a/\u{212A}", "a/K"])),
            [
                "haul.yaml:4:36: error: files[1].dest: \"a/K\" differs from \"a/\u{212A}\", the destination of files[0] "
                    + "(line 3), only in Unicode normalization (\"a/K\" here, \"a/\\u{212a}\" there): one file on file "
                    + "systems that ignore Unicode normalization, such as macOS's"
            ])
    }

    func testAFileAndAFolderEqualUnderNormalizationConflict() {
        XCTAssertEqual(
            Fixture.diagnostics(manifest([decomposed + "/x", composed])),
            [
                "haul.yaml:4:36: error: files[1].dest: \"\(composed)\" is needed as a folder for \"\(decomposed)/x\", the "
                    + "destination of files[0] (line 3), on file systems that ignore Unicode normalization, such as "
                    + "macOS's (\"caf\\u{e9}\" here, \"cafe\\u{301}\" there)"
            ])
        XCTAssertEqual(
            Fixture.diagnostics(manifest([composed, decomposed + "/x"])),
            [
                "haul.yaml:4:36: error: files[1].dest: \"\(decomposed)/x\" would be inside \"\(decomposed)\", which is the "
                    + "destination of files[0] (line 3), on file systems that ignore Unicode normalization, such as "
                    + "macOS's (\"cafe\\u{301}\" here, \"caf\\u{e9}\" there)"
            ])
    }

    func testFoldersEqualUnderNormalizationAreOneFolderThere() throws {
        let loaded = try XCTUnwrap(Fixture.manifest(manifest([composed + "/a", decomposed + "/b", "x/" + composed])))
        XCTAssertEqual(
            loaded.files.map(\.destination.description), [composed + "/a", decomposed + "/b", "x/" + composed])
    }
}
