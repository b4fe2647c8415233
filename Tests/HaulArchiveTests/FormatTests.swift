import Foundation
import Glibc
import HaulArchive
import HaulDigest
import HaulManifest
import HaulTestSupport
import XCTest

/// Archives made by the real tools (`tar`, `gzip`, `bzip2`, `xz`, `zstd`, `zip`, `7z`) from one source tree,
/// unpacked by haul as the bytes arrive in chunks of 1 byte, 4 KiB and 1 MiB: the tree on disk (contents by
/// `sha256sum`) is the source's, and the unpacker's account of it (member digests included) says the same.
final class FormatTests: XCTestCase {
    private var bench: UnpackBench!
    /// The source tree's listing, as `UnpackBench.listing` gives it, under `pkg/`.
    private var source: [String] = []

    override func setUpWithError() throws {
        bench = try UnpackBench()
        var random = SplitMix(seed: 29)
        let data = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let files: [(String, [UInt8])] = [
            ("src/pkg/README", Array("hello\n".utf8)), ("src/pkg/bin/tool", Array("#!/bin/sh\necho tool\n".utf8)),
            ("src/pkg/bin/setuid", Array("#!/bin/sh\n".utf8)), ("src/pkg/lib/data.bin", data),
            ("src/pkg/lib/empty", []),
            ("src/pkg/shared", Array("group-writable\n".utf8)), ("src/pkg/caf\u{e9}", Array("composed\n".utf8)),
        ]
        for (path, bytes) in files { try bench.directory.write("work/" + path, bytes) }
        try bench.directory.makeDirectory("work/src/pkg/empty-folder")
        XCTAssertEqual(chmod(bench.work("src/pkg/bin/tool"), 0o755), 0)
        XCTAssertEqual(chmod(bench.work("src/pkg/bin/setuid"), 0o4755), 0)
        XCTAssertEqual(chmod(bench.work("src/pkg/shared"), 0o664), 0)
        XCTAssertEqual(symlink("data.bin", bench.work("src/pkg/lib/link")), 0)
        XCTAssertEqual(symlink("../lib/data.bin", bench.work("src/pkg/bin/up")), 0)
        XCTAssertEqual(link(bench.work("src/pkg/lib/data.bin"), bench.work("src/pkg/lib/hard")), 0)
        source = try bench.listing(of: "work/src")
        XCTAssertTrue(source.contains("pkg/bin/up -> ../lib/data.bin"), "\(source)")
    }

    override func tearDown() {
        bench?.assertNothingOutsideTrees()
        bench = nil
    }

    private static let chunks = [1, 4096, 1 << 20]

    /// Unpacks `archive` in every chunk size, checking each tree against `expected` on disk and in the result.
    private func assertUnpacks(
        _ archive: String, format: ArchiveFormat?, expected: [String],
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        for chunk in Self.chunks {
            let (tree, result) = try bench.unpack(archive, rules: UnpackRules(format: format), chunk: chunk)
            guard let unpacked = bench.tree(result, file: file, line: line) else { continue }
            XCTAssertEqual(try bench.listing(of: tree), expected, "chunks of \(chunk)", file: file, line: line)
            XCTAssertEqual(unpacked.members.map(\.description), expected, "chunks of \(chunk)", file: file, line: line)
            XCTAssertEqual(unpacked.files, expected.filter { $0.contains(" file ") }.count, file: file, line: line)
        }
    }

    func testTarInEachHeaderFormatAndCompression() throws {
        let made: [(String, [String], ArchiveFormat)] = [
            ("gnu.tar", ["--format=gnu", "-cf"], .tar), ("pax.tar", ["--format=posix", "-cf"], .tar),
            ("ustar.tar", ["--format=ustar", "-cf"], .tar), ("a.tar.gz", ["-czf"], .tarGzip),
            ("a.tar.bz2", ["-cjf"], .tarBzip2),
            ("a.tar.xz", ["-cJf"], .tarXz), ("a.tar.zst", ["--zstd", "-cf"], .tarZstd),
        ]
        for (name, options, format) in made {
            try bench.run("tar", options + [name, "-C", "src", "pkg"])
            try assertUnpacks(bench.work(name), format: format, expected: source)
            try assertUnpacks(bench.work(name), format: nil, expected: source)
        }
    }

    func testModesAreKeptOnlyAsTheExecuteBitAndHardLinksShareTheirFile() throws {
        try bench.run("tar", ["-cf", "a.tar", "-C", "src", "pkg"])
        let (tree, result) = try bench.unpack(bench.work("a.tar"))
        XCTAssertNotNil(bench.tree(result))
        for (path, mode) in [
            ("pkg/bin/tool", 0o755), ("pkg/bin/setuid", 0o755), ("pkg/shared", 0o644), ("pkg/bin", 0o755),
            ("pkg/empty-folder", 0o755),
        ] as [(String, mode_t)] {
            var info = stat()
            XCTAssertEqual(lstat(bench.directory.path("\(tree)/\(path)"), &info), 0)
            XCTAssertEqual(info.st_mode & 0o7777, mode, path)
        }
        var data = stat(), hard = stat()
        XCTAssertEqual(lstat(bench.directory.path("\(tree)/pkg/lib/data.bin"), &data), 0)
        XCTAssertEqual(lstat(bench.directory.path("\(tree)/pkg/lib/hard"), &hard), 0)
        XCTAssertEqual(data.st_ino, hard.st_ino)
    }

    /// A zip read as it arrives is read from its local headers: no Unix modes and no symlinks (the central
    /// directory, which holds them, comes last). Read from the file, it has both.
    func testZipStreamedFromLocalHeadersAndReadWholeFromTheFile() throws {
        try bench.run("zip", ["-qry", "../a.zip", "pkg"], in: bench.work("src"))
        // A symlink arrives as a file holding its target; no file is executable.
        let expected = source.map { line -> String in
            guard let arrow = line.range(of: " -> ") else { return line.replacingOccurrences(of: " x ", with: " ") }
            let target = Array(line[arrow.upperBound...].utf8)
            return
                "\(line[..<arrow.lowerBound]) file \(target.count) \(StreamingHasher.digest(target, algorithm: .sha256).hex)"
        }
        try assertUnpacks(bench.work("a.zip"), format: .zip, expected: expected)
        try assertUnpacks(bench.work("a.zip"), format: nil, expected: expected)
        // Written to a pipe, zip cannot go back to a member's header: its sizes follow the data (a data descriptor).
        try bench.run("sh", ["-c", "zip -q - pkg/README pkg/lib/data.bin | cat > ../piped.zip"], in: bench.work("src"))
        let piped = ["pkg/", "pkg/README", "pkg/lib/", "pkg/lib/data.bin"]
        try assertUnpacks(
            bench.work("piped.zip"), format: .zip,
            expected: expected.filter { line in piped.contains { line == $0 || line.hasPrefix($0 + " ") } })

        let (tree, result) = try bench.unpackFile(bench.work("a.zip"), rules: UnpackRules(format: .zip))
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), source)
        XCTAssertEqual(try bench.listing(of: tree), source)
    }

    func testSevenZipIsReadFromTheFileAndRefusedAsAStream() throws {
        guard access("/usr/bin/7z", X_OK) == 0 else { throw Capability.unavailable("7z (p7zip-full) is not installed") }
        try bench.run("7z", ["a", "-bd", "-snl", "-snh", "../a.7z", "pkg"], in: bench.work("src"))
        for format in [ArchiveFormat.sevenZip, nil] {
            let (tree, result) = try bench.unpackFile(bench.work("a.7z"), rules: UnpackRules(format: format))
            XCTAssertEqual(bench.tree(result)?.members.map(\.description), source)
            XCTAssertEqual(try bench.listing(of: tree), source)

            let (_, streamed) = try bench.unpack(bench.work("a.7z"), rules: UnpackRules(format: format))
            XCTAssertEqual(
                bench.failure(streamed),
                "cannot unpack \"a.7z\": a 7z archive cannot be unpacked as it arrives: its index comes after its data")
        }
    }

    func testANamedFormatRefusesOtherBytes() throws {
        try bench.run("tar", ["-czf", "a.tar.gz", "-C", "src", "pkg"])
        try bench.run("tar", ["-cf", "a.tar", "-C", "src", "pkg"])
        try bench.run("zip", ["-qry", "../a.zip", "pkg"], in: bench.work("src"))
        try bench.run("sh", ["-c", "gzip -c a.tar.gz > a.tar.gz.gz"])
        let cases: [(String, ArchiveFormat, String)] = [
            ("a.tar", .tarGzip, "cannot unpack \"a.tar\": not a tar.gz archive: not compressed"),
            ("a.tar.gz", .tarXz, "cannot unpack \"a.tar.gz\": not a tar.xz archive: Unrecognized archive format"),
            ("a.tar.gz", .tar, "cannot unpack \"a.tar.gz\": not a tar archive: Unrecognized archive format"),
            (
                "a.tar.gz.gz", .tarGzip,
                "cannot unpack \"a.tar.gz.gz\": not a tar.gz archive: compressed with gzip inside gzip"
            ),
            ("a.zip", .tarGzip, "cannot unpack \"a.zip\": not a tar.gz archive: Unrecognized archive format"),
            ("a.tar", .zip, "cannot unpack \"a.tar\": not a zip archive: Unrecognized archive format"),
        ]
        for (name, format, message) in cases {
            let (tree, result) = try bench.unpack(bench.work(name), rules: UnpackRules(format: format))
            XCTAssertEqual(bench.failure(result), message)
            XCTAssertEqual(bench.directory.list(tree), [])
        }
        try Data("just some text\n".utf8).write(to: URL(fileURLWithPath: bench.work("notes.txt")))
        let (_, unknown) = try bench.unpack(bench.work("notes.txt"))
        XCTAssertEqual(
            bench.failure(unknown),
            "cannot unpack \"notes.txt\": not an archive haul reads (tar, tar.gz, tar.bz2, "
                + "tar.xz, tar.zst, zip, 7z): Unrecognized archive format")
    }

    func testStripDropsLeadingComponentsAsTarCountsThem() throws {
        try bench.run("tar", ["-czf", "dot.tar.gz", "-C", "src", "."])
        // "./pkg/README": "." is a component, as GNU tar counts it.
        let (tree, result) = try bench.unpack(bench.work("dot.tar.gz"), rules: UnpackRules(strip: 2))
        let expected = source.filter { $0.hasPrefix("pkg/") && $0 != "pkg/" }.map { String($0.dropFirst(4)) }
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), expected)
        XCTAssertEqual(try bench.listing(of: tree), expected)

        // One more, and bin/up's "../lib/data.bin" would leave the tree.
        let (_, deeper) = try bench.unpack(bench.work("dot.tar.gz"), rules: UnpackRules(strip: 3))
        XCTAssertEqual(
            bench.failure(deeper),
            "cannot unpack \"dot.tar.gz\": member \"./pkg/bin/up\": it is a symlink to "
                + "\"../lib/data.bin\", outside the folder")
    }

    /// Selection sees the stripped path; a folder is made when it is selected itself or holds a kept member.
    func testSelectionKeepsSelectedMembersAndTheFoldersAboveThem() throws {
        try bench.run("tar", ["-cf", "a.tar", "-C", "src", "pkg"])
        let rules = UnpackRules(strip: 1, selects: { $0.hasPrefix("lib/l") || $0 == "empty-folder" || $0 == "bin" })
        let (tree, result) = try bench.unpack(bench.work("a.tar"), rules: rules)
        let expected = ["bin/", "empty-folder/", "lib/", "lib/link -> data.bin"]
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), expected)
        XCTAssertEqual(try bench.listing(of: tree), expected)
    }

    /// Names stored as bytes (GNU tar, ustar) arrive as they are; names stored as Unicode (pax, zip, 7z) arrive
    /// in NFC, as libarchive normalizes them: two spellings of one name are then one path, held twice.
    func testUnicodeNamesAreBytesInGnuTarAndNormalizedWhereStoredAsUnicode() throws {
        try bench.directory.write("work/names/caf\u{e9}", "composed\n")
        try bench.directory.write("work/names/cafe\u{301}", "decomposed\n")
        let both = try bench.listing(of: "work/names")
        XCTAssertEqual(both.count, 2)
        try bench.run("tar", ["--format=gnu", "-cf", "gnu.tar", "-C", "names", "."])
        let (tree, result) = try bench.unpack(bench.work("gnu.tar"))
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), both)
        XCTAssertEqual(try bench.listing(of: tree), both)

        try bench.run("tar", ["--format=posix", "-cf", "pax.tar", "-C", "names", "cafe\u{301}"])
        let (alone, aloneResult) = try bench.unpack(bench.work("pax.tar"))
        XCTAssertEqual(bench.tree(aloneResult)?.members.map(\.path), ["caf\u{e9}"])
        XCTAssertEqual(bench.directory.list(alone), ["caf\u{e9}"])

        try bench.run("tar", ["--format=posix", "-cf", "pax-both.tar", "-C", "names", "caf\u{e9}", "cafe\u{301}"])
        let (_, twice) = try bench.unpack(bench.work("pax-both.tar"))
        XCTAssertEqual(
            bench.failure(twice),
            "cannot unpack \"pax-both.tar\": member \"caf\u{e9}\": the archive holds this path twice")
    }
}
