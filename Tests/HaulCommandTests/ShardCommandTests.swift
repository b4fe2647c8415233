import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// `--shard K/N`: N real haul processes share one root at once, each managing only its part of the manifest, and
/// together they make what one unsharded run makes.
final class ShardCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    private struct Corpus {
        var files: [String: [UInt8]]  // by destination
        var manifest: String
    }

    /// `count` pinned files in a few folders, served from `/<destination>`.
    /// A corpus of `count` files on a loopback server (stopped when the test ends), and `haul.yaml` syncing it to
    /// `out`.
    private func servedCorpus(_ count: Int) throws -> (LoopbackHTTPServer, Corpus) {
        let server = try LoopbackHTTPServer(files: [:])
        addTeardownBlock { server.stop() }
        let corpus = corpus(count, serverURL: server.url)
        for (destination, bytes) in corpus.files { server.files?.set("/" + destination, bytes) }
        try directory.write("haul.yaml", corpus.manifest)
        return (server, corpus)
    }

    private func corpus(_ count: Int, serverURL: (String) -> String, root: String = "out") -> Corpus {
        var files: [String: [UInt8]] = [:]
        var lines = ["version: 1", "root: \(root)", "files:"]
        for index in 0..<count {
            let destination = "d\(index % 4)/f\(index).bin"
            let bytes = (0..<(1000 + index * 37)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            files[destination] = bytes
            lines.append(
                "  - { url: \(serverURL("/" + destination)), dest: \(destination), "
                    + "sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }")
        }
        return Corpus(files: files, manifest: lines.joined(separator: "\n") + "\n")
    }

    private func start(_ arguments: [String], environment: [String: String] = [:]) throws -> BackgroundProcess {
        try HaulProcess.start(
            arguments, environment: environment, currentDirectory: directory.path,
            outputPath: directory.path("output-\(UUID().uuidString).txt"))
    }

    private func assertRoot(
        _ root: String, holds files: [String: [UInt8]], file: StaticString = #filePath, line: UInt = #line
    ) {
        for (destination, bytes) in files {
            XCTAssertEqual(directory.read("\(root)/\(destination)"), bytes, destination, file: file, line: line)
        }
        let present = directory.list(root).filter { $0 != ".haul" }.flatMap { folder in
            directory.list("\(root)/\(folder)").map { "\(folder)/\($0)" }
        }
        XCTAssertEqual(Set(present), Set(files.keys), "nothing but the destinations", file: file, line: line)
    }

    private func stateRecords(_ root: String) -> [String: StateFileRecord] {
        guard case .records(let records) = StateFile.read(root: directory.path(root)) else { return [:] }
        return Dictionary(records.map { ($0.destination, $0) }, uniquingKeysWith: { $1 })
    }

    /// Watches the corpus's folders for files being opened.
    private func watch(_ root: String) throws -> FileOpenWatch {
        try FileOpenWatch(folders: (0..<4).map { directory.path("\(root)/d\($0)") }, base: directory.path(root))
    }

    func testFourShardsAtOnceMakeByteForByteWhatOneUnshardedRunMakesAndItTrustsTheirState() throws {
        let (server, corpus) = try servedCorpus(60)
        try directory.write("whole.yaml", corpus.manifest.replacingOccurrences(of: "root: out", with: "root: whole"))
        XCTAssertEqual(
            Set((1...4).flatMap { k in corpus.files.keys.filter { shard(of: $0, count: 4) == k } }).count, 60)
        XCTAssertTrue(
            (1...4).allSatisfy { k in corpus.files.keys.contains { shard(of: $0, count: 4) == k } },
            "every shard has work")

        let shards = try (1...4).map { try start(["sync", "--shard", "\($0)/4", "--progress", "none"]) }
        for (index, process) in shards.enumerated() {
            XCTAssertEqual(process.waitForExit(timeout: 60), 0, "shard \(index + 1): \(process.output)")
        }
        XCTAssertEqual(server.requests.count, 60, "each file fetched once, by its own shard")
        assertRoot("out", holds: corpus.files)

        // The same as one unsharded run, and so is the state.
        let whole = try directory.haul(["sync", "whole.yaml"])
        XCTAssertEqual(whole.exitCode, 0, whole.stderr)
        assertRoot("whole", holds: corpus.files)
        let sharded = stateRecords("out"), unsharded = stateRecords("whole")
        XCTAssertEqual(Set(sharded.keys), Set(corpus.files.keys), "every shard's records are in the one state")
        XCTAssertEqual(sharded.mapValues(\.digest), unsharded.mapValues(\.digest))

        // An unsharded run after the shards: no request, and no file opened that the state proves unchanged (a
        // record is proof once the state was written after the file's last change, as it is for git's index).
        let stateTime = OnDiskIdentity.of(directory.path("out/.haul/state"))?.modified ?? ""
        let provable = Set(sharded.filter { $0.value.identity.changed < stateTime }.map(\.key))
        XCTAssertGreaterThan(provable.count, 50)
        let watch = try watch("out")
        server.resetLog()
        let noOp = try directory.haul(["sync"])
        XCTAssertEqual(noOp.exitCode, 0, noOp.stderr)
        XCTAssertTrue(noOp.stdout.contains("Nothing to do: 60 files up to date"), noOp.stdout)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertEqual(watch.opened().intersection(provable), [], "the shards' records were trusted, not re-hashed")

        // The check can fail: hashing opens them.
        let rehash = try directory.haul(["sync", "--rehash"])
        XCTAssertEqual(rehash.exitCode, 0, rehash.stderr)
        XCTAssertEqual(watch.opened(), Set(corpus.files.keys))

        // And the other way: a shard after an unsharded run opens nothing and asks nothing.
        let settled = try directory.haul(["sync"])
        XCTAssertEqual(settled.exitCode, 0, settled.stderr)
        _ = watch.opened()
        let mine = corpus.files.keys.filter { shard(of: $0, count: 4) == 3 }
        let shardNoOp = try directory.haul(["sync", "--shard", "3/4"])
        XCTAssertEqual(shardNoOp.exitCode, 0, shardNoOp.stderr)
        XCTAssertTrue(shardNoOp.stdout.contains("Nothing to do: \(mine.count) files up to date"), shardNoOp.stdout)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertEqual(watch.opened(), [])
    }

    func testAShardHoldsOnlyItsShareOfTheRootAndAnUnshardedRunWaitsForIt() throws {
        let (server, corpus) = try servedCorpus(24)
        // Shard 1/2's files take a while to arrive: its run holds its share meanwhile.
        let slow = Set(corpus.files.keys.filter { shard(of: $0, count: 2) == 1 })
        let stalling = try LoopbackHTTPServer { request in
            let destination = String(request.path.dropFirst())
            guard let bytes = corpus.files[destination] else { return ServerResponse(status: 404) }
            return slow.contains(destination)
                ? ServerResponse.ok(bytes).with(fault: .stallAfter(bytes: 100, seconds: 3)) : .ok(bytes)
        }
        defer { stalling.stop() }
        try directory.write(
            "haul.yaml", corpus.manifest.replacingOccurrences(of: server.baseURL, with: stalling.baseURL))

        let holder = try start(["sync", "--shard", "1/2"])
        XCTAssertEqual(holder.wait(until: { stalling.requests.count > 0 }, timeout: 20), .conditionMet, holder.output)

        let unsharded = try directory.haul(["sync"])
        XCTAssertEqual(unsharded.exitCode, 4, unsharded.stderr)
        XCTAssertTrue(unsharded.stderr.contains("another haul is syncing"), unsharded.stderr)
        XCTAssertTrue(
            unsharded.stderr.contains("pid \(holder.pid), haul sync"), "names the holder: \(unsharded.stderr)")

        let overlapping = try directory.haul(["sync", "--shard", "2/4"])  // 2/4 lies inside 1/2
        XCTAssertEqual(overlapping.exitCode, 4, overlapping.stderr)
        XCTAssertTrue(overlapping.stderr.contains("overlapping shard 2/4"), overlapping.stderr)

        let other = try directory.haul(["sync", "--shard", "2/2"])
        XCTAssertEqual(other.exitCode, 0, "the other shard runs meanwhile: \(other.stderr)")
        let finer = try directory.haul(["sync", "--shard", "3/4"])  // inside 2/2: shares nothing with 1/2
        XCTAssertEqual(finer.exitCode, 0, "a shard of another N that shares nothing runs too: \(finer.stderr)")
        XCTAssertNil(holder.poll(), "shard 1/2 is still running")
        for destination in corpus.files.keys where !slow.contains(destination) {
            XCTAssertEqual(directory.read("out/\(destination)"), corpus.files[destination])
        }

        let waiting = try start(["sync", "--wait"])
        XCTAssertEqual(holder.waitForExit(timeout: 60), 0, holder.output)
        XCTAssertEqual(waiting.waitForExit(timeout: 60), 0, waiting.output)
        XCTAssertTrue(waiting.output.contains("Nothing to do: 24 files up to date"), waiting.output)
        assertRoot("out", holds: corpus.files)
    }

    func testAShardKilledMidRunLeavesTheOthersToFinishAndItsRerunCompletesTheRoot() throws {
        let corpusFiles = corpus(32, serverURL: { $0 }).files
        let victims = Set(corpusFiles.keys.filter { shard(of: $0, count: 4) == 2 })
        let stalls = Atomic(true)
        let server = try LoopbackHTTPServer { request in
            let destination = String(request.path.dropFirst())
            guard let bytes = corpusFiles[destination] else { return ServerResponse(status: 404) }
            return victims.contains(destination) && stalls.load(ordering: .relaxed)
                ? ServerResponse.ok(bytes).with(fault: .stallAfter(bytes: 10, seconds: 20)) : .ok(bytes)
        }
        defer { server.stop() }
        try directory.write("haul.yaml", corpus(32, serverURL: server.url).manifest)
        let shards = try (1...4).map { try start(["sync", "--shard", "\($0)/4"]) }
        XCTAssertEqual(
            shards[1].wait(
                until: { server.requests.contains { victims.contains(String($0.path.dropFirst())) } }, timeout: 20),
            .conditionMet)
        shards[1].send(SIGKILL)
        XCTAssertEqual(shards[1].waitForExit(timeout: 10), 128 + SIGKILL)
        for k in [0, 2, 3] { XCTAssertEqual(shards[k].waitForExit(timeout: 60), 0, shards[k].output) }
        for (destination, bytes) in corpusFiles where !victims.contains(destination) {
            XCTAssertEqual(directory.read("out/\(destination)"), bytes, destination)
        }
        for destination in victims {
            XCTAssertFalse(directory.exists("out/\(destination)"), "killed before its commit")
        }

        // The rerun finds its share free (the kernel released the lock), and the root is whole.
        stalls.store(false, ordering: .relaxed)
        let rerun = try directory.haul(["sync", "--shard", "2/4"])
        XCTAssertEqual(rerun.exitCode, 0, rerun.stderr)
        assertRoot("out", holds: corpusFiles)
        let check = try directory.haul(["plan"])
        XCTAssertEqual(check.exitCode, 0, "nothing left to do: \(check.stdout)")
    }

    func testPruningUnderAShardTouchesOnlyThatShardsFiles() throws {
        let (_, corpus) = try servedCorpus(20)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        // Keep only the first entry listed.
        let lines = corpus.manifest.split(separator: "\n")
        try directory.write("haul.yaml", lines.prefix(4).joined(separator: "\n") + "\n")
        let kept = "d0/f0.bin"

        let first = try directory.haul(["sync", "--prune", "--shard", "1/2"])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        for destination in corpus.files.keys where destination != kept {
            XCTAssertEqual(
                directory.exists("out/\(destination)"), shard(of: destination, count: 2) == 2,
                "\(destination): only shard 1's unlisted files go")
        }
        let second = try directory.haul(["sync", "--prune", "--shard", "2/2"])
        XCTAssertEqual(second.exitCode, 0, second.stderr)
        assertRoot("out", holds: [kept: corpus.files[kept] ?? []])
        XCTAssertEqual(Set(stateRecords("out").keys), [kept])
    }

    func testPlanAndVerifyOfAShardSpeakOfItsEntriesOnly() throws {
        let (_, corpus) = try servedCorpus(12)
        let mine = corpus.files.keys.filter { shard(of: $0, count: 3) == 2 }

        let plan = try directory.haul(["plan", "--shard", "2/3"])
        XCTAssertEqual(plan.exitCode, 2, plan.stderr)
        XCTAssertTrue(
            plan.stdout.contains("Plan in shard 2/3 (\(mine.count) of 12 entries): \(mine.count) to download"),
            plan.stdout)
        for destination in corpus.files.keys {
            XCTAssertEqual(plan.stdout.contains("+ \(destination) "), mine.contains(destination), destination)
        }
        let json = try directory.haul(["plan", "--json"], environment: ["HAUL_SHARD": "2/3"])
        XCTAssertTrue(json.stdout.contains("\"shard\":\"2/3\""), json.stdout)
        XCTAssertTrue(json.stdout.contains("\"manifest_entries\":12"), json.stdout)

        for destination in mine { try directory.write("out/\(destination)", corpus.files[destination] ?? []) }
        let verify = try directory.haul(["verify", "--shard", "2/3"])
        XCTAssertEqual(verify.exitCode, 0, "the other shards' missing files are not this shard's: \(verify.stdout)")
        XCTAssertTrue(verify.stdout.contains("Verified \(mine.count) files in shard 2/3"), verify.stdout)
        let verifyJSON = try directory.haul(["verify", "--shard", "2/3", "--json"])
        XCTAssertTrue(verifyJSON.stdout.contains("\"shard\":\"2/3\",\"manifest_entries\":12"), verifyJSON.stdout)
        XCTAssertEqual(try directory.haul(["verify"]).exitCode, 1, "unsharded, the missing files count")
    }

    func testAMalformedShardIsAUsageError() throws {
        try directory.write("haul.yaml", "version: 1\nroot: out\nfiles: []\n")
        for text in ["0/4", "5/4", "a/b", "1/0", "2", "1/2/3", "-1/2", " 1/2", "1/2097152", "+1/2"] {
            for command in ["sync", "plan", "verify"] {
                let result = try directory.haul([command, "--shard=\(text)"])
                XCTAssertEqual(result.exitCode, 64, "\(command) --shard \(text): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains("is not a shard: write K/N"), result.stderr)
            }
        }
        let fromEnvironment = try directory.haul(["sync"], environment: ["HAUL_SHARD": "3/2"])
        XCTAssertEqual(fromEnvironment.exitCode, 64, fromEnvironment.stderr)
        XCTAssertTrue(fromEnvironment.stderr.contains("HAUL_SHARD: '3/2' is not a shard"), fromEnvironment.stderr)
        XCTAssertFalse(directory.exists("out"), "nothing made")
    }
}
