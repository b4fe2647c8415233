import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// Process limits (`ulimit -n`, `ulimit -v`) as a shell or a service manager sets them, run through the real binary:
/// a limit too low to work at all is a clear error at once, and above that every entry lands, the content cache's
/// folders included in the budget. Every run is bounded: a hang is a failure, not a stuck suite.
final class ResourceLimitTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        server?.stop()
    }

    /// `count` small files served by a loopback server as `/f<index>`; their bytes.
    private func serve(_ count: Int) throws -> [[UInt8]] {
        let bodies = (0..<count).map { Array("file \($0)\n".utf8) }
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: bodies.enumerated().map { ("/f\($0.offset)", $0.element) }))
        return bodies
    }

    /// A manifest pinning the files `keeping` keeps, each at `<folder(index)>/f<index>` under `root`.
    private func writeManifest(
        _ name: String, root: String, bodies: [[UInt8]], folder: (Int) -> String,
        keeping: (Int) -> Bool = { _ in true }
    ) throws {
        var yaml = "version: 1\nroot: \(root)\nfiles:\n"
        for (index, body) in bodies.enumerated() where keeping(index) {
            yaml +=
                "  - { url: \(server.url("/f\(index)")), dest: \(folder(index))/f\(index), "
                + "sha256: \(StreamingHasher.digest(body, algorithm: .sha256).hex) }\n"
        }
        try directory.write(name, yaml)
    }

    /// haul with `ulimit -n limit` (soft and hard: haul cannot raise it), in the test folder.
    private func haul(openFiles limit: Int, _ arguments: [String], timeout: Double = 120) throws -> ProcessResult {
        try ProcessRunner.run(
            "/bin/sh", ["-c", "ulimit -n \(limit) && exec \"$0\" \"$@\"", HaulProcess.executablePath] + arguments,
            currentDirectory: directory.path, timeout: timeout)
    }

    private func assertEveryFile(
        _ bodies: [[UInt8]], in root: String, folder: (Int) -> String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let wrong = bodies.indices.filter { directory.read("\(root)/\(folder($0))/f\($0)") != bodies[$0] }
        XCTAssertEqual(wrong.count, 0, "files missing or wrong, e.g. \(wrong.prefix(5))", file: file, line: line)
    }

    // MARK: - Open files

    /// `ulimit -n 10` is too few to sync, plan or verify: each says so at once (the limit it found, and the least it
    /// needs), exits 64, and touches nothing: no request, no `.haul`.
    func testTooFewOpenFilesIsAClearErrorAtOnce() throws {
        let bodies = try serve(60)
        try writeManifest("haul.yaml", root: "out", bodies: bodies, folder: { "d\($0 % 5)" })
        for command in ["sync", "plan", "verify"] {
            let result = try haul(openFiles: 10, [command, "haul.yaml", "--progress", "none"], timeout: 30)
            XCTAssertEqual(result.exitCode, 64, "\(command): \(result.stderr.suffix(1000))")
            let pattern =
                #"^error: the open-file limit \(ulimit -n\) is 10, too few for haul to run: it needs at least (\d+) here "#
                + #"\((\d+) of its own, and the (\d+) open when it started\)\n$"#
            let match = try XCTUnwrap(result.stderr.wholeMatch(of: try Regex(pattern)), "\(command): \(result.stderr)")
            let numbers = (1...3).compactMap { Int(match.output[$0].substring ?? "") }
            XCTAssertEqual(numbers.count, 3)
            XCTAssertEqual(numbers[0], numbers[1] + numbers[2], result.stderr)
            XCTAssertGreaterThan(numbers[0], 10, result.stderr)
        }
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertFalse(directory.exists("out"), "nothing made")
    }

    /// At the least the error names, and just above it, every entry lands (deep folders, one transfer at a time;
    /// with a cache holding half of them, and without): nothing fails for want of a descriptor, at a commit or
    /// anywhere else, and `verify` reads every file.
    func testAtTheMinimumEveryEntryLands() throws {
        let bodies = try serve(60)
        let folder: (Int) -> String = { "d\($0 % 6)/a/b/c/d/e/f/g" }
        try writeManifest("haul.yaml", root: "out", bodies: bodies, folder: folder)
        try writeManifest("half.yaml", root: "half", bodies: bodies, folder: folder, keeping: { $0 % 2 == 0 })
        let filled = try directory.haul(["sync", "half.yaml", "--cache", directory.path("cache"), "--progress", "none"])
        XCTAssertEqual(filled.exitCode, 0, filled.stderr)
        for cache in [[], ["--cache", directory.path("cache")]] {
            let refusal = try haul(openFiles: 12, ["sync", "haul.yaml", "--progress", "none"] + cache, timeout: 30)
            XCTAssertEqual(refusal.exitCode, 64, refusal.stderr)
            let minimum = try XCTUnwrap(
                refusal.stderr.firstMatch(of: /needs at least (\d+)/).flatMap { Int(String($0.output.1)) },
                refusal.stderr)
            for limit in minimum...(minimum + 2) {
                let result = try haul(openFiles: limit, ["sync", "haul.yaml", "--progress", "none"] + cache)
                XCTAssertEqual(result.exitCode, 0, "ulimit -n \(limit) \(cache): \(result.stderr.suffix(2000))")
                XCTAssertFalse(
                    result.stderr.contains("Too many open files"), "ulimit -n \(limit): \(result.stderr.suffix(2000))")
                assertEveryFile(bodies, in: "out", folder: folder)
                let verify = try haul(openFiles: limit, ["verify", "haul.yaml"])
                XCTAssertEqual(verify.exitCode, 0, "verify at ulimit -n \(limit): \(verify.stdout.suffix(1000))")
                XCTAssertEqual(rmdirTree(directory.path("out")), true)
            }
        }
    }

    /// The content cache's folders count with the rest: 3,000 entries, half of them in the cache (spread over its
    /// 256 folders), under `ulimit -n 200` and `300`: every entry lands, from the cache or downloaded, none fails
    /// for want of a descriptor.
    func testTheCachesFoldersAreWithinTheBudget() throws {
        let bodies = try serve(3000)
        let folder: (Int) -> String = { "d\($0 % 20)" }
        try writeManifest("half.yaml", root: "half", bodies: bodies, folder: folder, keeping: { $0 % 2 == 0 })
        let cache = directory.path("cache")
        let filled = try directory.haul(["sync", "half.yaml", "--cache", cache, "--progress", "none"])
        XCTAssertEqual(filled.exitCode, 0, "\(filled.stderr.suffix(2000))")
        try writeManifest("all.yaml", root: "out", bodies: bodies, folder: folder)
        for limit in [200, 300] {
            server.resetLog()
            let result = try haul(openFiles: limit, ["sync", "all.yaml", "--cache", cache, "--progress", "none"])
            XCTAssertEqual(result.exitCode, 0, "ulimit -n \(limit): \(result.stderr.suffix(2000))")
            XCTAssertFalse(
                result.stderr.contains("Too many open files"), "ulimit -n \(limit): \(result.stderr.suffix(2000))")
            XCTAssertTrue(
                result.stdout.contains("1500 from the cache"), "ulimit -n \(limit): \(result.stdout.suffix(300))")
            XCTAssertEqual(server.requests.count, 1500, "only what the cache lacks is asked for (ulimit -n \(limit))")
            assertEveryFile(bodies, in: "out", folder: folder)
            XCTAssertEqual(rmdirTree(directory.path("out")), true)
            // The next round fills from the cache as this one did: put back what this one added.
            for index in bodies.indices where index % 2 == 1 {
                let hex = StreamingHasher.digest(bodies[index], algorithm: .sha256).hex
                XCTAssertEqual(unlink("\(cache)/sha256/\(hex.prefix(2))/\(hex)"), 0)
            }
        }
    }

    // MARK: - Address space

    /// haul with `ulimit -v` of `mebibytes` MiB (soft and hard), in the test folder.
    private func haul(addressSpace mebibytes: Int, _ arguments: [String], timeout: Double = 120) throws -> ProcessResult
    {
        try ProcessRunner.run(
            "/bin/sh",
            ["-c", "ulimit -v \(mebibytes << 10) && exec \"$0\" \"$@\"", HaulProcess.executablePath]
                + arguments, currentDirectory: directory.path, timeout: timeout)
    }

    /// Under `ulimit -v` from the least that loads haul's libraries (about 100 MiB: libarchive brings ICU's data
    /// with it) to 300 MiB, 16 large files at once (each with a hashing thread of its own) are
    /// either all synced or refused at once with the limit named (exit 64), never a crash: threads, buffers and malloc
    /// arenas are sized to the limit. Staged files a crash would leave (planted here) are swept by the next run, and
    /// no run leaves one.
    func testAnAddressSpaceLimitIsBudgetedNotACrash() throws {
        let bodies = (0..<16).map { Array("file \($0)\n".utf8) + [UInt8](repeating: UInt8($0), count: 9 << 20) }
        server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: bodies.enumerated().map { ("/f\($0.offset)", $0.element) }))
        try writeManifest("haul.yaml", root: "out", bodies: bodies, folder: { _ in "big" })
        let refusal = try Regex(
            #"^error: the address-space limit \(ulimit -v\) is \d+\.\d MiB, too little for haul to run"#
                + #"( on 16 entries)?: it needs at least \d+\.\d MiB here \(\d+\.\d MiB of its own, and the \d+\.\d MiB "#
                + #"mapped already\)\n$"#)
        var synced = 0
        // Below this the dynamic loader itself refuses (exit 127) before haul runs a line: not haul's to budget.
        let loads = try stride(from: 60, through: 300, by: 20).first {
            try haul(addressSpace: $0, ["--version"]).exitCode == 0
        }
        XCTAssertNotNil(loads, "haul loads under some limit up to 300 MiB")
        for limit in stride(from: loads ?? 300, through: 300, by: 20) {
            try directory.makeDirectory("out/.haul/tmp")
            for name in ["5e1f07-1.part", "5e1f07-2.part"] {
                try directory.write("out/.haul/tmp/\(name)", "left by a crash")
            }
            let result = try haul(
                addressSpace: limit, ["sync", "haul.yaml", "--progress", "none", "--durability", "none"])
            switch result.exitCode {
            case 0:
                synced += 1
                assertEveryFile(bodies, in: "out", folder: { _ in "big" })
                XCTAssertEqual(
                    directory.list("out/.haul/tmp"), [], "ulimit -v \(limit) MiB: staged files swept, none left")
            case 64:
                XCTAssertNotNil(result.stderr.wholeMatch(of: refusal), "ulimit -v \(limit) MiB: \(result.stderr)")
                XCTAssertEqual(directory.read("out/big/f0"), nil, "refused before anything was written")
            default:
                XCTFail("ulimit -v \(limit) MiB: exit \(result.exitCode): \(result.stderr.suffix(3000))")
            }
            XCTAssertEqual(rmdirTree(directory.path("out")), true)
        }
        XCTAssertGreaterThan(synced, 0, "some limit in the range is enough")
    }

    /// Removes a tree (the test's own files only).
    private func rmdirTree(_ path: String) -> Bool {
        (try? FileManager.default.removeItem(atPath: path)) != nil
    }
}
