import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// Faults of the local machine, produced for real (a full tmpfs, RLIMIT_FSIZE, an unprivileged user, the
/// immutable attribute, a nested mount, a directory at a destination), never simulated: each fails its own
/// entries with a message naming the destination and the cause, leaves their old content byte for byte, frees
/// what it staged, and lets every other entry finish (exit 1). Where this machine cannot produce a fault (not
/// root, no mount permission, a file system without `chattr +i`), the test is skipped and says why.
final class LocalFaultTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory(prefix: "haul-fault")
    }

    /// XCTest keeps test case objects until the end of the run: dropping the directory here removes it now.
    override func tearDown() {
        directory = nil
    }

    private struct Entry {
        var destination: String
        var bytes: [UInt8]
        var pinned = true
    }

    private func writeManifest(_ entries: [Entry], server: LoopbackHTTPServer) throws {
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for entry in entries {
            yaml += "  - url: \(server.url("/" + entry.destination))\n    dest: \(entry.destination)\n"
            if entry.pinned { yaml += "    sha256: \(sha256(entry.bytes))\n    size: \(entry.bytes.count)\n" }
        }
        try directory.write("haul.yaml", yaml)
    }

    private func serve(_ entries: [Entry]) throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: entries.map { ("/" + $0.destination, $0.bytes) }))
    }

    private func out(_ destination: String) -> [UInt8]? { directory.read("out/" + destination) }

    /// Nothing a failed entry staged may stay behind to fill the disk further.
    private func assertNothingStaged(file: StaticString = #filePath, line: UInt = #line) {
        let root = directory.path("out")
        XCTAssertEqual(RootInspection.entries(of: root + "/.haul/tmp"), [], ".haul/tmp", file: file, line: line)
        XCTAssertEqual(RootInspection.entries(of: root + "/.haul/partial"), [], ".haul/partial", file: file, line: line)
    }

    private func assertContains(_ text: String, _ expected: String, file: StaticString = #filePath, line: UInt = #line)
    {
        XCTAssertTrue(
            text.contains(expected), "expected \(expected.debugDescription) in:\n\(text)", file: file, line: line)
    }

    // MARK: Disk full

    /// A 1 MiB tmpfs as root: the 2 MiB entries (one pinned and resumable-sized, staged in `.haul/partial`; one
    /// unpinned, staged in `.haul/tmp`) hit ENOSPC; their bytes are freed at once, so the small entries after them
    /// still fit. `--jobs 1` makes the order, and so the outcome, deterministic.
    func testDiskFullFailsTheEntryNamingItsCauseFreesItsBytesAndTheOthersComplete() throws {
        let root = directory.path("out")
        try directory.makeDirectory("out")
        let mount = try Capability.required { try TestMount.tmpfs(at: root, size: 1 << 20) }
        defer { mount.unmount() }

        let entries = [
            Entry(destination: "small1.bin", bytes: pattern(4_096, seed: 1)),
            Entry(destination: "big-pinned.bin", bytes: pattern(2 << 20, seed: 2)),
            Entry(destination: "big-unpinned.bin", bytes: pattern(2 << 20, seed: 3), pinned: false),
            Entry(destination: "small2.bin", bytes: pattern(4_096, seed: 4)),
        ]
        let server = try serve(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)
        let old = Array("the old, smaller version".utf8)
        try directory.write("out/big-pinned.bin", old)

        let result = try directory.haul(["sync", "--jobs", "1"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        for name in ["big-pinned.bin", "big-unpinned.bin"] {
            assertContains(result.stderr, "error: \(name): \(server.url("/" + name)): cannot write \(root)/.haul/")
        }
        XCTAssertEqual(result.stderr.components(separatedBy: "No space left on device").count - 1, 2, result.stderr)
        XCTAssertEqual(out("big-pinned.bin"), old, "the failed entry keeps its old content")
        XCTAssertNil(out("big-unpinned.bin"))
        XCTAssertEqual(out("small1.bin"), entries[0].bytes)
        XCTAssertEqual(out("small2.bin"), entries[3].bytes, "the entry after the failures still had room")
        assertNothingStaged()

        try mount.resize(to: 16 << 20)
        let retry = try directory.haul(["sync"])
        XCTAssertEqual(retry.exitCode, 0, retry.stderr)
        for entry in entries { XCTAssertEqual(out(entry.destination), entry.bytes, entry.destination) }
    }

    // MARK: File size limit (RLIMIT_FSIZE)

    /// `ulimit -f` with SIGXFSZ ignored, the way a service manager may start haul: write(2) fails with EFBIG and
    /// only that entry fails. (1 MiB exceeds 512 blocks whether the shell counts 512- or 1024-byte blocks.)
    func testAFileSizeLimitFailsOnlyTheEntryThatExceedsIt() throws {
        let (entries, server) = try fileSizeLimitFixture()
        defer { server.stop() }
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c", "trap '' XFSZ; ulimit -f 512; exec \"$0\" \"$@\"",
                HaulProcess.executablePath, "sync", "--jobs", "1",
            ],
            currentDirectory: directory.path, timeout: 60)
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        assertContains(result.stderr, "error: big.bin: \(server.url("/big.bin")): cannot write ")
        assertContains(result.stderr, "File too large")
        XCTAssertEqual(out("big.bin"), Array("old".utf8))
        XCTAssertEqual(out("a.bin"), entries[0].bytes)
        XCTAssertEqual(out("z.bin"), entries[2].bytes)
        assertNothingStaged()
    }

    /// The same limit with SIGXFSZ at its default (what `ulimit -f` in a shell gives): the kernel sends SIGXFSZ
    /// on the first write past the limit, and unless haul ignores it, it kills the whole run: haul ignores it,
    /// so only the entry that hit the limit fails (EFBIG).
    func testAFileSizeLimitDoesNotKillHaulWithSIGXFSZ() throws {
        let (entries, server) = try fileSizeLimitFixture()
        defer { server.stop() }
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c", "ulimit -f 512; exec \"$0\" \"$@\"",
                HaulProcess.executablePath, "sync", "--jobs", "1",
            ],
            currentDirectory: directory.path, timeout: 60)
        XCTAssertNotEqual(result.exitCode, 128 + SIGXFSZ, "haul ignores SIGXFSZ and fails only the one entry")
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        assertContains(result.stderr, "error: big.bin: \(server.url("/big.bin")): cannot write ")
        assertContains(result.stderr, "File too large")
        XCTAssertEqual(out("big.bin"), Array("old".utf8))
        XCTAssertEqual(out("a.bin"), entries[0].bytes)
        XCTAssertEqual(out("z.bin"), entries[2].bytes)
        assertNothingStaged()
    }

    private func fileSizeLimitFixture() throws -> ([Entry], LoopbackHTTPServer) {
        let entries = [
            Entry(destination: "a.bin", bytes: pattern(4_096, seed: 5)),
            Entry(destination: "big.bin", bytes: pattern(1 << 20, seed: 6)),
            Entry(destination: "z.bin", bytes: pattern(4_096, seed: 7)),
        ]
        let server = try serve(entries)
        try writeManifest(entries, server: server)
        try directory.write("out/big.bin", Array("old".utf8))
        return (entries, server)
    }

    // MARK: Permissions

    /// haul as an unprivileged user (setpriv) on a root it owns, except one folder owned by root: the entry that
    /// replaces a file there and the one that needs a new folder there fail with EACCES; the rest is done.
    func testPermissionDeniedFailsOnlyTheEntriesInTheFolderTheUserCannotWrite() throws {
        let entries = [
            Entry(destination: "locked/a.bin", bytes: pattern(3_000, seed: 8)),
            Entry(destination: "locked/sub/c.bin", bytes: pattern(3_000, seed: 9)),
            Entry(destination: "free/b.bin", bytes: pattern(3_000, seed: 10)),
        ]
        let server = try serve(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)
        let old = Array("root's old file".utf8)
        try directory.write("out/locked/a.bin", old)
        XCTAssertEqual(chmod(directory.path, 0o755), 0, "the unprivileged user must reach the manifest and root")
        try Capability.required { try Unprivileged.checkAvailable(currentDirectory: directory.path) }
        try Unprivileged.giveAway(directory.path("out"))
        for path in ["out/locked", "out/locked/a.bin"] { XCTAssertEqual(chown(directory.path(path), 0, 0), 0, path) }

        let command = Unprivileged.command([HaulProcess.executablePath, "sync"])
        let result = try ProcessRunner.run(
            command[0], Array(command.dropFirst()), currentDirectory: directory.path, timeout: 60)
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        assertContains(result.stderr, "error: locked/a.bin: cannot rename into it: Permission denied")
        assertContains(
            result.stderr, "error: locked/sub/c.bin: cannot create directory \"locked/sub\": Permission denied")
        XCTAssertEqual(out("locked/a.bin"), old)
        XCTAssertFalse(directory.exists("out/locked/sub"))
        XCTAssertEqual(out("free/b.bin"), entries[2].bytes)
        assertNothingStaged()

        // The permission was the only obstacle.
        XCTAssertEqual(chown(directory.path("out/locked"), Unprivileged.uid, Unprivileged.gid), 0)
        let retry = try ProcessRunner.run(
            command[0], Array(command.dropFirst()), currentDirectory: directory.path, timeout: 60)
        XCTAssertEqual(retry.exitCode, 0, retry.stderr)
        for entry in entries { XCTAssertEqual(out(entry.destination), entry.bytes, entry.destination) }
    }

    /// A read-only folder that even root cannot change (`chattr +i`): its entries fail with EPERM and keep
    /// their old content; the others finish.
    func testAnImmutableDestinationFolderFailsItsEntriesAndKeepsTheirOldContent() throws {
        let entries = [
            Entry(destination: "ro/a.bin", bytes: pattern(3_000, seed: 11)),
            Entry(destination: "ro/new.bin", bytes: pattern(3_000, seed: 12)),
            Entry(destination: "ok.bin", bytes: pattern(3_000, seed: 13)),
        ]
        let server = try serve(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)
        let old = Array("old".utf8)
        try directory.write("out/ro/a.bin", old)
        let immutable = try Capability.required { try ImmutableAttribute(directory.path("out/ro")) }
        defer { immutable.release() }

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        assertContains(result.stderr, "error: ro/a.bin: cannot rename into it: Operation not permitted")
        assertContains(result.stderr, "error: ro/new.bin: cannot rename into it: Operation not permitted")
        XCTAssertEqual(out("ro/a.bin"), old)
        XCTAssertNil(out("ro/new.bin"))
        XCTAssertEqual(out("ok.bin"), entries[2].bytes)
        assertNothingStaged()

        immutable.release()
        let retry = try directory.haul(["sync"])
        XCTAssertEqual(retry.exitCode, 0, retry.stderr)
        for entry in entries { XCTAssertEqual(out(entry.destination), entry.bytes, entry.destination) }
    }

    /// A folder under root that is a read-only bind mount. rename(2) refuses to cross mounts (EXDEV) before it
    /// even looks at the read-only flag, so the message must say that the folder is another mount, not only
    /// strerror's "Invalid cross-device link".
    func testAFolderThatIsAnotherMountFailsItsEntriesWithACauseThatSaysSo() throws {
        let entries = [
            Entry(destination: "mnt/a.bin", bytes: pattern(3_000, seed: 14)),
            Entry(destination: "ok.bin", bytes: pattern(3_000, seed: 15)),
        ]
        let server = try serve(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)
        let old = Array("old".utf8)
        try directory.write("out/mnt/a.bin", old)
        let mount = try Capability.required { try TestMount.readOnlyBind(at: directory.path("out/mnt")) }
        defer { mount.unmount() }

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        assertContains(
            result.stderr,
            "error: mnt/a.bin: cannot rename into it: its folder is on another mount "
                + "than haul's staging area \(directory.path("out"))/.haul/tmp (rename(2) cannot cross mounts)")
        XCTAssertEqual(out("mnt/a.bin"), old)
        XCTAssertEqual(out("ok.bin"), entries[1].bytes)
        assertNothingStaged()
    }

    // MARK: Something else at the destination

    /// A non-empty directory at a destination, and a regular file where a destination needs a parent folder:
    /// both entries are refused before any request, with the path and the reason, and nothing there is touched.
    func testADirectoryAtTheDestinationOrAFileInPlaceOfItsParentIsLeftUntouched() throws {
        let entries = [
            Entry(destination: "data/x", bytes: pattern(2_000, seed: 16)),
            Entry(destination: "data/file.txt/y", bytes: pattern(2_000, seed: 17)),
            Entry(destination: "data/ok.bin", bytes: pattern(2_000, seed: 18)),
        ]
        let server = try serve(entries)
        defer { server.stop() }
        try writeManifest(entries, server: server)
        let inner = Array("someone's data".utf8)
        let plain = Array("a plain file".utf8)
        try directory.write("out/data/x/inner.txt", inner)
        try directory.write("out/data/file.txt", plain)

        let result = try directory.haul(["sync"])
        XCTAssertEqual(result.exitCode, 1, result.stderr)
        assertContains(result.stderr, "error: data/x: a directory is in the way")
        // Each line names its destination once.
        assertContains(
            result.stderr, "error: data/file.txt/y: cannot inspect it: parent \"data/file.txt\" is not a directory\n")
        assertContains(result.stdout, "! data/x (a directory is in the way)")
        assertContains(
            result.stdout, "! data/file.txt/y (cannot inspect it: parent \"data/file.txt\" is not a directory)")
        XCTAssertEqual(server.requests.map(\.path), ["/data/ok.bin"], "refused entries cost no request")
        XCTAssertEqual(directory.list("out/data/x"), ["inner.txt"])
        XCTAssertEqual(out("data/x/inner.txt"), inner)
        XCTAssertEqual(out("data/file.txt"), plain)
        XCTAssertEqual(out("data/ok.bin"), entries[2].bytes)
        assertNothingStaged()
    }
}

/// A 4 KiB block, different per seed, repeated: cheap for the megabytes a full disk needs, even in debug builds.
private func pattern(_ count: Int, seed: Int) -> [UInt8] {
    let block = (0..<4_096).map { UInt8(truncatingIfNeeded: (($0 &* 2_654_435_761) &+ seed &* 131) >> 6) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count { bytes += block.prefix(count - bytes.count) }
    return bytes
}
