import HaulManifest
import XCTest

/// Rules that keep hostile or mistaken manifests from escaping root, crashing haul, or widening permissions.
final class SafetyLimitsTests: XCTestCase {
    func testDestinationsAreSplitOnTheSlashByteSoACombiningMarkCannotHideAParent() throws {
        let manifest = try XCTUnwrap(Fixture.manifest(Fixture.entry("url: https://h/x", "dest: \"link/\u{301}x\"")))
        XCTAssertEqual(manifest.files[0].destination.components, ["link", "\u{301}x"])
        XCTAssertEqual(DestinationPath("link/\u{301}x")?.components, ["link", "\u{301}x"])
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: \".haul/\u{301}x\"")),
            [
                "haul.yaml:4:11: error: files[0].dest: \".haul/\u{301}x\" is inside \".haul\", haul's private folder under root"
            ])
    }

    /// The parts a walk uses are cut from the normalized text at the byte `/`, however the path was written.
    func testTheFileNameParentAndAncestorsAreCutAtTheSlashByte() throws {
        let path = try XCTUnwrap(DestinationPath("a//link/./\u{301}x/file-0000000.bin"))
        XCTAssertEqual(path.description, "a/link/\u{301}x/file-0000000.bin")
        XCTAssertEqual(path.fileName, "file-0000000.bin")
        XCTAssertEqual(String(path.parent), "a/link/\u{301}x")
        XCTAssertEqual(String(path.firstComponent), "a")
        XCTAssertEqual(path.ancestors.map(\.description), ["a/link/\u{301}x", "a/link", "a"])
        XCTAssertEqual(path.parentComponents, ["a", "link", "\u{301}x"])
        let top = try XCTUnwrap(DestinationPath("\u{301}top"))
        XCTAssertEqual(top.fileName, "\u{301}top")
        XCTAssertEqual(top.parent, "")
        XCTAssertEqual(String(top.firstComponent), "\u{301}top")
        XCTAssertEqual(top.ancestors, [])
        // A mark after a slash, or a prepended character before one, stays on its own side of the slash.
        XCTAssertEqual(try XCTUnwrap(DestinationPath("\u{600}/x")).parent.unicodeScalars.map(\.value), [0x600])
        XCTAssertEqual(try XCTUnwrap(DestinationPath("d/\u{301}")).fileName.unicodeScalars.first, "\u{301}")
    }

    func testHeadersHaulSetsItselfAreRefused() {
        for name in ["Range", "if-range", "Accept-Encoding", "Host", "Transfer-Encoding", "If-None-Match"] {
            let diagnostics = Fixture.diagnostics(
                Fixture.entry("url: https://h/x", "dest: x", "headers: { \(name): v }"))
            XCTAssertEqual(diagnostics.count, 1, name)
            XCTAssertTrue(
                diagnostics.first?.contains("files[0].headers.\(name): header \"\(name)\" is set by haul itself")
                    == true,
                "\(diagnostics)")
        }
    }

    func testSpecialPermissionBitsAreRefused() {
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: x", "mode: \"4755\"")),
            [
                "haul.yaml:5:11: error: files[0].mode: setuid, setgid and sticky bits are not applied to downloaded files; use at most \"0777\", found \"4755\""
            ])
        XCTAssertEqual(
            Fixture.manifest(Fixture.entry("url: https://h/x", "dest: x", "mode: \"0750\""))?.files[0].mode,
            FileMode(0o750))
    }

    func testAbsurdTimeoutsAndSizesAreRefusedRatherThanOverflowingLater() {
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: x", "timeout: 100000000000000000000")),
            [
                "haul.yaml:5:14: error: files[0].timeout: must be at most 24h, found \"100000000000000000000\""
            ])
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: x", "size: 999999999999999999")),
            [
                "haul.yaml:5:11: error: files[0].size: 999999999999999999 bytes is more than haul accepts for one file (1 PiB)"
            ])
        XCTAssertEqual(
            Fixture.manifest(Fixture.entry("url: https://h/x", "dest: x", "timeout: 24h"))?.files[0].timeout,
            Seconds(86_400))
        // Int64.max and beyond are numbers, only impossible sizes: said so, not "expected an integer".
        for huge in ["9223372036854775807", "9223372036854775808", "99999999999999999999999"] {
            XCTAssertEqual(
                Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: x", "size: \(huge)")),
                [
                    "haul.yaml:5:11: error: files[0].size: \(huge) bytes is more than haul accepts for one file (1 PiB)"
                ])
        }
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: x", "size: -1")),
            [
                "haul.yaml:5:11: error: files[0].size: expected a size in bytes (an integer of 0 or more), found \"-1\""
            ])
    }
}
