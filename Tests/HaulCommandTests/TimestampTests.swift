import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// File times are data like any other: haul handles any time a file system can hold, and never trusts one that
/// is too coarse to show a change.
final class TimestampTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let bytes = Array("the pinned content\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(files: ["/a.txt": bytes, "/b.txt": bytes])
        let digest = StreamingHasher.digest(bytes, algorithm: .sha256).hex
        try directory.write("haul.yaml", """
            version: 1
            root: out
            files:
              - { url: \(server.url("/a.txt")), dest: a.txt, sha256: \(digest) }
              - { url: \(server.url("/b.txt")), dest: b.txt, sha256: \(digest) }
            """)
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }


    /// Sets mtime (and so ctime, to now) of `path` without following a final symlink.
    private func setModified(_ path: String, seconds: Int) {
        var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW), 0, "utimensat \(path): \(errno)")
    }

    func testDatesBeyondWhatNanosecondsSinceNineteenSeventyHoldNeverCrashAnyCommand() throws {
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        // 2300-01-01 and 1600-01-01: past 2262 and before 1677, as a tar archive with a bogus date leaves them.
        for seconds in [10_413_792_000, -11_676_096_000] {
            setModified(directory.path("out/a.txt"), seconds: seconds)
            setModified(directory.path("out/.haul/state"), seconds: seconds)
            try? FileManager.default.removeItem(atPath: directory.path("out/b.txt"))
            XCTAssertEqual(symlink("a.txt", directory.path("out/b.txt")), 0)
            setModified(directory.path("out/b.txt"), seconds: seconds)
            for command in [["plan"], ["verify"], ["sync", "--rehash"], ["sync"], ["sync"], ["plan"]] {
                let result = try directory.haul(command)
                XCTAssertLessThan(result.exitCode, 3, "\(command) at \(seconds): \(result.stderr)")
                XCTAssertFalse(result.stderr.contains("overflow"), result.stderr)
            }
            XCTAssertEqual(directory.read("out/a.txt"), bytes)
            XCTAssertEqual(directory.read("out/b.txt"), bytes, "the symlink was replaced by the file")
            XCTAssertEqual(try directory.haul(["plan"]).exitCode, 0)
        }
    }

    /// On a file system with whole-second timestamps, a same-size edit made in the same second as haul recorded
    /// the file leaves its identity unchanged: only the rule that an identity must be older than the moment it was
    /// recorded (git's racy-clean check) notices. Loop-mounted ext4 with 128-byte inodes.
    func testASameSecondEditOnACoarseFileSystemIsNoticed() throws {
        try directory.makeDirectory("out")
        let mount = try Capability.required {
            try TestMount.loopExt4(at: directory.path("out"), size: 16 << 20, mkfsOptions: ["-I", "128"])
        }
        defer { mount.unmount() }
        let edited = Array("THE PINNED CONTENT\n".utf8)
        XCTAssertEqual(edited.count, bytes.count)

        var raced = false
        for _ in 0..<5 where !raced {
            try? FileManager.default.removeItem(atPath: directory.path("out/a.txt"))
            XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
            // Same inode, same size, and (if the second has not turned meanwhile) the same mtime and ctime.
            let fd = open(directory.path("out/a.txt"), O_WRONLY)
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertEqual(pwrite(fd, edited, edited.count, 0), edited.count)
            close(fd)
            var file = stat(), state = stat()
            XCTAssertEqual(stat(directory.path("out/a.txt"), &file), 0)
            XCTAssertEqual(stat(directory.path("out/.haul/state"), &state), 0)
            XCTAssertEqual(file.st_mtim.tv_nsec, 0, "whole-second timestamps")
            raced = file.st_ctim.tv_sec == state.st_mtim.tv_sec
        }
        guard raced else { return XCTFail("could not edit within the second of the commit in five tries") }

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, "the edit must be noticed:\n\(plan.stdout)")
        XCTAssertTrue(plan.stdout.contains("~ a.txt (checksum differs"), plan.stdout)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/a.txt"), bytes)
        let verify = try directory.haul(["verify"])
        XCTAssertEqual(verify.exitCode, 0, verify.stdout)
    }
}
