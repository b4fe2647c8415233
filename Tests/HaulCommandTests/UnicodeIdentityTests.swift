import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// Destination identity is the UTF-8 bytes, end to end: "caf\u{e9}" (NFC) and "cafe\u{301}" (NFD) are two files to
/// the kernel, and the state, the plan and pruning keep them apart.
final class UnicodeIdentityTests: XCTestCase {
    func testAPruneNeverDeletesTheUsersFileForAnotherSpellingHaulWrote() throws {
        let directory = try TemporaryDirectory()
        let bytes = Array("same content\n".utf8), other = Array("other\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/c": bytes, "/o": other])
        defer { server.stop() }
        let nfc = "caf\u{e9}.txt", nfd = "cafe\u{301}.txt"
        XCTAssertNotEqual(Array(nfc.utf8), Array(nfd.utf8))
        func manifest(prune: Bool, _ entries: [(String, String, [UInt8])]) throws {
            var yaml = "version: 1\nroot: out\nprune: \(prune)\nfiles:\n"
            for (path, dest, content) in entries {
                yaml +=
                    "  - { url: \"\(server.url(path))\", dest: \"\(dest)\", sha256: \(StreamingHasher.digest(content, algorithm: .sha256).hex) }\n"
            }
            try directory.write("haul.yaml", yaml)
        }
        func haul() throws -> ProcessResult { try HaulProcess.run(["sync"], currentDirectory: directory.path) }

        // The user's own file, already right: haul only hashes it (and does not own it).
        try directory.write("out/" + nfc, bytes)
        try manifest(prune: false, [("/c", nfc, bytes)])
        XCTAssertEqual(try haul().exitCode, 0)
        // The other spelling is another file: haul writes it, and owns that one.
        try manifest(prune: true, [("/c", nfd, bytes)])
        let second = try haul()
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        XCTAssertTrue(second.stdout.contains("fetched \(nfd)"), second.stdout)
        // Neither is listed now: only the one haul wrote goes.
        try manifest(prune: true, [("/o", "other.txt", other)])
        let third = try haul()
        XCTAssertEqual(third.exitCode, 0, third.stderr)
        XCTAssertEqual(directory.read("out/" + nfc), bytes, "the user's file stays:\n\(third.stdout)")
        let names =
            (try? FileManager.default.contentsOfDirectory(atPath: directory.path("out")))?.map { Array($0.utf8) } ?? []
        XCTAssertFalse(names.contains(Array(nfd.utf8)), "the file haul wrote is pruned:\n\(third.stdout)")
        XCTAssertTrue(names.contains(Array(nfc.utf8)))
    }

    /// Two folders whose names differ only in normalization are two folders: a commit batch holding a file for
    /// each puts each file in its own.
    func testFoldersSpelledTwoWaysGetTheirOwnFilesInOneBatch() throws {
        let directory = try TemporaryDirectory()
        let first = Array("first\n".utf8), second = Array("second\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/1": first, "/2": second])
        defer { server.stop() }
        let nfc = "caf\u{e9}", nfd = "cafe\u{301}"
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for (path, dest, content) in [("/1", nfc + "/a", first), ("/2", nfd + "/b", second), ("/1", nfc + "/c", first)]
        {
            yaml += "  - { url: \"\(server.url(path))\", dest: \"\(dest)\", sha256: \(sha256(content)) }\n"
        }
        try directory.write("haul.yaml", yaml)
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        func names(_ folder: String) -> [[UInt8]] {
            ((try? FileManager.default.contentsOfDirectory(atPath: directory.path(folder))) ?? []).map {
                Array($0.utf8)
            }.sorted {
                $0.lexicographicallyPrecedes($1)
            }
        }
        XCTAssertEqual(
            names("out").filter { $0 != Array(".haul".utf8) },
            [Array(nfc.utf8), Array(nfd.utf8)].sorted { $0.lexicographicallyPrecedes($1) })
        XCTAssertEqual(names("out/" + nfc), [Array("a".utf8), Array("c".utf8)])
        XCTAssertEqual(names("out/" + nfd), [Array("b".utf8)])
        XCTAssertEqual(directory.read("out/" + nfd + "/b"), second)
    }
}
