import Foundation
import HaulDigest
import HaulTestSupport
import XCTest

/// Nothing lost silently: a source that served the wrong bytes is a warning in every output mode, even when a
/// mirror then serves the right ones; in `--json` it is a `warning` event on stdout, as are the run's other
/// warnings.
final class WarningsCommandTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let good: [UInt8] = Array("the right bytes\n".utf8)
    private var server: LoopbackHTTPServer!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
        let good = self.good
        server = try LoopbackHTTPServer { request in request.path == "/tampered" ? .ok("the wrong bytes\n") : .ok(good)
        }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/tampered"))
                mirrors: [\(server.url("/mirror"))]
                dest: a.txt
                sha256: \(StreamingHasher.digest(good, algorithm: .sha256).hex)
            """)
    }

    override func tearDown() {
        server.stop()
    }

    private func sync(_ arguments: [String]) throws -> ProcessResult {
        try? FileManager.default.removeItem(atPath: directory.path("out"))
        return try HaulProcess.run(["sync"] + arguments, currentDirectory: directory.path)
    }

    func testAChecksumMismatchIsAWarningInEveryHumanStyleEvenWhenTheMirrorSucceeds() throws {
        for style in ["plain", "bar", "none"] {
            let result = try sync(["--progress", style])
            XCTAssertEqual(result.exitCode, 0, result.stderr)
            XCTAssertEqual(directory.read("out/a.txt"), good)
            let warning =
                "warning: a.txt: \(server.url("/tampered")): checksum mismatch: expected \(sha256(good)), got "
            XCTAssertTrue(result.stderr.contains(warning), "\(style): \(result.stderr)")
        }
        XCTAssertEqual(try sync(["--quiet"]).stderr, "", "--quiet prints errors only")
    }

    func testAChecksumMismatchIsAJSONWarningEventOnStdout() throws {
        let result = try sync(["--json"])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let events = try result.stdout.split(separator: "\n").map {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let warnings = events.filter { $0["event"] as? String == "warning" }
        XCTAssertEqual(warnings.count, 1, result.stdout)
        XCTAssertEqual(warnings.first?["dest"] as? String, "a.txt")
        let message = try XCTUnwrap(warnings.first?["message"] as? String)
        XCTAssertTrue(
            message.hasPrefix("\(server.url("/tampered")): checksum mismatch: expected \(sha256(good)), got "), message)
        XCTAssertEqual(events.last?["event"] as? String, "summary")
    }

    /// The run's own warnings (an unreadable state cache here) are `warning` events too, with a null `dest`.
    func testTheRunsWarningsAreJSONEventsWithANullDest() throws {
        XCTAssertEqual(try sync([]).exitCode, 0)
        try directory.write("out/.haul/state", "not a state file\n")
        let result = try HaulProcess.run(["sync", "--json"], currentDirectory: directory.path)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let warnings = try result.stdout.split(separator: "\n").map {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }.filter { $0["event"] as? String == "warning" }
        XCTAssertEqual(warnings.count, 1, result.stdout)
        XCTAssertTrue(warnings.first?["dest"] is NSNull)
        XCTAssertNotNil(warnings.first?["message"] as? String)
    }
}
