import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// What a content cache may touch and take, run as the real binary: `cache gc` and `sync` act only on a folder that
/// is a cache (its marker, or an older haul's layout), gc removes only names the cache makes, and a hit is held to
/// the same size limit as a download.
final class ContentCacheBoundsTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private let content = Array("pinned and cached\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer(files: ["/a.bin": content])
    }

    override func tearDown() {
        server?.stop()
    }

    private var hex: String { StreamingHasher.digest(content, algorithm: .sha256).hex }

    private func writeManifest(_ name: String, root: String, size: Int? = nil) throws {
        try directory.write(
            name,
            "version: 1\nroot: \(root)\nfiles:\n  - url: \(server.url("/a.bin"))\n    dest: a.bin\n"
                + "    sha256: \(hex)\n" + (size.map { "    size: \($0)\n" } ?? ""))
    }

    private func setModified(_ relativePath: String, secondsAgo: Int) throws {
        let when = timespec(tv_sec: time(nil) - secondsAgo, tv_nsec: 0)
        var times = [when, when]
        guard utimensat(AT_FDCWD, directory.path(relativePath), &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
    }

    /// A folder that only looks like a home: a dotfile, and old files in `tmp/` and `sha256/…`, one of them even
    /// named as the cache names its own.
    private func makeHomeFolder() throws -> [String] {
        let planted = [".bashrc", "tmp/notes.txt", "tmp/1a2b-3c4d-5.tmp", "sha256/\(hex.prefix(2))/\(hex)"]
        for name in planted {
            try directory.write("home/\(name)", "the user's own\n")
            try setModified("home/\(name)", secondsAgo: 7200)
        }
        return planted
    }

    /// `cache gc` (by `--cache` or `HAUL_CACHE`) and `cache info` refuse a folder that is not a cache, exit 64,
    /// naming it and what in it is not a cache's; not one file in it is removed, however old.
    func testGarbageCollectionRefusesAFolderThatIsNotACache() throws {
        let planted = try makeHomeFolder()
        let home = directory.path("home")
        let refusal =
            "error: \"\(home)\" is not a haul content cache: it has no haul-cache file and holds \".bashrc\", "
            + "which a cache does not; nothing was read or removed\n"
        for (arguments, environment) in [
            (["cache", "gc", "--max-size", "1", "--cache", home], [:]),
            (["cache", "gc", "--max-size", "1"], ["HAUL_CACHE": home]),
            (["cache", "info", "--cache", home], [:]),
        ] {
            let result = try directory.haul(arguments, environment: environment)
            XCTAssertEqual(result.exitCode, 64, "\(arguments): \(result.stdout)\(result.stderr)")
            XCTAssertEqual(result.stderr, refusal, "\(arguments)")
            XCTAssertEqual(result.stdout, "", "\(arguments)")
        }
        for name in planted { XCTAssertTrue(directory.exists("home/\(name)"), "\(name) is still there") }
    }

    /// A sync told to use a folder that is not a cache says so once and syncs without it: nothing is made in it.
    func testASyncDoesNotMakeACacheOfAFolderThatIsNotOne() throws {
        try directory.write("home/.bashrc", "the user's own\n")
        try writeManifest("m.yaml", root: "out")
        let result = try directory.haul(["sync", "m.yaml"], environment: ["HAUL_CACHE": directory.path("home")])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), content)
        XCTAssertEqual(
            result.stderr,
            "warning: the cache cannot be used (\"\(directory.path("home"))\" is not a haul content "
                + "cache: it has no haul-cache file and holds \".bashrc\", which a cache does not); syncing without it\n"
        )
        XCTAssertEqual(directory.list("home"), [".bashrc"], "nothing made in it")
    }

    /// In a cache, gc removes from `tmp/` only stale insertions (the names the cache gives them), never another file
    /// left there, however old.
    func testGarbageCollectionRemovesOnlyTheCachesOwnNames() throws {
        try writeManifest("m.yaml", root: "out")
        XCTAssertEqual(try directory.haul(["sync", "m.yaml", "--cache", directory.path("cache")]).exitCode, 0)
        let strangers = [
            "tmp/notes.txt", "tmp/abc.part", "tmp/1a2b-3c4d.tmp", "tmp/1A2B-3C4D-5.tmp", "sha256/not-an-entry",
        ]
        for name in strangers + ["tmp/1a2b-3c4d-5.tmp"] {
            try directory.write("cache/\(name)", "left here\n")
            try setModified("cache/\(name)", secondsAgo: 7200)
        }
        let gc = try directory.haul(["cache", "gc", "--max-size", "1M", "--cache", directory.path("cache")])
        XCTAssertEqual(gc.exitCode, 0, gc.stderr)
        XCTAssertEqual(
            gc.stdout.split(separator: "\n").filter { $0.hasPrefix("removed ") },
            ["removed tmp/1a2b-3c4d-5.tmp (stale)"])
        XCTAssertFalse(directory.exists("cache/tmp/1a2b-3c4d-5.tmp"))
        for name in strangers {
            XCTAssertTrue(directory.exists("cache/\(name)"), "\(name) is not the cache's: left alone")
        }
    }

    /// A sync makes its cache with the marker; a cache an older haul made (its layout, no marker) is still a cache:
    /// gc and a hit work in it, and the sync marks it.
    func testACacheIsMarkedAndAnOlderHaulsCacheIsAdopted() throws {
        try writeManifest("m.yaml", root: "out")
        XCTAssertEqual(try directory.haul(["sync", "m.yaml", "--cache", directory.path("cache")]).exitCode, 0)
        let marker = String(decoding: directory.read("cache/haul-cache") ?? [], as: UTF8.self)
        XCTAssertTrue(marker.hasPrefix("haul content cache\n"), marker)

        // As an older haul left it: entries and tmp/, no marker.
        XCTAssertEqual(unlink(directory.path("cache/haul-cache")), 0)
        try directory.write("cache/tmp/1a2b-3c4d-5.tmp", "crashed insertion\n")
        try setModified("cache/tmp/1a2b-3c4d-5.tmp", secondsAgo: 7200)
        let gc = try directory.haul(["cache", "gc", "--max-size", "1M", "--cache", directory.path("cache")])
        XCTAssertEqual(gc.exitCode, 0, gc.stderr)
        XCTAssertTrue(gc.stdout.contains("removed tmp/1a2b-3c4d-5.tmp (stale)"), gc.stdout)

        server.resetLog()
        try writeManifest("second.yaml", root: "second")
        let second = try directory.haul(["sync", "second.yaml", "--cache", directory.path("cache")])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertEqual(directory.read("second/a.bin"), content)
        XCTAssertEqual(server.requests.count, 0, "served from the adopted cache")
        XCTAssertTrue(directory.exists("cache/haul-cache"), "the sync marked it")
    }

    /// A hit is held to the limit a download is: for an entry without `size`, `--max-file-size`. An entry larger
    /// than that (a sparse 16 MiB planted under the digest) is not copied, in whole or in part: the warning says why
    /// in a download's words, the file is downloaded, and the cache then holds the verified download.
    func testACacheEntryOverTheSizeLimitIsNotCopied() throws {
        try writeManifest("m.yaml", root: "out")
        let entry = "cache/sha256/\(hex.prefix(2))/\(hex)"
        try directory.write(entry, "")
        XCTAssertEqual(truncate(directory.path(entry), 16 << 20), 0)
        let result = try directory.haul([
            "sync", "m.yaml", "--cache", directory.path("cache"), "--max-file-size", "1M",
            "--progress", "none",
        ])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(
            result.stderr,
            "warning: the cache entry \(directory.path(entry)) is not used: more than 1.0 MiB, the "
                + "--max-file-size limit (an entry's size sets its own); a.bin is downloaded\n")
        XCTAssertEqual(directory.read("out/a.bin"), content)
        XCTAssertEqual(server.requests.count, 1)
        XCTAssertEqual(directory.read(entry), content, "the verified download replaced it")
    }
}
