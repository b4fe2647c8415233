import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add --extract`, end to end: the real binary pins an archive a loopback server serves and the NAR digest of
/// the tree it unpacks to; `nix hash path` over the tree the test packed, and over what sync then puts in place,
/// must print that same digest.
final class AddExtractTests: XCTestCase {
    private var directory: TemporaryDirectory!
    /// Where the test makes its trees and archives: never under the manifest's root.
    private var work: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        work = try TemporaryDirectory()
        try directory.makeDirectory("tmp")
    }

    private var environment: [String: String] { ["TMPDIR": directory.path("tmp")] }

    private func manifestText(_ name: String = "haul.yaml") -> String? {
        directory.read(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `sdk-1.2/` with a file, an executable and a symlink, under `src/` (a folder holding only it), as
    /// `<name>.tar.gz`: the archive's bytes.
    private func packSDK(readme: String = "hello\n", name: String = "sdk-1.2.tar.gz") throws -> [UInt8] {
        _ = try? FileManager.default.removeItem(atPath: work.path("src"))
        try work.makeDirectory("src/sdk-1.2/bin")
        try work.write("src/sdk-1.2/README", readme)
        try work.write("src/sdk-1.2/bin/tool", "#!/bin/sh\necho tool\n")
        XCTAssertEqual(chmod(work.path("src/sdk-1.2/bin/tool"), 0o755), 0)
        XCTAssertEqual(symlink("README", work.path("src/sdk-1.2/LICENSE")), 0)
        let tar = try ProcessRunner.run(
            "/usr/bin/tar",
            [
                "-C", work.path("src"), "--sort=name", "--owner=0", "--group=0",
                "-czf", work.path(name), "sdk-1.2",
            ])
        XCTAssertEqual(tar.exitCode, 0, tar.stderr)
        return try XCTUnwrap(work.read(name))
    }

    /// What Debian's nix-bin prints for `path`: the oracle for every tree digest here.
    private func nixHash(_ path: String) throws -> String {
        guard access("/usr/bin/nix", X_OK) == 0 else {
            throw Capability.unavailable("Debian's nix-bin is not installed (scripts/setup-debian.sh installs it)")
        }
        let result = try ProcessRunner.run(
            "/usr/bin/nix", ["--extra-experimental-features", "nix-command", "hash", "path", path])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The `tree:` value of the manifest's entry for `dest`.
    private func pinnedTree(_ text: String?) -> String? {
        text?.firstMatch(of: /tree: (sha256-[A-Za-z0-9+\/=]+)/).map { String($0.output.1) }
    }

    func testExtractPinsTheArchiveAndItsTreeAndASyncElsewhereUnpacksThatTree() throws {
        let archive = try packSDK()
        let tree = try nixHash(work.path("src"))
        let server = try LoopbackHTTPServer(files: ["/v1.2/sdk-1.2.tar.gz": archive])
        defer { server.stop() }
        let url = server.url("/v1.2/sdk-1.2.tar.gz")

        let add = try directory.haul(["add", "--extract", url], environment: environment)
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(add.stderr, "")
        XCTAssertTrue(add.stdout.hasPrefix("Created haul.yaml with sdk-1.2 ("), add.stdout)
        XCTAssertTrue(
            add.stdout.contains(
                "sha256 \(sha256(archive).prefix(12))…, tree \(tree.prefix(19))…) as files[0], line 3.\n"
                    + "Placed sdk-1.2; the next sync makes no request for it.\n"), add.stdout)
        XCTAssertEqual(
            manifestText(),
            """
            version: 1
            files:
              - url: \(url)
                dest: sdk-1.2
                sha256: \(sha256(archive))
                size: \(archive.count)
                extract:
                  tree: \(tree)

            """)
        XCTAssertEqual(directory.read("sdk-1.2/sdk-1.2/README"), Array("hello\n".utf8))
        XCTAssertEqual(try nixHash(directory.path("sdk-1.2")), tree, "what add put in place is the tree it pinned")
        XCTAssertEqual(directory.list("tmp"), [], "the unpacked tree and the archive are gone from add's own folder")
        XCTAssertEqual(server.requests(path: "/v1.2/sdk-1.2.tar.gz").count, 1)

        let noop = try directory.haul(["sync"])
        XCTAssertEqual(noop.exitCode, 0, noop.stderr)
        XCTAssertEqual(server.requests(path: "/v1.2/sdk-1.2.tar.gz").count, 1, "the sync after add makes no request")

        // Another root, from the network: sync unpacks the archive and checks the tree against the pin add wrote.
        try directory.makeDirectory("elsewhere")
        try directory.write("elsewhere/haul.yaml", try XCTUnwrap(manifestText()))
        let sync = try directory.haul(["sync", "elsewhere/haul.yaml"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(server.requests(path: "/v1.2/sdk-1.2.tar.gz").count, 2)
        XCTAssertEqual(try nixHash(directory.path("elsewhere/sdk-1.2")), tree)
        var info = stat()
        XCTAssertEqual(stat(directory.path("elsewhere/sdk-1.2/sdk-1.2/bin/tool"), &info), 0)
        XCTAssertNotEqual(info.st_mode & 0o100, 0, "the executable bit is part of the tree")
    }

    func testStripIsWrittenAndIsPartOfTheTreePinned() throws {
        let archive = try packSDK()
        let stripped = try nixHash(work.path("src/sdk-1.2"))
        let server = try LoopbackHTTPServer(files: ["/sdk-1.2.tar.gz": archive])
        defer { server.stop() }
        let url = server.url("/sdk-1.2.tar.gz")

        let printed = try directory.haul(
            ["add", "--extract", "--strip", "1", "--print", url], environment: environment)
        XCTAssertEqual(printed.exitCode, 0, printed.stderr)
        XCTAssertEqual(
            printed.stdout,
            """
            - url: \(url)
              dest: sdk-1.2
              sha256: \(sha256(archive))
              size: \(archive.count)
              extract:
                strip: 1
                tree: \(stripped)

            """)
        XCTAssertFalse(directory.exists("haul.yaml"))

        let add = try directory.haul(
            ["add", "--extract", "--strip", "1", url, "--dest", "tools/sdk/"], environment: environment)
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(pinnedTree(manifestText()), stripped)
        XCTAssertTrue(
            manifestText()?.contains(
                "    dest: tools/sdk\n    sha256: \(sha256(archive))\n    size: \(archive.count)\n"
                    + "    extract:\n      strip: 1\n      tree: \(stripped)\n") == true, manifestText() ?? "")
        XCTAssertEqual(directory.read("tools/sdk/README"), Array("hello\n".utf8))
        XCTAssertEqual(try nixHash(directory.path("tools/sdk")), stripped)

        // The same archive without --strip is another tree: the pin says which.
        let whole = try directory.haul(["add", "--extract", url, "--print"], environment: environment)
        XCTAssertEqual(pinnedTree(whole.stdout), try nixHash(work.path("src")))
        XCTAssertNotEqual(pinnedTree(whole.stdout), stripped)
    }

    func testExtractOptionsAreCheckedBeforeAnythingIsFetched() throws {
        let strip = try directory.haul(["add", "--strip", "1", "http://127.0.0.1:9/a.tar.gz"])
        XCTAssertEqual(strip.exitCode, 64)
        XCTAssertTrue(strip.stderr.contains("--strip and --format go with --extract"), strip.stderr)
        let format = try directory.haul(["add", "--extract", "--format", "rar", "http://127.0.0.1:9/a"])
        XCTAssertEqual(format.exitCode, 64)
        XCTAssertTrue(
            format.stderr.contains("expected one of tar, tar.gz, tar.bz2, tar.xz, tar.zst, zip, 7z"), format.stderr)
        XCTAssertFalse(directory.exists("haul.yaml"))
    }

    func testAFormatGivenForAURLWithoutASuffixIsWrittenAndSyncs() throws {
        let archive = try packSDK()
        let server = try LoopbackHTTPServer(files: ["/download/latest": archive])
        defer { server.stop() }
        let add = try directory.haul(
            ["add", "--extract", "--format", "tar.gz", server.url("/download/latest"), "--dest", "sdk"],
            environment: environment)
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertTrue(
            manifestText()?.contains(
                "    extract:\n      format: tar.gz\n      tree: \(try nixHash(work.path("src")))\n") == true,
            manifestText() ?? "")
        XCTAssertEqual(directory.read("sdk/sdk-1.2/README"), Array("hello\n".utf8))
    }

    /// A tar crafted member by member with Python's tarfile: `members` are (name, bytes) pairs.
    private func craftTar(_ name: String, _ members: [(String, String)]) throws -> [UInt8] {
        let list = members.map { "(\(String(reflecting: $0.0)), \(String(reflecting: $0.1)).encode())" }.joined(
            separator: ", ")
        let script = """
            import io, sys, tarfile
            with tarfile.open(sys.argv[1], 'w:gz', format=tarfile.GNU_FORMAT) as archive:
                for name, data in [\(list)]:
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    archive.addfile(info, io.BytesIO(data))
            """
        let python = try ProcessRunner.run("python3", ["-c", script, work.path(name)], inheritEnvironment: true)
        XCTAssertEqual(python.exitCode, 0, python.stderr)
        return try XCTUnwrap(work.read(name))
    }

    func testAHostileOrUnreadableArchiveLeavesTheManifestByteIdenticalAndExitsNonZero() throws {
        let climbing = try craftTar("climb.tar.gz", [("ok.txt", "fine\n"), ("../escape.txt", "outside\n")])
        let absolute = try craftTar("absolute.tar.gz", [("/tmp/owned.txt", "outside\n")])
        let garbage = Array("this is not an archive at all\n".utf8)
        let server = try LoopbackHTTPServer(files: [
            "/climb.tar.gz": climbing, "/absolute.tar.gz": absolute, "/garbage.tar.gz": garbage,
        ])
        defer { server.stop() }
        let original = "# inputs\nversion: 1\nfiles: []   # none yet\n"
        try directory.write("haul.yaml", original)

        let cases = [
            ("/climb.tar.gz", "member \"../escape.txt\": its name contains \"..\", which could leave the folder"),
            (
                "/absolute.tar.gz",
                "member \"/tmp/owned.txt\": its name is absolute; members are unpacked inside the folder"
            ),
        ]
        for (path, reason) in cases {
            let add = try directory.haul(["add", "--extract", server.url(path)], environment: environment)
            XCTAssertEqual(add.exitCode, 1, path)
            XCTAssertEqual(add.stderr, "error: cannot unpack \"\(server.url(path))\": \(reason)\n")
            XCTAssertEqual(add.stdout, "")
            XCTAssertEqual(manifestText(), original, path)
        }
        let unreadable = try directory.haul(
            ["add", "--extract", server.url("/garbage.tar.gz")], environment: environment)
        XCTAssertEqual(unreadable.exitCode, 1)
        XCTAssertTrue(
            unreadable.stderr.hasPrefix("error: cannot unpack \"\(server.url("/garbage.tar.gz"))\": "),
            unreadable.stderr)
        XCTAssertEqual(manifestText(), original)
        XCTAssertEqual(directory.list().sorted(), ["haul.yaml", "tmp"], "no folder was made for any of them")
        XCTAssertEqual(directory.list("tmp"), [], "nothing unpacked is left in add's own folder")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path("escape.txt")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path("tmp/escape.txt")))
    }

    func testUpdateRepinsTheArchiveAndItsTreeAfterTheServedArchiveChanges() throws {
        let files = StaticFiles(["/sdk-1.2.tar.gz": try packSDK()])
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }
        let url = server.url("/sdk-1.2.tar.gz")
        let add = try directory.haul(["add", "--extract", url], environment: environment)
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        let before = try XCTUnwrap(manifestText())

        let unchanged = try directory.haul(["add", "--update", "sdk-1.2"], environment: environment)
        XCTAssertEqual(unchanged.exitCode, 0, unchanged.stderr)
        XCTAssertTrue(
            unchanged.stdout.hasPrefix("files[0] (sdk-1.2) is already pinned to what \(url) serves"), unchanged.stdout)
        XCTAssertEqual(manifestText(), before)

        let changed = try packSDK(readme: "hello again\n")
        let tree = try nixHash(work.path("src"))
        files.set("/sdk-1.2.tar.gz", changed)
        let update = try directory.haul(["add", "--update", "sdk-1.2/"], environment: environment)
        XCTAssertEqual(update.exitCode, 0, update.stderr)
        XCTAssertTrue(update.stdout.contains(", tree \(tree.prefix(19))…"), update.stdout)
        XCTAssertEqual(
            manifestText(),
            """
            version: 1
            files:
              - url: \(url)
                dest: sdk-1.2
                sha256: \(sha256(changed))
                size: \(changed.count)
                extract:
                  tree: \(tree)

            """)
        XCTAssertEqual(directory.read("sdk-1.2/sdk-1.2/README"), Array("hello again\n".utf8))
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(try nixHash(directory.path("sdk-1.2")), tree)

        // A digest given cannot pin the tree the archive unpacks to.
        let given = try directory.haul(["add", "--update", "sdk-1.2", "--sha256", sha256(changed)])
        XCTAssertEqual(given.exitCode, 64)
        XCTAssertEqual(
            given.stderr,
            "error: files[0] (sdk-1.2) pins the tree its archive unpacks to; --update downloads the "
                + "archive to pin both (give no --sha256)\n")
        XCTAssertEqual(directory.list("tmp"), [])
    }
}
