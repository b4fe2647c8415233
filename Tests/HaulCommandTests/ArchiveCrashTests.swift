import Foundation
import Glibc
import HaulTestSupport
import Synchronization
import XCTest

/// `kill -9` of a real `haul sync` that replaces an extracted tree (v1 by v2), at moments reached by observation,
/// never by sleeping: while the archive is unpacking (the origin stalls mid-body once the staging folder holds
/// members), and at exact system calls of the commit (`KillSwitch`: before the flush, before the exchange, after
/// it). Afterwards the folder is byte for byte v1 or v2, never a mix; nothing is left beside `.haul`; the lock is
/// free; and the next run completes the tree and leaves nothing staged.
final class ArchiveCrashTests: XCTestCase {
    private var fixture: ArchiveFixture!
    /// Body bytes after which the origin goes silent, per path; cleared for the run that must complete.
    private let stalls = Stalls()
    private var old: [String] = []
    private var new: [String] = []

    override func setUpWithError() throws {
        let stalls = stalls
        fixture = try ArchiveFixture { files, request in
            let response = files.respond(to: request)
            guard (200..<300).contains(response.status), let offset = stalls.offset(for: request.path) else {
                return response
            }
            return response.with(fault: .stallAfter(bytes: offset, seconds: 120))
        }
    }

    override func tearDown() { fixture = nil }

    /// v1 synced into `sdk`; v2 (`files` members of `size` bytes each, as a plain tar, pinned unless `pinned` is
    /// false) in the manifest.
    private func prepare(files count: Int, size: Int, pinned: Bool = true) throws {
        try fixture.source(
            "v1",
            [
                .file("README", "version 1\n"), .file("bin/tool", "tool 1\n", executable: true),
                .file("only-in-1/data", "old\n"),
            ])
        let v1 = try fixture.pack("v1", format: "tar.gz")
        try fixture.manifest([ArchiveFixture.entry(fixture.publish("/v1.tar.gz", v1), dest: "sdk", sha256: sha256(v1))])
        try fixture.syncSucceeds()
        old = try fixture.listing("out/sdk")
        XCTAssertEqual(old, try fixture.listing("src/v1"))

        for index in 0..<count {
            try fixture.directory.write("src/v2/data/part\(index).bin", pseudoRandom(size, seed: index))
        }
        try fixture.directory.write("src/v2/README", "version 2\n")
        let v2 = try fixture.pack("v2", format: "tar")
        try fixture.manifest([
            ArchiveFixture.entry(fixture.publish("/v2.tar", v2), dest: "sdk", sha256: pinned ? sha256(v2) : nil)
        ])
        new = try fixture.listing("src/v2")
    }

    private func start() throws -> BackgroundProcess {
        try HaulProcess.start(
            ["sync", "--quiet"], currentDirectory: fixture.directory.path,
            outputPath: fixture.directory.path("haul-output-\(UUID().uuidString).txt"))
    }

    /// How many members the staging folders of `.haul/tmp` hold so far.
    private var stagedMembers: Int {
        let tmp = fixture.root + "/.haul/tmp"
        return RootInspection.entries(of: tmp).filter { $0.hasSuffix(".tree") }
            .map { RootInspection.entries(of: tmp + "/" + $0 + "/data").count }.reduce(0, +)
    }

    private enum Version: Equatable { case old, new }

    /// The folder is exactly v1 or exactly v2 (nil: neither, a mix), and nothing else changed.
    private func version(_ context: String, file: StaticString = #filePath, line: UInt = #line) throws -> Version? {
        let listing = try fixture.listing("out/sdk")
        XCTAssertEqual(fixture.directory.list("out"), [".haul", "sdk"], context, file: file, line: line)
        XCTAssertEqual(fixture.escapes(), [], context, file: file, line: line)
        XCTAssertTrue(
            RootInspection.lockIsFree(root: fixture.root), "\(context): the lock is free", file: file, line: line)
        return listing == old ? .old : listing == new ? .new : nil
    }

    /// The next run, undisturbed, exits 0 and makes the folder v2; nothing is left staged, and a plan has nothing to do.
    /// `pinned`: v2 is pinned, so the plan has nothing to do (else it revalidates it, exit 2).
    private func assertNextRunCompletes(
        _ context: String, pinned: Bool = true, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        stalls.set([:])
        let next = try fixture.haul(["sync"])
        XCTAssertEqual(next.exitCode, 0, "\(context): \(next.stdout)\(next.stderr)", file: file, line: line)
        XCTAssertEqual(try fixture.listing("out/sdk"), new, context, file: file, line: line)
        fixture.assertNoLitter(destinations: ["sdk"], context, file: file, line: line)
        let plan = try fixture.haul(["plan"])
        XCTAssertEqual(
            plan.exitCode, pinned ? 0 : 2, "\(context): \(plan.stdout)\(plan.stderr)", file: file, line: line)
    }

    // MARK: While unpacking

    /// The engine hands the unpacker what has arrived in steps of 4 MiB: an archive of 8 MiB whose body stalls at
    /// 6 MiB has members unpacked in the staging area, and the rest still to come.
    private static let stallOffset = 6 << 20

    func testSIGKILLWhileTheArchiveIsUnpackingKeepsTheOldTree() throws {
        try prepare(files: 40, size: 200_000, pinned: false)
        stalls.set(["/v2.tar": Self.stallOffset])
        let sync = try start()
        XCTAssertEqual(
            sync.wait(until: { self.stagedMembers >= 3 }), .conditionMet,
            "members were being unpacked when the body stalled: \(stagedMembers)\n\(sync.output)")
        XCTAssertLessThan(stagedMembers, 40)
        sync.send(SIGKILL)
        XCTAssertEqual(sync.waitForExit(), 128 + SIGKILL, sync.output)
        XCTAssertEqual(try version("killed mid-body"), .old)
        try assertNextRunCompletes("after a kill mid-body", pinned: false)
    }

    /// A pinned archive of 256 KiB or more is kept in `.haul/partial` when a run dies: the next run resumes it from
    /// where it stopped, unpacks the kept bytes again from byte 0, and the tree is whole and exact.
    func testSIGKILLWhileUnpackingAResumableArchiveResumesAndUnpacksTheWholeTree() throws {
        try prepare(files: 40, size: 200_000)
        stalls.set(["/v2.tar": Self.stallOffset])
        let sync = try start()
        let reached = sync.wait(until: {
            RootInspection.stagedSizes(root: self.fixture.root) == [Int64(Self.stallOffset)] && self.stagedMembers >= 3
        })
        XCTAssertEqual(
            reached, .conditionMet,
            "staged \(RootInspection.stagedSizes(root: fixture.root)), members \(stagedMembers)\n\(sync.output)")
        sync.send(SIGKILL)
        XCTAssertEqual(sync.waitForExit(), 128 + SIGKILL, sync.output)
        XCTAssertEqual(try version("killed mid-body"), .old)
        fixture.server.resetLog()
        try assertNextRunCompletes("after a kill of a resumable download")
        XCTAssertEqual(
            fixture.server.requests(path: "/v2.tar").first?.header("Range"), "bytes=\(Self.stallOffset)-",
            "the kept bytes are resumed from, not fetched again")
    }

    // MARK: The commit

    /// Killed at exact system calls of the commit: before the flush and before the exchange the folder is v1; once
    /// the exchange happened (the parent's sync, the state's rename) it is v2.
    func testSIGKILLDuringTheCommitLeavesTheOldTreeOrTheNewOneWhole() throws {
        let points: [(String, (String) -> KillSwitch.Point, Version)] = [
            ("the flush", { _ in .syncfs(n: 1) }, .old),
            ("the exchange", { .rename(n: 1, targetPrefix: $0 + "/sdk") }, .old),
            ("the parent's sync after the exchange", { .fsync(n: 1, path: $0) }, .new),
            ("the state's rename", { .rename(n: 1, targetPrefix: $0 + "/.haul/state") }, .new),
        ]
        for (moment, point, expected) in points {
            fixture = try ArchiveFixture()
            try prepare(files: 4, size: 3_000)
            let armed = point(realpath(fixture.root))
            let environment = try Capability.required("cannot kill haul at \(armed)") {
                try KillSwitch.environment(armed)
            }
            let killed = try fixture.haul(["sync", "--quiet"], environment: environment)
            XCTAssertEqual(
                killed.exitCode, 128 + SIGKILL, "\(moment): the kill switch fired: \(killed.stdout)\(killed.stderr)")
            XCTAssertEqual(try version(moment), expected, moment)
            try assertNextRunCompletes("after a kill at \(moment)")
        }
    }
}

/// Body bytes after which the origin goes silent, per path.
private final class Stalls: Sendable {
    private let offsets = Mutex<[String: Int]>([:])
    func set(_ table: [String: Int]) { offsets.withLock { $0 = table } }
    func offset(for path: String) -> Int? { offsets.withLock { $0[path] } }
}

/// The path as the kernel names it (what `/proc/self/fd` links show), for the kill switch's path matches.
private func realpath(_ path: String) -> String {
    guard let resolved = Glibc.realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
}
