import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// The config file's URL rewrites, end to end: the real binary against loopback servers that count what they get.
final class RewriteCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let bytes: [UInt8] = Array("the asset's bytes".utf8)
    private var sha256: String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    /// A manifest of one pinned entry at `url`, with `headers` under `defaults:`.
    private func manifest(url: String, headers: String? = nil, pinned: Bool = true, retries: Int = 3) throws {
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            \(headers.map { "defaults:\n  headers: \($0)" } ?? "")
            files:
              - url: \(url)
                dest: a.bin
                retries: \(retries)
                \(pinned ? "sha256: \(sha256)" : "")
            """)
    }

    /// A loopback server of `files`, stopped when the test ends.
    private func server(_ files: [String: [UInt8]]) throws -> LoopbackHTTPServer {
        try server(StaticFiles(files))
    }

    private func server(_ files: StaticFiles) throws -> LoopbackHTTPServer {
        let server = try LoopbackHTTPServer(files: files)
        addTeardownBlock { server.stop() }
        return server
    }

    private func config(_ text: String) throws {
        try directory.write("config.yaml", text)
    }

    private func haul(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try directory.haul(arguments + ["--config", "config.yaml"], environment: environment)
    }

    func testAMatchingRuleSendsTheRequestToTheRewrittenServerOnly() throws {
        let upstream = try server(["/pkg/a.bin": bytes])
        let cache = try server(["/upstream/pkg/a.bin": bytes])
        try manifest(url: upstream.url("/pkg/a.bin"))
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: \(cache.url("/upstream/"))
            """)
        let sync = try haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        XCTAssertEqual(upstream.requests.count, 0, "the original server is never asked")
        XCTAssertEqual(cache.requests.map(\.path), ["/upstream/pkg/a.bin"])
    }

    /// `haul add` downloads through the rewrite too, and pins the URL as the user gave it.
    func testAddDownloadsThroughTheRewriteAndPinsTheOriginalURL() throws {
        let upstream = try server([:])
        let cache = try server(["/upstream/pkg/a.bin": bytes])
        try config("rewrites:\n  - {prefix: '\(upstream.baseURL)/', to: '\(cache.url("/upstream/"))'}\n")
        let add = try haul(["add", upstream.url("/pkg/a.bin"), "--print"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertTrue(add.stdout.contains("url: \(upstream.url("/pkg/a.bin"))"), add.stdout)
        XCTAssertTrue(add.stdout.contains(sha256), add.stdout)
        XCTAssertEqual(upstream.requests.count, 0)
        XCTAssertEqual(cache.requests.map(\.path), ["/upstream/pkg/a.bin"])
    }

    func testARuleThatDoesNotMatchLeavesTheURLAlone() throws {
        let upstream = try server(["/pkg/a.bin": bytes])
        let cache = try server(["/upstream/pkg/a.bin": bytes])
        try manifest(url: upstream.url("/pkg/a.bin"))
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/other/
                to: \(cache.url("/upstream/"))
              - regex: '^https://127\\.0\\.0\\.1.*$'
                to: \(cache.url("/never"))
            """)
        let sync = try haul(["sync"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        XCTAssertEqual(upstream.requests.map(\.path), ["/pkg/a.bin"])
        XCTAssertEqual(cache.requests.count, 0)
    }

    /// The rewritten server is down: with `fallback: original` the file comes from the original URL, which gets
    /// the manifest's headers as always; without it, the entry fails and the original is not asked.
    func testFallbackOriginalFetchesFromTheOriginalWhenTheRewrittenServerIsDown() throws {
        let upstream = try server(["/pkg/a.bin": bytes])
        let down = try RefusingPort()
        // No retries: a refused connection is retried after a backoff, which only makes the test slower.
        try manifest(url: upstream.url("/pkg/a.bin"), headers: "{Authorization: \"Bearer ${TOKEN}\"}", retries: 0)
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: \(down.url("/"))
                fallback: original
            """)
        let sync = try haul(["sync", "--verbose"], environment: ["TOKEN": "s3cret"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        XCTAssertEqual(upstream.requests.map { $0.header("Authorization") }, ["Bearer s3cret"])
        XCTAssertTrue(
            sync.stdout.contains("fetched a.bin (17 B) from \(upstream.url("/pkg/a.bin")) over HTTP/1.1\n"), sync.stdout
        )

        try FileManager.default.removeItem(atPath: directory.path("out"))
        upstream.resetLog()
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: \(down.url("/"))
            """)
        let without = try haul(["sync"], environment: ["TOKEN": "s3cret"])
        XCTAssertEqual(without.exitCode, 1, without.stdout)
        XCTAssertEqual(upstream.requests.count, 0)
        XCTAssertTrue(without.stderr.contains(down.url("/pkg/a.bin")), without.stderr)
    }

    func testHeadersForTheUpstreamOriginReachTheRewrittenServerOnlyWhenForwarded() throws {
        let cache = try server(["/pkg/a.bin": bytes])
        try manifest(
            url: "https://upstream.invalid/pkg/a.bin", headers: "{Authorization: \"Bearer ${TOKEN}\", X-Team: blue}")
        try config(
            """
            rewrites:
              - prefix: https://upstream.invalid/
                to: \(cache.url("/"))
            """)
        let dropped = try haul(["sync"], environment: ["TOKEN": "s3cret"])
        XCTAssertEqual(dropped.exitCode, 0, dropped.stderr)
        XCTAssertEqual(cache.requests.count, 1)
        XCTAssertNil(cache.requests.first?.header("Authorization"), "the upstream's credentials stay with the upstream")
        XCTAssertNil(cache.requests.first?.header("X-Team"))

        try FileManager.default.removeItem(atPath: directory.path("out"))
        cache.resetLog()
        try config(
            """
            rewrites:
              - prefix: https://upstream.invalid/
                to: \(cache.url("/"))
                headers: forward
            """)
        let forwarded = try haul(["sync"], environment: ["TOKEN": "s3cret"])
        XCTAssertEqual(forwarded.exitCode, 0, forwarded.stderr)
        XCTAssertEqual(cache.requests.map { $0.header("Authorization") }, ["Bearer s3cret"])
        XCTAssertEqual(cache.requests.map { $0.header("X-Team") }, ["blue"])
    }

    /// An unpinned file fetched through a rewrite is revalidated at the rewritten server: the second sync sends its
    /// validators there, gets a 304, and downloads nothing.
    func testRevalidationGoesToTheRewrittenServer() throws {
        let files = StaticFiles(["/up/feed.json": bytes])
        let cache = try server(files)
        let upstream = try server(["/feed.json": bytes])
        try manifest(url: upstream.url("/feed.json"), pinned: false)
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: \(cache.url("/up/"))
                fallback: original
            """)
        XCTAssertEqual(try haul(["sync"]).exitCode, 0)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        cache.resetLog()
        let again = try haul(["sync", "--json"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertEqual(cache.requests.map { $0.header("If-None-Match") }, [files.etag("/up/feed.json")])
        XCTAssertEqual(upstream.requests.count, 0)
        XCTAssertTrue(again.stdout.contains("\"result\":\"not-modified\""), again.stdout)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
    }

    /// The file came from the fallback (a source the manifest's list does not have at that index): the state
    /// records the original as its source, and the next sync asks the original conditionally, not the cache.
    func testAFileTheFallbackDeliveredIsRevalidatedAtTheOriginal() throws {
        let files = StaticFiles(["/feed.json": bytes])
        let upstream = try server(files)
        let cache = try server([:])
        try manifest(url: upstream.url("/feed.json"), pinned: false)
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: \(cache.url("/up/"))
                fallback: original
            """)
        let first = try haul(["sync"])
        XCTAssertEqual(first.exitCode, 0, first.stderr)
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        cache.resetLog()
        upstream.resetLog()
        let again = try haul(["sync"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertEqual(cache.requests.map { $0.header("If-None-Match") }, [nil], "the cache never served this copy")
        XCTAssertEqual(upstream.requests.map { $0.header("If-None-Match") }, [files.etag("/feed.json")])
        XCTAssertTrue(again.stdout.contains("1 confirmed by their server"), again.stdout)
    }

    func testVerboseOutputShowsTheRewrittenURLAndWhereItCameFrom() throws {
        let upstream = try server([:])
        let cache = try server(["/up/pkg/a.bin": bytes])
        try manifest(url: upstream.url("/pkg/a.bin"))
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: \(cache.url("/up/"))
                fallback: original
            """)
        let rewritten = "\(cache.url("/up/pkg/a.bin")) (rewritten from \(upstream.url("/pkg/a.bin")))"
        let plan = try haul(["plan", "--verbose"])
        XCTAssertEqual(plan.exitCode, 2, plan.stderr)
        XCTAssertTrue(
            plan.stdout.contains(
                "+ a.bin (missing)\n    ← \(rewritten)\n    ← \(upstream.url("/pkg/a.bin")) "
                    + "(the original, tried last)\n"), plan.stdout)
        let quiet = try haul(["plan"])
        XCTAssertFalse(quiet.stdout.contains("←"), "without --verbose the plan is as it was")
        XCTAssertEqual(cache.requests.count + upstream.requests.count, 0, "plan fetches nothing")

        let sync = try haul(["sync", "--verbose", "--progress", "none"])
        XCTAssertEqual(sync.exitCode, 0, sync.stderr)
        XCTAssertTrue(sync.stdout.contains("fetch a.bin ← \(rewritten)\n"), sync.stdout)
        XCTAssertTrue(sync.stdout.contains("fetched a.bin (17 B) from \(rewritten) over HTTP/1.1\n"), sync.stdout)

        try FileManager.default.removeItem(atPath: directory.path("out"))
        let json = try haul(["sync", "--json"])
        XCTAssertEqual(json.exitCode, 0, json.stderr)
        let from = "\"url\":\"\(cache.url("/up/pkg/a.bin"))\""
        XCTAssertTrue(
            json.stdout.contains(
                "{\"event\":\"start\",\"dest\":\"a.bin\",\(from),"
                    + "\"rewritten_from\":\"\(upstream.url("/pkg/a.bin"))\"}"), json.stdout)
        XCTAssertTrue(
            json.stdout.contains("\"rewritten_from\":\"\(upstream.url("/pkg/a.bin"))\"}\n{\"event\":\"summary\""),
            "the done event says it too: \(json.stdout)")
    }

    /// A token from the environment in the manifest's URL reaches the rewritten server, and no output: not the
    /// plan, not the verbose lines, not the JSON events, not an error naming the URL.
    func testATokenInAnExpandedURLNeverAppearsInOutput() throws {
        let cache = try server(["/gh/s3cr3t-t0ken/a.bin": bytes])
        try manifest(url: "https://upstream.invalid/${TOKEN}/a.bin")
        try config(
            """
            rewrites:
              - regex: '^https://upstream\\.invalid/(.*)$'
                to: '\(cache.url("/gh/$1"))'
            """)
        let environment = ["TOKEN": "s3cr3t-t0ken"]
        var outputs: [ProcessResult] = [try haul(["plan", "--verbose"], environment: environment)]
        outputs.append(try haul(["sync", "--verbose", "--progress", "plain"], environment: environment))
        XCTAssertEqual(outputs[1].exitCode, 0, outputs[1].stderr)
        XCTAssertEqual(cache.requests.map(\.path), ["/gh/s3cr3t-t0ken/a.bin"])
        XCTAssertEqual(directory.read("out/a.bin"), bytes)
        XCTAssertTrue(
            outputs[1].stdout.contains(
                "from \(cache.url("/gh/***/a.bin")) (rewritten from "
                    + "https://upstream.invalid/${TOKEN}/a.bin)"), outputs[1].stdout)
        // A failing fetch names its URL in the error, the JSON events name it too.
        try FileManager.default.removeItem(atPath: directory.path("out"))
        outputs.append(try haul(["sync", "--verbose"], environment: ["TOKEN": "wr0ng-t0ken"]))
        outputs.append(try haul(["sync", "--json"], environment: ["TOKEN": "wr0ng-t0ken"]))
        XCTAssertEqual(outputs[2].exitCode, 1)
        XCTAssertTrue(outputs[2].stderr.contains(cache.url("/gh/***/a.bin")), outputs[2].stderr)
        for output in outputs {
            for secret in ["s3cr3t-t0ken", "wr0ng-t0ken"] {
                XCTAssertFalse(output.stdout.contains(secret), output.stdout)
                XCTAssertFalse(output.stderr.contains(secret), output.stderr)
            }
        }
    }

    func testABadConfigExitsWith64NamingFileLineAndColumnAndTouchesNothing() throws {
        let upstream = try server(["/pkg/a.bin": bytes])
        try manifest(url: upstream.url("/pkg/a.bin"))
        try config(
            """
            rewrites:
              - prefix: \(upstream.baseURL)/
                to: https://cache.invalid/
              - regex: '^https://(unclosed'
                to: https://cache.invalid/
            """)
        for command in ["sync", "plan", "verify"] {
            let run = try haul([command])
            XCTAssertEqual(run.exitCode, 64, "\(command): \(run.stdout)\(run.stderr)")
            XCTAssertTrue(
                run.stderr.hasPrefix("config.yaml:4:12: error: rewrites[1].regex: invalid regular expression"),
                run.stderr)
        }
        XCTAssertFalse(directory.exists("out"), "nothing is touched")
        XCTAssertEqual(upstream.requests.count, 0)

        let missing = try directory.haul(["sync", "--config", "nowhere.yaml"])
        XCTAssertEqual(missing.exitCode, 64)
        XCTAssertTrue(missing.stderr.contains("nowhere.yaml: error: cannot read the config file"), missing.stderr)
        let named = try directory.haul(["sync"], environment: ["HAUL_CONFIG": directory.path("nowhere.yaml")])
        XCTAssertEqual(named.exitCode, 64, "HAUL_CONFIG names a file the user wants read")
        XCTAssertFalse(directory.exists("out"))
    }

    /// Without --config or HAUL_CONFIG, `$XDG_CONFIG_HOME/haul/config.yaml` is read when it exists, and its
    /// absence is no error.
    func testTheDefaultConfigIsReadWhenItExists() throws {
        let upstream = try server(["/pkg/a.bin": bytes])
        let cache = try server(["/pkg/a.bin": bytes])
        try manifest(url: upstream.url("/pkg/a.bin"))
        let environment = ["XDG_CONFIG_HOME": directory.path("xdg")]
        let none = try directory.haul(["sync"], environment: environment)
        XCTAssertEqual(none.exitCode, 0, none.stderr)
        XCTAssertEqual(upstream.requests.count, 1)

        try FileManager.default.removeItem(atPath: directory.path("out"))
        try directory.write(
            "xdg/haul/config.yaml", "rewrites:\n  - {prefix: '\(upstream.baseURL)/', to: '\(cache.baseURL)/'}\n")
        let some = try directory.haul(["sync"], environment: environment)
        XCTAssertEqual(some.exitCode, 0, some.stderr)
        XCTAssertEqual(upstream.requests.count, 1)
        XCTAssertEqual(cache.requests.count, 1)
    }
}
