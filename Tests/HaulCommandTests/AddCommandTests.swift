import Dispatch
import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// `haul add`, end to end: the real binary pins what a real loopback server serves, edits a real manifest,
/// and the result is a manifest `haul sync` accepts and fulfils.
final class AddCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let body = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    private let other: [UInt8] = Array("already pinned\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func manifestText(_ name: String = "haul.yaml") -> String? {
        directory.read(name).map { String(decoding: $0, as: UTF8.self) }
    }

    private func serve() throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer(files: ["/v1/data.bin": body, "/v1/old.txt": other])
    }

    private func commentedManifest(_ server: LoopbackHTTPServer) -> String {
        """
        # Build inputs. Run `haul sync` after editing.
        version: 1
        root: out   # relative to this file

        files:
          # Pinned by hand.
          - url: \(server.url("/v1/old.txt"))
            dest: old.txt
            sha256: \(sha256(other))   # checked on every sync
            # size: unknown

        # Keep pruning off until the migration ends.
        prune: false

        """
    }

    func testAddToACommentedManifestKeepsItsCommentsAndTheResultSyncs() throws {
        let server = try serve()
        defer { server.stop() }
        let original = commentedManifest(server)
        try directory.write("haul.yaml", original)
        chmod(directory.path("haul.yaml"), 0o640)

        try directory.makeDirectory("tmp")
        let add = try directory.haul(
            ["add", server.url("/v1/data.bin")], environment: ["TMPDIR": directory.path("tmp")])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(add.stderr, "")
        XCTAssertEqual(
            add.stdout,
            """
            Added data.bin (4.0 KiB, sha256 \(sha256(body).prefix(12))…) to haul.yaml as files[1], line 11.
            Placed out/data.bin; the next sync makes no request for it.

            """)
        XCTAssertEqual(
            manifestText(),
            """
            # Build inputs. Run `haul sync` after editing.
            version: 1
            root: out   # relative to this file

            files:
              # Pinned by hand.
              - url: \(server.url("/v1/old.txt"))
                dest: old.txt
                sha256: \(sha256(other))   # checked on every sync
                # size: unknown
              - url: \(server.url("/v1/data.bin"))
                dest: data.bin
                sha256: \(sha256(body))
                size: 4096

            # Keep pruning off until the migration ends.
            prune: false

            """)
        var info = stat()
        XCTAssertEqual(stat(directory.path("haul.yaml"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o7777, 0o640, "the manifest keeps its mode")
        XCTAssertEqual(directory.read("out/data.bin"), body, "what add downloaded is in place")
        XCTAssertNil(directory.read("out/old.txt"), "add puts only its own entries in place")
        XCTAssertEqual(server.requests(path: "/v1/data.bin").count, 1, "one download")
        XCTAssertEqual(directory.list("tmp"), [], "add leaves nothing in $TMPDIR")

        let sync = try directory.haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/data.bin"), body)
        XCTAssertEqual(directory.read("out/old.txt"), other)
        XCTAssertEqual(
            server.requests(path: "/v1/data.bin").count, 1, "the sync after add makes no request for its file")
    }

    func testAddCreatesAMissingManifest() throws {
        let server = try serve()
        defer { server.stop() }

        let add = try directory.haul([
            "add", server.url("/v1/data.bin"), "--dest", "inputs//data.bin", "--manifest", "assets.yaml",
        ])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(
            add.stdout,
            """
            Created assets.yaml with inputs/data.bin (4.0 KiB, sha256 \(sha256(body).prefix(12))…) as files[0], line 3.
            Placed inputs/data.bin; the next sync makes no request for it.

            """)
        XCTAssertEqual(
            manifestText("assets.yaml"),
            """
            version: 1
            files:
              - url: \(server.url("/v1/data.bin"))
                dest: inputs/data.bin
                sha256: \(sha256(body))
                size: 4096

            """)
        let sync = try directory.haul(["sync", "assets.yaml"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("inputs/data.bin"), body)
    }

    func testPrintPrintsTheEntryAndTouchesNothing() throws {
        let server = try serve()
        defer { server.stop() }
        let original = commentedManifest(server)
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", "--print", server.url("/v1/data.bin"), "--dest", "yes"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(add.stderr, "")
        XCTAssertEqual(
            add.stdout,
            """
            - url: \(server.url("/v1/data.bin"))
              dest: "yes"
              sha256: \(sha256(body))
              size: 4096

            """)
        XCTAssertEqual(manifestText(), original)
        XCTAssertEqual(directory.list(), ["haul.yaml"])
    }

    func testNotFoundExitsNonZeroNamingTheURLAndWritesNothing() throws {
        let server = try serve()
        defer { server.stop() }
        let original = commentedManifest(server)
        try directory.write("haul.yaml", original)
        let missing = server.url("/v1/missing.bin")

        let add = try directory.haul(["add", missing])
        XCTAssertEqual(add.exitCode, 1)
        XCTAssertEqual(add.stderr, "error: \(missing): HTTP 404\n")
        XCTAssertEqual(add.stdout, "")
        XCTAssertEqual(manifestText(), original)

        let fresh = try directory.haul(["add", missing, "--manifest", "new.yaml"])
        XCTAssertEqual(fresh.exitCode, 1)
        XCTAssertFalse(directory.exists("new.yaml"), "no manifest is created for a URL that cannot be pinned")
        XCTAssertEqual(directory.list(), ["haul.yaml"])
    }

    func testAManifestEditedDuringTheDownloadIsNotOverwritten() throws {
        let path = directory.path("haul.yaml")
        let edited = "version: 1\nfiles: []  # edited by someone else meanwhile\n"
        let served = body
        let server = try LoopbackHTTPServer { _ in
            try? Data(edited.utf8).write(to: URL(fileURLWithPath: path))
            return .ok(served)
        }
        defer { server.stop() }
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")

        let add = try directory.haul(["add", server.url("/data.bin")])
        XCTAssertEqual(add.exitCode, 1)
        XCTAssertEqual(
            add.stderr,
            "error: haul.yaml changed while haul add was downloading; it was not modified (run haul add again)\n")
        XCTAssertEqual(manifestText(), edited)
    }

    func testSIGINTDuringTheDownloadExits130LeavingNothingBehind() throws {
        let served = body
        let server = try LoopbackHTTPServer { _ in
            ServerResponse.ok(served).with(fault: .stallAfter(bytes: 1_000, seconds: 20))
        }
        defer { server.stop() }
        let original = "version: 1\nfiles: []\n"
        try directory.write("haul.yaml", original)
        try directory.makeDirectory("tmp")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: HaulProcess.executablePath)
        process.arguments = ["add", server.url("/slow.bin")]
        process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
        process.environment = ProcessRunner.minimalEnvironment.merging(["TMPDIR": directory.path("tmp")]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        let deadline = Date().addingTimeInterval(10)
        while !directory.holdsBytesInFlight(under: "tmp") && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(directory.holdsBytesInFlight(under: "tmp"), "the first bytes are in the temporary file")
        XCTAssertEqual(directory.list("tmp").count, 1, "the download goes to a private directory under $TMPDIR")
        kill(process.processIdentifier, SIGINT)
        XCTAssertEqual(exited.wait(timeout: .now() + 10), .success, "haul stops promptly")
        process.waitUntilExit()

        XCTAssertEqual(process.terminationStatus, 130)
        XCTAssertEqual(manifestText(), original)
        XCTAssertEqual(directory.list("tmp"), [], "the temporary directory and its partial file are removed")
    }

    func testDuplicateDestinationExits3BeforeAnyDownload() throws {
        let server = try serve()
        defer { server.stop() }
        let original = commentedManifest(server)
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", server.url("/v1/data.bin"), "--dest", "./old.txt"])
        XCTAssertEqual(add.exitCode, 3)
        XCTAssertEqual(
            add.stderr,
            """
            haul.yaml:8:11: error: files[0].dest: "old.txt" is already the destination of files[0]
            hint: to pin it anew from its own url, run "haul add --update old.txt"; or choose another destination with --dest

            """)
        XCTAssertEqual(manifestText(), original)
        XCTAssertEqual(server.requests.count, 0, "nothing is downloaded for an entry that cannot be added")
    }

    func testDestinationNeededAsAFolderExits3NamingTheOtherEntry() throws {
        let server = try serve()
        defer { server.stop() }
        let original = commentedManifest(server)
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", server.url("/v1/data.bin"), "--dest", "old.txt/data.bin"])
        XCTAssertEqual(add.exitCode, 3)
        XCTAssertEqual(
            add.stderr,
            "error: files[1].dest: \"old.txt/data.bin\" would be inside \"old.txt\", which is the "
                + "destination of files[0] (line 8)\n")
        XCTAssertEqual(manifestText(), original)
        XCTAssertEqual(server.requests.count, 0)
    }

    func testAnInvalidManifestIsReportedAsSyncWouldAndLeftAlone() throws {
        let server = try serve()
        defer { server.stop() }
        let original = "version: 1\nfiles:\n  - url: \(server.url("/v1/old.txt"))\n    dset: old.txt\n"
        try directory.write("haul.yaml", original)

        let add = try directory.haul(["add", server.url("/v1/data.bin")])
        XCTAssertEqual(add.exitCode, 3)
        XCTAssertEqual(
            add.stderr,
            """
            haul.yaml:3:5: error: files[0]: missing required key "dest"
            haul.yaml:4:5: error: files[0].dset: unknown key "dset"; did you mean "dest"?

            """)
        XCTAssertEqual(manifestText(), original)
        XCTAssertEqual(server.requests.count, 0)
    }

    func testAURLAlreadyListedIsAddedWithAWarning() throws {
        let server = try serve()
        defer { server.stop() }
        try directory.write("haul.yaml", commentedManifest(server))

        let add = try directory.haul(["add", server.url("/v1/old.txt"), "--dest", "copy/old.txt"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(
            add.stderr,
            "warning: haul.yaml:7:10: files[0] (dest \"old.txt\") already fetches "
                + "\(server.url("/v1/old.txt")); adding another entry for it\n")
        XCTAssertTrue(manifestText()?.contains("    dest: copy/old.txt\n") ?? false)
    }

    func testEnvironmentReferencesAreKeptAndSecretsNeverPrinted() throws {
        let server = try serve()
        defer { server.stop() }
        let template = "http://user:s3cret@127.0.0.1:${ASSET_PORT}/v1/data.bin"

        let add = try directory.haul(["add", template], environment: ["ASSET_PORT": String(server.port)])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertFalse(add.stdout.contains("s3cret") || add.stderr.contains("s3cret"))
        XCTAssertEqual(
            manifestText()?.split(separator: "\n").dropFirst(2).first, "  - url: \(template)",
            "the manifest gets the reference, not the port it expanded to")

        // The manifest is validated as sync would validate it, in this environment.
        let missing = "http://user:s3cret@127.0.0.1:\(server.port)/v1/missing.bin"
        let unset = try directory.haul(["add", missing, "--dest", "m.bin"])
        XCTAssertEqual(unset.exitCode, 3)
        XCTAssertEqual(
            unset.stderr, "haul.yaml:3:10: error: files[0].url: environment variable ASSET_PORT is not set\n")

        let failing = try directory.haul(
            ["add", missing, "--dest", "m.bin"], environment: ["ASSET_PORT": String(server.port)])
        XCTAssertEqual(failing.exitCode, 1)
        XCTAssertEqual(failing.stderr, "error: http://***@127.0.0.1:\(server.port)/v1/missing.bin: HTTP 404\n")

        let sync = try directory.haul(["sync"], environment: ["ASSET_PORT": String(server.port)])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("data.bin"), body)
    }

    func testUnusableURLOrDestinationIsAUsageError() throws {
        let noName = try directory.haul(["add", "https://example.com/"])
        XCTAssertEqual(noName.exitCode, 64)
        XCTAssertEqual(
            noName.stderr,
            "error: URL \"https://example.com/\" has no file name at the end of its path; choose a destination with --dest\n"
        )
        let escaping = try directory.haul(["add", "https://example.com/a.bin", "--dest", "../a.bin"])
        XCTAssertEqual(escaping.exitCode, 64)
        XCTAssertEqual(
            escaping.stderr, "error: destination \"../a.bin\" contains \"..\"; destinations must stay inside root\n")
        XCTAssertEqual(directory.list(), [], "nothing is created")
    }
}
