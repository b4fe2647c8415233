import Haul
import HaulDigest
import HaulManifest
import XCTest

/// Refusals decided from the manifest and the flags alone, before anything is looked at: each names the file, the
/// entry and its place.
final class RunPolicyTests: XCTestCase {
    private func entry(_ index: Int, _ dest: String, pinned: Bool, line: Int) -> FileEntry {
        let digest = StreamingHasher.digest(Array(dest.utf8), algorithm: .sha256)
        return FileEntry(
            index: index, url: TemplatedString(literal: "https://example.com/\(dest)"), mirrors: [],
            destination: DestinationPath(dest)!, checksum: pinned ? Checksum(digest: digest, notation: .hexKey) : nil,
            size: nil, mode: FileMode(0o644), retries: 3, timeout: Seconds(30), headers: [],
            location: SourceLocation(line: line, column: 5))
    }

    private func manifest(_ files: [FileEntry]) -> Manifest {
        Manifest(sourcePath: "assets.yaml", version: 1, root: "/srv/assets", prune: false, files: files, warnings: [])
    }

    func testRequiringChecksumsNamesEveryUnpinnedEntryWhereItIs() {
        let found = RunPolicy.violations(
            manifest([
                entry(0, "a", pinned: true, line: 4), entry(1, "b", pinned: false, line: 7),
                entry(2, "c", pinned: false, line: 10),
            ]),
            requireChecksums: true, prune: false, force: false)
        XCTAssertEqual(found.map(\.keyPath), ["files[1]", "files[2]"])
        XCTAssertEqual(found.map { $0.location?.line }, [7, 10])
        XCTAssertEqual(found.map(\.file), ["assets.yaml", "assets.yaml"])
        XCTAssertTrue(found[0].message.hasPrefix("b has no checksum, and --require-checksums is set"), found[0].message)
        XCTAssertEqual(
            RunPolicy.violations(
                manifest([entry(0, "b", pinned: false, line: 7)]), requireChecksums: false,
                prune: false, force: false
            ).count, 0, "unpinned is allowed unless required")
    }

    /// An archive may be pinned by its own bytes, by the tree it unpacks to, or both: either pin counts.
    func testRequiringChecksumsCountsAPinnedTreeAsPinned() {
        let tree = StreamingHasher.digest(Array("tree".utf8), algorithm: .sha256)
        var treeOnly = entry(0, "sdk", pinned: false, line: 4)
        treeOnly.extract = ExtractRule(tree: tree)
        var archiveOnly = entry(1, "tools", pinned: true, line: 7)
        archiveOnly.extract = ExtractRule()
        var neither = entry(2, "data", pinned: false, line: 10)
        neither.extract = ExtractRule(strip: 1)
        let found = RunPolicy.violations(
            manifest([treeOnly, archiveOnly, neither]), requireChecksums: true, prune: false,
            force: false)
        XCTAssertEqual(found.map(\.keyPath), ["files[2]"])
        XCTAssertEqual(
            found.map(\.message),
            [
                "data has no checksum, and --require-checksums is set (`haul add --update data "
                    + "--manifest assets.yaml` fetches it and writes the archive's checksum and "
                    + "its tree into the manifest)"
            ])
    }

    func testPruningWithAnEmptyListIsRefusedUnlessForced() {
        let empty = manifest([])
        let refused = RunPolicy.violations(empty, requireChecksums: false, prune: true, force: false)
        XCTAssertEqual(refused.map(\.keyPath), ["files"])
        XCTAssertTrue(
            refused[0].message.contains("would delete every file this manifest synced under /srv/assets"),
            refused[0].message)
        XCTAssertTrue(refused[0].message.contains("--force"), refused[0].message)
        XCTAssertEqual(RunPolicy.violations(empty, requireChecksums: false, prune: true, force: true).count, 0)
        XCTAssertEqual(RunPolicy.violations(empty, requireChecksums: false, prune: false, force: false).count, 0)
    }
}
