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
        try directory.write(
            "haul.yaml",
            """
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

    /// On a file system with whole-second timestamps, a same-size edit made in the same second as haul saved its
    /// records (right after the sync returns) is still noticed. FUSE passthrough reporting whole seconds: kernels
    /// from 6.18 mount an ext4 with 128-byte inodes (whole-second times) read-only.
    func testASameSecondEditOnACoarseFileSystemIsNoticed() throws {
        let faults = try Capability.required {
            try FaultFileSystem(over: directory, mountPoint: "out", backing: "back", coarse: true)
        }
        defer { faults.unmount() }
        let edited = Array("THE PINNED CONTENT\n".utf8)
        XCTAssertEqual(edited.count, bytes.count)

        var raced = false
        for _ in 0..<5 where !raced {
            try? FileManager.default.removeItem(atPath: directory.path("out/a.txt"))
            XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
            // Same inode, same size, and (if the second has not turned meanwhile) the same mtime and ctime as the
            // state's.
            let fd = open(directory.path("out/a.txt"), O_WRONLY)
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertEqual(pwrite(fd, edited, edited.count, 0), edited.count)
            close(fd)
            var file = stat(), state = stat()
            XCTAssertEqual(stat(directory.path("out/a.txt"), &file), 0)
            XCTAssertEqual(stat(directory.path("out/.haul/state"), &state), 0)
            XCTAssertEqual(file.st_mtim.tv_nsec, 0, "whole-second timestamps")
            XCTAssertEqual(state.st_mtim.tv_nsec, 0, "whole-second timestamps")
            raced = file.st_ctim.tv_sec == state.st_mtim.tv_sec
        }
        guard raced else { return XCTFail("could not edit within the second of the state's save in five tries") }

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, "the edit must be noticed:\n\(plan.stdout)")
        XCTAssertTrue(plan.stdout.contains("~ a.txt (checksum differs"), plan.stdout)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/a.txt"), bytes)
        let verify = try directory.haul(["verify"])
        XCTAssertEqual(verify.exitCode, 0, verify.stdout)
    }

    /// The records a sync saves are trusted by the very next run: a file renamed into place in the same tick of the
    /// file system's clock as the state was saved would carry a ctime no older than the state, and every later
    /// `plan` would hash it again. Small files and one of 64 MiB, on tmpfs, a journaled ext4 and a file system with
    /// whole-second times; the next sync and plan open no destination.
    func testTheRunAfterASyncOpensNothingItWrote() throws {
        let large = [UInt8](repeating: 0x5a, count: 64 << 20)
        var files: [String: [UInt8]] = ["/large.bin": large]
        for index in 0..<30 { files["/small-\(index).txt"] = Array("small file \(index)\n".utf8) }
        let corpus = try LoopbackHTTPServer(files: files)
        defer { corpus.stop() }
        let entries = files.keys.sorted().map { name in
            let digest = StreamingHasher.digest(files[name] ?? [], algorithm: .sha256).hex
            return "  - { url: \(corpus.url(name)), dest: \(name.dropFirst()), sha256: \(digest) }"
        }
        try directory.write("many.yaml", "version: 1\nroot: out\nfiles:\n" + entries.joined(separator: "\n") + "\n")
        let destinations = Set(files.keys.map { String($0.dropFirst()) })

        let fileSystems: [(name: String, mount: () throws -> () -> Void)] = [
            (
                "tmpfs",
                {
                    let mount = try TestMount.tmpfs(at: self.directory.path("out"), size: 256 << 20);
                    return mount.unmount
                }
            ),
            (
                "journaled ext4",
                {
                    let mount = try TestMount.loopExt4(at: self.directory.path("out"), size: 256 << 20);
                    return mount.unmount
                }
            ),
            (
                "whole-second FUSE",
                {
                    let mount = try FaultFileSystem(
                        over: self.directory, mountPoint: "out", backing: "coarse", coarse: true)
                    return mount.unmount
                }
            ),
        ]
        for (name, mount) in fileSystems {
            try directory.makeDirectory("out")
            let unmount = try Capability.required(name, mount)
            defer {
                unmount()
                try? FileManager.default.removeItem(atPath: directory.path("out"))
            }
            let first = try directory.haul(["sync", "many.yaml"])
            XCTAssertEqual(first.exitCode, 0, "\(name): \(first.stderr)")
            let watch = try FileOpenWatch(folders: [directory.path("out")], base: directory.path)
            corpus.resetLog()
            for command in [["sync", "many.yaml"], ["plan", "many.yaml"], ["plan", "many.yaml"]] {
                let again = try directory.haul(command)
                XCTAssertEqual(again.exitCode, 0, "\(name) \(command): \(again.stdout)\(again.stderr)")
                let opened = watch.opened().map { String($0.dropFirst("out/".count)) }
                XCTAssertEqual(
                    Set(opened).intersection(destinations), [], "\(name) \(command) hashed what the sync wrote")
            }
            XCTAssertEqual(corpus.requests.count, 0, name)
            // The check can fail: hashing opens every destination.
            XCTAssertEqual(try directory.haul(["plan", "many.yaml", "--rehash"]).exitCode, 0)
            let rehashed = Set(watch.opened().map { String($0.dropFirst("out/".count)) })
            XCTAssertEqual(rehashed.intersection(destinations), destinations, name)
        }
    }
}
