import Glibc
@testable import Haul
import HaulManifest
import HaulPlanner
import HaulTestSupport
import Synchronization
import XCTest

/// Freshness end to end, through the state: a real loopback server grants `max-age`, and a clock the test
/// moves (no sleeping) decides when the next sync asks again.
final class FreshnessSyncTests: XCTestCase {
    /// Seconds since the epoch, as the syncs see them.
    private final class Clock: Sendable {
        let now = Mutex<Double>(1_800_000_000)
    }

    private let clock = Clock()

    private func advance(_ seconds: Double) { clock.now.withLock { $0 += seconds } }

    private func manifest(url: String, root: String, refresh: Double? = nil) throws -> Manifest {
        var entry = FileEntry(
            index: 0, url: TemplatedString(literal: url), mirrors: [],
            destination: try XCTUnwrap(DestinationPath("feed.json")), checksum: nil, size: nil,
            mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: [],
            location: SourceLocation(line: 4, column: 5))
        entry.refresh = refresh.map(Seconds.init)
        return Manifest(
            sourcePath: root + "/haul.yaml", version: 1, root: root, prune: false, files: [entry], warnings: [])
    }

    /// One sync as `haul sync` runs it: observe under the lock, plan, apply. The plan's action for the entry.
    @discardableResult
    private func sync(_ manifest: Manifest, refresh: Bool = false) throws -> (Action, SyncResult) {
        var options = SyncOptions()
        options.revalidatesFreshFiles = refresh
        options.wallClock = { [clock] in clock.now.withLock { $0 } }
        let sync = Sync(manifest: manifest, options: options)
        let observation = try sync.observe(.exclusive(wait: .no, holder: "FreshnessSyncTests"))
        let plan = sync.plan(observation)
        let result = sync.apply(plan, observed: observation, observer: nil)
        return (plan.actions[0], result)
    }

    func testMaxAgeSkipsTheRequestWhileFreshAndTheAnswerAfterGrantsItAgain() throws {
        let server = try LoopbackHTTPServer(files: StaticFiles(["/feed.json": Array("{\"v\":1}".utf8)]), maxAge: 600)
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let manifest = try manifest(url: server.url("/feed.json"), root: directory.path)

        XCTAssertEqual(try sync(manifest).0, .fetch(.missing))
        XCTAssertEqual(server.requests.count, 1)

        advance(599)
        XCTAssertEqual(try sync(manifest).0, .fresh(for: 1))
        XCTAssertEqual(server.requests.count, 1, "no request while the server's max-age lasts")

        advance(1)
        let (action, result) = try sync(manifest)
        XCTAssertEqual(action, .revalidate)
        XCTAssertEqual(server.requests.count, 2)
        XCTAssertNotNil(server.requests.last?.header("If-None-Match"), "asked conditionally")
        guard case .notModified(let freshFor) = result.outcomes[0] else { return XCTFail("\(result.outcomes[0])") }
        XCTAssertEqual(freshFor, 600)

        advance(300)
        XCTAssertEqual(try sync(manifest).0, .fresh(for: 300), "the 304's max-age counts from the 304")
        XCTAssertEqual(try sync(manifest, refresh: true).0, .revalidate, "--refresh asks anyway")
        XCTAssertEqual(server.requests.count, 3)
    }

    func testTheEntrysRefreshIntervalAppliesWithoutAnyWordFromTheServer() throws {
        let server = try LoopbackHTTPServer(files: ["/feed.json": Array("{\"v\":1}".utf8)])
        defer { server.stop() }
        let directory = try TemporaryDirectory()
        let manifest = try manifest(url: server.url("/feed.json"), root: directory.path, refresh: 600)

        try sync(manifest)
        advance(10)
        XCTAssertEqual(try sync(manifest).0, .fresh(for: 590))
        advance(590)
        XCTAssertEqual(try sync(manifest).0, .revalidate)
        XCTAssertEqual(server.requests.count, 2)

        // Without `refresh` and without max-age, every sync asks.
        let plain = try self.manifest(url: server.url("/feed.json"), root: directory.path)
        XCTAssertEqual(try sync(plain).0, .revalidate)
    }
}
