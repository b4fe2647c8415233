import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// haul's own folder (`<root>/.haul`) is never followed anywhere: a symlink or a file of the wrong kind planted
/// in it makes every command refuse the root (exit 5) before touching anything, inside root or out.
final class PrivateFolderTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let bytes = Array("pinned content\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(files: ["/a.txt": bytes])
        let digest = StreamingHasher.digest(bytes, algorithm: .sha256).hex
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: ./out
            files:
              - url: \(server.url("/a.txt"))
                dest: a.txt
                sha256: \(digest)
            """)
    }

    override func tearDown() {
        server.stop()
    }

    /// A synced root, then a folder outside it holding files a careless cleanup would delete.
    private func syncedRootAndVictim() throws -> String {
        let first = try directory.haul(["sync"])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        server.resetLog()
        try directory.write("victim/keep.txt", "precious")
        try directory.write("victim/5f3a9c0e-1a.part", "named like a temporary file")
        try directory.write("victim/sha256-\(String(repeating: "0", count: 64)).part", "named like a partial")
        try directory.write("victim/state", "named like the state")
        return directory.path("victim")
    }

    private func replaceWithSymlink(_ relative: String, to target: String) throws {
        try? FileManager.default.removeItem(atPath: directory.path(relative))
        XCTAssertEqual(symlink(target, directory.path(relative)), 0)
    }

    private func assertRefused(
        _ result: ProcessResult, path relative: String, saying what: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(result.exitCode, 5, result.stderr, file: file, line: line)
        XCTAssertTrue(
            result.stderr.contains("error: \(directory.path(relative)) is \(what)"), result.stderr, file: file,
            line: line)
        XCTAssertEqual(server.requests.count, 0, "a refused root makes no request", file: file, line: line)
    }

    func testASymlinkedStagingFolderMakesEveryCommandRefuseAndNothingOutsideIsDeleted() throws {
        let victim = try syncedRootAndVictim()
        let before = TreeSnapshot(directory.path)
        for member in [".haul/tmp", ".haul/partial"] {
            try replaceWithSymlink("out/" + member, to: victim)
            let snapshot = TreeSnapshot(directory.path)
            for command in [["sync"], ["sync", "--dry-run"], ["plan"], ["verify"], ["sync", "--rehash"]] {
                server.resetLog()
                assertRefused(
                    try directory.haul(command), path: "out/" + member,
                    saying: "a symlink to \(victim); haul's folder must be a real directory inside root")
                XCTAssertEqual(
                    TreeSnapshot(directory.path), snapshot, "\(command) with \(member) a symlink changed something")
            }
            try FileManager.default.removeItem(atPath: directory.path("out/" + member))
        }
        XCTAssertEqual(TreeSnapshot(directory.path("victim")), before.subtree("victim"))
    }

    func testASymlinkedHaulFolderGetsNeitherLockNorStateWrittenThrough() throws {
        _ = try syncedRootAndVictim()
        let elsewhere = directory.path("elsewhere")
        try FileManager.default.moveItem(atPath: directory.path("out/.haul"), toPath: elsewhere)
        try replaceWithSymlink("out/.haul", to: elsewhere)
        try FileManager.default.removeItem(atPath: directory.path("out/a.txt"))
        let snapshot = TreeSnapshot(directory.path)
        for command in [["sync"], ["plan"], ["verify"], ["sync", "--dry-run"]] {
            server.resetLog()
            assertRefused(
                try directory.haul(command), path: "out/.haul",
                saying: "a symlink to \(elsewhere); haul's folder must be a real directory inside root")
            XCTAssertEqual(TreeSnapshot(directory.path), snapshot, "\(command) changed something")
        }
        XCTAssertFalse(directory.exists("out/a.txt"), "nothing is fetched into a refused root")
        XCTAssertEqual(directory.read("victim/keep.txt"), Array("precious".utf8))
    }

    func testAStateThatIsAFIFORefusesAtOnceInsteadOfHanging() throws {
        _ = try syncedRootAndVictim()
        try FileManager.default.removeItem(atPath: directory.path("out/.haul/state"))
        XCTAssertEqual(mkfifo(directory.path("out/.haul/state"), 0o600), 0)
        for command in [["sync"], ["plan"], ["sync", "--wait"]] {
            assertRefused(
                try directory.haul(command), path: "out/.haul/state",
                saying: "a FIFO; haul's state must be a regular file")
        }
    }

    func testMembersOfTheWrongKindAreRefusedNamingWhatTheyAre() throws {
        _ = try syncedRootAndVictim()
        let cases: [(member: String, make: () throws -> Void, what: String)] = [
            (
                ".haul/lock", { try self.directory.makeDirectory("out/.haul/lock") },
                "a directory; haul's lock must be a regular file"
            ),
            (
                ".haul/state", { try self.directory.makeDirectory("out/.haul/state") },
                "a directory; haul's state must be a regular file"
            ),
            (
                ".haul/tmp", { try self.directory.write("out/.haul/tmp", "a file") },
                "a regular file; haul's folder must be a real directory inside root"
            ),
            (
                ".haul", { try self.directory.write("out/.haul", "a file") },
                "a regular file; haul's folder must be a real directory inside root"
            ),
            (
                ".haul/state", { try self.replaceWithSymlink("out/.haul/state", to: "/etc/hostname") },
                "a symlink to /etc/hostname; haul's state must be a regular file"
            ),
            (
                ".haul/key", { try self.replaceWithSymlink("out/.haul/key", to: "/etc/hostname") },
                "a symlink to /etc/hostname; haul's key must be a regular file"
            ),
        ]
        for (member, make, what) in cases {
            try FileManager.default.removeItem(atPath: directory.path("out"))
            XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
            try FileManager.default.removeItem(atPath: directory.path("out/" + member))
            try make()
            server.resetLog()
            let snapshot = TreeSnapshot(directory.path)
            assertRefused(try directory.haul(["sync"]), path: "out/" + member, saying: what)
            XCTAssertEqual(TreeSnapshot(directory.path), snapshot, "a refused sync changed something")
            try FileManager.default.removeItem(atPath: directory.path("out/" + member))
        }
        let healthy = try directory.haul(["sync"])
        XCTAssertEqual(healthy.exitCode, 0, "once the intruder is gone the root is used again: \(healthy.stderr)")
    }

    /// `root` itself may be a symlink: where the user keeps their files is their choice.
    func testASymlinkedRootIsTheUsersChoice() throws {
        try directory.makeDirectory("real-out")
        XCTAssertEqual(symlink(directory.path("real-out"), directory.path("out")), 0)
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("real-out/a.txt"), bytes)
        XCTAssertTrue(directory.exists("real-out/.haul/state"))
    }
}

/// Every path under a folder with what it is: kind, size, mode and, for files, content. Equal snapshots mean
/// nothing was created, removed, or changed in content, mode or kind (a lock file's holder line included).
struct TreeSnapshot: Equatable, CustomStringConvertible {
    private(set) var entries: [String: String] = [:]

    init(_ root: String) {
        walk(root, relative: "")
    }

    private init(entries: [String: String]) { self.entries = entries }

    mutating func removeAll(where shouldBeRemoved: (String) -> Bool) {
        entries = entries.filter { !shouldBeRemoved($0.key) }
    }

    func subtree(_ prefix: String) -> TreeSnapshot {
        var inner: [String: String] = [:]
        for (path, value) in entries where path.hasPrefix(prefix + "/") {
            inner[String(path.dropFirst(prefix.count + 1))] = value
        }
        return TreeSnapshot(entries: inner)
    }

    private mutating func walk(_ root: String, relative: String) {
        let here = relative.isEmpty ? root : root + "/" + relative
        for name in (try? FileManager.default.contentsOfDirectory(atPath: here)) ?? [] {
            let path = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(root + "/" + path, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                entries[path] = "dir \(info.st_mode & 0o7777)"
                walk(root, relative: path)
            case S_IFREG:
                let content = FileManager.default.contents(atPath: root + "/" + path).map { Array($0) } ?? []
                entries[path] =
                    "file \(info.st_mode & 0o7777) \(StreamingHasher.digest(content, algorithm: .sha256).hex)"
            case S_IFLNK:
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + path)) ?? "?"
                entries[path] = "symlink \(target)"
            default:
                entries[path] = "other \(info.st_mode)"
            }
        }
    }

    var description: String {
        entries.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "\n")
    }
}

/// The staging folder is held open for the whole run: swapped for a symlink after the run checked it, it still
/// receives nothing outside root (every temporary file is created, written and renamed through the descriptor).
final class StagingSwapTests: XCTestCase {
    func testAStagingFolderSwappedForASymlinkMidRunSendsNothingOutside() throws {
        let directory = try TemporaryDirectory()
        let first = Array("first\n".utf8), second = Array("second\n".utf8)
        let files = StaticFiles(["/first": first, "/second": second])
        let gates = Mutex<Set<String>>([])
        let server = try LoopbackHTTPServer { request in
            while !gates.withLock({ $0.contains(request.path) }) { usleep(5_000) }
            return files.respond(to: request)
        }
        defer {
            gates.withLock { $0 = ["/first", "/second"] }
            server.stop()
        }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/first")), dest: first.txt, sha256: \(sha256(first)) }
              - { url: \(server.url("/second")), dest: second.txt, sha256: \(sha256(second)) }
            """)
        try directory.makeDirectory("victim")
        let sync = try HaulProcess.start(
            ["sync", "--jobs", "1"], currentDirectory: directory.path,
            outputPath: directory.path("output.txt"))
        XCTAssertEqual(sync.wait(until: { server.requests.count == 1 }, timeout: 20), .conditionMet, sync.output)
        XCTAssertEqual(rename(directory.path("out/.haul/tmp"), directory.path("out/.haul/tmp.held")), 0)
        XCTAssertEqual(symlink(directory.path("victim"), directory.path("out/.haul/tmp")), 0)
        gates.withLock { _ = $0.insert("/first") }
        XCTAssertEqual(sync.wait(until: { server.requests.count == 2 }, timeout: 20), .conditionMet, sync.output)
        // The second download is under way: its temporary file is in the folder the run holds, not the victim.
        XCTAssertEqual(directory.list("victim"), [], "nothing is created outside root")
        XCTAssertEqual(
            directory.list("out/.haul/tmp.held").count, 1, directory.list("out/.haul/tmp.held").joined(separator: ", "))
        gates.withLock { _ = $0.insert("/second") }
        XCTAssertEqual(sync.waitForExit(timeout: 30), 0, sync.output)
        XCTAssertEqual(directory.read("out/first.txt"), first)
        XCTAssertEqual(directory.read("out/second.txt"), second)
        XCTAssertEqual(directory.list("victim"), [])
    }
}
