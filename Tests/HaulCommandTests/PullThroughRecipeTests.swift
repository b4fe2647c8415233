import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// `examples/pull-through/` works as its README says: a real nginx configured from the recipe's `nginx.conf`
/// in front of a loopback origin, and haul pointed at it by the recipe's `haul-config.yaml`. The first sync fills
/// nginx's cache (one origin request per file), a second sync into a fresh root is served from that cache alone.
final class PullThroughRecipeTests: XCTestCase {
    private static let recipe: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path + "/examples/pull-through"
    }()

    /// The example addresses `haul-config.yaml` is written with, replaced by this test's servers.
    private static let exampleUpstream = "https://downloads.example.com/"
    private static let exampleMirror = "http://127.0.0.1:8080/"

    /// The recipe's template with its `${NAME}` placeholders filled in, as its header's `envsubst` line does;
    /// nginx's own `$variables` are left alone.
    private static func fill(_ template: String, _ values: [String: String]) throws -> String {
        var text = template
        for (name, value) in values {
            XCTAssertTrue(text.contains("${\(name)}"), "the recipe's nginx.conf no longer has ${\(name)}")
            text = text.replacingOccurrences(of: "${\(name)}", with: value)
        }
        let unfilled = text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("${") }
        guard unfilled.isEmpty else {
            throw NginxServerError.startFailed("placeholders left in nginx.conf: \(unfilled)")
        }
        return text
    }

    func testTheMirrorFetchesOnceThenServesFromItsCache() throws {
        var random = SplitMix(seed: 7)
        let files: [String: [UInt8]] = [
            "/releases/tool-1.0.tar.gz": (0..<300_000).map { _ in UInt8(truncatingIfNeeded: random.next()) },
            "/releases/data.bin": (0..<65_536).map { _ in UInt8(truncatingIfNeeded: random.next()) },
        ]
        let origin = try LoopbackHTTPServer(files: files)
        defer { origin.stop() }

        let template = try String(contentsOfFile: Self.recipe + "/nginx.conf", encoding: .utf8)
        let nginx = try ConfiguredNginx { port, folder in
            try Self.fill(template, ["UPSTREAM": origin.baseURL, "LISTEN": "127.0.0.1:\(port)", "STATE_DIR": folder])
        }
        defer { nginx.stop() }

        let directory = try TemporaryDirectory()
        let recipeConfig = try String(contentsOfFile: Self.recipe + "/haul-config.yaml", encoding: .utf8)
        XCTAssertTrue(
            recipeConfig.contains(Self.exampleUpstream) && recipeConfig.contains(Self.exampleMirror), recipeConfig)
        try directory.write(
            "haul-config.yaml",
            recipeConfig
                .replacingOccurrences(of: Self.exampleUpstream, with: origin.baseURL + "/")
                .replacingOccurrences(of: Self.exampleMirror, with: nginx.baseURL + "/"))
        let manifest = """
            version: 1
            root: out
            files:
            \(files.keys.sorted().map { path in """
              - url: \(origin.url(path))
                dest: \(path.split(separator: "/").last ?? "")
                sha256: \(StreamingHasher.digest(files[path] ?? [], algorithm: .sha256).hex)
                retries: 0
            """ }.joined(separator: "\n"))
            """
        try directory.write("first/haul.yaml", manifest)
        try directory.write("second/haul.yaml", manifest)
        func sync(_ root: String) throws -> ProcessResult {
            try directory.haul([
                "sync", "\(root)/haul.yaml", "--config", "haul-config.yaml", "--verbose", "--progress", "none",
            ])
        }
        func cacheStatuses(_ lines: [String]) -> [String] {
            lines.map { $0.components(separatedBy: "cache=").last ?? "" }
        }

        // First run: through nginx, which asks the origin once per file and keeps the answers.
        let first = try sync("first")
        XCTAssertEqual(
            first.exitCode, 0, first.stdout + first.stderr + nginx.lines(of: "error.log").joined(separator: "\n"))
        for (path, bytes) in files {
            let name = String(path.split(separator: "/").last ?? "")
            XCTAssertEqual(directory.read("first/out/\(name)"), bytes, name)
            XCTAssertEqual(origin.requests(path: path).count, 1, "\(path): the origin is asked once, by nginx")
            XCTAssertTrue(
                first.stdout.contains("fetched \(name) ")
                    && first.stdout.contains(
                        "from \(nginx.baseURL)\(path) "
                            + "(rewritten from \(origin.url(path)))"),
                first.stdout)
        }
        let afterFirst = nginx.lines(of: "access.log", atLeast: 2)
        XCTAssertEqual(cacheStatuses(afterFirst), ["MISS", "MISS"], afterFirst.joined(separator: "\n"))

        // Second run, into a fresh root: every byte from nginx's cache, nothing asked of the origin.
        let originRequests = origin.requests.count
        let second = try sync("second")
        XCTAssertEqual(second.exitCode, 0, second.stdout + second.stderr)
        XCTAssertEqual(origin.requests.count, originRequests, "the second run never reaches the origin")
        let afterSecond = nginx.lines(of: "access.log", atLeast: 4)
        XCTAssertEqual(
            cacheStatuses(Array(afterSecond.dropFirst(afterFirst.count))), ["HIT", "HIT"],
            afterSecond.joined(separator: "\n"))
        for (path, bytes) in files {
            let name = String(path.split(separator: "/").last ?? "")
            XCTAssertEqual(directory.read("second/out/\(name)"), bytes, "\(name): the cached bytes are the origin's")
        }
        // Pinned: haul verified each file's sha256 as it arrived; verify hashes them again from disk.
        let verify = try directory.haul(["verify", "second/haul.yaml"])
        XCTAssertEqual(verify.exitCode, 0, verify.stdout + verify.stderr)
    }
}
