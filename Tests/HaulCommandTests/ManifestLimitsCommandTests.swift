import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// Hostile or unusual manifests, end to end: the real binary, real pipes, a loopback server.
final class ManifestLimitsCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// `script` run by bash in the test's directory, with `$HAUL` the binary under test.
    private func shell(_ script: String) throws -> ProcessResult {
        try ProcessRunner.run(
            "/bin/bash", ["-c", "HAUL=\"$0\"; " + script, HaulProcess.executablePath],
            currentDirectory: directory.path)
    }

    // MARK: Memory

    /// What a manifest costs in memory grows with its bytes by a bounded factor: the peak resident set of `haul plan`
    /// of 100,000 entries (18.5 MB, every file missing), less that of a plan of one entry (start-up), per manifest
    /// byte, on the binary the tests run. This build measures 3.1 here (3.0 for the release build); before the file
    /// was read in chunks, paths kept only their text and rare settings moved behind a reference, 5.9 (4.9).
    func testPlanMemoryGrowsWithTheManifestByABoundedFactor() throws {
        func manifest(entries: Int) -> String {
            var text = "version: 1\nroot: out\nfiles:\n"
            text.reserveCapacity(entries * 190)
            for index in 0..<entries {
                let folder = String(index / 1000), name = "file-\(index).bin"
                let hex = String(index, radix: 16)
                text += "  - url: http://127.0.0.1:9/data/\(folder)/\(name)\n    dest: data/\(folder)/\(name)\n"
                text += "    sha256: \(String(repeating: "0", count: 64 - hex.count) + hex)\n    size: 16384\n"
            }
            return text
        }
        let large = manifest(entries: 100_000)
        try directory.write("large.yaml", large)
        try directory.write("one.yaml", manifest(entries: 1))
        // The kernel's peak for a child this test spawns starts at the test's own (it is spawned with vfork, and
        // the peak carries over exec): plan is forked from a small python instead, which reports its peak.
        func plan(_ file: String, _ options: [String] = []) throws -> (result: ProcessResult, peak: Int) {
            let script = """
                import os, sys
                pid = os.fork()
                if pid == 0:
                    os.execv(sys.argv[1], sys.argv[1:])
                _, status, usage = os.wait4(pid, 0)
                sys.stderr.write(f"peak {usage.ru_maxrss}\\n")
                sys.exit(os.waitstatus_to_exitcode(status))
                """
            let result = try ProcessRunner.run(
                "/usr/bin/python3", ["-c", script, HaulProcess.executablePath, "plan", file] + options,
                currentDirectory: directory.path)
            let kibibytes = try XCTUnwrap(
                result.stderr.split(separator: "\n").last.flatMap { Int($0.dropFirst(5)) },
                result.stderr)
            return (result, kibibytes << 10)
        }
        let startUp = try plan("one.yaml"), planned = try plan("large.yaml")
        XCTAssertEqual(startUp.result.exitCode, 2, startUp.result.stderr)
        XCTAssertEqual(planned.result.exitCode, 2, planned.result.stderr)
        XCTAssertTrue(
            planned.result.stdout.hasSuffix("\nPlan: 100000 to download (1.5 GiB), 0 up to date.\n"),
            String(planned.result.stdout.suffix(100)))
        let perByte = Double(planned.peak - startUp.peak) / Double(large.utf8.count)
        XCTAssertLessThanOrEqual(
            perByte, 4.0,
            "plan of 100,000 entries: \(planned.peak >> 20) MiB, start-up \(startUp.peak >> 20) MiB")

        // `--json`: the plan is one event of 100,000 changes, written as it is encoded, never held whole.
        let events = try plan("large.yaml", ["--json"])
        XCTAssertEqual(events.result.exitCode, 2, events.result.stderr)
        XCTAssertTrue(events.result.stdout.hasPrefix("{\"event\":\"plan\""), String(events.result.stdout.prefix(100)))
        XCTAssertTrue(
            events.result.stdout.hasSuffix(
                ",\"download\":100000,\"replace\":0,\"revalidate\":0,\"prune\":0,"
                    + "\"blocked\":0,\"up_to_date\":0,\"bytes\":1638400000}\n"),
            String(events.result.stdout.suffix(150)))
        let jsonPerByte = Double(events.peak - startUp.peak) / Double(large.utf8.count)
        XCTAssertLessThanOrEqual(
            jsonPerByte, 4.0,
            "plan --json of 100,000 entries: \(events.peak >> 20) MiB, start-up \(startUp.peak >> 20) MiB")
    }

    // MARK: Manifests without a folder of their own

    /// A sync from a pipe, from `-`, from `/dev/stdin` (a pipe or a redirected file) and from `<(…)` writes under
    /// the current directory. Before, `/dev/stdin` wrote `/dev/<root>/…` and `/dev/<root>/.haul`.
    func testAManifestFromStandardInputOrAPipeSyncsUnderTheCurrentDirectory() throws {
        let body = Array("served bytes\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/f1.txt": body])
        defer { server.stop() }
        // A name of its own, so that a misplaced root is recognizable (and removable) wherever it lands.
        let root = "haul-stdin-test-\(UUID().uuidString)"
        defer {
            for folder in ["/dev", "/dev/fd", "/proc/self/fd"] {
                try? FileManager.default.removeItem(atPath: "\(folder)/\(root)")
            }
        }
        let sha256 = StreamingHasher.digest(body, algorithm: .sha256).hex
        try directory.write(
            "m.yaml",
            "version: 1\nroot: \(root)\nfiles:\n  - url: \(server.url("/f1.txt"))\n"
                + "    dest: f1.txt\n    sha256: \(sha256)\n")
        try directory.makeDirectory("sub")
        let commands = [
            "cat m.yaml | \"$HAUL\" sync -",
            "cat m.yaml | \"$HAUL\" sync /dev/stdin",
            "\"$HAUL\" sync /dev/stdin < m.yaml",
            "\"$HAUL\" sync <(cat m.yaml)",
            "cd sub && \"$HAUL\" sync - < ../m.yaml",
        ]
        for command in commands {
            let result = try shell(command)
            XCTAssertEqual(result.exitCode, 0, "\(command)\n\(result.stderr)")
            let target = command.hasPrefix("cd sub") ? "sub/\(root)" : root
            XCTAssertEqual(directory.read("\(target)/f1.txt"), body, command)
            XCTAssertTrue(directory.exists("\(target)/.haul"), command)
            XCTAssertFalse(FileManager.default.fileExists(atPath: "/dev/\(root)"), command)
            try? FileManager.default.removeItem(atPath: directory.path(target))
        }
    }

    func testMessagesNameStandardInputAsStdin() throws {
        try directory.write("m.yaml", "version: 1\nfiles:\n  - {url: \"https://e.com/a\", dest: /abs}\n")
        let result = try shell("\"$HAUL\" plan - < m.yaml")
        XCTAssertEqual(result.exitCode, 3)
        XCTAssertEqual(
            result.stderr,
            "<stdin>:3:36: error: files[0].dest: destination \"/abs\" is absolute; destinations are relative to root\n")
    }

    // MARK: Bounded work

    /// `/dev/zero` never ends; haul stops reading at the limit. Before, it grew to 3.7 GB.
    func testAManifestLargerThan256MiBIsRefusedNamingTheLimit() throws {
        let result = try directory.haul(["plan", "/dev/zero"])
        XCTAssertEqual(result.exitCode, 3)
        XCTAssertEqual(result.stdout, "")
        XCTAssertEqual(result.stderr, "/dev/zero: error: the manifest is larger than 256 MiB, the most haul reads\n")
    }

    /// A few thousand references to a long variable would be gigabytes; they count against the same limit, once.
    func testEnvironmentExpansionsCountAgainstTheLimit() throws {
        // An environment string may hold at most 128 KiB; 2,700 references to 100,000 bytes make 270 MB.
        let references = String(repeating: "${BIG}", count: 2700)
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: http://127.0.0.1:1/a
                dest: a
                headers: {X-A: "\(references)"}
              - url: http://127.0.0.1:1/b
                dest: b
                headers: {X-B: "\(references)"}

            """)
        let result = try directory.haul(["plan"], environment: ["BIG": String(repeating: "v", count: 100_000)])
        XCTAssertEqual(result.exitCode, 3)
        XCTAssertEqual(
            result.stderr,
            "haul.yaml:5:20: error: files[0].headers.X-A: expanding environment variables "
                + "makes the manifest larger than 256 MiB, the most haul reads\n")
    }

    func testAtMost50DiagnosticsArePrintedThenHowManyMore() throws {
        try directory.write("haul.yaml", "version: 1\n" + (0..<2000).map { "k\($0): v\n" }.joined() + "files: []\n")
        let expected =
            (0..<50).map { "haul.yaml:\($0 + 2):1: error: k\($0): unknown key \"k\($0)\"\n" }.joined()
            + "… and 1950 more\n"
        for arguments in [["plan"], ["plan", "--json"], ["sync"], ["verify", "--json"]] {
            let result = try directory.haul(arguments)
            XCTAssertEqual(result.exitCode, 3, arguments.joined(separator: " "))
            // Under --json the same 50, as diagnostic events.
            XCTAssertEqual(
                result.stdout.split(separator: "\n").count, arguments.contains("--json") ? 50 : 0,
                arguments.joined(separator: " "))
            XCTAssertEqual(result.stderr, expected, arguments.joined(separator: " "))
        }
    }

    func testAtMost50WarningsArePrintedThenHowManyMore() throws {
        let md5 = "d41d8cd98f00b204e9800998ecf8427e"
        try directory.write(
            "haul.yaml",
            "version: 1\nfiles:\n"
                + (0..<60).map {
                    "  - {url: \"http://127.0.0.1:1/\($0)\", dest: f\($0), checksum: \"md5:\(md5)\"}\n"
                }.joined())
        let result = try directory.haul(["plan", "--json"])
        XCTAssertEqual(result.exitCode, 2, result.stderr)
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 52)
        XCTAssertEqual(
            lines[0],
            "haul.yaml:3:55: warning: files[0].checksum: md5 is a weak digest algorithm (collisions are practical); prefer sha256"
        )
        XCTAssertEqual(
            lines[49],
            "haul.yaml:52:57: warning: files[49].checksum: md5 is a weak digest algorithm (collisions are practical); prefer sha256"
        )
        XCTAssertEqual(lines[50], "… and 10 more")
    }
}
