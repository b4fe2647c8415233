import Foundation
import Glibc
import HaulArchive
import HaulDigest
import HaulTestSupport
import XCTest

/// Decompression bombs stop at the byte limit, counted as the bytes are written; a body that ends before the
/// archive does is a failure, never a smaller tree; sparse members count as their full size.
final class UnpackLimitTests: XCTestCase {
    private var bench: UnpackBench!

    override func setUpWithError() throws { bench = try UnpackBench() }

    override func tearDown() {
        bench?.assertNothingOutsideTrees()
        bench = nil
    }

    private static let limit: Int64 = 64 << 20

    /// A tar member of 1 GiB of zeros, compressed with zstd to a few kilobytes: its header says how large it is, and
    /// nothing of it is written.
    func testABombWhoseHeaderTellsItsSizeIsRefusedBeforeAByteIsWritten() throws {
        try bench.run(
            "sh",
            [
                "-c",
                "python3 -c \"import sys, tarfile; i = tarfile.TarInfo('zeros'); i.size = 1 << 30; "
                    + "sys.stdout.buffer.write(i.tobuf(tarfile.GNU_FORMAT))\" > head && "
                    + "{ cat head; head -c 1073741824 /dev/zero; head -c 10240 /dev/zero; } | zstd -q -o bomb.tar.zst",
            ])
        let (tree, result) = try bench.unpack(bench.work("bomb.tar.zst"), rules: UnpackRules(maxBytes: Self.limit))
        XCTAssertEqual(
            bench.failure(result),
            "cannot unpack \"bomb.tar.zst\": member \"zeros\": the members unpack to more than "
                + "67108864 bytes")
        XCTAssertEqual(bench.directory.list(tree), [])
    }

    /// A zip member of 1 GiB of zeros whose local header says it unpacks to 1 byte: libarchive inflates what the
    /// deflate stream holds, and the count of bytes written stops it at the limit.
    func testABombWhoseHeaderLiesIsStoppedAtTheLimitAsItIsWritten() throws {
        try bench.run(
            "python3",
            [
                "-c",
                """
                import struct, zipfile
                with zipfile.ZipFile('bomb.zip', 'w', compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
                    with archive.open('zeros', 'w') as member:
                        block = bytes(1 << 20)
                        for _ in range(1024): member.write(block)
                data = bytearray(open('bomb.zip', 'rb').read())
                struct.pack_into('<I', data, 22, 1)
                open('bomb.zip', 'wb').write(data)
                """,
            ])
        let (tree, result) = try bench.unpack(bench.work("bomb.zip"), rules: UnpackRules(maxBytes: Self.limit))
        XCTAssertEqual(
            bench.failure(result),
            "cannot unpack \"bomb.zip\": member \"zeros\": the members unpack to more than "
                + "67108864 bytes")
        var info = stat()
        XCTAssertEqual(lstat(bench.directory.path("\(tree)/zeros"), &info), 0)
        XCTAssertLessThanOrEqual(Int64(info.st_size), Self.limit)
        // The limit is on every member together.
        let many = try bench.craft(
            "many.tar", (1...5).map { ["name": "f\($0)", "data": String(repeating: "x", count: 1000)] })
        let (_, together) = try bench.unpack(many, rules: UnpackRules(maxBytes: 4500))
        XCTAssertEqual(
            bench.failure(together),
            "cannot unpack \"many.tar\": member \"f5\": the members unpack to more than 4500 bytes")
        let (_, fits) = try bench.unpack(many, rules: UnpackRules(maxBytes: 5000))
        XCTAssertEqual(bench.tree(fits)?.bytes, 5000)
    }

    func testABodyThatEndsEarlyIsAFailure() throws {
        let members = (1...3).map { ["name": "f\($0)", "data": String(repeating: "\($0)", count: 600)] }
        let tar = try bench.craft("cut.tar", members)
        // Cut inside the second member's data, and exactly after it (a member boundary: 512 + 1024 bytes each).
        let (_, inside) = try bench.unpack(tar, cutAt: 1536 + 700)
        XCTAssertEqual(
            bench.failure(inside),
            "cannot unpack \"cut.tar\": member \"f2\": the archive ends early: Truncated tar archive")
        let (_, boundary) = try bench.unpack(tar, cutAt: 2 * 1536)
        XCTAssertEqual(
            bench.failure(boundary),
            "cannot unpack \"cut.tar\": the archive ends early: no end-of-archive blocks after the last member")
        let (_, whole) = try bench.unpack(tar)
        XCTAssertEqual(bench.tree(whole)?.files, 3)

        try bench.run(
            "sh", ["-c", "gzip -c cut.tar > cut.tar.gz && zstd -q -c cut.tar > cut.tar.zst && zip -q cut.zip cut.tar"])
        for (name, message) in [
            ("cut.tar.gz", "truncated gzip input"), ("cut.tar.zst", "Truncated zstd input"),
            ("cut.zip", "ZIP decompression failed (-5)"),
        ] {
            let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: bench.work(name))[.size] as? Int)
            for chunk in [1, 4096] {
                let (_, result) = try bench.unpack(bench.work(name), chunk: chunk, cutAt: size / 2)
                let member = name.hasSuffix(".zip") ? " member \"cut.tar\":" : ""
                XCTAssertEqual(
                    bench.failure(result), "cannot unpack \"\(name)\":\(member) the archive ends early: \(message)",
                    "chunks of \(chunk)")
            }
        }
        // A body abandoned before any byte.
        let (_, empty) = try bench.unpack(tar, cutAt: 0)
        XCTAssertEqual(bench.failure(empty), "cannot unpack \"cut.tar\": the archive ends early: there are no bytes")
    }

    /// A sparse file of 10 MiB holding 4 bytes: written with its holes, hashed and counted as its 10 MiB.
    func testSparseMembersCountAndHashAsTheirFullSize() throws {
        try bench.run(
            "sh",
            [
                "-c",
                "truncate -s 10M sparse && printf data | dd of=sparse bs=1 seek=4096 conv=notrunc 2>/dev/null && "
                    + "tar --format=posix -S -cf sparse.tar sparse",
            ])
        let expected = try bench.listing(of: "work").filter { $0.hasPrefix("sparse file") }
        let (tree, result) = try bench.unpack(bench.work("sparse.tar"))
        XCTAssertEqual(bench.tree(result)?.members.map(\.description), expected)
        XCTAssertEqual(try bench.listing(of: tree), expected)
        XCTAssertEqual(bench.tree(result)?.bytes, 10 << 20)

        let (_, limited) = try bench.unpack(bench.work("sparse.tar"), rules: UnpackRules(maxBytes: 1 << 20))
        XCTAssertEqual(
            bench.failure(limited),
            "cannot unpack \"sparse.tar\": member \"sparse\": the members unpack to more than "
                + "1048576 bytes")
    }
}
