import Foundation
import Glibc
import HaulTestSupport
import XCTest

/// Hostile archives through the real `haul` binary, crafted member by member: each is refused with exit 1 and an
/// error naming the archive (the entry's folder), the member and the rule; nothing is written outside the root (nor
/// where the archive aims), a folder that did not exist is still absent, a tree that existed is as it was, and
/// nothing is left beside `.haul`.
final class ArchiveHostileTests: XCTestCase {
    private var fixture: ArchiveFixture!
    /// The tree `kept` held before the hostile archive was asked for.
    private var before: [String] = []

    override func setUpWithError() throws {
        fixture = try ArchiveFixture()
        try fixture.source("good", [.file("README", "good\n"), .file("bin/tool", "tool\n", executable: true)])
        let good = try fixture.pack("good", format: "tar.gz")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/good.tar.gz", good), dest: "kept", sha256: sha256(good))
        ])
        try fixture.syncSucceeds()
        before = try fixture.listing("out/kept")
        XCTAssertEqual(before.count, 3)
    }

    override func tearDown() { fixture = nil }

    /// Serves the crafted archive to two entries, `kept` (which holds a tree) and `fresh` (which does not), and checks
    /// that both are refused saying `member` and `rule`, and that nothing changed.
    private func assertRefused(
        _ name: String, format: String = "gnu", _ members: [[String: Any]], member: String,
        rule: String, extract: [String] = [], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let url = fixture.publish("/hostile/" + name, try fixture.craft(name, format: format, members))
        try fixture.manifest([
            ArchiveFixture.entry(url, dest: "kept", extract: extract),
            ArchiveFixture.entry(url, dest: "fresh", extract: extract),
        ])
        let sync = try fixture.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1, "\(sync.stdout)\(sync.stderr)", file: file, line: line)
        for dest in ["kept", "fresh"] {
            let expected = "error: \(dest): cannot unpack \"\(dest)\": member \"\(member)\": \(rule)"
            XCTAssertTrue(
                sync.stderr.contains(expected), "\(expected)\nnot in:\n\(sync.stderr)", file: file, line: line)
        }
        XCTAssertEqual(try fixture.listing("out/kept"), before, "the old tree is as it was", file: file, line: line)
        XCTAssertFalse(fixture.directory.exists("out/fresh"), file: file, line: line)
        fixture.assertNoLitter(destinations: ["kept"], name, file: file, line: line)
    }

    func testAbsoluteNames() throws {
        let target = fixture.directory.path("escaped")
        let rule = "its name is absolute; members are unpacked inside the folder"
        try assertRefused("absolute.tar", [["name": target, "data": "x"]], member: target, rule: rule)
        try assertRefused("absolute.zip", format: "zip", [["name": target, "data": "x"]], member: target, rule: rule)
    }

    func testParentComponents() throws {
        let rule = "its name contains \"..\", which could leave the folder"
        try assertRefused("up.tar", [["name": "../../escaped", "data": "x"]], member: "../../escaped", rule: rule)
        try assertRefused(
            "deep.tar", [["name": "a/", "type": "dir"], ["name": "a/../../../../escaped", "data": "x"]],
            member: "a/../../../../escaped", rule: rule)
        try assertRefused(
            "up.zip", format: "zip", [["name": "../../escaped", "data": "x"]], member: "../../escaped", rule: rule)
        // strip: 1 would drop the "..", but the archive that holds it is hostile all the same.
        try assertRefused(
            "stripped.tar", [["name": "../escaped", "data": "x"]], member: "../escaped", rule: rule,
            extract: ["strip: 1"])
    }

    /// The two-step escape: a symlink the archive made, then a member written through it.
    func testAMemberWrittenThroughASymlinkTheArchiveMade() throws {
        try assertRefused(
            "escape.tar",
            [
                ["name": "link", "type": "symlink", "target": "../../../outside"],
                ["name": "link/escaped", "data": "x"],
            ],
            member: "link", rule: "it is a symlink to \"../../../outside\", outside the folder")
        try assertRefused(
            "through.tar",
            [
                ["name": "sub/", "type": "dir"], ["name": "link", "type": "symlink", "target": "sub"],
                ["name": "link/escaped", "data": "x"],
            ],
            member: "link/escaped", rule: "its path goes through \"link\", a symlink the archive made")
        try assertRefused(
            "absolute-link.tar",
            [
                ["name": "link", "type": "symlink", "target": fixture.directory.path("outside")],
                ["name": "link/escaped", "data": "x"],
            ],
            member: "link", rule: "it is a symlink to an absolute path, \"\(fixture.directory.path("outside"))\"")
        try assertRefused(
            "through.zip", format: "zip",
            [
                ["name": "link", "type": "symlink", "target": "."],
                ["name": "link/escaped", "data": "x"],
            ],
            member: "link/escaped", rule: "its path goes through \"link\", a symlink the archive made")
    }

    func testHardLinksOutOfTheTree() throws {
        let sentinel = fixture.directory.path("outside/sentinel")
        try assertRefused(
            "hard-absolute.tar", [["name": "h", "type": "hardlink", "target": sentinel]],
            member: "h", rule: "it is a hard link to \"\(sentinel)\", which is not a file unpacked before it")
        try assertRefused(
            "hard-up.tar", [["name": "h", "type": "hardlink", "target": "../../../outside/sentinel"]],
            member: "h",
            rule: "it is a hard link to \"../../../outside/sentinel\", which is not a file unpacked before it")
        // A hard link to a member the archive has not unpacked (yet): it could only name something else.
        try assertRefused(
            "hard-forward.tar",
            [["name": "h", "type": "hardlink", "target": "later"], ["name": "later", "data": "x"]],
            member: "h", rule: "it is a hard link to \"later\", which is not a file unpacked before it")
    }

    func testDeviceNodesAndFIFOs() throws {
        try assertRefused(
            "chr.tar", [["name": "dev/null", "type": "chr"]], member: "dev/null",
            rule: "it is a character device: device nodes, FIFOs and sockets are not unpacked")
        try assertRefused(
            "blk.tar", [["name": "disk", "type": "blk"]], member: "disk",
            rule: "it is a block device: device nodes, FIFOs and sockets are not unpacked")
        try assertRefused(
            "fifo.tar", [["name": "ok", "data": "fine"], ["name": "pipe", "type": "fifo"]], member: "pipe",
            rule: "it is a FIFO: device nodes, FIFOs and sockets are not unpacked")
    }

    func testDuplicateNames() throws {
        let rule = "the archive holds this path twice"
        try assertRefused(
            "twice.tar", [["name": "a", "data": "first"], ["name": "a", "data": "second"]], member: "a", rule: rule)
        try assertRefused(
            "folder-then-file.tar", [["name": "a/", "type": "dir"], ["name": "a", "data": "x"]], member: "a", rule: rule
        )
        try assertRefused(
            "twice.zip", format: "zip", [["name": "a", "data": "first"], ["name": "a", "data": "second"]],
            member: "a", rule: rule)
    }

    /// A decompression bomb: 8 MiB of zeros in a few KiB of gzip, above `max_unpacked: 1M`. The same archive with
    /// room for it unpacks: the cap, not the archive, is what refused it.
    func testADecompressionBombAboveMaxUnpackedIsRefused() throws {
        try fixture.directory.write("src/bomb/zeros", [UInt8](repeating: 0, count: 8 << 20))
        let bomb = try fixture.pack("bomb", format: "tar.gz")
        XCTAssertLessThan(bomb.count, 64 << 10)
        let url = fixture.publish("/bomb.tar.gz", bomb)
        try fixture.manifest([
            ArchiveFixture.entry(url, dest: "kept", extract: ["max_unpacked: 1M"]),
            ArchiveFixture.entry(url, dest: "fresh", extract: ["max_unpacked: 1M"]),
        ])
        let sync = try fixture.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 1, sync.stdout + sync.stderr)
        for dest in ["kept", "fresh"] {
            let expected =
                "error: \(dest): cannot unpack \"\(dest)\": member \"zeros\": the members unpack to more than 1048576 bytes"
            XCTAssertTrue(sync.stderr.contains(expected), "\(expected)\nnot in:\n\(sync.stderr)")
        }
        XCTAssertEqual(try fixture.listing("out/kept"), before)
        XCTAssertFalse(fixture.directory.exists("out/fresh"))
        fixture.assertNoLitter(destinations: ["kept"])

        try fixture.manifest([ArchiveFixture.entry(url, dest: "fresh", extract: ["max_unpacked: 9M"])])
        try fixture.syncSucceeds()
        XCTAssertEqual(fixture.directory.read("out/fresh/zeros")?.count, 8 << 20)
    }

    /// setuid, setgid and sticky bits are dropped, not refused (the tree pins what it contains, not who may change
    /// it): the members are unpacked with plain modes.
    func testSetuidSetgidAndStickyBitsAreDropped() throws {
        let url = fixture.publish(
            "/hostile/modes.tar",
            try fixture.craft(
                "modes.tar",
                [
                    ["name": "setuid", "data": "x", "mode": 0o4755],
                    ["name": "setgid", "data": "x", "mode": 0o2755],
                    ["name": "sticky/", "type": "dir", "mode": 0o1777],
                ]))
        try fixture.manifest([ArchiveFixture.entry(url, dest: "modes")])
        try fixture.syncSucceeds()
        for (name, mode) in [("setuid", 0o755), ("setgid", 0o755), ("sticky", 0o755)] {
            var info = stat()
            XCTAssertEqual(lstat(fixture.directory.path("out/modes/" + name), &info), 0, name)
            XCTAssertEqual(info.st_mode & 0o7777, mode_t(mode), "\(name): \(String(info.st_mode & 0o7777, radix: 8))")
        }
    }
}
