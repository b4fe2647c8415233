import Foundation
import Glibc
import HaulDigest
@testable import HaulManifest
import HaulTestSupport
import XCTest

/// The fleet recipes under `examples/` are read as their systems would read them (with haul's own YAML reader),
/// checked for the settings they rely on, and their commands are run as those systems would run them: once per
/// shard, with the variables each system sets, against a loopback server that counts requests.
final class RecipeTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private var files: [String: [UInt8]] = [:]

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        for index in 0..<24 {
            files["set\(index % 3)/asset-\(index).bin"] = (0..<(2000 + index * 53)).map {
                UInt8(truncatingIfNeeded: $0 ^ index)
            }
        }
        server = try LoopbackHTTPServer(files: Dictionary(uniqueKeysWithValues: files.map { ("/" + $0.key, $0.value) }))
    }

    override func tearDown() {
        server?.stop()
        server = nil
        directory = nil
    }

    private static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples").path

    private func recipe(_ path: String) throws -> YAMLValue {
        try YAMLValue.read(Self.examples + "/" + path)
    }

    /// The pinned manifest the recipes sync, with `root` as given.
    private func manifest(root: String) -> String {
        var lines = ["version: 1", "root: \(root)", "files:"]
        for (destination, bytes) in files.sorted(by: { $0.key < $1.key }) {
            lines.append(
                "  - { url: \(server.url("/" + destination)), dest: \(destination), "
                    + "sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// PATH with the built `haul` first, as an installed one would be.
    private var path: String {
        let haulFolder = (HaulProcess.executablePath as NSString).deletingLastPathComponent
        return haulFolder + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
    }

    /// Runs each shell script at once, each with its own variables and folder; fails the test for any nonzero exit.
    private func runAtOnce(
        _ jobs: [(script: String, environment: [String: String], folder: String)],
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let processes = try jobs.enumerated().map { index, job in
            try BackgroundProcess(
                "/bin/sh", ["-c", job.script], environment: job.environment.merging(["PATH": path]) { $1 },
                currentDirectory: job.folder, outputPath: directory.path("job-\(index)-\(UUID().uuidString).log"))
        }
        for (index, process) in processes.enumerated() {
            XCTAssertEqual(
                process.waitForExit(timeout: 60), 0, "job \(index): \(process.output)", file: file, line: line)
        }
    }

    private func assertHoldsEveryFile(_ roots: [String], file: StaticString = #filePath, line: UInt = #line) {
        for (destination, bytes) in files {
            let holders = roots.filter { directory.read("\($0)/\(destination)") == bytes }
            XCTAssertFalse(holders.isEmpty, "\(destination) synced somewhere", file: file, line: line)
        }
    }

    func testTheKubernetesIndexedJobsPodsSyncOneVolumeAtOnce() throws {
        let job = try recipe("kubernetes/job.yaml")
        XCTAssertEqual(job["kind"]?.text, "Job")
        XCTAssertEqual(job["spec"]?["completionMode"]?.text, "Indexed")
        let completions = try XCTUnwrap(job["spec"]?["completions"]?.text.flatMap { Int($0) })
        XCTAssertEqual(job["spec"]?["parallelism"]?.text, String(completions), "every shard at once")
        let container = try XCTUnwrap(job["spec"]?["template"]?["spec"]?["containers"]?.items.first)
        XCTAssertEqual(container["command"]?.items.compactMap(\.text), ["/bin/sh", "-c"])
        let script = try XCTUnwrap(container["args"]?.items.first?.text)
        XCTAssertTrue(script.contains("--shard \"$((JOB_COMPLETION_INDEX + 1))/\(completions)\""), script)
        let manifestMount = try XCTUnwrap(
            container["volumeMounts"]?.items.first { $0["name"]?.text == "manifest" }?["mountPath"]?.text)
        XCTAssertTrue(script.contains("\(manifestMount)/haul.yaml"), script)

        // The ConfigMap's file and the shared volume, in a folder of the test's.
        try directory.write("config/haul.yaml", manifest(root: directory.path("mirror/assets")))
        let podScript = script.replacingOccurrences(
            of: "\(manifestMount)/haul.yaml", with: directory.path("config/haul.yaml"))
        try runAtOnce(
            (0..<completions).map { index in
                (podScript, ["JOB_COMPLETION_INDEX": String(index)], directory.path)
            })
        XCTAssertEqual(server.requests.count, files.count, "each file fetched once, by one pod")
        assertHoldsEveryFile(["mirror/assets"])

        server.resetLog()
        let again = try directory.haul(["sync", "config/haul.yaml"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("Nothing to do: \(files.count) files up to date"), again.stdout)
        XCTAssertEqual(server.requests.count, 0)
    }

    /// `${{ matrix.shard }}`, the one expression the recipe gives the action.
    private func githubExpression(_ text: String, shard: String) -> String {
        text.replacingOccurrences(of: "${{ matrix.shard }}", with: shard)
    }

    /// The workflow's haul action step is what the action runs (`haul sync MANIFEST ARGS`, with the content cache in
    /// the runner's temporary folder; `ActionTests` runs the action itself): one job per shard, then again on fresh
    /// runners with each shard's cache restored.
    func testTheGitHubActionsMatrixSyncsEveryShardAndTheRestoredCachesServeTheRerun() throws {
        let workflow = try recipe("github-actions/assets.yml")
        let job = try XCTUnwrap(workflow["jobs"]?["sync"])
        let shards = try XCTUnwrap(job["strategy"]?["matrix"]?["shard"]?.items.compactMap(\.text))
        XCTAssertEqual(shards, (1...shards.count).map(String.init), "1-based, one job per shard")
        let steps = try XCTUnwrap(job["steps"]?.items)
        let action = try XCTUnwrap(steps.first { $0["uses"]?.text?.hasSuffix("/haul@v0.1.0") == true })
        let settings = try XCTUnwrap(action["with"])
        let arguments = try XCTUnwrap(settings["args"]?.text)
        XCTAssertTrue(arguments.contains("--shard ${{ matrix.shard }}/\(shards.count)"), arguments)
        XCTAssertEqual(settings["manifest"]?.text, "assets/haul.yaml")
        XCTAssertEqual(settings["cache-key"]?.text, "shard-${{ matrix.shard }}", "each shard keeps its own cache")
        XCTAssertNotNil(settings["version"]?.text, "a released version, not a build")

        // Each job on a runner of its own: its own workspace and temporary folder (where the action keeps the cache).
        func jobs(_ round: String) throws -> [(script: String, environment: [String: String], folder: String)] {
            try shards.map { shard in
                let workspace = directory.path("\(round)-runner-\(shard)")
                try directory.write("\(round)-runner-\(shard)/assets/haul.yaml", manifest(root: "."))
                return (
                    "haul sync assets/haul.yaml " + githubExpression(arguments, shard: shard),
                    ["HAUL_CACHE": workspace + "/temp/haul-cache"], workspace
                )
            }
        }
        try runAtOnce(try jobs("first"))
        XCTAssertEqual(server.requests.count, files.count, "each file fetched once, by one shard")
        assertHoldsEveryFile(shards.map { "first-runner-\($0)/assets" })

        // A re-run on fresh runners with each job's cache restored: files in place, every byte verified, no request.
        server.resetLog()
        for shard in shards {
            try copyTree(
                directory.path("first-runner-\(shard)/temp/haul-cache"),
                to: directory.path("second-runner-\(shard)/temp/haul-cache"))
        }
        try runAtOnce(try jobs("second"))
        XCTAssertEqual(server.requests.count, 0, "served from the restored caches")
        assertHoldsEveryFile(shards.map { "second-runner-\($0)/assets" })
    }

    /// The pipeline includes the haul component (`templates/haul.yml`; `ActionTests` runs its job) and extends its
    /// `.haul-sync` job, whose script is `haul sync MANIFEST ARGS` with the cache in the project folder.
    func testTheGitLabParallelJobsSyncEveryShardAndTheirCachesServeTheNextPipeline() throws {
        let pipeline = try recipe("gitlab-ci/.gitlab-ci.yml")
        let job = try XCTUnwrap(pipeline["sync-assets"])
        XCTAssertEqual(job["extends"]?.text, ".haul-sync")
        let total = try XCTUnwrap(job["parallel"]?.text.flatMap { Int($0) })
        let inputs = try XCTUnwrap(pipeline["include"]?.items.first?["inputs"])
        let arguments = try XCTUnwrap(inputs["args"]?.text)
        XCTAssertTrue(arguments.contains("--shard $CI_NODE_INDEX/$CI_NODE_TOTAL"), arguments)
        XCTAssertEqual(inputs["manifest"]?.text, "assets/haul.yaml")
        let script = ["haul sync assets/haul.yaml " + arguments]
        let cacheVariable = "$CI_PROJECT_DIR/.haul-cache"

        // GitLab numbers the jobs of `parallel: N` 1…N; each gets a project folder of its own.
        func jobs(_ round: String) throws -> [(script: String, environment: [String: String], folder: String)] {
            try (1...total).map { index in
                let project = directory.path("\(round)-job-\(index)")
                try directory.write("\(round)-job-\(index)/assets/haul.yaml", manifest(root: "."))
                let variables = [
                    "CI_NODE_INDEX": String(index), "CI_NODE_TOTAL": String(total), "CI_PROJECT_DIR": project,
                ]
                // Variables are expanded by the runner before the script sees them.
                let cache = cacheVariable.replacingOccurrences(of: "$CI_PROJECT_DIR", with: project)
                return (
                    "set -e\n" + script.joined(separator: "\n"), variables.merging(["HAUL_CACHE": cache]) { $1 },
                    project
                )
            }
        }
        try runAtOnce(try jobs("first"))
        XCTAssertEqual(server.requests.count, files.count)
        assertHoldsEveryFile((1...total).map { "first-job-\($0)/assets" })

        server.resetLog()
        for index in 1...total {
            try copyTree(
                directory.path("first-job-\(index)/.haul-cache"), to: directory.path("second-job-\(index)/.haul-cache"))
        }
        try runAtOnce(try jobs("second"))
        XCTAssertEqual(server.requests.count, 0, "served from the restored caches")
        assertHoldsEveryFile((1...total).map { "second-job-\($0)/assets" })
    }

    /// What a CI cache restore does: the same files in a fresh place.
    private func copyTree(_ source: String, to target: String) throws {
        try FileManager.default.createDirectory(
            atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        guard FileManager.default.fileExists(atPath: source) else { return }
        try FileManager.default.copyItem(atPath: source, toPath: target)
    }
}

/// A recipe as plain values: what CI systems and Kubernetes read from these files.
indirect enum YAMLValue {
    case scalar(String)
    case list([YAMLValue])
    case map([(key: String, value: YAMLValue)])

    var text: String? {
        if case .scalar(let text) = self { return text }
        return nil
    }

    var items: [YAMLValue] {
        if case .list(let items) = self { return items }
        return []
    }

    subscript(key: String) -> YAMLValue? {
        if case .map(let pairs) = self { return pairs.first { $0.key == key }?.value }
        return nil
    }

    private struct NoEntries: YAMLEntrySink {
        mutating func consume(items: [YAMLItem], in document: YAMLDocument) {}
    }

    static func read(_ path: String) throws -> YAMLValue {
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: path), path)
        var diagnostics = DiagnosticCollector(file: path)
        var sink = NoEntries()
        let document = YAMLReader.read(.bytes(Array(bytes)), diagnostics: &diagnostics, sink: &sink)
        XCTAssertEqual(diagnostics.errorCount, 0, "\(path) is valid YAML")
        let parsed = try XCTUnwrap(document, path)
        return value(try XCTUnwrap(parsed.root, path), in: parsed)
    }

    private static func value(_ id: YAMLDocument.NodeID, in document: YAMLDocument) -> YAMLValue {
        switch document.kind(of: id) {
        case .scalar, .alias: .scalar(document.text(of: id))
        case .sequence: .list(document.childIDs(of: id).map { value($0, in: document) })
        case .mapping: .map(document.pairs(of: id).map { (document.text(of: $0.key), value($0.value, in: document)) })
        }
    }
}
