import HaulDigest
import HaulTestSupport
import XCTest

/// Where files go: the manifest's `root:` (relative to the manifest, `${VAR}` and `${VAR:-default}` expanded), or
/// `--root DIR` (relative to the current directory, as any path on a command line), which wins.
final class RootOptionTests: XCTestCase {
    private let bytes: [UInt8] = Array("asset\n".utf8)

    func testRootComesFromTheEnvironmentAndTheCommandLineWins() throws {
        let directory = try TemporaryDirectory()
        let server = try LoopbackHTTPServer(files: ["/a.bin": bytes])
        defer { server.stop() }
        try directory.makeDirectory("conf")
        try directory.write(
            "conf/haul.yaml",
            """
            version: 1
            root: ${OUTDIR:-default-out}
            files:
              - url: \(server.url("/a.bin"))
                dest: a.bin
                sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex)
            """)
        XCTAssertEqual(try directory.haul(["sync", "conf/haul.yaml"]).exitCode, 0)
        XCTAssertEqual(directory.read("conf/default-out/a.bin"), bytes, "unset: the default, relative to the manifest")

        XCTAssertEqual(
            try directory.haul(["sync", "conf/haul.yaml"], environment: ["OUTDIR": directory.path("env-out")]).exitCode,
            0)
        XCTAssertEqual(directory.read("env-out/a.bin"), bytes)

        let option = try directory.haul(
            ["sync", "conf/haul.yaml", "--root", "cli-out"], environment: ["OUTDIR": "ignored"])
        XCTAssertEqual(option.exitCode, 0, option.stderr)
        XCTAssertEqual(directory.read("cli-out/a.bin"), bytes, "--root is relative to the current directory")
        XCTAssertFalse(directory.exists("conf/ignored"))

        let plan = try directory.haul(["plan", "conf/haul.yaml", "--root", "cli-out"])
        XCTAssertEqual(plan.exitCode, 0, plan.stdout)
        let verify = try directory.haul(["verify", "conf/haul.yaml", "--root", "cli-out"])
        XCTAssertEqual(verify.exitCode, 0, verify.stdout)
        let empty = try directory.haul(["plan", "conf/haul.yaml", "--root", ""])
        XCTAssertEqual(empty.exitCode, 3, empty.stderr)
        XCTAssertTrue(empty.stderr.contains("--root: expected a folder path"), empty.stderr)
    }
}
