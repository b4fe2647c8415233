@testable import Haul
import HaulDigest
import HaulFailures
import HaulManifest
import HaulPlanner
@testable import HaulStore
import XCTest

/// An extracted folder judged from a walk and the state's records, as values: which members changed and how, which
/// files are the user's, and which members must be read before the tree is called intact.
final class TreeJudgementTests: XCTestCase {
    private let from = UnpackedFrom(
        archive: StreamingHasher.digest(Array("archive".utf8), algorithm: .sha256),
        rules: "0123456789abcdef", tree: nil, folder: "sdk")

    private func identity(_ inode: UInt64, size: Int64 = 5) -> FileIdentity {
        FileIdentity(
            device: 1, inode: inode, size: size, modified: FileTime(seconds: 100, nanoseconds: 0),
            changed: FileTime(seconds: 100, nanoseconds: 0))
    }

    private func record(_ identity: FileIdentity, _ digest: Digest) -> StateRecord {
        StateRecord(identity: identity, digest: digest, origin: Origin(manifestKey: "m", unpacked: from))
    }

    private var members: [String: StateRecord] {
        [
            "bin/tool": record(identity(2), StreamingHasher.digest(Array("tool".utf8), algorithm: .sha256)),
            "link": record(identity(3, size: 8), TreeJudgement.digest(ofTarget: "bin/tool")),
            "README": record(identity(4), StreamingHasher.digest(Array("hello".utf8), algorithm: .sha256)),
        ]
    }

    private var intactNodes: [TreeNode] {
        [
            TreeNode(path: "README", kind: .file(identity(4))), TreeNode(path: "bin", kind: .folder(identity(1))),
            TreeNode(path: "bin/tool", kind: .file(identity(2))),
            TreeNode(path: "link", kind: .symlink(target: "bin/tool", identity: identity(3, size: 8))),
        ]
    }

    private func judge(
        _ nodes: [TreeNode], members: [String: StateRecord]? = nil, trusted: Bool = true
    ) -> TreeJudgement {
        TreeJudgement.judge(nodes: nodes, members: members ?? self.members) { record, found in
            trusted && record.identity == found
        }
    }

    func testAnUntouchedTreeIsIntactAndNothingIsRead() {
        let judged = judge(intactNodes)
        XCTAssertEqual(judged.state, .tree(from, changed: []))
        XCTAssertTrue(judged.unproven.isEmpty)
        XCTAssertEqual(judged.usersFiles, [])
    }

    func testEachKindOfChangeIsNamed() {
        var nodes = intactNodes
        nodes[0] = TreeNode(path: "README", kind: .file(identity(4, size: 6)))  // grew
        nodes[3] = TreeNode(path: "link", kind: .symlink(target: "/etc/passwd", identity: identity(3, size: 8)))
        nodes.remove(at: 2)  // bin/tool gone
        XCTAssertEqual(
            judge(nodes).state,
            .tree(
                from,
                changed: [
                    MemberChange("README", .edited), MemberChange("link", .edited),
                    MemberChange("bin/tool", .missing),
                ]))
        let folderInstead = intactNodes.map {
            $0.path == "bin/tool" ? TreeNode(path: "bin/tool", kind: .folder(identity(9))) : $0
        }
        XCTAssertEqual(judge(folderInstead).state, .tree(from, changed: [MemberChange("bin/tool", .replaced)]))
        let fifoInstead = intactNodes.map { $0.path == "README" ? TreeNode(path: "README", kind: .other) : $0 }
        XCTAssertEqual(judge(fifoInstead).state, .tree(from, changed: [MemberChange("README", .replaced)]))
    }

    /// A file whose identity the record cannot vouch for (same size) is to be read; none is read once a change is
    /// known, since the tree is unpacked again anyway.
    func testAFileTheRecordCannotVouchForIsReadOnlyWhileNothingElseChanged() {
        let untrusted = judge(intactNodes, trusted: false)
        XCTAssertEqual(untrusted.state, .tree(from, changed: []))
        XCTAssertEqual(Set(untrusted.unproven.map(\.path)), ["README", "bin/tool"])
        let changedToo = judge(intactNodes.filter { $0.path != "link" }, trusted: false)
        XCTAssertEqual(changedToo.state, .tree(from, changed: [MemberChange("link", .missing)]))
        XCTAssertTrue(changedToo.unproven.isEmpty)
    }

    func testFilesNoRecordNamesAreTheUsersAndChangeNothing() {
        let nodes =
            intactNodes + [
                TreeNode(path: "bin/mine.sh", kind: .file(identity(10))),
                TreeNode(path: "notes", kind: .folder(identity(11))),
                TreeNode(path: "notes/here", kind: .symlink(target: "../README", identity: identity(12))),
                TreeNode(path: "pipe", kind: .other),
            ]
        let judged = judge(nodes)
        XCTAssertEqual(judged.state, .tree(from, changed: []), "the user's files and folders are not the tree's")
        XCTAssertEqual(judged.usersFiles, ["bin/mine.sh", "notes/here", "pipe"])
        XCTAssertEqual(judged.usersLinks, ["notes/here": "../README"])
    }

    func testAFolderWithoutRecordsWasNotUnpackedByHaul() {
        let judged = judge(intactNodes, members: [:])
        XCTAssertEqual(judged.state, .tree(nil, changed: []))
        XCTAssertEqual(judged.usersFiles, ["README", "bin/tool", "link"])
        XCTAssertEqual(
            Planner.decide(entry(rule: ExtractRule()), judged.state), .fetch(.treeChanged(.notUnpackedByHaul)))
    }

    // MARK: - The planner's decision for an extract entry

    private func entry(checksum: Digest? = nil, rule: ExtractRule) -> FileEntry {
        var entry = FileEntry(
            index: 0, url: TemplatedString(literal: "https://example.com/sdk.tar.gz"), mirrors: [],
            destination: DestinationPath("sdk")!,
            checksum: checksum.map { Checksum(digest: $0, notation: .hexKey) }, size: nil,
            mode: FileMode(0o644), retries: 3, timeout: Seconds(30), headers: [],
            location: SourceLocation(line: 1, column: 1))
        entry.extract = rule
        return entry
    }

    func testTheTreeIsKeptOnlyWhenUnpackedFromWhatTheEntryPinsWithItsRules() {
        let rule = ExtractRule()
        let pinnedTree = StreamingHasher.digest(Array("tree".utf8), algorithm: .sha256)
        let recorded = UnpackedFrom(archive: from.archive, rules: rule.fingerprint, tree: nil, folder: "sdk")
        let intact = LocalState.tree(recorded, changed: [])
        XCTAssertEqual(Planner.decide(entry(checksum: from.archive, rule: rule), intact), .keep)
        XCTAssertEqual(
            Planner.decide(
                entry(checksum: StreamingHasher.digest(Array("other".utf8), algorithm: .sha256), rule: rule), intact),
            .fetch(.treeChanged(.otherArchive)), "another archive pinned")
        XCTAssertEqual(
            Planner.decide(entry(checksum: from.archive, rule: ExtractRule(strip: 1)), intact),
            .fetch(.treeChanged(.otherArchive)), "other rules shape another tree")
        XCTAssertEqual(
            Planner.decide(entry(checksum: from.archive, rule: ExtractRule(tree: pinnedTree)), intact),
            .fetch(.treeChanged(.otherArchive)), "a tree pinned now that was not checked then")
        let checked = LocalState.tree(
            UnpackedFrom(archive: from.archive, rules: rule.fingerprint, tree: pinnedTree, folder: "sdk"),
            changed: [])
        XCTAssertEqual(
            Planner.decide(entry(rule: ExtractRule(tree: pinnedTree)), checked), .keep, "the tree pinned alone")
        XCTAssertEqual(Planner.decide(entry(rule: rule), intact), .revalidate, "nothing pinned: asked about")
        XCTAssertEqual(
            Planner.decide(
                entry(checksum: from.archive, rule: rule), .tree(recorded, changed: [MemberChange("a", .missing)])),
            .fetch(.treeChanged(.membersChanged([MemberChange("a", .missing)]))))
    }

    func testAnythingButAFolderAtTheDestinationIsInTheWayOrMissing() {
        let rule = ExtractRule()
        XCTAssertEqual(Planner.decide(entry(rule: rule), .missing), .fetch(.missing))
        XCTAssertEqual(
            Planner.decide(entry(rule: rule), .file(size: 3, digest: nil)), .refuse(.inTheWayOfTree(.regular)))
        XCTAssertEqual(Planner.decide(entry(rule: rule), .symlink), .refuse(.inTheWayOfTree(.symlink)))
        let escapes = StoreError(
            operation: .inspect, path: "x/sdk", errno: 0, problem: .parentEscapesRoot(parent: "x", target: "/elsewhere")
        )
        XCTAssertEqual(Planner.decide(entry(rule: rule), .inaccessible(escapes)), .refuse(.failed(escapes)))
        XCTAssertEqual(
            Planner.decide(entry(rule: rule), .obstructed(.inTheWayOfTree(.fifo))), .refuse(.inTheWayOfTree(.fifo)))
    }
}
