import Foundation
import HaulDigest
import HaulEngine
import HaulManifest
import HaulTestSupport
import XCTest

/// Values from the environment and URL passwords never appear in any output: human, verbose, plain progress,
/// JSON, plan, dry run, verify, errors — nor in any way of printing the values that carry them.
final class SecretsTests: XCTestCase {
    private let token = "s3cr3t-T0KEN-value"
    private let password = "pa55-w0rd-value"

    func testNoOutputOfAnyCommandContainsASecret() throws {
        let directory = try TemporaryDirectory()
        let body: [UInt8] = Array("payload\n".utf8)
        let server = try LoopbackHTTPServer { request in
            request.path.hasPrefix("/ok/") ? .ok(body) : .notFound
        }
        defer { server.stop() }
        let base = server.url("")
        let digest = StreamingHasher.digest(body, algorithm: .sha256).hex
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            defaults:
              headers: {Authorization: "Bearer ${TOKEN}"}
            files:
              - url: "${BASE}/ok/${TOKEN}/a.bin"
                dest: a.bin
                sha256: \(digest)
              - url: "${BASE}/missing/${TOKEN}"
                mirrors: ["http://user:\(password)@127.0.0.1:\(server.port)/missing/mirror"]
                dest: b.bin
                sha256: \(digest)
              - url: "${BASE}/ok/${TOKEN}/unpinned"
                dest: c.bin
            """)
        let environment = ["TOKEN": token, "BASE": base]
        var outputs: [(String, ProcessResult)] = []
        for arguments in [
            ["plan"], ["sync", "--dry-run"], ["sync", "--verbose", "--progress", "plain"], ["sync", "--json"],
            ["sync", "--verbose"], ["verify"], ["verify", "--json"], ["plan", "--json"],
            ["sync", "--require-checksums"],
        ] {
            outputs.append(
                (
                    arguments.joined(separator: " "),
                    try HaulProcess.run(arguments, environment: environment, currentDirectory: directory.path)
                ))
        }
        XCTAssertTrue(
            server.requests.contains { $0.header("Authorization") == "Bearer \(token)" }, "the secret was used")
        let failing = try XCTUnwrap(outputs.first { $0.0 == "sync --verbose" }?.1)
        XCTAssertEqual(failing.exitCode, 1)
        XCTAssertTrue(failing.stderr.contains("${BASE}/missing/${TOKEN}: HTTP 404"), failing.stderr)
        XCTAssertTrue(failing.stderr.contains("http://***@127.0.0.1:\(server.port)/missing/mirror"), failing.stderr)
        for (command, result) in outputs {
            for secret in [token, password] {
                XCTAssertFalse(result.stdout.contains(secret), "\(command) stdout: \(result.stdout)")
                XCTAssertFalse(result.stderr.contains(secret), "\(command) stderr: \(result.stderr)")
            }
        }
        let state = String(decoding: directory.read("out/.haul/state") ?? [], as: UTF8.self)
        XCTAssertFalse(state.contains(token) || state.contains(password) || state.contains(base), state)
    }

    func testNoWayOfPrintingAManifestValueOrATransferSourceRevealsTheSecret() throws {
        let url = TemplatedString(
            template: "https://h/${TOKEN}", expanded: "https://h/\(token)", environmentValues: [token])
        let entry = FileEntry(
            index: 0, url: url, mirrors: [], destination: try XCTUnwrap(DestinationPath("a")), checksum: nil,
            size: nil, mode: FileMode(0o644), retries: 0, timeout: Seconds(1),
            headers: [HeaderField(name: "X-Key", value: url)], location: SourceLocation(line: 1, column: 1))
        let source = TransferSource(
            url: url.expanded, displayURL: url.description,
            headers: [HTTPHeader(name: "X-Key", value: token)], secrets: [token])
        var dumped = ""
        dump(entry, to: &dumped)
        dump(source, to: &dumped)
        for text in [
            "\(entry)", String(reflecting: entry), "\(url)", String(reflecting: url), "\(source)",
            String(reflecting: source), "\(source.headers)", dumped,
        ] {
            XCTAssertFalse(text.contains(token), text)
        }
        XCTAssertTrue("\(entry)".contains("https://h/${TOKEN}"))
    }
}
