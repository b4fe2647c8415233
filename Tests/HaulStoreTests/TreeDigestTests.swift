import Foundation
import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulStore
import HaulTestSupport
import XCTest

/// The tree digest is Nix's NAR hash: every tree here is made by the test and hashed by haul and by Debian's
/// `nix-bin` (2.8), which must agree byte for byte. Both of nix's commands run offline, without the daemon:
/// `nix-hash --type sha256 DIR` (hex) and `nix --extra-experimental-features nix-command hash path DIR` (SRI)
/// only read the tree. The smallest trees are also pinned by an archive written out by hand, so the format holds
/// where nix is not installed.
final class TreeDigestTests: XCTestCase {
    private var scratch: Scratch!

    override func setUpWithError() throws {
        scratch = try Scratch()
    }

    override func tearDown() {
        scratch = nil
    }

    // MARK: - The format, by hand

    /// `str(s)`: the length as 8 bytes little-endian, the bytes, zeros to a multiple of 8.
    private func str(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        let length = withUnsafeBytes(of: UInt64(bytes.count).littleEndian, Array.init)
        return length + bytes + [UInt8](repeating: 0, count: (8 - bytes.count % 8) % 8)
    }

    private func digest(of relative: String, shownAs shown: String = "tree") throws -> Result<Digest, StoreError> {
        let folder = try DirectoryHandle.opening(scratch.at(relative))
        return TreeDigest.of(folder: folder, shownAs: shown)
    }

    func testAnEmptyFolderIsTheArchiveOfAnEmptyDirectory() throws {
        try scratch.mkdir("empty")
        let archive = ["nix-archive-1", "(", "type", "directory", ")"].flatMap(str)
        let expected = StreamingHasher.digest(archive, algorithm: .sha256)
        XCTAssertEqual(try digest(of: "empty").get(), expected)
        // What nix-hash --type sha256 printed for an empty folder.
        XCTAssertEqual(expected.hex, "a50a5ab6d992f5598edd92105059fae9acfc192981e08bd88534c2167e92526a")
        XCTAssertEqual(expected.subresourceIntegrity, "sha256-pQpattmS9VmO3ZIQUFn66az8GSmB4IvYhTTCFn6SUmo=")
    }

    func testOneFileIsItsNameAndItsPaddedContents() throws {
        try scratch.write("one/hello.txt", "hello")
        let archive = [
            "nix-archive-1", "(", "type", "directory",
            "entry", "(", "name", "hello.txt", "node",
            "(", "type", "regular", "contents", "hello", ")",
            ")", ")",
        ].flatMap(str)
        let expected = StreamingHasher.digest(archive, algorithm: .sha256)
        XCTAssertEqual(try digest(of: "one").get(), expected)
        XCTAssertEqual(expected.hex, "280bba766bc83940c56c17fd20da4f799b48680d277eed8b57c6f286c4c5f4b5")
    }

    func testTheSubresourceIntegrityFormRoundTrips() throws {
        let digest = StreamingHasher.digest(Array("tree".utf8), algorithm: .sha256)
        XCTAssertEqual(Digest(subresourceIntegrity: digest.subresourceIntegrity), digest)
        XCTAssertTrue(digest.subresourceIntegrity.hasPrefix("sha256-"))
        let sha512 = StreamingHasher.digest(Array("tree".utf8), algorithm: .sha512)
        XCTAssertEqual(Digest(subresourceIntegrity: sha512.subresourceIntegrity), sha512)
        for refused in [
            "sha256:" + digest.base64, "sha1-" + StreamingHasher.digest([], algorithm: .sha1).base64,
            "sha256-" + String(digest.base64.dropLast(4)), digest.base64, "md5-", "sha256-",
        ] {
            XCTAssertNil(Digest(subresourceIntegrity: refused), refused)
        }
    }

    // MARK: - Against nix

    /// What nix-bin prints for `folder`: hex from `nix-hash`, SRI from `nix hash path`.
    private func nix(
        _ folder: String, file: StaticString = #filePath, line: UInt = #line
    ) throws -> (hex: String, sri: String) {
        guard access("/usr/bin/nix-hash", X_OK) == 0, access("/usr/bin/nix", X_OK) == 0 else {
            throw Capability.unavailable("Debian's nix-bin is not installed (scripts/setup-debian.sh installs it)")
        }
        let hex = try ProcessRunner.run("/usr/bin/nix-hash", ["--type", "sha256", folder])
        XCTAssertEqual(hex.exitCode, 0, hex.stderr, file: file, line: line)
        let sri = try ProcessRunner.run(
            "/usr/bin/nix", ["--extra-experimental-features", "nix-command", "hash", "path", folder])
        XCTAssertEqual(sri.exitCode, 0, sri.stderr, file: file, line: line)
        return (
            hex.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            sri.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        )
    }

    private func assertMatchesNix(_ relative: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let ours = try digest(of: relative).get()
        let theirs = try nix(scratch.at(relative), file: file, line: line)
        XCTAssertEqual(ours.hex, theirs.hex, "nix-hash of \(relative)", file: file, line: line)
        XCTAssertEqual(ours.subresourceIntegrity, theirs.sri, "nix hash path of \(relative)", file: file, line: line)
        XCTAssertEqual(Digest(subresourceIntegrity: theirs.sri), ours, file: file, line: line)
    }

    func testTheTinyTreesMatchNix() throws {
        try scratch.mkdir("empty")
        try assertMatchesNix("empty")
        try scratch.write("one/hello.txt", "hello")
        try assertMatchesNix("one")
    }

    func testNestedFoldersEmptyFilesAndEmptyFoldersMatchNix() throws {
        try scratch.write("t/a/b/c/deep.txt", "deep\n")
        try scratch.write("t/a/empty", "")
        try scratch.mkdir("t/a/nothing")
        try scratch.mkdir("t/z/also/nothing")
        try scratch.write("t/top", "top\n")
        try assertMatchesNix("t")
    }

    /// Lengths around the 8-byte padding: none, 1, 7, exactly 8, 9, 16.
    func testContentsOfEveryPaddingMatchNix() throws {
        for size in [0, 1, 7, 8, 9, 15, 16, 17] {
            try scratch.write("t/size-\(size)", [UInt8](repeating: UInt8(0x40 + size), count: size))
        }
        try assertMatchesNix("t")
        // Names of 8 and 9 bytes pad the same way.
        try scratch.write("n/12345678", "eight")
        try scratch.write("n/123456789", "nine")
        try assertMatchesNix("n")
    }

    /// Nix takes the owner's execute bit (S_IXUSR) as "executable", and no other bit of the mode.
    func testTheExecutableBitIsTheOwnersAsNixReadsIt() throws {
        for (name, mode) in [
            ("plain", 0o644), ("tool", 0o755), ("private", 0o700), ("group-only", 0o614),
            ("other-only", 0o645), ("read-only", 0o444), ("owner-x-only", 0o100),
        ] as [(String, mode_t)] {
            try scratch.write("t/\(name)", "#!/bin/sh\n")
            XCTAssertEqual(chmod(scratch.at("t/\(name)"), mode), 0)
        }
        try assertMatchesNix("t")
        // Only S_IXUSR moves the digest.
        let before = try digest(of: "t").get()
        XCTAssertEqual(chmod(scratch.at("t/plain"), 0o654), 0)
        XCTAssertEqual(try digest(of: "t").get(), before)
        XCTAssertEqual(chmod(scratch.at("t/plain"), 0o744), 0)
        XCTAssertNotEqual(try digest(of: "t").get(), before)
    }

    func testSymlinksAbsoluteRelativeAndDanglingAreTheirTargetsNotFollowed() throws {
        try scratch.write("t/lib/real.so", "ELF")
        try scratch.symlink("t/lib/link.so", to: "real.so")
        try scratch.symlink("t/up", to: "../t/lib")
        try scratch.symlink("t/root", to: "/")
        try scratch.symlink("t/etc-passwd", to: "/etc/passwd")
        try scratch.symlink("t/dangling", to: "nowhere/at/all")
        try assertMatchesNix("t")
        // Following `root` would read the whole machine; following `etc-passwd` would make it a file.
        let linkOnly = try digest(of: "t").get()
        try FileManager.default.removeItem(atPath: scratch.at("t/etc-passwd"))
        try scratch.symlink("t/etc-passwd", to: "/etc/hostname")
        XCTAssertNotEqual(try digest(of: "t").get(), linkOnly, "the target's text is hashed")
    }

    /// Entries in the byte order of their names, which is not always how Swift orders the same strings:
    /// "cafe\u{301}" (bytes 63 61 66 65 cc 81) sorts before "caff" by bytes, after it as a String (it equals
    /// "caf\u{e9}", which is a different name to the kernel and to nix).
    func testEntriesAreInTheByteOrderOfTheirNames() throws {
        for name in ["B", "b", "Z", "_", "a.b", "a-b", "a0", "caf\u{e9}", "cafe\u{301}", "caff", "cafe", "\u{e4}", "z"]
        {
            try scratch.write("t/\(name)", name)
        }
        try scratch.write("t/a/b", "a/b")
        try scratch.write("t/a.b.c/d", "a.b.c/d")
        XCTAssertTrue("caff" < "cafe\u{301}", "Swift orders these unlike their bytes")
        try assertMatchesNix("t")
    }

    func testALargeFileStreamsAcrossManyReadsAndMatchesNix() throws {
        var generator = SplitMix(seed: 29)
        let size = 3 << 20 + 5
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.withUnsafeMutableBytes { raw in
            for word in 0..<size / 8 { raw.storeBytes(of: generator.next(), toByteOffset: 8 * word, as: UInt64.self) }
        }
        try scratch.write("t/big.bin", bytes)
        try scratch.write("t/small", "after the big one")
        try assertMatchesNix("t")
    }

    // MARK: - Failures

    func testAFIFOFailsNamingIt() throws {
        try scratch.write("t/sub/file", "x")
        XCTAssertEqual(mkfifo(scratch.at("t/sub/pipe"), 0o600), 0)
        XCTAssertEqual(
            try digest(of: "t", shownAs: "sdk").failure?.description,
            "cannot hash \"sdk/sub/pipe\": it is a FIFO; a tree holds only files, folders and symlinks")
    }

    func testANameThatIsNotUTF8FailsNamingIt() throws {
        try scratch.mkdir("t")
        try scratch.touch("t/bad", nameEndingWith: [0xFF])
        XCTAssertEqual(
            try digest(of: "t", shownAs: "sdk").failure?.description,
            "cannot read \"sdk/bad\u{FFFD}\": its name is not UTF-8")
    }

    /// Real I/O errors from a FUSE file system (`FaultFileSystem`): a file that cannot be read, a folder that
    /// cannot be listed.
    func testReadFailuresNameThePath() throws {
        try withFaultyTree { folder, faults in
            XCTAssertNotNil(try TreeDigest.of(folder: folder, shownAs: "sdk").get())
            try faults.inject(["read bin/tool"])
            XCTAssertEqual(
                TreeDigest.of(folder: folder, shownAs: "sdk").failure?.description,
                "cannot read \"sdk/bin/tool\": Input/output error")
            try faults.inject(["readdir share/doc"])
            XCTAssertEqual(
                TreeDigest.of(folder: folder, shownAs: "sdk").failure?.description,
                "cannot read the folder \"sdk/share/doc\": Input/output error")
        }
    }
}
