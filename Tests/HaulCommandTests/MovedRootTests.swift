import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// Which manifest wrote a file is recorded relative to root: a root moved with its manifest (a CI cache restored
/// in another workspace) still prunes; a renamed manifest's files are named, kept, and adopted on request; and a
/// state an older haul wrote (manifests named by a hash of their path) still belongs to its manifest.
final class MovedRootTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func write(
        _ manifest: String, in folder: String, serving server: LoopbackHTTPServer, _ names: [String]
    ) throws {
        let entries = names.map { name in
            "  - url: \(server.url("/" + name))\n    dest: \(name)\n    sha256: \(sha256(Array(name.utf8)))\n"
        }.joined()
        try directory.write("\(folder)/\(manifest)", "version: 1\nroot: out\nfiles:\n" + entries)
    }

    private func serve() throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer(files: ["/a.bin": Array("a.bin".utf8), "/b.bin": Array("b.bin".utf8)])
    }

    func testAMovedWorkspaceStillPrunesWhatItsManifestWrote() throws {
        let server = try serve()
        defer { server.stop() }
        try directory.makeDirectory("ws1")
        try write("haul.yaml", in: "ws1", serving: server, ["a.bin", "b.bin"])
        XCTAssertEqual(try directory.haul(["sync", "ws1/haul.yaml"]).exitCode, 0)
        XCTAssertEqual(rename(directory.path("ws1"), directory.path("ws2")), 0, "the CI cache lands elsewhere")

        try write("haul.yaml", in: "ws2", serving: server, ["a.bin"])
        let plan = try directory.haul(["plan", "ws2/haul.yaml"])
        XCTAssertTrue(plan.stdout.hasSuffix("1 file no longer listed (--prune deletes them).\n"), plan.stdout)
        let pruned = try directory.haul(["sync", "ws2/haul.yaml", "--prune"])
        XCTAssertEqual(pruned.exitCode, 0, pruned.stderr)
        XCTAssertFalse(directory.exists("ws2/out/b.bin"))
        XCTAssertEqual(directory.read("ws2/out/a.bin"), Array("a.bin".utf8))
    }

    func testARenamedManifestsFilesAreNamedKeptAndAdoptedOnRequest() throws {
        let server = try serve()
        defer { server.stop() }
        try directory.makeDirectory("ws")
        try write("haul.yaml", in: "ws", serving: server, ["a.bin", "b.bin"])
        XCTAssertEqual(try directory.haul(["sync", "ws/haul.yaml"]).exitCode, 0)
        XCTAssertEqual(unlink(directory.path("ws/haul.yaml")), 0)
        try write("assets.yaml", in: "ws", serving: server, ["a.bin"])

        let plan = try directory.haul(["plan", "ws/assets.yaml", "--prune"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout)
        XCTAssertEqual(
            plan.stdout,
            "! 2 files written by ../haul.yaml, which is gone: not pruned "
                + "(--adopt ../haul.yaml makes this manifest their owner)\nNo changes: 1 file up to date.\n")
        XCTAssertEqual(try directory.haul(["sync", "ws/assets.yaml", "--prune"]).exitCode, 0)
        XCTAssertTrue(directory.exists("ws/out/b.bin"), "another manifest's file is never pruned unasked")

        let adopted = try directory.haul(["sync", "ws/assets.yaml", "--prune", "--adopt", "../haul.yaml"])
        XCTAssertEqual(adopted.exitCode, 0, adopted.stderr)
        XCTAssertFalse(directory.exists("ws/out/b.bin"))
        XCTAssertEqual(directory.read("ws/out/a.bin"), Array("a.bin".utf8))
        // From now on a.bin is the new manifest's: nothing is left to adopt.
        let after = try directory.haul(["plan", "ws/assets.yaml", "--prune"])
        XCTAssertEqual(after.stdout, "No changes: 1 file up to date.\n")
    }

    /// A state an older haul wrote: manifests named by a hash of their path, and no owner tags. Its records still
    /// spare the hashing and still belong to their manifest, but no file is pruned on their word alone (anyone who
    /// can write `.haul` could have written them): the plan names them, and `--adopt` vouches for them once.
    func testAStateAnOlderHaulWroteStillBelongsToItsManifestAndIsPrunedOnceAdopted() throws {
        let server = try serve()
        defer { server.stop() }
        try directory.makeDirectory("ws")
        try write("haul.yaml", in: "ws", serving: server, ["a.bin", "b.bin"])
        XCTAssertEqual(try directory.haul(["sync", "ws/haul.yaml"]).exitCode, 0)
        // Name the manifest as haul did before: the first 32 hex digits of the SHA-256 of its real path, in the
        // format before owner tags (11 fields, header 3).
        let real = try XCTUnwrap(
            realpath(directory.path("ws/haul.yaml"), nil).map { pointer in
                defer { free(pointer) }
                return String(cString: pointer)
            })
        let legacy = String(sha256(Array(real.utf8)).prefix(32))
        let state = String(decoding: try XCTUnwrap(directory.read("ws/out/.haul/state")), as: UTF8.self)
        XCTAssertTrue(state.hasPrefix("haul-state\t5\n"), state)
        let older = state.split(separator: "\n").dropFirst().map { line -> String in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            XCTAssertEqual(fields.count, 15, String(line))
            XCTAssertEqual(fields[7], "../haul.yaml")
            return (fields[..<7] + [legacy] + fields[8..<11]).joined(separator: "\t")
        }
        try directory.write("ws/out/.haul/state", (["haul-state\t3"] + older).joined(separator: "\n") + "\n")

        try write("haul.yaml", in: "ws", serving: server, ["a.bin"])
        server.resetLog()
        let plan = try directory.haul(["plan", "ws/haul.yaml", "--prune"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout)
        XCTAssertEqual(
            plan.stdout,
            "! 1 file recorded as written by ../haul.yaml without haul's proof (a state an older haul "
                + "wrote, or one edited): not pruned (--adopt ../haul.yaml vouches for them)\nNo changes: 1 file up to date.\n"
        )
        let kept = try directory.haul(["sync", "ws/haul.yaml", "--prune"])
        XCTAssertEqual(kept.exitCode, 0, kept.stderr)
        XCTAssertTrue(kept.stdout.hasPrefix("Nothing to do: 1 file up to date in "), kept.stdout)
        XCTAssertEqual(
            kept.stderr,
            "warning: 1 file recorded as written by ../haul.yaml without haul's proof (a state an older "
                + "haul wrote, or one edited): not pruned (--adopt ../haul.yaml vouches for them)\n",
            "a sync that prunes nothing says why, even with nothing else to do")
        XCTAssertEqual(directory.read("ws/out/b.bin"), Array("b.bin".utf8), "not pruned without proof")
        XCTAssertEqual(server.requests.count, 0, "the older records still spare the download")
        let renamed = String(decoding: try XCTUnwrap(directory.read("ws/out/.haul/state")), as: UTF8.self)
        XCTAssertFalse(renamed.contains(legacy), "recorded under the new name from now on: \(renamed)")

        let adopted = try directory.haul(["sync", "ws/haul.yaml", "--prune", "--adopt", "../haul.yaml"])
        XCTAssertEqual(adopted.exitCode, 0, adopted.stderr)
        XCTAssertFalse(directory.exists("ws/out/b.bin"), "vouched for, and pruned")
        XCTAssertEqual(directory.read("ws/out/a.bin"), Array("a.bin".utf8))

        // Adopted once: a.bin's record is proven from now on, and pruned without --adopt when it goes.
        try write("haul.yaml", in: "ws", serving: server, ["b.bin"])
        let later = try directory.haul(["sync", "ws/haul.yaml", "--prune"])
        XCTAssertEqual(later.exitCode, 0, later.stderr)
        XCTAssertFalse(directory.exists("ws/out/a.bin"), later.stdout)
    }
}
