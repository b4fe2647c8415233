import Foundation
import Glibc
import HaulArchive
import HaulTestSupport
import XCTest

/// Archives no archiver would make, crafted member by member (`Tests/Tools/craft_archive.py`): each is refused
/// with a message naming the archive, the member and the rule, and nothing is written outside the tree, in
/// particular not where the archive aims.
final class HostileArchiveTests: XCTestCase {
    private var bench: UnpackBench!

    override func setUpWithError() throws { bench = try UnpackBench() }

    override func tearDown() {
        bench?.assertNothingOutsideTrees(escapes: [
            bench.directory.path("escaped"), bench.directory.path("outside/escaped"),
        ])
        var info = stat()
        XCTAssertEqual(lstat(bench.directory.path("outside/sentinel"), &info), 0)
        XCTAssertEqual(info.st_nlink, 1, "a hard link was made to the sentinel")
        bench = nil
    }

    /// Crafts `members` as `name` (format from its suffix: `.zip`, else a GNU tar, or `format`), unpacks it as it
    /// would arrive (or, `fromFile`, from the file: a zip's symlinks are in its central directory) and checks the
    /// failure's message.
    private func assertRefused(
        _ name: String, format: String? = nil, fromFile: Bool = false, _ members: [[String: Any]],
        rules: UnpackRules = UnpackRules(), _ message: String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let archive = try bench.craft(name, format: format ?? (name.hasSuffix(".zip") ? "zip" : "gnu"), members)
        let (_, result) = try fromFile ? bench.unpackFile(archive, rules: rules) : bench.unpack(archive, rules: rules)
        XCTAssertEqual(bench.failure(result, file: file, line: line), message, file: file, line: line)
    }

    func testAbsoluteNames() throws {
        let target = bench.directory.path("escaped")
        try assertRefused(
            "absolute.tar", [["name": target, "data": "x"]],
            "cannot unpack \"absolute.tar\": member \"\(target)\": its name is absolute; members are unpacked inside the folder"
        )
        try assertRefused(
            "absolute.zip", [["name": "/escaped", "data": "x"]],
            "cannot unpack \"absolute.zip\": member \"/escaped\": its name is absolute; members are unpacked inside the folder"
        )
    }

    func testParentComponents() throws {
        let rule = "its name contains \"..\", which could leave the folder"
        try assertRefused(
            "up.tar", [["name": "../escaped", "data": "x"]], "cannot unpack \"up.tar\": member \"../escaped\": \(rule)")
        try assertRefused(
            "deep.tar", [["name": "a/", "type": "dir"], ["name": "a/../../escaped", "data": "x"]],
            "cannot unpack \"deep.tar\": member \"a/../../escaped\": \(rule)")
        try assertRefused(
            "up.zip", [["name": "../escaped", "data": "x"]], "cannot unpack \"up.zip\": member \"../escaped\": \(rule)")
        // Stripping would drop the "..", but the archive that holds it is hostile all the same.
        try assertRefused(
            "stripped.tar", [["name": "../escaped", "data": "x"]], rules: UnpackRules(strip: 1),
            "cannot unpack \"stripped.tar\": member \"../escaped\": \(rule)")
    }

    /// The classic two-step: a symlink out of the tree, then a member written through it.
    func testWritingThroughASymlinkTheArchiveMade() throws {
        try assertRefused(
            "escape.tar",
            [
                ["name": "link", "type": "symlink", "target": "../outside"],
                ["name": "link/escaped", "data": "x"],
            ],
            "cannot unpack \"escape.tar\": member \"link\": it is a symlink to \"../outside\", outside the folder")
        // Even a symlink inside the tree is never written through.
        try assertRefused(
            "through.tar",
            [
                ["name": "sub/", "type": "dir"], ["name": "link", "type": "symlink", "target": "sub"],
                ["name": "link/file", "data": "x"],
            ],
            "cannot unpack \"through.tar\": member \"link/file\": its path goes through \"link\", a symlink the archive made"
        )
        try assertRefused(
            "through.zip", fromFile: true,
            [["name": "link", "type": "symlink", "target": "."], ["name": "link/file", "data": "x"]],
            "cannot unpack \"through.zip\": member \"link/file\": its path goes through \"link\", a symlink the archive made"
        )
        try assertRefused(
            "file.tar", [["name": "f", "data": "x"], ["name": "f/g", "data": "y"]],
            "cannot unpack \"file.tar\": member \"f/g\": its path goes through \"f\", which is not a folder")
    }

    func testSymlinksThatLeadOutOfTheTree() throws {
        try assertRefused(
            "absolute-link.tar", [["name": "l", "type": "symlink", "target": "/etc"]],
            "cannot unpack \"absolute-link.tar\": member \"l\": it is a symlink to an absolute path, \"/etc\"")
        try assertRefused(
            "outside-link.tar", [["name": "a/l", "type": "symlink", "target": "../../outside/sentinel"]],
            "cannot unpack \"outside-link.tar\": member \"a/l\": it is a symlink to \"../../outside/sentinel\", "
                + "outside the folder")
        try assertRefused(
            "outside-link.zip", fromFile: true, [["name": "l", "type": "symlink", "target": "../escaped"]],
            "cannot unpack \"outside-link.zip\": member \"l\": it is a symlink to \"../escaped\", outside the folder")
        // Lexically inside ("d/../s1/.." is the root), but s1 is the root itself: the kernel would take the last
        // ".." from there, out of the tree.
        try assertRefused(
            "chained.tar",
            [
                ["name": "s1", "type": "symlink", "target": "."],
                ["name": "d/s2", "type": "symlink", "target": "../s1/.."],
            ],
            "cannot unpack \"chained.tar\": member \"d/s2\": it is a symlink to \"../s1/..\": a \"..\" after a name "
                + "could leave the folder through another symlink")
    }

    func testHardLinksToAnythingButAnEarlierFileOfTheTree() throws {
        let rule = "which is not a file unpacked before it"
        for (name, target) in [("etc.tar", "/etc/passwd"), ("sentinel.tar", "../outside/sentinel")] {
            try assertRefused(
                name, [["name": "h", "type": "hardlink", "target": target]],
                "cannot unpack \"\(name)\": member \"h\": it is a hard link to \"\(target)\", \(rule)")
        }
        try assertRefused(
            "later.tar", [["name": "h", "type": "hardlink", "target": "f"], ["name": "f", "data": "x"]],
            "cannot unpack \"later.tar\": member \"h\": it is a hard link to \"f\", \(rule)")
        try assertRefused(
            "folder.tar", [["name": "d/", "type": "dir"], ["name": "h", "type": "hardlink", "target": "d"]],
            "cannot unpack \"folder.tar\": member \"h\": it is a hard link to \"d\", \(rule)")
        try assertRefused(
            "symlink.tar",
            [
                ["name": "f", "data": "x"], ["name": "s", "type": "symlink", "target": "f"],
                ["name": "h", "type": "hardlink", "target": "s"],
            ],
            "cannot unpack \"symlink.tar\": member \"h\": it is a hard link to \"s\", \(rule)")
        let (tree, result) = try bench.unpack(
            try bench.craft(
                "good.tar",
                [
                    ["name": "f", "data": "x"],
                    ["name": "h", "type": "hardlink", "target": "f"],
                ]))
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), try bench.listing(of: tree))
        XCTAssertEqual(bench.directory.list(tree), ["f", "h"])
    }

    func testDevicesAndFIFOs() throws {
        for (type, words) in [("chr", "a character device"), ("blk", "a block device"), ("fifo", "a FIFO")] {
            try assertRefused(
                "\(type).tar", [["name": "node", "type": type]],
                "cannot unpack \"\(type).tar\": member \"node\": it is \(words): device nodes, FIFOs and sockets are not unpacked"
            )
        }
        // Left out by the selection, a device node is not looked at: a root file system's tree without /dev.
        let archive = try bench.craft(
            "rootfs.tar", [["name": "dev/null", "type": "chr"], ["name": "etc/hostname", "data": "box\n"]])
        let (tree, result) = try bench.unpack(archive, rules: UnpackRules(selects: { !$0.hasPrefix("dev") }))
        XCTAssertEqual(bench.tree(result)?.members.map(\.path), ["etc", "etc/hostname"])
        XCTAssertEqual(bench.directory.list(tree), ["etc"])
    }

    func testDuplicateNames() throws {
        let rule = "the archive holds this path twice"
        try assertRefused(
            "twice.tar", [["name": "a", "data": "first"], ["name": "a", "data": "second"]],
            "cannot unpack \"twice.tar\": member \"a\": \(rule)")
        try assertRefused(
            "folder-after-file.tar", [["name": "d", "data": "x"], ["name": "d/", "type": "dir"]],
            "cannot unpack \"folder-after-file.tar\": member \"d/\": \(rule)")
        try assertRefused(
            "file-after-folder.tar", [["name": "d/f", "data": "x"], ["name": "d", "data": "y"]],
            "cannot unpack \"file-after-folder.tar\": member \"d\": \(rule)")
        try assertRefused(
            "normalized.tar", [["name": "a/b", "data": "x"], ["name": "./a//b", "data": "y"]],
            "cannot unpack \"normalized.tar\": member \"./a//b\": \(rule)")
        try assertRefused(
            "twice.zip", [["name": "a", "data": "first"], ["name": "a", "data": "second"]],
            "cannot unpack \"twice.zip\": member \"a\": \(rule)")
        // A folder named again (or after a member inside it) is no duplicate.
        let archive = try bench.craft(
            "folders.tar",
            [
                ["name": "d/", "type": "dir"], ["name": "d/f", "data": "x"],
                ["name": "d/", "type": "dir"], ["name": "e/f", "data": "y"], ["name": "e", "type": "dir"],
            ])
        let (tree, result) = try bench.unpack(archive)
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), try bench.listing(of: tree))
        XCTAssertEqual(bench.tree(result)?.members.map(\.path), ["d", "d/f", "e", "e/f"])
    }

    func testNamesOverThePathLimits() throws {
        let long = String(repeating: "n", count: 256)
        try assertRefused(
            "name.tar", format: "pax", [["name": "d/" + long, "data": "x"]],
            "cannot unpack \"name.tar\": member \"d/\(String(repeating: "n", count: 78))…\": "
                + "\"\(String(repeating: "n", count: 80))…\" is 256 bytes long; a file or folder name has at most 255 bytes"
        )
        let deep = Array(repeating: String(repeating: "p", count: 240), count: 17).joined(separator: "/")
        try assertRefused(
            "path.tar", format: "pax", [["name": deep, "data": "x"]],
            "cannot unpack \"path.tar\": member \"\(deep.prefix(80))…\": its path is 4096 bytes long; a path has at "
                + "most 4095 bytes")
        // After strip, the same path is within the limit.
        let (_, result) = try bench.unpack(bench.work("path.tar"), rules: UnpackRules(strip: 1))
        XCTAssertEqual(bench.tree(result)?.files, 1)
    }

    func testNamesThatAreNotUTF8() throws {
        try assertRefused(
            "bytes.tar", [["name_hex": "6261c3" + "ff", "data": "x"]],
            "cannot unpack \"bytes.tar\": member \"ba\u{FFFD}\u{FFFD}\": its name is not valid UTF-8")
        try assertRefused(
            "bytes-pax.tar", format: "pax", [["name_hex": "626164ff", "data": "x"]],
            "cannot unpack \"bytes-pax.tar\": member \"bad\u{FFFD}\": its name is not valid UTF-8")
    }

    func testTooManyMembers() throws {
        let members = (1...6).map { ["name": "f\($0)", "data": "x"] }
        try assertRefused(
            "many.tar", members, rules: UnpackRules(maxMembers: 5),
            "cannot unpack \"many.tar\": member \"f6\": the archive holds more than 5 members")
        // Members left out count too: the cap bounds the work, not the tree.
        try assertRefused(
            "many-skipped.tar", members, rules: UnpackRules(selects: { $0 == "f1" }, maxMembers: 5),
            "cannot unpack \"many-skipped.tar\": member \"f6\": the archive holds more than 5 members")
        let (_, result) = try bench.unpack(bench.work("many.tar"), rules: UnpackRules(maxMembers: 6))
        XCTAssertEqual(bench.tree(result)?.files, 6)
    }

    /// setuid, setgid, sticky and group or other write bits are dropped: 0644, or 0755 with any execute bit, exactly,
    /// whatever the umask.
    func testSpecialModeBitsAreDropped() throws {
        let archive = try bench.craft(
            "modes.tar",
            [
                ["name": "suid", "data": "x", "mode": 0o6777],
                ["name": "plain", "data": "x", "mode": 0o4666],
                ["name": "d/", "type": "dir", "mode": 0o1777], ["name": "d/e/f", "data": "x"],
            ])
        for mask in [0o022, 0o077] as [mode_t] {
            let previous = umask(mask)
            defer { umask(previous) }
            let (tree, result) = try bench.unpack(archive)
            XCTAssertEqual(bench.tree(result)?.members.map(\.description), try bench.listing(of: tree))
            for (name, mode) in [("suid", 0o755), ("plain", 0o644), ("d", 0o755), ("d/e", 0o755), ("d/e/f", 0o644)]
                as [(String, mode_t)]
            {
                var info = stat()
                XCTAssertEqual(lstat(bench.directory.path("\(tree)/\(name)"), &info), 0)
                XCTAssertEqual(info.st_mode & 0o7777, mode, "\(name) under umask \(String(mask, radix: 8))")
            }
        }
    }
}
