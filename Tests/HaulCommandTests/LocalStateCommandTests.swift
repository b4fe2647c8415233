import Dispatch
import Foundation
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// One run at a time per root, and what interrupted runs leave behind is cleaned up by the next.
final class LocalStateCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func writeManifest(url: String, bytes: [UInt8], dest: String = "f.bin") throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(url)
                dest: \(dest)
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
            """)
    }

    func testASecondConcurrentSyncExits4NamingTheHolderAndWaitWaits() throws {
        try assertASecondSyncIsRefusedThenWaits(withAnEarlierState: false)
    }

    /// With a state from an earlier run, both runs try to take the lock while their manifest is still being read
    /// (to look at the files the state knows): the holder gets it that way, the second is still refused, and
    /// the waiting one, which finds the state rewritten by the holder, looks at everything again.
    func testTheSameWithAStateFromAnEarlierRun() throws {
        try assertASecondSyncIsRefusedThenWaits(withAnEarlierState: true)
    }

    private func assertASecondSyncIsRefusedThenWaits(withAnEarlierState: Bool) throws {
        let bytes = [UInt8](repeating: 5, count: 10_000)
        let early = [UInt8](repeating: 4, count: 5_000)
        let stalled = Mutex(false)
        let server = try LoopbackHTTPServer { request in
            if request.path == "/early" { return .ok(early) }
            let isFirst = stalled.withLock { value in
                defer { value = true }; return !value
            }
            // The first request for /f stalls for a while, so the first sync holds the lock meanwhile.
            return isFirst ? ServerResponse.ok(bytes).with(fault: .stallAfter(bytes: 0, seconds: 2)) : .ok(bytes)
        }
        defer { server.stop() }
        var manifest = """
            version: 1
            root: out
            files:
              - url: \(server.url("/f"))
                dest: f.bin
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
            """
        if withAnEarlierState {
            let earlier = """

                  - url: \(server.url("/early"))
                    dest: early.bin
                    sha256: \(StreamingHasher.digest(early, algorithm: .sha256).hex)
                """
            try directory.write("haul.yaml", "version: 1\nroot: out\nfiles:" + earlier)
            XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
            XCTAssertNotNil(directory.read("out/.haul/state"))
            manifest += earlier
        }
        try directory.write("haul.yaml", manifest)
        let requestsBefore = server.requests.count

        let holder = Mutex<ProcessResult?>(nil)
        let done = DispatchSemaphore(value: 0)
        let path = directory.path
        DispatchQueue.global().async {
            let result = try? HaulProcess.run(["sync"], currentDirectory: path)
            holder.withLock { $0 = result }
            done.signal()
        }
        // The lock is taken before the first request: once the server has seen it, the root is busy.
        let deadline = Date().addingTimeInterval(10)
        while server.requests.count == requestsBefore && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.requests.count, requestsBefore + 1)

        let busy = try directory.haul(["sync"])
        XCTAssertEqual(busy.exitCode, 4)
        XCTAssertTrue(busy.stderr.contains("another haul is syncing"), busy.stderr)
        XCTAssertTrue(busy.stderr.contains("pid "), "the message names the holder: \(busy.stderr)")
        XCTAssertEqual(server.requests.count, requestsBefore + 1, "the refused run made no request")

        let timedOut = try directory.haul(["sync", "--wait-timeout", "300ms"])
        XCTAssertEqual(timedOut.exitCode, 4, timedOut.stderr)
        XCTAssertTrue(
            timedOut.stderr.hasPrefix("haul: waiting for another haul syncing \"\(directory.path)/out\" (pid "),
            timedOut.stderr)
        XCTAssertTrue(timedOut.stderr.contains("haul sync haul.yaml); waited 0.3 s (--wait-timeout)"), timedOut.stderr)
        XCTAssertEqual(server.requests.count, requestsBefore + 1, "the run that gave up made no request")

        let waited = try directory.haul(["sync", "--wait"])
        XCTAssertEqual(waited.exitCode, 0, waited.stderr)
        XCTAssertTrue(
            waited.stderr.contains("haul: waiting for another haul syncing"), "says what it waits for: \(waited.stderr)"
        )
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(holder.withLock { $0?.exitCode }, 0)
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertTrue(waited.stdout.contains("Nothing to do"), "the waiting run found the work done: \(waited.stdout)")
        if withAnEarlierState { XCTAssertEqual(directory.read("out/early.bin"), early) }
    }

    /// (That partials of wanted files survive the sweep is shown by SyncCommandTests.testAnInterruptedSyncResumesInTheNextRun.)
    func testLeftoversOfInterruptedRunsAreSwept() throws {
        let bytes = [UInt8](repeating: 6, count: 300_000)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        try writeManifest(url: server.url("/f"), bytes: bytes)
        try directory.write("out/.haul/tmp/5f3a9c0e-1a.part", Array("stale temporary".utf8))
        try directory.write("out/.haul/tmp/notes.txt", Array("not haul's".utf8))
        try directory.write("out/.haul/partial/sha256-\(String(repeating: "0", count: 64)).part", Array("orphan".utf8))
        try directory.write(
            "out/.haul/partial/sha256-\(String(repeating: "0", count: 64)).part.meta",
            Array("source x\netag \"y\"\n".utf8))

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/tmp"), ["notes.txt"],
            "only names haul itself makes are cleaned up")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/partial"), [])
    }
}

extension LocalStateCommandTests {
    /// Starts `haul sync` as a real process and sends it `signal` once the first bytes of a body are in a staged
    /// file and `alsoReady` holds.
    private func interruptedSync(
        _ signal: Int32, server: LoopbackHTTPServer, alsoReady: () -> Bool = { true }
    ) throws -> Int32 {
        let root = directory.path + "/out"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: HaulProcess.executablePath)
        process.arguments = ["sync", "--quiet"]
        process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
        process.environment = ProcessRunner.minimalEnvironment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        func isReady() -> Bool { RootInspection.stagedFiles(root: root).contains { $0.size > 0 } && alsoReady() }
        while !(!server.requests.isEmpty && isReady()) && Date() < deadline { usleep(10_000) }
        kill(process.processIdentifier, signal)
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        if process.isRunning { XCTAssertEqual(exited.wait(timeout: .now() + 10), .success, "haul stops promptly") }
        process.waitUntilExit()
        return process.terminationStatus
    }

    func testSIGINTStopsTransfersKeepsOldContentAndTheResumablePartial() throws {
        let bytes = (0..<600_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let files = StaticFiles(["/f": bytes])
        let stall = Mutex(true)
        let server = try LoopbackHTTPServer { request in
            let response = files.respond(to: request)
            return stall.withLock { $0 } ? response.with(fault: .stallAfter(bytes: 200_000, seconds: 20)) : response
        }
        defer { server.stop() }
        try writeManifest(url: server.url("/f"), bytes: bytes)
        let old: [UInt8] = Array("old content".utf8)
        try directory.write("out/f.bin", old)

        XCTAssertEqual(try interruptedSync(SIGINT, server: server), 130)
        XCTAssertEqual(directory.read("out/f.bin"), old)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/tmp"), [])
        let partials = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/partial")
        XCTAssertEqual(
            Set(partials.map { $0.hasSuffix(".meta") }), [true, false],
            "the partial and its validator are kept: \(partials)")

        stall.withLock { $0 = false }
        let resumed = try directory.haul(["sync"])
        XCTAssertEqual(resumed.exitCode, 0, resumed.stderr)
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertEqual(server.requests.last?.header("Range"), "bytes=200000-")
    }

    func testAnInterruptedRunSavesTheStateOfWhatItCommitted() throws {
        let fast = [UInt8](repeating: 1, count: 1_000), slow = [UInt8](repeating: 2, count: 50_000)
        let server = try LoopbackHTTPServer { request in
            request.path == "/fast"
                ? .ok(fast) : ServerResponse.ok(slow).with(fault: .stallAfter(bytes: 1_000, seconds: 20))
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - {url: "\(server.url("/fast"))", dest: fast.bin, sha256: \(StreamingHasher.digest(fast, algorithm: .sha256).hex)}
              - {url: "\(server.url("/slow"))", dest: slow.bin, sha256: \(StreamingHasher.digest(slow, algorithm: .sha256).hex)}
            """)
        XCTAssertEqual(try interruptedSync(SIGTERM, server: server) { self.directory.exists("out/fast.bin") }, 143)
        XCTAssertEqual(directory.read("out/fast.bin"), fast)
        let state = String(decoding: directory.read("out/.haul/state") ?? [], as: UTF8.self)
        XCTAssertTrue(state.contains("\nfast.bin\t"), "the committed file is recorded: \(state)")
        XCTAssertFalse(state.contains("slow.bin"), state)
    }

    func testSIGTERMExits143() throws {
        let bytes = [UInt8](repeating: 1, count: 50_000)
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok(bytes).with(fault: .stallAfter(bytes: 1_000, seconds: 20))
        }
        defer { server.stop() }
        try writeManifest(url: server.url("/f"), bytes: bytes)
        XCTAssertEqual(try interruptedSync(SIGTERM, server: server), 143)
        XCTAssertNil(directory.read("out/f.bin"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/out/.haul/tmp"), [])
    }
}

extension LocalStateCommandTests {
    private func syncedFixture() throws -> (server: LoopbackHTTPServer, bytes: [UInt8], statePath: String) {
        let bytes = [UInt8](repeating: 8, count: 4_096)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        try writeManifest(url: server.url("/f"), bytes: bytes)
        let first = try directory.haul(["sync"])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        return (server, bytes, directory.path + "/out/.haul/state")
    }

    func testTheStateCacheIsTrustedOnlyForAnUnchangedIdentityAndVerifyAndRehashIgnoreIt() throws {
        let (server, bytes, statePath) = try syncedFixture()
        defer { server.stop() }
        let state = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
        let realDigest = StreamingHasher.digest(bytes, algorithm: .sha256).hex
        XCTAssertTrue(state.hasPrefix("haul-state\t5\nf.bin\t"), state)
        XCTAssertTrue(state.contains("sha256:\(realDigest)"), state)

        // A record claiming other content for the same identity is believed: proof that a match skips hashing.
        let lying = state.replacingOccurrences(of: realDigest, with: String(repeating: "0", count: 64))
        try lying.write(toFile: statePath, atomically: false, encoding: .utf8)
        XCTAssertEqual(try directory.haul(["plan"]).exitCode, 2, "the cached (wrong) digest was used without hashing")
        let verify = try directory.haul(["verify"])
        XCTAssertEqual(verify.exitCode, 0, "verify hashes everything: \(verify.stdout)")
        server.resetLog()
        let rehash = try directory.haul(["sync", "--rehash"])
        XCTAssertEqual(rehash.exitCode, 0, rehash.stderr)
        XCTAssertTrue(rehash.stdout.contains("Nothing to do"), rehash.stdout)
        XCTAssertEqual(server.requests.count, 0)
        XCTAssertTrue(
            String(decoding: directory.read("out/.haul/state") ?? [], as: UTF8.self).contains(realDigest),
            "the state was rebuilt from what is on disk")
    }

    func testACorruptStateFileCostsAWarningNotCorrectness() throws {
        let (server, bytes, statePath) = try syncedFixture()
        defer { server.stop() }
        try "garbage\u{0}\n".write(toFile: statePath, atomically: false, encoding: .utf8)
        server.resetLog()
        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertTrue(
            result.stderr.contains("is corrupt or from another haul version; hashing every file to rebuild it"),
            result.stderr)
        XCTAssertEqual(server.requests.count, 0, "re-hashing found the file right: no request")
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
        XCTAssertTrue(
            String(decoding: directory.read("out/.haul/state") ?? [], as: UTF8.self).hasPrefix("haul-state\t5\n"))

        try FileManager.default.removeItem(atPath: statePath)
        let again = try directory.haul(["sync"])
        XCTAssertEqual(again.exitCode, 0)
        XCTAssertEqual(again.stderr, "", "a missing state is simply rebuilt")
        XCTAssertEqual(server.requests.count, 0)
    }

    func testASameSizeEditWithItsMtimeRestoredIsStillNoticed() throws {
        let (server, bytes, _) = try syncedFixture()
        defer { server.stop() }
        let path = directory.path + "/out/f.bin"
        var before = stat()
        XCTAssertEqual(stat(path, &before), 0)
        try directory.write("out/f.bin", [UInt8](repeating: 9, count: bytes.count))
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0, "mtime set back; ctime cannot be")
        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 2, plan.stdout)
        XCTAssertTrue(plan.stdout.contains("~ f.bin (checksum differs"), plan.stdout)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/f.bin"), bytes)
    }
}
