import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// `kill -9` at chosen moments of a real `haul sync`, then the promises that must hold whatever the moment:
/// every destination is absent/old or new-and-verified (compared byte for byte, with its final mode), nothing
/// sits under a destination's name but a destination, `.haul/state` never vouches for bytes that are not there,
/// the lock is free, and the next run finishes the job and leaves `.haul/tmp` and `.haul/partial` empty.
///
/// Moments are reached by observation, not by sleeping: mid-body kills wait until the staged bytes on disk are
/// exactly where the server stalled; commit-phase kills use `KillSwitch`, an LD_PRELOAD library that SIGKILLs
/// haul at an exact system call (the first syncfs, the n-th rename into the tree, a directory's fsync, the
/// state file's rename).
final class CrashConsistencyTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "haul-crash")
    }

    /// XCTest keeps test case objects until the end of the run: dropping the directory here removes it now.
    override func tearDown() {
        directory = nil
    }

    // MARK: Mid-transfer

    func testSIGKILLWhileEveryTransferIsMidBodyKeepsEveryDestinationAsItWas() throws {
        let scenario = try CrashScenario(
            directory,
            items: [
                .init(
                    "d/replaced.bin", old: bytes(6_000, seed: 1), new: bytes(10_000, seed: 2), mode: "0640",
                    stallAt: 4_000),
                // 256 KiB or more and pinned: written to `.haul/partial`, the resumable path.
                .init("d/big.bin", old: bytes(300_000, seed: 3), new: bytes(400_000, seed: 4), stallAt: 150_000),
                .init("d/added.bin", old: nil, new: bytes(20_000, seed: 5), stallAt: 7_000),
                .init("e/unpinned.txt", old: nil, new: bytes(12_000, seed: 6), pinned: false, stallAt: 5_000),
            ])
        try scenario.syncOldContent()

        let sync = try scenario.start()
        XCTAssertEqual(
            sync.wait(until: { scenario.stagedSizes == [4_000, 5_000, 7_000, 150_000] }), .conditionMet,
            "every transfer reached its stall point: \(scenario.stagedSizes)\n\(sync.output)")
        sync.send(SIGKILL)
        XCTAssertEqual(sync.waitForExit(), 128 + SIGKILL, sync.output)

        XCTAssertEqual(
            scenario.states(), scenario.items.map { $0.old == nil ? .absent : .old },
            "nothing was verified, so nothing may have been committed")
        scenario.assertInvariants()
        try scenario.assertNextRunCompletes(requesting: scenario.items.map(\.destination))
        // The resumable file's metadata was written when its response was accepted, not when the run ended:
        // a killed run's partial is resumed, not fetched again from byte 0.
        XCTAssertEqual(
            scenario.lastRecoveryRequests.first { $0.path == "/v2/d/big.bin" }?.header("Range"), "bytes=150000-")
    }

    func testSIGKILLAfterSomeCommitsWhileOthersAreInFlightKeepsTheCommittedOnesAndFetchesOnlyTheRest() throws {
        let fast = (0..<6).map { index in
            CrashScenario.Item(
                "d/fast\(index).bin", old: index % 2 == 0 ? bytes(2_000, seed: 10 + index) : nil,
                new: bytes(3_000, seed: 20 + index), mode: "0600")
        }
        let slow: [CrashScenario.Item] = [
            .init("d/slow-big.bin", old: bytes(1_000, seed: 30), new: bytes(300_000, seed: 31), stallAt: 100_000),
            .init("d/sub/slow-small.bin", old: nil, new: bytes(9_000, seed: 32), stallAt: 2_000),
        ]
        let scenario = try CrashScenario(directory, items: fast + slow)
        try scenario.syncOldContent()

        let sync = try scenario.start()
        let reached = sync.wait(until: {
            scenario.stagedSizes == [2_000, 100_000] && fast.allSatisfy { scenario.state(of: $0) == .new }
        })
        XCTAssertEqual(
            reached, .conditionMet,
            "fast files committed, slow ones stalled: staged \(scenario.stagedSizes), "
                + "fast \(fast.map { scenario.state(of: $0) })\n\(sync.output)")
        sync.send(SIGKILL)
        XCTAssertEqual(sync.waitForExit(), 128 + SIGKILL, sync.output)

        XCTAssertEqual(scenario.states(), fast.map { _ in .new } + [.old, .absent])
        scenario.assertInvariants()
        try scenario.assertNextRunCompletes(requesting: slow.map(\.destination))
    }

    /// A partial that a SIGINT left resumable, grown further by a run that is then SIGKILLed, still resumes
    /// from its last byte, and the result is the verified file.
    func testSIGKILLDuringAResumedDownloadKeepsEveryByteForTheNextResume() throws {
        let item = CrashScenario.Item("d/big.bin", old: Array("old".utf8), new: bytes(600_000, seed: 40))
        let scenario = try CrashScenario(directory, items: [item])
        try scenario.syncOldContent()

        scenario.stall(item, at: [200_000, 100_000])  // first the whole body, then the resumed range
        let interrupted = try scenario.start()
        XCTAssertEqual(
            interrupted.wait(until: { scenario.stagedSizes == [200_000] }), .conditionMet, interrupted.output)
        interrupted.send(SIGINT)
        XCTAssertEqual(interrupted.waitForExit(), 130, interrupted.output)

        let killed = try scenario.start()
        XCTAssertEqual(
            killed.wait(until: { scenario.stagedSizes == [300_000] }), .conditionMet,
            "the second run resumed and received 100000 more bytes: \(scenario.stagedSizes)\n\(killed.output)")
        XCTAssertEqual(scenario.origin.server.requests.last?.header("Range"), "bytes=200000-")
        killed.send(SIGKILL)
        XCTAssertEqual(killed.waitForExit(), 128 + SIGKILL, killed.output)

        XCTAssertEqual(scenario.states(), [.old])
        scenario.assertInvariants()
        try scenario.assertNextRunCompletes(requesting: [item.destination])
        XCTAssertEqual(
            scenario.lastRecoveryRequests.last?.header("Range"), "bytes=300000-",
            "the bytes the killed run wrote are kept and resumed from")
    }

    /// A run is killed mid-body, then the manifest stops asking for that file: the next run has nothing to
    /// fetch, and must still clear the dead run's staged bytes (a partial can be gigabytes), as the README
    /// promises ("it clears what interrupted runs left in .haul/").
    func testStagedBytesOfAKilledRunAreClearedEvenWhenTheNextRunHasNothingToFetch() throws {
        let kept = CrashScenario.Item("d/kept.bin", old: bytes(2_000, seed: 70), new: bytes(2_000, seed: 70))
        let dropped = CrashScenario.Item("d/dropped.bin", old: nil, new: bytes(300_000, seed: 71), stallAt: 120_000)
        let small = CrashScenario.Item("d/dropped-small.bin", old: nil, new: bytes(9_000, seed: 72), stallAt: 3_000)
        let scenario = try CrashScenario(directory, items: [kept, dropped, small])
        try scenario.syncOldContent()
        let sync = try scenario.start()
        XCTAssertEqual(sync.wait(until: { scenario.stagedSizes == [3_000, 120_000] }), .conditionMet, sync.output)
        sync.send(SIGKILL)
        XCTAssertEqual(sync.waitForExit(), 128 + SIGKILL, sync.output)
        scenario.assertInvariants()

        let manifest = String(decoding: try XCTUnwrap(directory.read("haul.yaml")), as: UTF8.self)
        let onlyKept = manifest.components(separatedBy: "\n  - ").filter { !$0.contains("dropped") }.joined(
            separator: "\n  - ")
        try directory.write("haul.yaml", onlyKept)
        let next = try HaulProcess.run(["sync"], currentDirectory: directory.path)
        XCTAssertEqual(next.exitCode, 0, next.stderr)
        XCTAssertTrue(next.stdout.contains("Nothing to do: 1 file up to date"), next.stdout)
        XCTAssertEqual(directory.read("out/d/kept.bin"), kept.new)
        XCTAssertTrue(RootInspection.lockIsFree(root: scenario.root))
        let leftovers = RootInspection.stagedFiles(root: scenario.root).map(\.name)
        XCTAssertEqual(leftovers, [], "a sync with nothing to fetch still sweeps what a killed run staged")
    }

    // MARK: Commit phase (exact system calls)

    /// Five files in one folder: three replace old content, two are new; all small (staged in `.haul/tmp`).
    private func commitScenario(in directory: TemporaryDirectory) throws -> CrashScenario {
        try CrashScenario(
            directory,
            items: (0..<5).map { index in
                CrashScenario.Item(
                    "d/file\(index).bin", old: index < 3 ? bytes(1_500, seed: 50 + index) : nil,
                    new: bytes(5_000 + index, seed: 60 + index), mode: "0640")
            })
    }

    func testSIGKILLAtTheSyncBeforeAnyRenameLeavesEveryDestinationAsItWas() throws {
        let scenario = try commitScenario(in: directory)
        try scenario.syncOldContent()
        let killed = try scenario.run(killedAt: .syncfs(n: 1))
        XCTAssertEqual(killed.exitCode, 128 + SIGKILL, "the kill switch fired: \(killed.stdout)\(killed.stderr)")
        XCTAssertEqual(scenario.states(), scenario.items.map { $0.old == nil ? .absent : .old })
        XCTAssertFalse(scenario.stagedSizes.isEmpty, "verified files were waiting in .haul/tmp to be renamed")
        scenario.assertInvariants()
        try scenario.assertNextRunCompletes(requesting: nil)
    }

    /// Killed right before the 1st, 3rd and 5th rename into the tree: exactly the files renamed before are new. The
    /// same at `--durability none`, which gives up only what a power loss would take.
    func testSIGKILLBetweenRenamesCommitsExactlyTheFilesRenamedBefore() throws {
        for (n, level) in [(1, "full"), (3, "full"), (5, "full"), (3, "none")] {
            let folder = try TemporaryDirectory(prefix: "haul-crash")
            let scenario = try commitScenario(in: folder)
            try scenario.syncOldContent()
            let killed = try scenario.run(
                killedAt: .rename(n: n, targetPrefix: scenario.realRoot + "/d/"),
                environment: ["HAUL_DURABILITY": level])
            XCTAssertEqual(killed.exitCode, 128 + SIGKILL, "rename #\(n), \(level): \(killed.stdout)\(killed.stderr)")
            let states = scenario.states()
            XCTAssertEqual(states.filter { $0 == .new }.count, n - 1, "rename #\(n), \(level): \(states)")
            scenario.assertInvariants("rename #\(n), \(level)")
            let unfinished = zip(scenario.items, states).filter { $0.1 != .new }.map(\.0.destination)
            try scenario.assertNextRunCompletes(requesting: unfinished, "rename #\(n), \(level)")
        }
    }

    /// `none` never flushes: armed at the first syncfs, or the first fsync of the destinations' folder, the switch
    /// never fires, and the run completes.
    func testAtDurabilityNoneNothingIsFlushed() throws {
        let points: [(CrashScenario) -> KillSwitch.Point] = [
            { _ in .syncfs(n: 1) }, { .fsync(n: 1, path: $0.realRoot + "/d") },
        ]
        for point in points {
            let scenario = try commitScenario(in: try TemporaryDirectory(prefix: "haul-crash"))
            try scenario.syncOldContent()
            let armed = point(scenario)
            let run = try scenario.run(killedAt: armed, environment: ["HAUL_DURABILITY": "none"])
            XCTAssertEqual(run.exitCode, 0, "\(armed): \(run.stdout)\(run.stderr)")
            XCTAssertEqual(scenario.states(), scenario.items.map { _ in .new }, "\(armed)")
            scenario.assertInvariants("\(armed)")
        }
    }

    func testSIGKILLBeforeTheDirectorysFsyncKeepsWhatWasRenamed() throws {
        let scenario = try commitScenario(in: directory)
        try scenario.syncOldContent()
        let killed = try scenario.run(killedAt: .fsync(n: 1, path: scenario.realRoot + "/d"))
        XCTAssertEqual(killed.exitCode, 128 + SIGKILL, "the kill switch fired: \(killed.stdout)\(killed.stderr)")
        let states = scenario.states()
        XCTAssertGreaterThan(
            states.filter { $0 == .new }.count, 0, "the batch was renamed before its folder's fsync: \(states)")
        scenario.assertInvariants()
        let unfinished = zip(scenario.items, states).filter { $0.1 != .new }.map(\.0.destination)
        try scenario.assertNextRunCompletes(requesting: unfinished)
    }

    /// Every file is in place but the new state was not yet renamed over the old one: the old state stays
    /// intact (its records no longer match the replaced files, so they are not trusted) and the next run
    /// re-hashes, finds everything right, and makes no request.
    func testSIGKILLWhileSavingTheStateLeavesTheOldStateAndCostsNoRequest() throws {
        let scenario = try commitScenario(in: directory)
        try scenario.syncOldContent()
        let oldState = try XCTUnwrap(directory.read("out/.haul/state"))
        let killed = try scenario.run(killedAt: .rename(n: 1, targetPrefix: scenario.realRoot + "/.haul/state"))
        XCTAssertEqual(killed.exitCode, 128 + SIGKILL, "the kill switch fired: \(killed.stdout)\(killed.stderr)")
        XCTAssertEqual(scenario.states(), scenario.items.map { _ in .new })
        XCTAssertEqual(directory.read("out/.haul/state"), oldState, "the state is replaced whole or not at all")
        scenario.assertInvariants()
        try scenario.assertNextRunCompletes(requesting: [])
    }

    // MARK: The checks themselves

    /// The invariant checks are only worth something if they fail: each kind of damage is reported.
    func testTheInvariantChecksReportPartialBytesStrayFilesALyingStateAndAHeldLock() throws {
        let scenario = try commitScenario(in: directory)
        try scenario.syncOldContent()
        try scenario.assertNextRunCompletes(requesting: nil)
        XCTAssertEqual(scenario.violations(), [])

        let root = scenario.root
        // A record that vouches for other bytes, with the file's real identity: what haul must never write.
        let state = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
        let realDigest = sha256(scenario.items[0].new)
        try state.replacingOccurrences(of: realDigest, with: String(repeating: "0", count: 64))
            .write(toFile: root + "/.haul/state", atomically: false, encoding: .utf8)
        XCTAssertEqual(scenario.violations().count, 1, "\(scenario.violations())")
        XCTAssertTrue(scenario.violations().first?.contains("d/file0.bin") ?? false, "\(scenario.violations())")

        // Half a file under a destination name, and a temporary file beside it.
        try directory.write("out/d/file1.bin", Array(scenario.items[1].new.prefix(100)))
        try directory.write("out/d/file2.bin.part", [1, 2, 3])
        let lock = open(root + "/.haul/lock", O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(lock, 0)
        defer { close(lock) }
        XCTAssertTrue(RootLock.take(lock))
        let violations = scenario.violations()
        XCTAssertEqual(violations.count, 4, "\(violations)")
        for expected in ["neither its old", "d/file2.bin.part is not a destination", ".haul/lock is still held"] {
            XCTAssertTrue(violations.contains { $0.contains(expected) }, "\(expected) in \(violations)")
        }
    }
}

/// Deterministic, varied bytes (so that a splice at the wrong offset cannot go unnoticed).
private func bytes(_ count: Int, seed: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: (($0 &* 2_654_435_761) &+ seed &* 97) >> 5) }
}

/// One root, one server and the files of a manifest before (v1) and after (v2) a change; the v2 answers can be
/// made to stall mid-body at chosen offsets.
private final class CrashScenario {
    struct Item {
        var destination: String
        var old: [UInt8]?
        var new: [UInt8]
        /// Whether the manifest pins the new content (sha256 and size).
        var pinned = true
        var mode: String?
        var stallAt: Int?

        init(
            _ destination: String, old: [UInt8]?, new: [UInt8], pinned: Bool = true, mode: String? = nil,
            stallAt: Int? = nil
        ) {
            self.destination = destination
            self.old = old
            self.new = new
            self.pinned = pinned
            self.mode = mode
            self.stallAt = stallAt
        }

        var expectation: DestinationExpectation {
            DestinationExpectation(
                destination: destination, old: old, new: new,
                newMode: mode.flatMap { mode_t($0, radix: 8) } ?? 0o644)
        }
    }

    let directory: TemporaryDirectory
    let items: [Item]
    let origin: StallingOrigin
    /// Requests the last `assertNextRunCompletes` run made.
    private(set) var lastRecoveryRequests: [RecordedRequest] = []

    init(_ directory: TemporaryDirectory, items: [Item]) throws {
        self.directory = directory
        self.items = items
        origin = try StallingOrigin()
        for item in items {
            if let old = item.old { origin.files.set("/v1/" + item.destination, old) }
            origin.files.set("/v2/" + item.destination, item.new)
            if let offset = item.stallAt { origin.plan.set("/v2/" + item.destination, [offset]) }
        }
    }

    deinit { origin.server.stop() }

    var root: String { directory.path("out") }
    /// The root as the kernel names it (/proc/self/fd links), for the kill switch's path matches.
    var realRoot: String {
        guard let resolved = realpath(root, nil) else { return root }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    func stall(_ item: Item, at offsets: [Int]) { origin.plan.set("/v2/" + item.destination, offsets) }

    /// v1 of every item that has old content, synced by haul itself so that `.haul/state` describes it; then the
    /// manifest is switched to v2.
    func syncOldContent(file: StaticString = #filePath, line: UInt = #line) throws {
        let old = items.filter { $0.old != nil }
        if !old.isEmpty {
            try writeManifest(old.map { ($0, "/v1/", $0.old ?? []) }, mode: false)
            let result = try HaulProcess.run(["sync", "--quiet"], currentDirectory: directory.path)
            XCTAssertEqual(result.exitCode, 0, result.stderr, file: file, line: line)
        }
        try writeManifest(items.map { ($0, "/v2/", $0.new) }, mode: true)
    }

    private func writeManifest(_ entries: [(Item, String, [UInt8])], mode: Bool) throws {
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for (item, prefix, content) in entries {
            yaml += "  - url: \(origin.server.url(prefix + item.destination))\n    dest: \(item.destination)\n"
            if item.pinned || prefix == "/v1/" {
                yaml += "    sha256: \(sha256(content))\n    size: \(content.count)\n"
            }
            if mode, let value = item.mode { yaml += "    mode: \"\(value)\"\n" }
        }
        try directory.write("haul.yaml", yaml)
    }

    func start() throws -> BackgroundProcess {
        try HaulProcess.start(
            ["sync", "--quiet"], currentDirectory: directory.path,
            outputPath: directory.path("haul-output-\(UUID().uuidString).txt"))
    }

    /// A sync that the kill switch SIGKILLs at `point`. Skipped (or failed, see `Capability`) where the switch cannot be built.
    func run(killedAt point: KillSwitch.Point, environment extra: [String: String] = [:]) throws -> ProcessResult {
        let environment = try Capability.required("cannot kill haul at \(point)") { try KillSwitch.environment(point) }
        return try HaulProcess.run(
            ["sync", "--quiet"], environment: environment.merging(extra) { $1 },
            currentDirectory: directory.path, timeout: 30)
    }

    var stagedSizes: [Int64] { RootInspection.stagedSizes(root: root) }

    func state(of item: Item) -> DestinationState? {
        try? RootInspection.state(of: item.expectation, root: root).get()
    }

    /// Per item, in order; nil for a destination in none of the allowed states (the invariants say why).
    func states() -> [DestinationState?] { items.map(state(of:)) }

    func violations() -> [String] {
        RootInspection.crashViolations(root: root, expectations: items.map(\.expectation), sha256: sha256)
    }

    func assertInvariants(_ context: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(violations(), [], context, file: file, line: line)
    }

    /// The next run, undisturbed, exits 0, makes every destination its new content, leaves nothing staged, and
    /// writes a state that describes every file; `plan` then has nothing to do but revalidate unpinned files.
    /// - Parameter requesting: the destinations whose v2 URL it must fetch (nil: not checked).
    func assertNextRunCompletes(
        requesting expected: [String]?, _ context: String = "",
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        origin.plan.clear()
        origin.server.resetLog()
        let result = try HaulProcess.run(["sync"], currentDirectory: directory.path)
        lastRecoveryRequests = origin.server.requests
        XCTAssertEqual(
            result.exitCode, 0, "\(context) the next run: \(result.stdout)\(result.stderr)", file: file, line: line)
        XCTAssertFalse(result.stderr.contains("error"), "\(context) \(result.stderr)", file: file, line: line)
        for item in items {
            XCTAssertEqual(
                directory.read("out/" + item.destination), item.new, "\(context) \(item.destination)",
                file: file, line: line)
        }
        if let expected {
            XCTAssertEqual(
                Set(lastRecoveryRequests.map(\.path)), Set(expected.map { "/v2/" + $0 }),
                "\(context) only unfinished files are fetched again", file: file, line: line)
        }
        XCTAssertEqual(
            RootInspection.entries(of: root + "/.haul/tmp"), [], "\(context) .haul/tmp", file: file, line: line)
        XCTAssertEqual(
            RootInspection.entries(of: root + "/.haul/partial"), [], "\(context) .haul/partial", file: file, line: line)
        XCTAssertEqual(violations(), [], context, file: file, line: line)
        XCTAssertEqual(
            RootInspection.stateDescribesEveryDestination(
                root: root, destinations: items.map(\.destination),
                sha256: sha256), [], context, file: file, line: line)
        // Only the revalidation of unpinned files remains (plan exits 2 for those, as they may change).
        let plan = try HaulProcess.run(["plan"], currentDirectory: directory.path)
        let unpinned = items.filter { !$0.pinned }.map(\.destination)
        XCTAssertEqual(plan.exitCode, unpinned.isEmpty ? 0 : 2, "\(context) \(plan.stdout)", file: file, line: line)
        XCTAssertEqual(
            plan.stdout.split(separator: "\n").filter { !$0.hasPrefix("Plan:") && !$0.hasPrefix("No changes:") },
            unpinned.map { "↻ \($0) (unpinned; ask the server whether it changed)"[...] }, context, file: file,
            line: line)
    }
}

/// Static files whose answers stall after a planned number of body bytes, one plan entry per request, for as
/// long as the test needs (the server's `stop()` ends the stall).
private final class StallingOrigin: Sendable {
    final class Plan: Sendable {
        private let offsets = Mutex<[String: [Int]]>([:])
        func set(_ path: String, _ list: [Int]) { offsets.withLock { $0[path] = list } }
        func clear() { offsets.withLock { $0.removeAll() } }
        func next(for path: String) -> Int? {
            offsets.withLock { table in
                guard var list = table[path], !list.isEmpty else { return nil }
                let first = list.removeFirst()
                table[path] = list
                return first
            }
        }
    }

    let files = StaticFiles()
    let plan = Plan()
    let server: LoopbackHTTPServer

    init() throws {
        let files = files
        let plan = plan
        server = try LoopbackHTTPServer { request in
            let response = files.respond(to: request)
            guard (200..<300).contains(response.status), let offset = plan.next(for: request.path) else {
                return response
            }
            return response.with(fault: .stallAfter(bytes: offset, seconds: 120))
        }
    }
}
