import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A sync of a large manifest starts downloading while the manifest is still being read (`HeadStart`), and stays as
/// safe as one that waits: an invalid manifest still touches nothing, a present tree is not downloaded again, a
/// guess it could not make right (headers from a `defaults:` written after the entries) costs nothing but a few
/// refused requests, and its private folder is gone when the run ends.
///
/// The manifests are just over 1 MiB (where the head start begins) with few distinct files, so that reading them
/// takes far longer than downloading those files.
final class HeadStartTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var server: LoopbackHTTPServer!
    private static let entries = 8_000
    private static let distinct = 24
    private let bodies = (0..<HeadStartTests.distinct).map { index in
        (0..<(300 + index)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
    }
    private static let token = "early-token-8d1f"

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        try directory.makeDirectory("tmp")
        let files = StaticFiles(Dictionary(uniqueKeysWithValues: bodies.indices.map { ("/f/\($0)", bodies[$0]) }))
        server = try LoopbackHTTPServer(handler: { request in
            // Only the token opens the `/private/` copies: the head start cannot know it when it comes after `files:`.
            guard request.path.hasPrefix("/private/") else { return files.respond(to: request) }
            guard request.header("X-Token") == Self.token else { return .status(401) }
            return files.respond(
                to: RecordedRequest(
                    method: request.method, target: String(request.target.dropFirst("/private".count)),
                    headers: request.headers))
        })
    }

    override func tearDown() {
        server.stop()
        directory = nil
    }

    private func destination(_ index: Int) -> String { "d\(index % 50)/f\(index)" }

    /// `entries` entries over `distinct` files; `broken`: the last entry's `sha256` is not a digest.
    private func manifest(
        prefix: String = "/f/", root: String = "root: out\n", tail: String = "", broken: Bool = false
    ) -> String {
        var text = "version: 1\n\(root)files:\n"
        for index in 0..<Self.entries {
            let body = index % Self.distinct
            let digest =
                broken && index == Self.entries - 1
                ? "not-a-digest" : StreamingHasher.digest(bodies[body], algorithm: .sha256).hex
            text +=
                "  - {url: \"\(server.baseURL)\(prefix)\(body)\", dest: \(destination(index)), sha256: \(digest), size: \(bodies[body].count)}\n"
        }
        return text + tail
    }

    private func haul(_ arguments: [String]) throws -> ProcessResult {
        try directory.haul(arguments, environment: ["TMPDIR": directory.path + "/tmp"])
    }

    private func assertTreeIsComplete(file: StaticString = #filePath, line: UInt = #line) {
        for index in stride(from: 0, to: Self.entries, by: 97) + [Self.entries - 1] {
            XCTAssertEqual(
                directory.read("out/\(destination(index))"), bodies[index % Self.distinct], destination(index),
                file: file, line: line)
        }
    }

    func testAnInvalidManifestTouchesNothingThoughRequestsLeftBeforeItWasRead() throws {
        let text = manifest(broken: true)
        XCTAssertGreaterThanOrEqual(text.utf8.count, 1 << 20, "large enough for a head start")
        try directory.write("haul.yaml", text)
        let result = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(result.exitCode, 3, result.stderr)
        XCTAssertTrue(result.stderr.contains("files[\(Self.entries - 1)]"), result.stderr)
        // The head start did send requests, so this is the case it could have got wrong...
        XCTAssertFalse(server.requests.isEmpty)
        // ...and yet nothing is in the root, and its private folder is gone.
        XCTAssertFalse(directory.exists("out"))
        XCTAssertEqual(directory.list("tmp"), [])
    }

    func testWhatItDownloadedIsPutInPlaceAndNotDownloadedAgain() throws {
        try directory.write("haul.yaml", manifest())
        let result = try haul(["sync", "haul.yaml", "--json"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        assertTreeIsComplete()
        // Each distinct file was asked for once, by the head start (its first round holds all of them, and takes
        // a fraction of the time the rest of the manifest takes to read); the sync proper placed its copies.
        let paths = server.requests.map(\.path)
        XCTAssertEqual(paths.sorted(), (0..<Self.distinct).map { "/f/\($0)" }.sorted())
        // Reported as the downloads they were, not as cache hits.
        let done = result.stdout.split(separator: "\n").filter { $0.contains("\"event\":\"done\"") }
        XCTAssertEqual(done.count, Self.entries)
        XCTAssertEqual(
            done.filter { $0.contains("\"result\":\"fetched\"") }.count, Self.entries, String(done.first ?? ""))
        XCTAssertEqual(done.filter { $0.contains("\"url\":\"\(server.baseURL)/f/") }.count, Self.entries)
        XCTAssertEqual(directory.list("tmp"), [])
    }

    func testAPresentTreeIsNotDownloadedAgainWhileItsManifestIsRead() throws {
        try directory.write("haul.yaml", manifest())
        XCTAssertEqual(try haul(["sync", "haul.yaml", "--progress", "none"]).exitCode, 0)
        server.resetLog()
        // Without its state, the next sync must look at every file: the head start must not fetch them meanwhile.
        try FileManager.default.removeItem(atPath: directory.path + "/out/.haul")
        try directory.write("haul.yaml", manifest() + "# edited\n")
        let result = try haul(["sync", "haul.yaml", "--progress", "none"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(server.requests.map(\.path), [])
        assertTreeIsComplete()
    }

    func testHeadersItCouldNotKnowCostOnlyTheRequestsAlreadyMade() throws {
        let tail = "defaults:\n  headers: {X-Token: \"${EARLY_TOKEN}\"}\n"
        try directory.write("haul.yaml", manifest(prefix: "/private/f/", tail: tail))
        let result = try directory.haul(
            ["sync", "haul.yaml", "--progress", "none", "--jobs", "2"],
            environment: ["TMPDIR": directory.path + "/tmp", "EARLY_TOKEN": Self.token])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        assertTreeIsComplete()
        // The head start stopped at its first refusal: at most one request per transfer slot went without the token.
        let refused = server.requests.filter { $0.header("X-Token") == nil }
        XCTAssertFalse(refused.isEmpty)
        XCTAssertLessThanOrEqual(refused.count, 2)
        XCTAssertEqual(server.requests.filter { $0.header("X-Token") == Self.token }.count, Self.distinct)
        XCTAssertFalse(result.stdout.contains(Self.token) || result.stderr.contains(Self.token))
        XCTAssertEqual(directory.list("tmp"), [])
    }
}
