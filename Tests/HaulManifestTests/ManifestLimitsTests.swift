import Foundation
import HaulManifest
import XCTest

/// What a hostile manifest cannot make haul do: read without end, nest without end, report millions of findings,
/// name a path the kernel cannot create, or set a stall window no network can meet.
final class ManifestLimitsTests: XCTestCase {
    private func entry(dest: String) -> String {
        Fixture.entry("url: https://h/x", "dest: \"\(dest)\"")
    }

    // MARK: Paths

    func testANameOver255BytesIsRefused() throws {
        let name255 = String(repeating: "n", count: 255)
        XCTAssertEqual(
            try XCTUnwrap(Fixture.manifest(entry(dest: "d/" + name255))).files[0].destination.fileName, name255)
        XCTAssertEqual(
            Fixture.diagnostics(entry(dest: "d/" + name255 + "n/x")),
            [
                "haul.yaml:4:11: error: files[0].dest: \"\(String(repeating: "n", count: 80))…\" in destination is 256 bytes "
                    + "long; a file or folder name has at most 255 bytes"
            ])
        // Bytes, not characters: 128 two-byte characters.
        XCTAssertEqual(
            Fixture.diagnostics(entry(dest: String(repeating: "\u{e9}", count: 128))),
            [
                "haul.yaml:4:11: error: files[0].dest: \"\(String(repeating: "\u{e9}", count: 80))…\" in destination is 256 "
                    + "bytes long; a file or folder name has at most 255 bytes"
            ])
        XCTAssertNil(DestinationPath(name255 + "n"))
        XCTAssertNotNil(DestinationPath(name255))
    }

    func testADestinationOver4095BytesIsRefused() throws {
        let name = String(repeating: "n", count: 255)
        let longest = Array(repeating: name, count: 16).joined(separator: "/")
        XCTAssertEqual(longest.utf8.count, 4095)
        XCTAssertEqual(try XCTUnwrap(Fixture.manifest(entry(dest: longest))).files[0].destination.description, longest)
        XCTAssertEqual(
            Fixture.diagnostics(entry(dest: longest + "/x")),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"\(longest.prefix(80))…\" is 4097 bytes long; a "
                    + "destination has at most 4095 bytes"
            ])
        // The limit is on the path as created: what normalizing removes does not count.
        XCTAssertEqual(
            try XCTUnwrap(Fixture.manifest(entry(dest: String(repeating: "./", count: 3000) + longest)))
                .files[0].destination.description, longest)
        XCTAssertNotNil(DestinationPath(longest))
        XCTAssertNil(DestinationPath(longest + "/x"))
    }

    /// 42,000 components once made it to the store, which crashed on it.
    func testAPathOfTensOfThousandsOfComponentsIsRefused() {
        let deep = String(repeating: "a/", count: 42_000) + "x"
        XCTAssertEqual(
            Fixture.diagnostics(entry(dest: deep)),
            [
                "haul.yaml:4:11: error: files[0].dest: destination \"\(deep.prefix(80))…\" is 84001 bytes long; a "
                    + "destination has at most 4095 bytes"
            ])
    }

    // MARK: Timeouts

    func testATimeoutUnderOneMillisecondIsRefused() {
        for value in ["0.5ms", "0.0009s", "0.0009", "\"0.0009\"", "0.00001m"] {
            let shown = value.hasPrefix("\"") ? String(value.dropFirst().dropLast()) : value
            XCTAssertEqual(
                Fixture.diagnostics(Fixture.entry("url: https://h/x", "dest: x", "timeout: \(value)")),
                [
                    "haul.yaml:5:14: error: files[0].timeout: must be at least 1ms, found \"\(shown)\""
                ], value)
        }
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\ndefaults: {timeout: 0.1ms}\nfiles: []\n"),
            ["haul.yaml:2:21: error: defaults.timeout: must be at least 1ms, found \"0.1ms\""])
        for (value, seconds) in [("1ms", 0.001), ("0.001s", 0.001), ("0.001", 0.001), ("0.0001m", 0.006)] {
            XCTAssertEqual(
                Fixture.manifest(Fixture.entry("url: https://h/x", "dest: x", "timeout: \(value)"))?
                    .files[0].timeout.value ?? 0, seconds, accuracy: 1e-12, value)
        }
    }

    // MARK: Nesting

    func testNestingDeeperThan64IsRefusedWhereItHappens() {
        // The top-level mapping is the first level.
        let deepest =
            "version: 1\nfiles: []\nx: " + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + "\n"
        XCTAssertEqual(Fixture.diagnostics(deepest), ["haul.yaml:3:1: error: x: unknown key \"x\""])
        let tooDeep =
            "version: 1\nfiles: []\nx: " + String(repeating: "[", count: 100_000)
            + String(repeating: "]", count: 100_000) + "\n"
        XCTAssertEqual(
            Fixture.diagnostics(tooDeep),
            ["haul.yaml:3:67: error: collections nested more than 64 deep (a manifest needs 4 levels)"])
        // mirrors: (level 4) holds a sequence in a sequence …: the 65th level opens on line 67.
        let inAnEntry =
            "version: 1\nfiles:\n  - url: https://h/x\n    dest: x\n    mirrors:\n"
            + (0..<62).map { String(repeating: "  ", count: $0 + 3) + "-\n" }.joined()
        XCTAssertEqual(
            Fixture.diagnostics(inAnEntry),
            ["haul.yaml:67:129: error: collections nested more than 64 deep (a manifest needs 4 levels)"])
    }

    // MARK: How much a manifest may hold

    func testOneEntryHoldsAtMostAMillionValues() {
        let yaml =
            "version: 1\nfiles:\n  - url: https://h/x\n    dest: x\n    mirrors: ["
            + String(repeating: "a,", count: 1_000_000) + "a]\n"
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:5:2000001: error: files[0]: more than 1000000 YAML values in one entry (an entry needs a few dozen)"
            ])
    }

    func testTheRestOfTheManifestHoldsAtMostAMillionValues() {
        let yaml = "version: 1\nfiles: []\nx: [" + String(repeating: "a,", count: 1_000_000) + "a]\n"
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:3:1999991: error: more than 1000000 YAML values besides the entries of files (a manifest needs a few dozen)"
            ])
    }

    // MARK: Diagnostics

    func testAtMost50DiagnosticsAreKeptTheFirstInFileOrder() throws {
        let yaml = "version: 1\n" + (0..<2000).map { "k\($0): v\n" }.joined() + "files: []\n"
        let failure = try XCTUnwrap(Fixture.failure(yaml))
        XCTAssertEqual(
            failure.diagnostics.map(\.description),
            (0..<50).map { "haul.yaml:\($0 + 2):1: error: k\($0): unknown key \"k\($0)\"" })
        XCTAssertEqual(failure.omitted, 1950)
        XCTAssertEqual(failure.lines.last, "… and 1950 more")
        XCTAssertEqual(failure.description.split(separator: "\n").count, 51)
    }

    /// Entries are checked as they stream in, the top level afterwards: the first 50 are still the first in the file.
    func testTheFirst50AreTheFirstInTheFileWhateverOrderTheyWereFoundIn() throws {
        let yaml =
            "version: 1\n" + (0..<30).map { "k\($0): v\n" }.joined() + "files:\n"
            + (0..<40).map { "  - {url: \"https://h/\($0)\", dest: x\($0), bad\($0): 1}\n" }.joined()
        let failure = try XCTUnwrap(Fixture.failure(yaml))
        XCTAssertEqual(
            failure.diagnostics.map(\.description),
            (0..<30).map { "haul.yaml:\($0 + 2):1: error: k\($0): unknown key \"k\($0)\"" }
                + (0..<20).map {
                    "haul.yaml:\($0 + 33):\($0 < 10 ? 36 : 38): error: files[\($0)].bad\($0): unknown key \"bad\($0)\""
                })
        XCTAssertEqual(failure.omitted, 20)
    }

    func testALongUnknownKeyIsShownShortened() {
        let key = String(repeating: "k", count: 1 << 20)
        // An explicit key (`? `): YAML limits implicit ones to 1024 characters.
        XCTAssertEqual(
            Fixture.diagnostics("version: 1\nfiles: []\n? \(key)\n: 1\n"),
            ["haul.yaml:3:3: error: unknown key \"\(key.prefix(80))…\""])
    }

    func testAtMost50WarningsAreKept() throws {
        let md5 = "d41d8cd98f00b204e9800998ecf8427e"
        let yaml =
            "version: 1\nfiles:\n"
            + (0..<60).map { "  - {url: \"https://h/\($0)\", dest: f\($0), checksum: \"md5:\(md5)\"}\n" }.joined()
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(manifest.files.count, 60)
        XCTAssertEqual(manifest.warnings.count, 50)
        XCTAssertEqual(manifest.warnings.last?.location?.line, 52)
        XCTAssertEqual(manifest.omittedWarnings, 10)
        XCTAssertEqual(manifest.warningLines.last, "… and 10 more")
    }

    // MARK: Size

    func testAFileOver256MiBIsRefusedWithoutReadingIt() throws {
        let directory = try TemporaryFolder()
        let path = directory.path + "/huge.yaml"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("version: 1\nfiles: []\n".utf8)))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 256 << 20 + 1)  // sparse: no disk, and no memory unless read
        try handle.close()
        XCTAssertThrowsError(try ManifestLoader.load(path: path, environment: [:])) { error in
            XCTAssertEqual(
                (error as? DiagnosticsError)?.lines,
                ["\(path): error: the manifest is larger than 256 MiB, the most haul reads"])
        }
    }
}

/// A folder under the system's temporary directory, removed with everything in it when released.
final class TemporaryFolder {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("haul-manifest-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
