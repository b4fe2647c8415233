import Glibc
import HaulDigest
import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// A server's answer is believed only when it is consistent (RFC 9112 6.3): conflicting or malformed lengths,
/// statuses outside 100-599 and oversized header blocks are protocol errors that never become a file and are not
/// retried on that URL; the next mirror is tried at once.
final class ProtocolConsistencyTests: XCTestCase {
    private var temporary: TemporaryDirectory!

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    private func engine(maxBodyBytes: Int64 = EngineConfiguration.defaultMaxBodyBytes) -> TransferEngine {
        TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: heldOpen(temporary.path),
                retryPolicy: RetryPolicy(baseDelay: 0.001, jitter: 0),
                maxBodyBytes: maxBodyBytes))
    }

    private func fetch(_ urls: [String], pinned: [UInt8]? = nil, retries: Int = 2) -> Recorder {
        let recorder = Recorder()
        engine().run(
            [
                TransferRequest(
                    id: 0, sources: urls.map { TransferSource(url: $0, displayURL: $0) },
                    expectedDigest: pinned.map { StreamingHasher.digest($0, algorithm: .sha256) },
                    expectedSize: nil, retries: retries, stallTimeout: 5)
            ], delegate: recorder)
        return recorder
    }

    private func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { [UInt8]($0) } }

    /// `/odd` answers with `head` (raw), `/good` with the right bytes.
    private func server(odd head: ServerResponse) throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer { request in request.path == "/odd" ? head : .ok(Array("the right bytes".utf8)) }
    }

    private func assertProtocolErrorThenMirror(
        _ head: ServerResponse, is expected: (ProtocolViolation) -> Bool,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let server = try server(odd: head)
        defer { server.stop() }
        let recorder = fetch([server.url("/odd"), server.url("/good")])
        let result = try XCTUnwrap(
            try recorder.results[0]?.get(), "\(recorder.attemptFailures)", file: file, line: line)
        XCTAssertEqual(result.sourceDisplayURL, server.url("/good"), file: file, line: line)
        XCTAssertEqual(contents(result.temporaryPath), Array("the right bytes".utf8), file: file, line: line)
        XCTAssertEqual(
            server.requests.map(\.path), ["/odd", "/good"], "not retried on that URL", file: file, line: line)
        guard case .protocolViolation(let what) = recorder.attemptFailures.first?.failure.reason else {
            return XCTFail("a protocol error: \(recorder.attemptFailures)", file: file, line: line)
        }
        XCTAssertTrue(expected(what), "\(what)", file: file, line: line)
        XCTAssertNil(recorder.attemptFailures.first?.retryIn, "the mirror is tried at once", file: file, line: line)
    }

    func testTwoContentLengthsThatDisagreeFailTheAttemptAndNeverBecomeAFile() throws {
        // libcurl believes the last one: an unpinned file of 3 bytes, had haul not checked.
        let server = try server(
            odd: .raw("HTTP/1.1 200 OK", ["Content-Length: 5", "Content-Length: 3"], body: Array("hello".utf8)))
        defer { server.stop() }
        let recorder = fetch([server.url("/odd")])
        guard case .failure(let failure) = recorder.results[0] else {
            return XCTFail("\(String(describing: recorder.results[0]))")
        }
        XCTAssertEqual(
            failure.attempts.map(\.reason), [.protocolViolation(.conflictingContentLength(5, 3))])
        XCTAssertEqual(server.requests.count, 1, "a protocol error is not retried on that URL")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: temporary.path), [], "no file is left")
    }

    /// libcurl refuses some malformed lengths itself, before haul sees the header: its message names the field.
    private func saysContentLength(_ violation: ProtocolViolation) -> Bool {
        if case .unreadableAnswer(let message) = violation { message.contains("Content-Length") } else { false }
    }

    func testConflictingMalformedAndOutOfRangeLengthsGoToTheMirrorAtOnce() throws {
        let hello = Array("hello".utf8)
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 200 OK", ["Content-Length: 5", "Content-Length: 3"], body: hello),
            is: { $0 == .conflictingContentLength(5, 3) })
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 200 OK", ["Content-Length: 5, 3"], body: hello),
            is: { $0 == .conflictingContentLength(5, 3) })
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 200 OK", ["Content-Length: 99999999999999999999"], body: hello),
            is: { $0 == .contentLengthTooLarge("99999999999999999999") })
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 200 OK", ["Content-Length: abc"], body: hello),
            is: { $0 == .malformedContentLength("abc") || saysContentLength($0) })
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 200 OK", ["Content-Length: -5"], body: hello),
            is: { $0 == .malformedContentLength("-5") || saysContentLength($0) })
    }

    func testIdenticalDuplicateLengthsAreAccepted() throws {
        let server = try server(
            odd: .raw("HTTP/1.1 200 OK", ["Content-Length: 5", "Content-Length: 5, 5"], body: Array("hello".utf8)))
        defer { server.stop() }
        let recorder = fetch([server.url("/odd")], pinned: Array("hello".utf8))
        XCTAssertEqual(contents(try XCTUnwrap(try recorder.results[0]?.get()).temporaryPath), Array("hello".utf8))
    }

    func testABodyShorterThanItsLengthIsACutBodyNotAFile() throws {
        let server = try server(odd: .raw("HTTP/1.1 200 OK", ["Content-Length: 10"], body: Array("hello".utf8)))
        defer { server.stop() }
        let recorder = fetch([server.url("/odd")], retries: 0)
        guard case .failure(let failure) = recorder.results[0],
            case .network(.partialFile, _) = failure.attempts[0].reason
        else {
            return XCTFail("a cut body (CURLE_PARTIAL_FILE): \(String(describing: recorder.results[0]))")
        }
    }

    func testAStatusOutside100To599IsAProtocolErrorNotARetriedServerError() throws {
        // 999 would otherwise count as a 5xx: retried with backoff.
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 999 Odd", ["Content-Length: 5"], body: Array("hello".utf8)),
            is: { $0 == .statusOutOfRange(999) })
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 600 Odd", ["Content-Length: 5"], body: Array("hello".utf8)),
            is: { $0 == .statusOutOfRange(600) })
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 42 Odd", ["Content-Length: 5"], body: Array("hello".utf8)),
            is: { if case .unreadableAnswer(let message) = $0 { message.contains("response code") } else { false } })
    }

    func testAHeaderBlockOverOneMebibyteIsAProtocolError() throws {
        // Many ordinary lines (libcurl limits each line; its limit on the whole block depends on the build).
        let lines = (0..<1100).map { "X-Filler-\($0): " + String(repeating: "a", count: 1000) }
        try assertProtocolErrorThenMirror(
            .raw("HTTP/1.1 200 OK", lines + ["Content-Length: 5"], body: Array("hello".utf8)),
            is: { $0 == .headersTooLarge(kibibytes: 256) })
        // One huge line: libcurl itself refuses it, as "out of memory".
        try assertProtocolErrorThenMirror(
            .raw(
                "HTTP/1.1 200 OK",
                [
                    "X-Big: " + String(repeating: "b", count: 200_000),
                    "Content-Length: 5",
                ], body: Array("hello".utf8)),
            is: { $0 == .headerLineTooLong })
    }

    /// haul sends no Accept-Encoding; a server that compresses anyway serves other bytes than the file. A pinned
    /// file's mismatch says why; an unpinned one is stored as served and the result names the encoding.
    func testAnEncodingNobodyAskedForIsNamed() throws {
        let file: [UInt8] = Array("plain text".utf8)
        let encoded: [UInt8] = [0x1f, 0x8b, 8, 0, 1, 2, 3, 4]
        let server = try LoopbackHTTPServer { _ in .ok(encoded, headers: [("Content-Encoding", "gzip")]) }
        defer { server.stop() }
        let pinned = fetch([server.url("/f")], pinned: file)
        guard case .failure(let failure) = pinned.results[0] else {
            return XCTFail("\(String(describing: pinned.results[0]))")
        }
        XCTAssertEqual(failure.attempts.last.flatMap { servedEncoding($0.reason) }, "gzip", "\(failure)")

        let unpinned = fetch([server.url("/f")])
        let stored = try XCTUnwrap(try unpinned.results[0]?.get())
        XCTAssertEqual(contents(stored.temporaryPath), encoded, "stored as served")
        XCTAssertEqual(stored.contentEncoding, "gzip")
    }

    /// Text a server chose never reaches a message raw: no escape sequence, no line break, bounded length.
    func testServerTextInMessagesIsMadeSafe() throws {
        let hostile = "gzip\u{1B}[2J\u{1B}[31m" + String(repeating: "x", count: 500)
        let server = try LoopbackHTTPServer { _ in
            .raw(
                "HTTP/1.1 200 OK", ["Content-Encoding: \(hostile)", "Content-Length: 3"],
                body: Array("abc".utf8))
        }
        defer { server.stop() }
        let recorder = fetch([server.url("/f")], pinned: Array("xyz".utf8), retries: 0)
        guard case .failure(let failure) = recorder.results[0] else { return XCTFail("expected a mismatch") }
        let encoding = try XCTUnwrap(failure.attempts.last.flatMap { servedEncoding($0.reason) }, "\(failure)")
        XCTAssertTrue(encoding.hasPrefix("gzip"), encoding)
        XCTAssertFalse(encoding.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, encoding)
        XCTAssertLessThan(encoding.count, 300, encoding)
    }

    /// The `Content-Encoding` a mismatch says the wrong bytes came with.
    private func servedEncoding(_ reason: FailureReason) -> String? {
        switch reason {
        case .digestMismatch(_, _, let encoding), .sizeMismatch(_, _, let encoding): encoding
        default: nil
        }
    }
}
