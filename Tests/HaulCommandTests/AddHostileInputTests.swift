import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add` against hostile or odd input, through the real binary and real loopback servers: a checksum list of
/// many thousand lines in a capped address space, a manifest path that is no regular file, a HEAD answer that
/// contradicts the digest, messages that must name the real place and the real limit, names a manifest must not
/// hold raw, and what a killed `add` leaves behind.
final class AddHostileInputTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let tool: [UInt8] = Array("tool binary, version 2\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private var manifestText: String? { directory.read("haul.yaml").map { String(decoding: $0, as: UTF8.self) } }

    /// `haul` with `arguments`, run by bash after `setup` (e.g. `ulimit -v N`), in the test's folder.
    private func haulUnderShell(_ setup: String, _ arguments: [String], timeout: Double = 120) throws -> ProcessResult {
        try ProcessRunner.run(
            "/bin/bash", ["-c", "\(setup)", HaulProcess.executablePath] + arguments,
            currentDirectory: directory.path, timeout: timeout)
    }

    // MARK: Memory linear in the list's lines

    /// A list of 12,000 lines (1 MB) makes a manifest of 12,000 entries. The edit is made once: an address space of
    /// 384 MiB is room enough (about 160 MiB are used). Editing the text once per entry, keeping each version,
    /// needs about 15 GiB here and fails after some 1,800 lines.
    func testAChecksumListOfTwelveThousandLinesIsPinnedInACappedAddressSpace() throws {
        let count = 12_000
        let list = (0..<count).map { "\(sha256(Array("asset \($0)".utf8)))  assets/file-\($0).bin\n" }.joined()
        let server = try LoopbackHTTPServer(files: ["/r/SHA256SUMS": Array(list.utf8)])
        defer { server.stop() }

        let add = try haulUnderShell(
            "ulimit -v \(384 * 1024) && exec \"$0\" \"$@\"",
            ["add", "--from-sums", server.url("/r/SHA256SUMS")], timeout: 300)
        XCTAssertEqual(add.exitCode, 0, String(add.stderr.prefix(2_000)))
        let text = manifestText ?? ""
        XCTAssertEqual(text.components(separatedBy: "\n  - url: ").count - 1, count)
        XCTAssertTrue(
            text.hasSuffix(
                """
                  - url: \(server.url("/r/assets/file-\(count - 1).bin"))
                    dest: assets/file-\(count - 1).bin
                    sha256: \(sha256(Array("asset \(count - 1)".utf8)))

                """), String(text.suffix(300)))
        XCTAssertTrue(add.stdout.contains("to haul.yaml as files[\(count - 1)], line "), String(add.stdout.suffix(300)))
    }

    // MARK: Only a regular file is a manifest add edits

    func testADeviceOrASymlinkToOneIsRefusedAndLeftAsItIs() throws {
        let server = try LoopbackHTTPServer(files: ["/v2/tool.bin": tool])
        defer { server.stop() }
        let mknod = try ProcessRunner.run("mknod", [directory.path("device"), "c", "1", "3"])
        guard mknod.exitCode == 0 else { throw Capability.unavailable("mknod (root): \(mknod.stderr)") }
        XCTAssertEqual(symlink("device", directory.path("link")), 0)

        for name in ["device", "link"] {
            let add = try directory.haul(["add", server.url("/v2/tool.bin"), "--manifest", name])
            XCTAssertEqual(add.exitCode, 3, add.stderr)
            XCTAssertEqual(
                add.stderr,
                "error: cannot edit \"\(name)\": it is a character device, not a regular file "
                    + "(haul add edits a regular file or makes a new one)\n")
        }
        var info = stat()
        XCTAssertEqual(lstat(directory.path("device"), &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFCHR, "the device is still a device")
        XCTAssertEqual(lstat(directory.path("link"), &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFLNK, "the symlink is still a symlink")
        XCTAssertTrue(server.requests.isEmpty, "refused before any request")
        XCTAssertEqual(directory.list(), ["device", "link"], "no temporary file beside them")
    }

    /// A FIFO would block the open until a writer came: it is refused at once instead.
    func testAFIFOIsRefusedAtOnce() throws {
        let server = try LoopbackHTTPServer(files: ["/v2/tool.bin": tool])
        defer { server.stop() }
        XCTAssertEqual(mkfifo(directory.path("haul.yaml"), 0o644), 0)
        let add = try HaulProcess.start(
            ["add", server.url("/v2/tool.bin")], currentDirectory: directory.path,
            outputPath: directory.path("add.out"))
        XCTAssertEqual(add.waitForExit(timeout: 15), 3, "a FIFO is refused, not waited on: \(add.output)")
        XCTAssertEqual(
            add.output,
            "error: cannot edit \"haul.yaml\": it is a FIFO, not a regular file "
                + "(haul add edits a regular file or makes a new one)\n")
        var info = stat()
        XCTAssertEqual(lstat(directory.path("haul.yaml"), &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO)
    }

    /// Standard input can be read once and replaced never: `-` and `/dev/stdin` (here a pipe) are usage errors,
    /// not a file named `-` nor a manifest "changed while downloading".
    func testStandardInputIsRefusedAsAManifestToEdit() throws {
        let server = try LoopbackHTTPServer(files: ["/v2/tool.bin": tool])
        defer { server.stop() }
        let dash = try directory.haul(["add", server.url("/v2/tool.bin"), "--manifest", "-"])
        XCTAssertEqual(dash.exitCode, 64, dash.stderr)
        XCTAssertTrue(
            dash.stderr.hasPrefix(
                "error: --manifest \"-\": haul add edits a manifest file in place; give the "
                    + "file's own path (standard input cannot be edited; --print shows the entries "
                    + "without a manifest)\n"), dash.stderr)
        let piped = try haulUnderShell(
            "printf 'version: 1\\nfiles: []\\n' | \"$0\" \"$@\"",
            ["add", server.url("/v2/tool.bin"), "--manifest", "/dev/stdin"])
        XCTAssertEqual(piped.exitCode, 64, piped.stderr)
        XCTAssertTrue(
            piped.stderr.hasPrefix("error: --manifest \"/dev/stdin\": haul add edits a manifest file in place"),
            piped.stderr)
        XCTAssertTrue(server.requests.isEmpty)
        XCTAssertEqual(directory.list(), [], "no file named \"-\"")
    }

    /// The wait add has once it downloads ends within a second of SIGTERM, leaving the manifest and `$TMPDIR` clean.
    func testSIGTERMEndsADownloadWaitPromptly() throws {
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok([UInt8](repeating: 7, count: 8_000))
                .with(fault: .stallAfter(bytes: 1_000, seconds: 30))
        }
        defer { server.stop() }
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")
        try directory.makeDirectory("tmp")
        let add = try HaulProcess.start(
            ["add", server.url("/slow.bin")], environment: ["TMPDIR": directory.path("tmp")],
            currentDirectory: directory.path, outputPath: directory.path("tmp/../add.out"))
        XCTAssertEqual(add.wait(until: { self.directory.holdsBytesInFlight(under: "tmp") }), .conditionMet, add.output)
        let sent = monotonicSeconds()
        add.send(SIGTERM)
        XCTAssertEqual(add.waitForExit(timeout: 10), 143, add.output)
        XCTAssertLessThan(monotonicSeconds() - sent, 5, "ends promptly")
        XCTAssertEqual(manifestText, "version: 1\nfiles: []\n")
        XCTAssertEqual(directory.list("tmp"), [])
    }

    // MARK: No size that contradicts the digest

    func testAZeroContentLengthBesideANonEmptyDigestIsNotPinned() throws {
        let tool = tool
        let server = try LoopbackHTTPServer { request in
            request.method == "HEAD" ? .raw("HTTP/1.1 200 OK", ["Content-Length: 0", "Connection: close"]) : .ok(tool)
        }
        defer { server.stop() }
        let add = try directory.haul(["add", server.url("/v2/tool.bin"), "--sha256", sha256(tool)])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(
            add.stderr,
            "warning: \(server.url("/v2/tool.bin")) announces Content-Length: 0, which cannot be the "
                + "size of the file pinned: 0 bytes, but sha256 \(sha256(tool).prefix(12))… is not the digest of "
                + "empty content; the entry has no size (add --size to pin it)\n")
        XCTAssertEqual(
            manifestText,
            """
            version: 1
            files:
              - url: \(server.url("/v2/tool.bin"))
                dest: tool.bin
                sha256: \(sha256(tool))

            """)
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("tool.bin"), tool)

        let given = try directory.haul(["add", server.url("/v2/other.bin"), "--sha256", sha256(tool), "--size", "0"])
        XCTAssertEqual(given.exitCode, 64, given.stderr)
        XCTAssertEqual(
            given.stderr,
            "error: --size 0 contradicts --sha256: 0 bytes, but sha256 \(sha256(tool).prefix(12))… "
                + "is not the digest of empty content\n")
    }

    // MARK: Messages name the real place and the real limit

    /// A digest written as a block scalar is re-pinned where it stands, and the new `size` gets a line of its own.
    func testUpdateRepinsABlockScalarDigestInPlace() throws {
        let server = try LoopbackHTTPServer(files: ["/v2/tool.bin": tool])
        defer { server.stop() }
        let zeros = String(repeating: "0", count: 64)
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: \(server.url("/v2/tool.bin"))
                dest: tool.bin
                sha256: >-
                  \(zeros)

            """)
        let update = try directory.haul(["add", "--update", "tool.bin"])
        XCTAssertEqual(update.exitCode, 0, update.stderr)
        XCTAssertEqual(
            manifestText,
            """
            version: 1
            files:
              - url: \(server.url("/v2/tool.bin"))
                dest: tool.bin
                sha256: >-
                  \(sha256(tool))
                size: \(tool.count)

            """)
        XCTAssertEqual(directory.read("tool.bin"), tool)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
    }

    func testAListNamingOneDestinationTwiceNamesItsLines() throws {
        let list = """
            \(sha256(tool))  tool.bin
            \(sha256([1]))  docs/a.txt
            \(sha256([2]))  tool.bin
            """
        let spelled = "\(sha256(tool))  docs/a.txt\n\(sha256([2]))  ./docs//a.txt\n"
        let server = try LoopbackHTTPServer(files: [
            "/v2/SHA256SUMS": Array(list.utf8), "/v2/SPELLED": Array(spelled.utf8),
            "/a/tool.bin": tool, "/b/tool.bin": tool,
        ])
        defer { server.stop() }
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")

        let twice = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS")])
        XCTAssertEqual(twice.exitCode, 3, twice.stderr)
        XCTAssertEqual(
            twice.stderr,
            "\(server.url("/v2/SHA256SUMS")):3: error: \"tool.bin\" is named twice, at lines 1 and 3\n"
                + "haul.yaml was not modified\n")
        let same = try directory.haul(["add", "--from-sums", server.url("/v2/SPELLED")])
        XCTAssertEqual(same.exitCode, 3, same.stderr)
        XCTAssertEqual(
            same.stderr,
            "\(server.url("/v2/SPELLED")):2: error: \"docs//a.txt\" is the same destination as "
                + "\"docs/a.txt\" at line 1\nhaul.yaml was not modified\n")
        let urls = try directory.haul(["add", server.url("/a/tool.bin"), server.url("/b/tool.bin")])
        XCTAssertEqual(urls.exitCode, 3, urls.stderr)
        XCTAssertEqual(
            urls.stderr,
            "error: \(server.url("/a/tool.bin")) and \(server.url("/b/tool.bin")) would both be saved as "
                + "\"tool.bin\"; haul.yaml was not modified\nhint: add them one at a time, each with its own --dest\n")
        XCTAssertEqual(manifestText, "version: 1\nfiles: []\n")
        XCTAssertEqual(server.requests.filter { !$0.path.hasPrefix("/v2/") }.count, 0, "refused before any download")
    }

    /// A list whose body never ends stops at the list's own cap, and the message names that cap.
    func testAnEndlessListIsStoppedAtTheListsOwnCap() throws {
        let line = Array("\(sha256(tool))  tool.bin\n".utf8)
        let endless = Array(repeating: line, count: (64 << 20) / line.count + 2).flatMap { $0 }
        let server = try LoopbackHTTPServer { _ in ServerResponse.ok(endless).with(fault: .noContentLength) }
        defer { server.stop() }
        let add = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS")])
        XCTAssertEqual(add.exitCode, 1, add.stderr)
        XCTAssertEqual(
            add.stderr,
            "error: \(server.url("/v2/SHA256SUMS")): more than 64.0 MiB, the most haul reads of a checksum list\n")
        XCTAssertNil(manifestText)
    }

    // MARK: Names the manifest must not hold raw

    /// A bidi control reorders what an editor or a diff shows; a line separator breaks lines for some readers. Both
    /// are written as YAML escapes, and the names still mean the same files.
    func testBidiControlsAndLineSeparatorsAreWrittenAsEscapes() throws {
        let bidi = "bidi-\u{202E}txt.exe", separated = "line\u{2028}sep.txt", isolate = "iso\u{2066}late.txt"
        let list = [bidi, separated, isolate].map { "\(sha256(tool))  \($0)\n" }.joined()
        // The server matches the target as sent: every byte but the unreserved ones percent-encoded.
        let unreserved = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/".utf8)
        let onTheWire = { (name: String) in
            name.utf8.map { unreserved.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0) }
                .joined()
        }
        var files: [String: [UInt8]] = ["/v2/SHA256SUMS": Array(list.utf8)]
        for name in [bidi, separated, isolate] { files["/v2/" + onTheWire(name)] = tool }
        let server = try LoopbackHTTPServer(files: files)
        defer { server.stop() }

        let add = try directory.haul(["add", "--from-sums", server.url("/v2/SHA256SUMS")])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        let text = manifestText ?? ""
        XCTAssertTrue(text.contains("    dest: \"bidi-\\u202Etxt.exe\"\n"), text)
        XCTAssertTrue(text.contains("    dest: \"line\\Lsep.txt\"\n"), text)
        XCTAssertTrue(text.contains("    dest: \"iso\\u2066late.txt\"\n"), text)
        for raw in ["\u{202E}", "\u{2028}", "\u{2066}"] {
            XCTAssertFalse(
                text.unicodeScalars.contains(raw.unicodeScalars.first!),
                "no raw U+\(String(raw.unicodeScalars.first!.value, radix: 16))")
        }
        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        for name in [bidi, separated, isolate] { XCTAssertEqual(directory.read(name), tool, name) }
    }

    // MARK: What a killed add leaves

    /// A download folder under `$TMPDIR` that a SIGKILL left is removed by the next add; the folder of an add that
    /// is running is not (another add runs meanwhile), and that add finishes.
    func testAKilledAddsDownloadFolderIsRemovedAndALiveOneIsKept() throws {
        let slow = [UInt8](repeating: 9, count: 6_000), tool = tool
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            case "/killed.bin": ServerResponse.ok(slow).with(fault: .stallAfter(bytes: 2_000, seconds: 60))
            case "/live.bin": ServerResponse.ok(slow).with(fault: .stallAfter(bytes: 2_000, seconds: 12))
            default: .ok(tool)
            }
        }
        defer { server.stop() }
        try directory.makeDirectory("tmp")
        let environment = ["TMPDIR": directory.path("tmp")]
        let folders = { self.directory.list("tmp").filter { $0.hasPrefix("haul-add.") } }
        let downloading = { (folder: String) in
            self.directory.list("tmp/" + folder).contains { name in
                name.hasSuffix(".part") && (self.directory.read("tmp/\(folder)/\(name)")?.count ?? 0) >= 2_000
            }
        }

        let killed = try HaulProcess.start(
            ["add", server.url("/killed.bin")], environment: environment,
            currentDirectory: directory.path, outputPath: directory.path("killed.out"))
        XCTAssertEqual(
            killed.wait(until: { folders().count == 1 && downloading(folders()[0]) }), .conditionMet, killed.output)
        let litter = folders()
        killed.send(SIGKILL)
        XCTAssertEqual(killed.waitForExit(), 128 + SIGKILL)
        XCTAssertEqual(folders(), litter, "SIGKILL leaves the folder")

        let live = try HaulProcess.start(
            ["add", server.url("/live.bin"), "--manifest", "live.yaml"], environment: environment,
            currentDirectory: directory.path, outputPath: directory.path("live.out"))
        XCTAssertEqual(live.wait(until: { server.requests(path: "/live.bin").count == 1 }), .conditionMet, live.output)
        XCTAssertEqual(
            live.wait(until: { folders().contains(where: { !litter.contains($0) && downloading($0) }) }),
            .conditionMet, live.output)
        let liveFolder = folders().filter { !litter.contains($0) }
        XCTAssertEqual(folders(), liveFolder, "the next add removed the killed add's folder")

        let next = try directory.haul(["add", server.url("/next.bin"), "--print"], environment: environment)
        XCTAssertEqual(next.exitCode, 0, next.stderr)
        XCTAssertEqual(folders(), liveFolder, "an add running meanwhile keeps its folder")
        XCTAssertEqual(live.waitForExit(timeout: 60), 0, live.output)
        XCTAssertEqual(directory.read("live.bin"), slow)
        XCTAssertEqual(folders(), [])
    }

    /// The temporary file a killed add left beside the manifest is removed by the next add that writes it; one that
    /// a live process holds, or of another name form, is not.
    func testAKilledAddsTemporaryManifestIsRemovedAndALiveOneIsKept() throws {
        let server = try LoopbackHTTPServer(files: ["/v2/tool.bin": tool])
        defer { server.stop() }
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")
        for name in [
            ".haul.yaml.haul-3kq9z0dead", ".haul.yaml.haul-5live", ".haul.yaml.haul-NotOurs", ".other.yaml.haul-abc",
        ] {
            try directory.write(name, "version: 1\nfil")
        }
        let held = open(directory.path(".haul.yaml.haul-5live"), O_RDWR)
        XCTAssertGreaterThanOrEqual(held, 0)
        defer { close(held) }
        XCTAssertTrue(RootLock.take(held, 0..<Int64.max), "the test holds it as a live add would")

        let add = try directory.haul(["add", server.url("/v2/tool.bin")])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(
            directory.list().filter { $0.hasPrefix(".") && $0 != ".haul" },
            [".haul.yaml.haul-5live", ".haul.yaml.haul-NotOurs", ".other.yaml.haul-abc"])
        XCTAssertTrue(manifestText?.contains("dest: tool.bin") == true)
    }
}
