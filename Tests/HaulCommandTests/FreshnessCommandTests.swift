import HaulTestSupport
import XCTest

/// What a user of `plan` and `sync` sees of freshness: "fresh for …" instead of a revalidation, no request while
/// it lasts, and `--refresh` asking anyway. (When it ends is tested with a moved clock in FreshnessSyncTests.)
final class FreshnessCommandTests: XCTestCase {
    func testPlanSaysFreshForAndSyncMakesNoRequestUntilRefreshIsAsked() throws {
        let directory = try TemporaryDirectory()
        let files = StaticFiles(["/feed.json": Array("{\"v\":1}".utf8), "/other.json": Array("{}".utf8)])
        let server = try LoopbackHTTPServer { request in
            var response = files.respond(to: request)
            if request.path == "/feed.json" { response.setHeader("Cache-Control", "public, max-age=3600") }
            return response
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            files:
              - url: \(server.url("/feed.json"))
                dest: feed.json
              - url: \(server.url("/other.json"))
                dest: other.json
                refresh: 10m
            """)
        XCTAssertEqual(try directory.haul(["sync"]).exitCode, 0)
        XCTAssertEqual(server.requests.count, 2)

        let plan = try directory.haul(["plan"])
        XCTAssertEqual(plan.exitCode, 0, "nothing may change while both are fresh:\n\(plan.stdout)")
        XCTAssertTrue(
            plan.stdout.contains("= feed.json (unpinned; fresh for 1h00m, no request; --refresh asks now)")
                || plan.stdout.contains("= feed.json (unpinned; fresh for 59m"), plan.stdout)
        XCTAssertTrue(
            plan.stdout.contains("= other.json (unpinned; fresh for 10m00s")
                || plan.stdout.contains("= other.json (unpinned; fresh for 9m5"),
            plan.stdout)

        let again = try directory.haul(["sync"])
        XCTAssertEqual(again.exitCode, 0, again.stderr)
        XCTAssertEqual(server.requests.count, 2, "no request while fresh")

        let refreshed = try directory.haul(["plan", "--refresh"])
        XCTAssertEqual(refreshed.exitCode, 2, refreshed.stdout)
        XCTAssertTrue(refreshed.stdout.contains("↻ feed.json"), refreshed.stdout)
        XCTAssertEqual(try directory.haul(["sync", "--refresh"]).exitCode, 0)
        XCTAssertEqual(server.requests.count, 4)
        XCTAssertEqual(
            server.requests.suffix(2).compactMap { $0.header("If-None-Match") }.count, 2, "asked conditionally")
    }
}
