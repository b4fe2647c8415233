import Foundation
import HaulTestSupport
import XCTest

/// The repository holds the software, not what a run of it leaves behind: a `.haul` folder or a `haul.yaml` at
/// its top would be a run's lock, state and manifest, pointing at a test's server.
final class RepositoryTests: XCTestCase {
    private static let top = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func testTheTreeHoldsNoRunsLeftovers() throws {
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: Self.top + "/Package.swift"), "repository not found at \(Self.top)")
        for leftover in [".haul", "haul.yaml"] {
            XCTAssertFalse(
                FileManager.default.fileExists(atPath: Self.top + "/" + leftover),
                "\(Self.top)/\(leftover) is a run's leftover: remove it")
        }
        // What git tracks, where the tree is a clone (a source archive has no .git).
        guard FileManager.default.fileExists(atPath: Self.top + "/.git") else { return }
        let tracked = try ProcessRunner.run("git", ["-C", Self.top, "ls-files"], inheritEnvironment: true, timeout: 30)
        XCTAssertEqual(tracked.exitCode, 0, tracked.stderr)
        let leftovers = tracked.stdout.split(separator: "\n").filter { $0 == "haul.yaml" || $0.hasPrefix(".haul/") }
        XCTAssertEqual(leftovers, [], "tracked leftovers of a run")
    }

    /// The licence is Apache-2.0, word for word (Debian's copy of it is the reference where the machine has one).
    func testTheLicenceIsTheApacheLicenceWordForWord() throws {
        let licence = try String(contentsOfFile: Self.top + "/LICENSE", encoding: .utf8)
        XCTAssertTrue(
            licence.contains("Apache License\n                           Version 2.0, January 2004"),
            "LICENSE is not Apache-2.0")
        XCTAssertTrue(licence.contains("END OF TERMS AND CONDITIONS"), "LICENSE is cut short")
        if let reference = try? String(contentsOfFile: "/usr/share/common-licenses/Apache-2.0", encoding: .utf8) {
            XCTAssertEqual(licence, reference)
        }
        let readme = try String(contentsOfFile: Self.top + "/README.md", encoding: .utf8)
        XCTAssertTrue(readme.contains("[Apache License, Version 2.0](LICENSE)"), "README names the licence")
    }
}
