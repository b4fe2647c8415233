@testable import HaulArchive
import HaulFailures
import HaulManifest
import Synchronization
import XCTest

/// The rules from values alone: a header and what the tree holds decide what happens to a member, with no
/// archive and no file system.
final class MemberRulesTests: XCTestCase {
    private let keepAll = MemberRules(strip: 0, selects: { _ in true })

    private func header(_ name: String, _ kind: MemberHeader.Kind = .file, permissions: UInt32 = 0o644) -> MemberHeader
    {
        MemberHeader(name: Array(name.utf8), kind: kind, permissions: permissions)
    }

    private func path(_ text: String) throws -> DestinationPath { try XCTUnwrap(DestinationPath(text)) }

    /// A ledger holding `members` (folders end in `/`, symlinks in `@`), as if written in that order.
    private func ledger(_ members: [String]) throws -> TreeLedger {
        var ledger = TreeLedger()
        for member in members {
            let kind: MemberHeader.Kind =
                member.hasSuffix("/") ? .directory : member.hasSuffix("@") ? .symlink(target: Array("x".utf8)) : .file
            let name = member.hasSuffix("@") ? String(member.dropLast()) : member
            guard case .write(let planned) = keepAll.judge(header(name, kind), in: ledger) else {
                throw SetupFailure("\(member) was not allowed")
            }
            ledger.record(planned)
        }
        return ledger
    }

    func testNamesAreNormalizedAndStrippedAsTarCountsComponents() throws {
        XCTAssertEqual(MemberRules.destination(of: Array("./a//b/./c".utf8), strip: 0), .path(try path("a/b/c")))
        XCTAssertEqual(MemberRules.destination(of: Array("./a/b".utf8), strip: 1), .path(try path("a/b")))
        XCTAssertEqual(MemberRules.destination(of: Array("a//b/./c".utf8), strip: 2), .path(try path("c")))
        XCTAssertEqual(MemberRules.destination(of: Array("a/b/".utf8), strip: 2), .skipped)
        XCTAssertEqual(MemberRules.destination(of: Array("./".utf8), strip: 0), .root)
        XCTAssertEqual(MemberRules.destination(of: Array("a/.".utf8), strip: 1), .root)
        XCTAssertEqual(MemberRules.destination(of: [], strip: 0), .root)
        XCTAssertEqual(MemberRules(strip: -1, selects: { _ in true }).strip, 0)
    }

    func testNamesThatAreRefusedWhateverTheStrip() {
        let cases: [([UInt8], UnpackFailure.Rule)] = [
            ([0x61, 0x00, 0x62], .containsNUL), ([0x61, 0xff], .invalidUTF8), ([0xc3], .invalidUTF8),
            (Array("/etc/passwd".utf8), .absolute), (Array("a/../b".utf8), .parentComponent),
            (Array("..".utf8), .parentComponent),
        ]
        for (name, rule) in cases {
            for strip in [0, 5] {
                XCTAssertEqual(
                    MemberRules.destination(of: name, strip: strip), .refused(rule), "\(name) strip \(strip)")
            }
        }
    }

    func testPathLimitsAreDestinationPathsLimits() {
        let component = String(repeating: "c", count: DestinationPath.maximumNameBytes)
        XCTAssertEqual(MemberRules.destination(of: Array(component.utf8), strip: 0), .path(DestinationPath(component)!))
        XCTAssertEqual(
            MemberRules.destination(of: Array((component + "c").utf8), strip: 0),
            .refused(.componentTooLong(component: component + "c", bytes: 256)))
        let exactly = Array(repeating: String(repeating: "p", count: 15), count: 256).joined(separator: "/")
        XCTAssertEqual(exactly.utf8.count, DestinationPath.maximumBytes)
        XCTAssertEqual(MemberRules.destination(of: Array(exactly.utf8), strip: 0), .path(DestinationPath(exactly)!))
        XCTAssertEqual(
            MemberRules.destination(of: Array((exactly + "p").utf8), strip: 0), .refused(.nameTooLong(bytes: 4096)))
        XCTAssertEqual(
            MemberRules.destination(of: Array(("skip/" + exactly).utf8), strip: 1), .path(DestinationPath(exactly)!))
    }

    func testKindsAndModes() throws {
        XCTAssertEqual(
            keepAll.judge(header("tool", permissions: 0o4711), in: TreeLedger()),
            .write(PlannedMember(path: try path("tool"), kind: .file(executable: true), newFolders: [])))
        XCTAssertEqual(
            keepAll.judge(header("data", permissions: 0o6666), in: TreeLedger()),
            .write(PlannedMember(path: try path("data"), kind: .file(executable: false), newFolders: [])))
        for what: FileKind in [.socket, .fifo, .characterDevice, .blockDevice] {
            XCTAssertEqual(keepAll.judge(header("node", .special(what)), in: TreeLedger()), .refuse(.special(what)))
        }
        XCTAssertEqual(keepAll.judge(header(".", .file), in: TreeLedger()), .refuse(.namesTheRoot))
        XCTAssertEqual(keepAll.judge(header("./", .directory), in: TreeLedger()), .skip)
    }

    func testAncestorsAreMadeOnceAndNeverGoneThroughUnlessFolders() throws {
        XCTAssertEqual(
            keepAll.judge(header("a/b/c"), in: TreeLedger()),
            .write(
                PlannedMember(
                    path: try path("a/b/c"), kind: .file(executable: false),
                    newFolders: [try path("a"), try path("a/b")])))
        XCTAssertEqual(
            keepAll.judge(header("a/b/d"), in: try ledger(["a/b/c"])),
            .write(PlannedMember(path: try path("a/b/d"), kind: .file(executable: false), newFolders: [])))
        XCTAssertEqual(keepAll.judge(header("f/x"), in: try ledger(["f"])), .refuse(.throughNonFolder("f")))
        XCTAssertEqual(keepAll.judge(header("d/l/x"), in: try ledger(["d/", "d/l@"])), .refuse(.throughSymlink("d/l")))
    }

    func testDuplicates() throws {
        XCTAssertEqual(keepAll.judge(header("a"), in: try ledger(["a"])), .refuse(.duplicate))
        XCTAssertEqual(keepAll.judge(header("a", .directory), in: try ledger(["a"])), .refuse(.duplicate))
        XCTAssertEqual(keepAll.judge(header("d"), in: try ledger(["d/x"])), .refuse(.duplicate))
        XCTAssertEqual(
            keepAll.judge(header("l", .symlink(target: Array("x".utf8))), in: try ledger(["l@"])), .refuse(.duplicate))
        XCTAssertEqual(keepAll.judge(header("d/", .directory), in: try ledger(["d/x"])), .present)
        XCTAssertEqual(keepAll.judge(header("d/", .directory), in: try ledger(["d/"])), .present)
        // Identity is bytes: two spellings of "café" are two names.
        XCTAssertEqual(
            keepAll.judge(header("cafe\u{301}"), in: try ledger(["caf\u{e9}"])),
            .write(PlannedMember(path: try path("cafe\u{301}"), kind: .file(executable: false), newFolders: [])))
    }

    func testSymlinkTargetsStayInTheTree() throws {
        let cases: [(String, String, Result<String, UnpackFailure.Rule>)] = [
            ("l", "x", .success("x")), ("a/l", "../x", .success("../x")),
            ("a/b/l", "../../x/./y", .success("../../x/./y")),
            ("a/l", "..", .success("..")), ("l", ".", .success(".")),
            ("l", "..", .failure(.symlinkTargetOutside(".."))),
            ("a/l", "../../x", .failure(.symlinkTargetOutside("../../x"))),
            ("l", "/etc", .failure(.symlinkTargetAbsolute("/etc"))),
            ("l", "a/../b", .failure(.symlinkTargetClimbsAfterName("a/../b"))),
            ("l", "", .failure(.symlinkTargetInvalid(.empty))),
            ("l", String(repeating: "x", count: 4096), .failure(.symlinkTargetInvalid(.tooLong(bytes: 4096)))),
        ]
        for (link, target, expected) in cases {
            XCTAssertEqual(
                MemberRules.symlinkTarget(Array(target.utf8), of: try path(link)), expected, "\(link) -> \(target)")
        }
        XCTAssertEqual(
            MemberRules.symlinkTarget([0x61, 0xff], of: try path("l")),
            .failure(.symlinkTargetInvalid(.notUTF8)))
        XCTAssertEqual(
            keepAll.judge(header("l", .symlink(target: Array("/".utf8))), in: TreeLedger()),
            .refuse(.symlinkTargetAbsolute("/")))
    }

    func testHardLinksGoOnlyToEarlierFilesNamedAsTheyAreStripped() throws {
        let stripping = MemberRules(strip: 1, selects: { _ in true })
        var tree = TreeLedger()
        guard case .write(let file) = stripping.judge(header("top/f"), in: tree) else {
            return XCTFail("top/f not written")
        }
        tree.record(file)
        XCTAssertEqual(
            stripping.judge(header("top/h", .hardLink(target: Array("top/f".utf8))), in: tree),
            .write(PlannedMember(path: try path("h"), kind: .hardLink(to: try path("f")), newFolders: [])))
        for target in ["f", "top/g", "/top/f", "top/../f", "top"] {
            XCTAssertEqual(
                stripping.judge(header("top/h", .hardLink(target: Array(target.utf8))), in: tree),
                .refuse(.hardLinkTarget(target)), target)
        }
    }

    func testSelectionSeesTheStrippedPath() throws {
        let seen = SeenPaths()
        let rules = MemberRules(
            strip: 1,
            selects: {
                seen.add($0); return $0.hasPrefix("bin")
            })
        XCTAssertEqual(
            rules.judge(header("pkg/bin/tool"), in: TreeLedger()),
            .write(
                PlannedMember(path: try path("bin/tool"), kind: .file(executable: false), newFolders: [try path("bin")])
            ))
        XCTAssertEqual(rules.judge(header("pkg/share/doc", .special(.fifo)), in: TreeLedger()), .skip)
        XCTAssertEqual(rules.judge(header("pkg/", .directory), in: TreeLedger()), .skip)
        XCTAssertEqual(seen.paths, ["bin/tool", "share/doc"])
    }
}

/// The paths a selection was asked about, in order.
private final class SeenPaths: Sendable {
    private let seen = Mutex<[String]>([])
    var paths: [String] { seen.withLock { $0 } }
    func add(_ path: String) { seen.withLock { $0.append(path) } }
}
