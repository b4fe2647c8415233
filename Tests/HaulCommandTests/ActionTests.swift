import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// The repository's `action.yml`, run as a GitHub runner runs a composite action (`Tests/Tools/action_runner.py`),
/// and its GitLab component `templates/haul.yml`, run as a GitLab runner runs a job (`Tests/Tools/gitlab_job_runner.py`):
/// on a machine with no haul, each installs the release archive served on loopback (the agreed layout, made from the
/// built binary, with its SHA256SUMS), syncs the manifest, and keeps the content cache in an emulated CI cache.
final class ActionTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private var version = ""
    private var archiveName = ""
    private let repository = "example/haul"
    private let files: [String: [UInt8]] = [
        "models/a.bin": (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) },
        "models/b.bin": Array("second file\n".utf8),
    ]

    private static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        let versionRun = try HaulProcess.run(["--version"])
        version = String(versionRun.stdout.split(separator: "\n").first?.dropFirst("haul ".count) ?? "")
        XCTAssertFalse(version.isEmpty, versionRun.stdout)
        var machine = utsname()
        uname(&machine)
        let arch = withUnsafeBytes(of: &machine.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        archiveName = "haul-\(version)-linux-\(arch).tar.gz"
        let archive = try makeReleaseArchive(folder: "haul-\(version)-linux-\(arch)")
        let sums = "\(StreamingHasher.digest(archive, algorithm: .sha256).hex)  \(archiveName)\n"
        var served = Dictionary(uniqueKeysWithValues: files.map { ("/files/" + $0.key, $0.value) })
        served[releasePath(archiveName)] = archive
        served[releasePath("SHA256SUMS")] = Array(sums.utf8)
        server = try LoopbackHTTPServer(files: served)
    }

    override func tearDown() {
        server?.stop()
        server = nil
        directory = nil
    }

    /// Where `github.server_url` (the loopback server, as a GitHub Enterprise's would be) publishes the release.
    private func releasePath(_ name: String) -> String { "/\(repository)/releases/download/v\(version)/\(name)" }

    /// The release archive's layout (bin/haul, LICENSE, README.md under one top folder) around the built binary.
    private func makeReleaseArchive(folder: String) throws -> [UInt8] {
        try directory.makeDirectory("stage/\(folder)/bin")
        let binary = try XCTUnwrap(FileManager.default.contents(atPath: HaulProcess.executablePath))
        try directory.write("stage/\(folder)/bin/haul", Array(binary))
        XCTAssertEqual(chmod(directory.path("stage/\(folder)/bin/haul"), 0o755), 0)
        for name in ["LICENSE", "README.md"] {
            try directory.write(
                "stage/\(folder)/\(name)",
                Array(try XCTUnwrap(FileManager.default.contents(atPath: Self.repositoryRoot + "/" + name))))
        }
        let packed = try ProcessRunner.run(
            "/bin/tar", ["-C", directory.path("stage"), "-czf", directory.path("release.tar.gz"), folder])
        XCTAssertEqual(packed.exitCode, 0, packed.stderr)
        return try XCTUnwrap(directory.read("release.tar.gz"))
    }

    private func manifest(extra: String = "") -> String {
        var lines = ["version: 1", "root: assets", "files:"]
        for (destination, bytes) in files.sorted(by: { $0.key < $1.key }) {
            lines.append(
                "  - { url: \(server.url("/files/" + destination)), dest: \(destination), "
                    + "sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }")
        }
        return (lines + (extra.isEmpty ? [] : [extra])).joined(separator: "\n") + "\n"
    }

    private struct Run {
        let result: ProcessResult
        let outputs: [String: String]
        let summary: String
    }

    /// One job on a fresh runner (`name`: its workspace and temporary folder); the cache store is the repository's,
    /// shared by every run. PATH holds no haul.
    private func runAction(_ name: String, manifest text: String, inputs: [String: String]) throws -> Run {
        let workspace = directory.path("\(name)/workspace")
        try directory.write("\(name)/workspace/haul.yaml", text)
        try directory.makeDirectory("\(name)/temp")
        let arguments =
            [
                Self.repositoryRoot + "/Tests/Tools/action_runner.py", "--action", Self.repositoryRoot,
                "--workspace", workspace, "--temp", directory.path("\(name)/temp"),
                "--cache-store", directory.path("cache-store"), "--summary", directory.path("\(name)/summary.md"),
                "--repository", repository, "--server-url", server.baseURL,
                "--outputs", directory.path("\(name)/outputs.json"),
            ]
            + inputs.sorted { $0.key < $1.key }.flatMap { ["--input", "\($0.key)=\($0.value)"] }
        let result = try ProcessRunner.run(
            "/usr/bin/python3", arguments, environment: ["PATH": "/usr/bin:/bin"], timeout: 120)
        let outputs =
            directory.read("\(name)/outputs.json").flatMap {
                try? JSONSerialization.jsonObject(with: Data($0)) as? [String: String]
            } ?? [:]
        return Run(
            result: result, outputs: outputs,
            summary: String(decoding: directory.read("\(name)/summary.md") ?? [], as: UTF8.self))
    }

    private var fileRequests: [String] { server.requests.map(\.path).filter { $0.hasPrefix("/files/") } }

    func testFromNoHaulToAVerifiedSyncAndTheRestoredCacheServesTheNextRun() throws {
        XCTAssertNotEqual(
            try ProcessRunner.run("/bin/sh", ["-c", "command -v haul"], environment: ["PATH": "/usr/bin:/bin"])
                .exitCode, 0,
            "no haul on the runner's PATH")
        let first = try runAction("first", manifest: manifest(), inputs: ["version": version])
        XCTAssertEqual(first.result.exitCode, 0, first.result.stdout + first.result.stderr)
        for (destination, bytes) in files {
            XCTAssertTrue(directory.read("first/workspace/assets/\(destination)") == bytes, destination)
        }
        XCTAssertEqual(first.outputs["version"], version)
        XCTAssertEqual(first.outputs["exit-code"], "0")
        XCTAssertEqual(
            first.outputs["haul-path"],
            directory.path("first/temp/haul/\(archiveName.dropLast(".tar.gz".count))/bin/haul"))
        XCTAssertTrue(first.summary.hasPrefix("### haul sync haul\\.yaml\n"), first.summary)
        XCTAssertTrue(first.summary.contains("| 2 (4.9 KiB) | 0 | 0 | 0 | 0 | 0 |"), first.summary)
        XCTAssertEqual(
            Set(server.requests.map(\.path)),
            Set(files.keys.map { "/files/" + $0 } + [releasePath(archiveName), releasePath("SHA256SUMS")]))

        // A fresh runner: haul installed again, the files from the restored content cache, not one file requested.
        server.resetLog()
        let second = try runAction("second", manifest: manifest(), inputs: ["version": version])
        XCTAssertEqual(second.result.exitCode, 0, second.result.stdout + second.result.stderr)
        XCTAssertTrue(second.result.stdout.contains("cache: restored haul-content-Linux-"), second.result.stdout)
        XCTAssertEqual(fileRequests, [], "served from the restored cache")
        for (destination, bytes) in files {
            XCTAssertTrue(directory.read("second/workspace/assets/\(destination)") == bytes, destination)
        }
        XCTAssertTrue(second.summary.contains("| 0 (0 B) | 2 | 0 | 0 | 0 | 0 |"), second.summary)
    }

    func testAFailingEntryIsAnnotatedOnItsLineAndFailsTheStep() throws {
        let text = manifest(extra: "  - { url: \(server.url("/files/missing.bin")), dest: missing.bin, retries: 0 }")
        let run = try runAction(
            "failing", manifest: text,
            inputs: ["source": server.url(releasePath(archiveName)), "args": "--progress none"])
        XCTAssertEqual(run.result.exitCode, 1, run.result.stderr)
        XCTAssertTrue(
            run.result.stdout.contains(
                "::error file=haul.yaml,line=6,col=5::missing.bin: \(server.url("/files/missing.bin")): HTTP 404\n"),
            run.result.stdout)
        XCTAssertEqual(run.outputs["exit-code"], "1")
        XCTAssertTrue(run.summary.contains(#"| missing\.bin | 6 | "#), run.summary)
        XCTAssertTrue(
            directory.read("failing/workspace/assets/models/b.bin") == files["models/b.bin"], "the rest synced")
    }

    func testAnArchiveThatDoesNotMatchItsSHA256SUMSIsRefusedBeforeHaulRuns() throws {
        let sums = try XCTUnwrap(server.files)
        sums.set(releasePath("SHA256SUMS"), Array("\(String(repeating: "0", count: 64))  \(archiveName)\n".utf8))
        let run = try runAction("tampered", manifest: manifest(), inputs: ["version": version])
        XCTAssertEqual(run.result.exitCode, 1, run.result.stderr)
        XCTAssertTrue(
            run.result.stdout.contains(
                "::error title=haul action::\(archiveName) does not match "
                    + "\(server.url(releasePath("SHA256SUMS"))): its sha256 is "), run.result.stdout)
        XCTAssertEqual(fileRequests, [], "haul never ran")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path("tampered/temp/haul")), "nothing unpacked")
        XCTAssertNil(run.outputs["exit-code"].flatMap { $0.isEmpty ? nil : $0 })

        // A list that does not name the archive is refused too.
        sums.set(releasePath("SHA256SUMS"), Array("\(String(repeating: "0", count: 64))  other.tar.gz\n".utf8))
        let unlisted = try runAction(
            "unlisted", manifest: manifest(), inputs: ["source": server.url(releasePath(archiveName))])
        XCTAssertEqual(unlisted.result.exitCode, 1)
        XCTAssertTrue(
            unlisted.result.stdout.contains(
                "::error title=haul action::\(server.url(releasePath("SHA256SUMS"))) lists no \(archiveName)"),
            unlisted.result.stdout)
        XCTAssertEqual(fileRequests, [])
    }

    func testAnArchiveOfAnotherVersionThanAskedIsRefused() throws {
        let run = try runAction(
            "other-version", manifest: manifest(),
            inputs: ["version": "9.9.9", "source": server.url(releasePath(archiveName))])
        XCTAssertEqual(run.result.exitCode, 1, run.result.stderr)
        XCTAssertTrue(
            run.result.stdout.contains(
                "::error title=haul action::the archive holds haul \(version), "
                    + "not the version asked for, 9.9.9\n"), run.result.stdout)
        XCTAssertEqual(fileRequests, [], "haul never synced")
    }

    func testTheRunnerRefusesAnExpressionItDoesNotKnow() throws {
        try directory.write(
            "odd/action.yml",
            """
            runs:
              using: composite
              steps:
                - shell: bash
                  run: echo ${{ secrets.TOKEN }}
            """)
        try directory.makeDirectory("odd/temp")
        let result = try ProcessRunner.run(
            "/usr/bin/python3",
            [
                Self.repositoryRoot + "/Tests/Tools/action_runner.py",
                "--action", directory.path("odd"), "--workspace", directory.path("odd"),
                "--temp", directory.path("odd/temp"), "--cache-store", directory.path("odd/store"),
                "--summary", directory.path("odd/summary.md"),
            ],
            environment: ["PATH": "/usr/bin:/bin"])
        XCTAssertEqual(result.exitCode, 2)
        XCTAssertEqual(result.stderr, "action_runner: unsupported context: secrets.TOKEN\n")
    }

    /// The component's `.haul-sync` job in a fresh project folder `name`, with the example pipeline's inputs and
    /// `source` on loopback; the cache store is shared by every pipeline.
    private func runGitLabJob(_ name: String, source: String) throws -> ProcessResult {
        let pipeline = try YAMLValue.read(Self.repositoryRoot + "/examples/gitlab-ci/.gitlab-ci.yml")
        let include = try XCTUnwrap(pipeline["include"]?.items.first)
        XCTAssertTrue(
            include["component"]?.text?.hasSuffix("/haul/haul@0.1.0") == true, "the component named by its project")
        XCTAssertEqual(pipeline["sync-assets"]?["extends"]?.text, ".haul-sync")
        let inputs = try XCTUnwrap(include["inputs"])
        let manifestPath = try XCTUnwrap(inputs["manifest"]?.text)
        let arguments = try XCTUnwrap(inputs["args"]?.text)
        XCTAssertTrue(arguments.contains("--shard $CI_NODE_INDEX/$CI_NODE_TOTAL"), arguments)
        try directory.write("\(name)/\(manifestPath)", manifest())
        return try ProcessRunner.run(
            "/usr/bin/python3",
            [
                Self.repositoryRoot + "/Tests/Tools/gitlab_job_runner.py", "--template",
                Self.repositoryRoot + "/templates/haul.yml",
                "--job", ".haul-sync", "--project", directory.path(name), "--cache-store",
                directory.path("gitlab-cache"),
                "--input", "source=\(source)", "--input", "manifest=\(manifestPath)", "--input", "args=\(arguments)",
                "--variable", "CI_NODE_INDEX=1", "--variable", "CI_NODE_TOTAL=1",
            ], environment: ["PATH": "/usr/bin:/bin"], timeout: 120)
    }

    func testTheGitLabComponentInstallsTheReleaseAndItsCacheServesTheNextPipeline() throws {
        let first = try runGitLabJob("pipeline-1", source: server.url(releasePath(archiveName)))
        XCTAssertEqual(first.exitCode, 0, first.stdout + first.stderr)
        XCTAssertTrue(first.stdout.contains("haul \(version)\n"), "the installed haul ran: \(first.stdout)")
        for (destination, bytes) in files {
            XCTAssertTrue(directory.read("pipeline-1/assets/assets/\(destination)") == bytes, destination)
        }
        XCTAssertEqual(fileRequests.count, files.count)

        server.resetLog()
        let second = try runGitLabJob("pipeline-2", source: server.url(releasePath(archiveName)))
        XCTAssertEqual(second.exitCode, 0, second.stdout + second.stderr)
        XCTAssertTrue(second.stdout.contains("cache: restored haul-haul-sync-"), second.stdout)
        XCTAssertEqual(fileRequests, [], "served from the restored cache")
        for (destination, bytes) in files {
            XCTAssertTrue(directory.read("pipeline-2/assets/assets/\(destination)") == bytes, destination)
        }
    }

    func testTheGitLabComponentRefusesAnArchiveThatDoesNotMatchItsSHA256SUMS() throws {
        try XCTUnwrap(server.files).set(
            releasePath("SHA256SUMS"), Array("\(String(repeating: "0", count: 64))  \(archiveName)\n".utf8))
        let run = try runGitLabJob("tampered", source: server.url(releasePath(archiveName)))
        XCTAssertEqual(run.exitCode, 1, run.stdout)
        XCTAssertTrue(
            run.stderr.contains(
                "haul: \(archiveName) does not match \(server.url(releasePath("SHA256SUMS"))): its sha256 is "),
            run.stderr)
        XCTAssertEqual(fileRequests, [], "haul never ran")
    }
}
