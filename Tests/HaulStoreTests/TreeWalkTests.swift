import Foundation
import Glibc
import HaulFailures
import HaulFileSystem
import HaulTestSupport
import XCTest
@testable import HaulStore

/// The walk lists what `find -printf '%P %y'` lists, in the byte order of the paths, with the identities `stat`
/// shows, and follows no symlink.
final class TreeWalkTests: XCTestCase {
    private var scratch: Scratch!

    override func setUpWithError() throws {
        scratch = try Scratch()
    }

    override func tearDown() {
        scratch = nil
    }

    private func walk(_ relative: String, shownAs shown: String = "sdk") throws -> Result<[TreeNode], StoreError> {
        TreeWalk.nodes(under: try DirectoryHandle.opening(scratch.at(relative)), shownAs: shown)
    }

    /// A tree with one of everything, and names whose byte order is not their order component by component.
    private func makeTree() throws {
        try scratch.write("t/bin/tool", "#!/bin/sh\n")
        try scratch.write("t/a/b", "a/b")
        try scratch.write("t/a.b", "a.b")
        try scratch.write("t/a-b", "")
        try scratch.write("t/B", "upper")
        try scratch.write("t/caf\u{e9}", "precomposed")
        try scratch.write("t/cafe\u{301}", "decomposed")
        try scratch.write("t/share/doc/deep/README", "read me")
        try scratch.mkdir("t/empty")
        try scratch.symlink("t/root", to: "/")
        try scratch.symlink("t/bin/relative", to: "tool")
        try scratch.symlink("t/dangling", to: "../nowhere")
        XCTAssertEqual(mkfifo(scratch.at("t/pipe"), 0o600), 0)
    }

    private func kindLetter(_ kind: TreeNode.Kind) -> String {
        switch kind {
        case .file: "f"
        case .folder: "d"
        case .symlink: "l"
        case .other: "p"
        }
    }

    func testItListsWhatFindListsInByteOrder() throws {
        try makeTree()
        let nodes = try walk("t").get()
        let find = try ProcessRunner.run("find", [scratch.at("t"), "-mindepth", "1", "-printf", "%P %y\\n"])
        XCTAssertEqual(find.exitCode, 0, find.stderr)
        let expected = find.stdout.split(separator: "\n").map(String.init)
            .sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        XCTAssertEqual(nodes.map { "\($0.path) \(kindLetter($0.kind))" }, expected)
        // The byte order of whole paths: `a.b` (2e) before `a/b` (2f), after `a`; decomposed before precomposed.
        let paths = nodes.map(\.path)
        XCTAssertEqual(paths.prefix(4), ["B", "a", "a-b", "a.b"])
        XCTAssertEqual(paths.firstIndex(of: "a/b"), 4)
        XCTAssertLessThan(
            try XCTUnwrap(paths.firstIndex { $0.utf8.elementsEqual("cafe\u{301}".utf8) }),
            try XCTUnwrap(paths.firstIndex { $0.utf8.elementsEqual("caf\u{e9}".utf8) }))
    }

    func testIdentitiesAreWhatStatShows() throws {
        try makeTree()
        for node in try walk("t").get() {
            let identity: FileIdentity
            switch node.kind {
            case .file(let found), .folder(let found): identity = found
            case .symlink, .other: continue
            }
            let shown = try ProcessRunner.run("stat", ["-c", "%d %i %s %.9Y %.9Z", scratch.at("t/" + node.path)])
            XCTAssertEqual(shown.exitCode, 0, shown.stderr)
            XCTAssertEqual(
                "\(identity.device) \(identity.inode) \(identity.size) \(identity.modified) \(identity.changed)\n",
                shown.stdout, node.path)
        }
    }

    func testSymlinksAreListedNotFollowed() throws {
        try makeTree()
        let nodes = try walk("t").get()
        let byPath = Dictionary(nodes.map { ($0.path, $0.kind) }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(byPath["root"].flatMap(symlinkTarget), "/")
        XCTAssertEqual(byPath["bin/relative"].flatMap(symlinkTarget), "tool")
        XCTAssertEqual(byPath["dangling"].flatMap(symlinkTarget), "../nowhere")
        XCTAssertEqual(byPath["pipe"], .other)
        XCTAssertFalse(nodes.contains { $0.path.hasPrefix("root/") }, "nothing under a symlink to /")
    }

    func testAnEmptyFolderHasNoNodes() throws {
        try scratch.mkdir("e")
        XCTAssertEqual(try walk("e").get(), [])
    }

    func testANameThatIsNotUTF8FailsNamingIt() throws {
        try scratch.mkdir("t/sub")
        try scratch.touch("t/sub/x", nameEndingWith: [0xC3])
        XCTAssertEqual(try walk("t").failure?.description, "cannot read \"sdk/sub/x\u{FFFD}\": its name is not UTF-8")
    }

    /// Between a folder's `lstat` and its opening, another folder or a symlink may take its place: neither is read
    /// as the folder that was seen.
    func testAFolderReplacedAfterItWasSeenIsNotRead() throws {
        try scratch.write("t/d/file", "x")
        let parent = try DirectoryHandle.opening(scratch.at("t"))
        let seen = try parent.status(of: "d").get()
        let replaced = "cannot read the folder \"sdk/d\": it was replaced while the tree was read"

        XCTAssertEqual(rename(scratch.at("t/d"), scratch.at("t/d.old")), 0)
        try scratch.mkdir("t/d")
        XCTAssertEqual(TreeFolder.open("d", in: parent, seen: seen, shownAs: "sdk/d").failure?.description, replaced)

        XCTAssertEqual(rmdir(scratch.at("t/d")), 0)
        try scratch.symlink("t/d", to: "d.old")
        XCTAssertEqual(TreeFolder.open("d", in: parent, seen: seen, shownAs: "sdk/d").failure?.description, replaced)

        XCTAssertEqual(unlink(scratch.at("t/d")), 0)
        XCTAssertEqual(rename(scratch.at("t/d.old"), scratch.at("t/d")), 0)
        XCTAssertNotNil(
            try TreeFolder.open("d", in: parent, seen: seen, shownAs: "sdk/d").get(), "the same folder again")
    }

    /// A folder that cannot be listed (a real EIO from a FUSE file system: root reads any folder whatever its
    /// mode) fails the walk, naming it.
    func testAFolderThatCannotBeListedFailsNamingIt() throws {
        try withFaultyTree { folder, faults in
            XCTAssertEqual(
                try TreeWalk.nodes(under: folder, shownAs: "sdk").get().map(\.path),
                ["bin", "bin/tool", "share", "share/doc", "share/doc/README"])
            try faults.inject(["readdir share/doc"])
            XCTAssertEqual(
                TreeWalk.nodes(under: folder, shownAs: "sdk").failure?.description,
                "cannot read the folder \"sdk/share/doc\": Input/output error")
        }
    }

    private func symlinkTarget(_ kind: TreeNode.Kind) -> String? {
        if case .symlink(let target, _) = kind { return target }
        return nil
    }
}
