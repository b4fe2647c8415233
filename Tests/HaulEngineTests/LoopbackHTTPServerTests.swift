import Glibc
import HaulTestSupport
import Synchronization
import XCTest

/// The test server checked from the outside with /usr/bin/curl and raw sockets, so engine tests can trust
/// what it puts on the wire.
final class LoopbackHTTPServerTests: XCTestCase {
    private var temporary: TemporaryDirectory!

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory()
    }

    /// `-q` ignores any ~/.curlrc; `--noproxy` guards against a proxy even though the runner's minimal
    /// environment already drops proxy variables.
    private func curl(_ arguments: [String]) throws -> ProcessResult {
        try ProcessRunner.run(
            "/usr/bin/curl", ["-q", "-sS", "--noproxy", "*", "--max-time", "10"] + arguments, timeout: 20)
    }

    /// Fetches one URL; returns curl's exit code, the response head (status + headers) and the body bytes.
    private func fetch(_ url: String, _ extra: [String] = []) throws -> (exit: Int32, head: Head, body: [UInt8]) {
        let headPath = temporary.path("head-\(FileNumber.next())")
        let bodyPath = temporary.path("body-\(FileNumber.next())")
        let result = try curl(["-D", headPath, "-o", bodyPath] + extra + [url])
        let headText = String(decoding: FileManager.default.contents(atPath: headPath) ?? Data(), as: UTF8.self)
        let body = FileManager.default.contents(atPath: bodyPath).map { [UInt8]($0) } ?? []
        return (result.exitCode, Head(headText), body)
    }

    // MARK: Static files

    func testGetServesBodyWithLengthAndValidators() throws {
        let server = try LoopbackHTTPServer(files: ["/a.txt": Array("hello world".utf8)])
        defer { server.stop() }
        let files = try XCTUnwrap(server.files)
        let (exit, head, body) = try fetch(server.url("/a.txt"))
        XCTAssertEqual(exit, 0)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(body, Array("hello world".utf8))
        XCTAssertEqual(head["content-length"], "11")
        XCTAssertEqual(head["accept-ranges"], "bytes")
        XCTAssertEqual(head["etag"], files.etag("/a.txt"))
        XCTAssertEqual(head["last-modified"], files.lastModified("/a.txt"))
        XCTAssertTrue(head["etag"]?.hasPrefix("\"b-") ?? false, "strong, size-prefixed: \(head["etag"] ?? "nil")")
        XCTAssertEqual(try fetch(server.url("/missing")).head.status, 404)
    }

    func testHeadSendsHeadersOnly() throws {
        let server = try LoopbackHTTPServer(files: ["/a": Array("0123456789".utf8)])
        defer { server.stop() }
        let result = try curl(["-I", server.url("/a")])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        let head = Head(result.stdout)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head["content-length"], "10")
        XCTAssertEqual(server.requests.map(\.method), ["HEAD"])
    }

    func testRangesAnswer206OrA416() throws {
        let server = try LoopbackHTTPServer(files: ["/a": Array("hello world".utf8)])
        defer { server.stop() }
        let url = server.url("/a")

        let middle = try fetch(url, ["-H", "Range: bytes=2-5"])
        XCTAssertEqual(middle.head.status, 206)
        XCTAssertEqual(middle.head["content-range"], "bytes 2-5/11")
        XCTAssertEqual(middle.head["content-length"], "4")
        XCTAssertEqual(middle.body, Array("llo ".utf8))

        let open = try fetch(url, ["-H", "Range: bytes=6-"])
        XCTAssertEqual(open.head["content-range"], "bytes 6-10/11")
        XCTAssertEqual(open.body, Array("world".utf8))

        let suffix = try fetch(url, ["-H", "Range: bytes=-3"])
        XCTAssertEqual(suffix.head["content-range"], "bytes 8-10/11")
        XCTAssertEqual(suffix.body, Array("rld".utf8))

        let beyond = try fetch(url, ["-H", "Range: bytes=11-"])
        XCTAssertEqual(beyond.head.status, 416)
        XCTAssertEqual(beyond.head["content-range"], "bytes */11")

        let multiple = try fetch(url, ["-H", "Range: bytes=0-1,4-5"])
        XCTAssertEqual(multiple.head.status, 200, "multi-range is ignored, not half-supported")
    }

    func testIfRangeHonoursOnlyTheCurrentValidator() throws {
        let server = try LoopbackHTTPServer(files: ["/a": Array("version one".utf8)])
        defer { server.stop() }
        let files = try XCTUnwrap(server.files)
        let url = server.url("/a")
        let oldTag = try XCTUnwrap(files.etag("/a"))
        let oldDate = try XCTUnwrap(files.lastModified("/a"))

        XCTAssertEqual(try fetch(url, ["-H", "Range: bytes=8-", "-H", "If-Range: \(oldTag)"]).head.status, 206)
        XCTAssertEqual(try fetch(url, ["-H", "Range: bytes=8-", "-H", "If-Range: \(oldDate)"]).head.status, 206)

        files.set("/a", Array("version two!".utf8))
        let staleTag = try fetch(url, ["-H", "Range: bytes=8-", "-H", "If-Range: \(oldTag)"])
        XCTAssertEqual(staleTag.head.status, 200)
        XCTAssertEqual(staleTag.body, Array("version two!".utf8))
        XCTAssertNotEqual(files.lastModified("/a"), oldDate, "every set moves Last-Modified")
        XCTAssertEqual(try fetch(url, ["-H", "Range: bytes=8-", "-H", "If-Range: \(oldDate)"]).head.status, 200)
        XCTAssertEqual(try fetch(url, ["-H", "Range: bytes=8-", "-H", "If-Range: W/\(oldTag)"]).head.status, 200)
    }

    func testConditionalRequestsAnswer304() throws {
        let server = try LoopbackHTTPServer(files: ["/a": Array("cached".utf8)])
        defer { server.stop() }
        let files = try XCTUnwrap(server.files)
        let url = server.url("/a")
        let tag = try XCTUnwrap(files.etag("/a"))

        let notModified = try fetch(url, ["-H", "If-None-Match: \"other\", \(tag)"])
        XCTAssertEqual(notModified.head.status, 304)
        XCTAssertEqual(notModified.body, [])
        XCTAssertEqual(notModified.head["etag"], tag)
        XCTAssertEqual(try fetch(url, ["-H", "If-None-Match: \"other\""]).head.status, 200)
        let date = try XCTUnwrap(files.lastModified("/a"))
        XCTAssertEqual(try fetch(url, ["-H", "If-Modified-Since: \(date)"]).head.status, 304)

        files.remove("/a")
        XCTAssertEqual(try fetch(url, ["-H", "If-None-Match: \(tag)"]).head.status, 404)
    }

    // MARK: Connections and the request log

    func testKeepAliveServesTwoRequestsOverOneConnection() throws {
        let server = try LoopbackHTTPServer(files: ["/a": [1, 2, 3], "/b": [4, 5]])
        defer { server.stop() }
        let result = try curl(["-o", "/dev/null", "-o", "/dev/null", server.url("/a"), server.url("/b")])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        XCTAssertEqual(server.connectionCount, 1)
        XCTAssertEqual(server.requests.map(\.path), ["/a", "/b"])
        XCTAssertEqual(Set(server.requests.map(\.connectionID)), [1])
    }

    func testRequestLogKeepsMethodTargetHeadersAndBody() throws {
        let server = try LoopbackHTTPServer { _ in .ok("fine") }
        defer { server.stop() }
        let result = try curl([
            "-o", "/dev/null", "-H", "X-Haul-Test: yes", "--data-binary", "payload",
            server.url("/upload/x%20y?sig=abc&n=1"),
        ])
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        let request = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.target, "/upload/x%20y?sig=abc&n=1")
        XCTAssertEqual(request.path, "/upload/x%20y")
        XCTAssertEqual(request.query, "sig=abc&n=1")
        XCTAssertEqual(request.version, "HTTP/1.1")
        XCTAssertEqual(request.header("x-haul-test"), "yes")
        XCTAssertEqual(request.header("HOST"), "127.0.0.1:\(server.port)")
        XCTAssertEqual(request.body, Array("payload".utf8))
        XCTAssertEqual(server.requests(path: "/upload/x%20y").count, 1)
        XCTAssertEqual(server.requests(path: "/other").count, 0)
        server.resetLog()
        XCTAssertTrue(server.requests.isEmpty)
        XCTAssertEqual(server.connectionCount, 1, "resetLog clears requests only")
    }

    func testScriptedResponsesPlayInOrderThenFallBack() throws {
        let files = StaticFiles(["/a": Array("real".utf8)])
        let script = ScriptedResponses(then: files.respond)
        script.enqueue([.status(503)], for: "/a")
        script.enqueueFault(.closeAfter(bytes: 2), for: "/a")
        let server = try LoopbackHTTPServer(handler: script.respond)
        defer { server.stop() }
        XCTAssertEqual(try fetch(server.url("/a")).head.status, 503)
        let cut = try fetch(server.url("/a"))
        XCTAssertEqual(cut.exit, 18)
        XCTAssertEqual(cut.body, Array("re".utf8))
        XCTAssertEqual(try fetch(server.url("/a")).body, Array("real".utf8))
        XCTAssertEqual(script.pendingCount, 0)
    }

    func testChunkedResponsesAreFramed() throws {
        let body = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let server = try LoopbackHTTPServer { _ in .ok(body, headers: [("Transfer-Encoding", "chunked")]) }
        defer { server.stop() }
        let (exit, head, received) = try fetch(server.url("/c"))
        XCTAssertEqual(exit, 0)
        XCTAssertNil(head["content-length"])
        XCTAssertEqual(received, body)
    }

    // MARK: Faults, as curl sees them

    private let faultBody = (0..<20_000).map { UInt8(truncatingIfNeeded: $0) }

    private func serveFault(_ fault: Fault) throws -> LoopbackHTTPServer {
        let body = faultBody
        return try LoopbackHTTPServer { _ in ServerResponse.ok(body).with(fault: fault) }
    }

    func testCloseAfterIsAPartialFile() throws {
        let server = try serveFault(.closeAfter(bytes: 1_000))
        defer { server.stop() }
        let result = try fetch(server.url("/f"))
        XCTAssertEqual(result.exit, 18, "CURLE_PARTIAL_FILE")
        XCTAssertEqual(result.head["content-length"], "20000", "the announced length stays honest")
        XCTAssertEqual(result.body, Array(faultBody.prefix(1_000)))
    }

    func testResetAfterIsARecvErrorAfterTheBytesArrived() throws {
        let server = try serveFault(.resetAfter(bytes: 1_000))
        defer { server.stop() }
        let result = try fetch(server.url("/f"))
        XCTAssertEqual(result.exit, 56, "CURLE_RECV_ERROR")
        XCTAssertEqual(result.body, Array(faultBody.prefix(1_000)))
    }

    func testResetAfterDeliversExactlyTheBytesEvenBeyondSocketBuffers() throws {
        let big = [UInt8](repeating: 9, count: 3_000_000)
        let server = try LoopbackHTTPServer { _ in ServerResponse.ok(big).with(fault: .resetAfter(bytes: 2_000_000)) }
        defer { server.stop() }
        let result = try fetch(server.url("/big"), ["--limit-rate", "20M"])
        XCTAssertEqual(result.exit, 56)
        XCTAssertEqual(result.body.count, 2_000_000)
    }

    func testLyingContentLengthIsAPartialFile() throws {
        let server = try serveFault(.lyingContentLength(30_000))
        defer { server.stop() }
        let result = try fetch(server.url("/f"))
        XCTAssertEqual(result.exit, 18)
        XCTAssertEqual(result.head["content-length"], "30000")
        XCTAssertEqual(result.body, faultBody)
    }

    func testNoContentLengthIsCloseDelimited() throws {
        let server = try serveFault(.noContentLength)
        defer { server.stop() }
        let result = try fetch(server.url("/f"))
        XCTAssertEqual(result.exit, 0)
        XCTAssertNil(result.head["content-length"])
        XCTAssertEqual(result.head["connection"], "close")
        XCTAssertEqual(result.body, faultBody)
    }

    func testCloseWithoutResponseIsAnEmptyReply() throws {
        let server = try serveFault(.closeWithoutResponse)
        defer { server.stop() }
        XCTAssertEqual(try fetch(server.url("/f")).exit, 52, "CURLE_GOT_NOTHING")
        XCTAssertEqual(server.requests.count, 1)
    }

    func testStallThenResumeAndTrickleDeliverEverythingLate() throws {
        let stalled = try serveFault(.stallAfter(bytes: 500, seconds: 0.3))
        defer { stalled.stop() }
        var start = Date()
        let afterStall = try fetch(stalled.url("/f"))
        XCTAssertEqual(afterStall.exit, 0)
        XCTAssertEqual(afterStall.body, faultBody)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.3)

        // A stall longer than the client's patience; stop() cuts the server's side short afterwards.
        let stuck = try serveFault(.stallAfter(bytes: 500, seconds: 30))
        defer { stuck.stop() }
        let gaveUp = try fetch(stuck.url("/f"), ["--max-time", "0.5"])
        XCTAssertEqual(gaveUp.exit, 28, "CURLE_OPERATION_TIMEDOUT")
        XCTAssertEqual(gaveUp.body, Array(faultBody.prefix(500)))

        let trickled = try serveFault(.trickle(bytesPerChunk: 5_000, interval: 0.05))
        defer { trickled.stop() }
        start = Date()
        let slow = try fetch(trickled.url("/f"))
        XCTAssertEqual(slow.exit, 0)
        XCTAssertEqual(slow.body, faultBody)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.15, "four chunks, three pauses")
    }

    // MARK: Stopping

    func testStopReturnsPromptlyWithAStalledConnectionAndClosesIt() throws {
        let server = try serveFault(.stallAfter(bytes: 10, seconds: 60))
        let client = try RawClient(port: server.port)
        try client.send("GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
        let partial = client.receive(untilContains: Array(faultBody[0..<10]))
        XCTAssertTrue(partial.starts(with: Array("HTTP/1.1 200 OK\r\n".utf8)))
        let idle = try RawClient(port: server.port)  // an idle keep-alive connection too
        XCTAssertTrue(waitUntil { server.connectionCount == 2 })

        let start = Date()
        server.stop()
        XCTAssertLessThan(Date().timeIntervalSince(start), 1.0)
        XCTAssertTrue(client.readsEndOfStream())
        XCTAssertTrue(idle.readsEndOfStream())
        server.stop()  // idempotent
        XCTAssertThrowsError(try RawClient(port: server.port), "the listener is closed")
    }

    func testDroppingTheServerStopsIt() throws {
        var port: UInt16 = 0
        do {
            let server = try LoopbackHTTPServer(files: [:])
            port = server.port
            _ = try RawClient(port: port)
        }
        XCTAssertThrowsError(try RawClient(port: port))
    }

    func testRawPipelinedRequestsAreAnsweredInOrder() throws {
        let server = try LoopbackHTTPServer { request in .ok(request.path) }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        try client.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(client.readsEndOfStream())
        let text = String(decoding: client.received, as: UTF8.self)
        XCTAssertTrue(text.hasSuffix("\r\n\r\n/two"), text)
        XCTAssertTrue(text.contains("\r\n\r\n/one"), text)
        XCTAssertEqual(server.requests.map(\.path), ["/one", "/two"])
        XCTAssertEqual(server.connectionCount, 1)
    }

    private func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }
}

/// The process runner the CLI tests rely on.
final class ProcessRunnerTests: XCTestCase {
    func testLargeOutputOnBothStreamsDoesNotDeadlock() throws {
        let result = try ProcessRunner.run(
            "/bin/sh",
            ["-c", "head -c 300000 /dev/zero | tr '\\0' o; head -c 300000 /dev/zero | tr '\\0' e >&2; exit 3"])
        XCTAssertEqual(result.exitCode, 3)
        XCTAssertEqual(result.stdout.count, 300_000)
        XCTAssertEqual(result.stderr.count, 300_000)
    }

    func testEnvironmentIsMinimalPlusOverridesAndDirectoryApplies() throws {
        let directory = try TemporaryDirectory()
        let result = try ProcessRunner.run(
            "/bin/sh", ["-c", "env | sort; pwd"], environment: ["HAUL_X": "1"],
            currentDirectory: directory.path)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let shellOwn: Set<String> = ["PWD", "OLDPWD", "SHLVL", "_"]
        let names: [String] = lines.compactMap { line in
            guard let equals = line.firstIndex(of: "=") else { return nil }
            let name = String(line[..<equals])
            return shellOwn.contains(name) ? nil : name
        }
        XCTAssertEqual(names, ["HAUL_X", "HOME", "PATH", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"])
        XCTAssertEqual(
            lines.last.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path },
            URL(fileURLWithPath: directory.path).resolvingSymlinksInPath().path)
    }

    func testTimeoutKillsTheChildAndKeepsItsOutput() throws {
        let start = Date()
        XCTAssertThrowsError(try ProcessRunner.run("/bin/sh", ["-c", "echo started; sleep 30"], timeout: 0.3)) {
            error in
            guard case ProcessRunnerError.timedOut(_, _, let partial) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(partial.stdout, "started\n")
            XCTAssertEqual(partial.exitCode, 128 + SIGKILL)
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 3)
    }

    func testTemporaryDirectoryWritesNestedFilesAndCleansUp() throws {
        var path = ""
        do {
            let directory = try TemporaryDirectory()
            path = directory.path
            try directory.write("a/b/c.txt", "text")
            XCTAssertEqual(directory.read("a/b/c.txt"), Array("text".utf8))
            XCTAssertNil(directory.read("missing"))
            chmod(directory.path("a/b"), 0o500)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }
}

// MARK: Helpers

/// A response head as curl dumped it; header lookup is case-insensitive.
private struct Head {
    var status = 0
    var fields: [(String, String)] = []

    init(_ text: String) {
        // With several responses in one dump (100 Continue), the last one wins.
        for line in text.components(separatedBy: "\r\n") {
            if line.hasPrefix("HTTP/") {
                status = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
                fields = []
            } else if let colon = line.firstIndex(of: ":") {
                fields.append(
                    (
                        line[..<colon].lowercased(),
                        line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    ))
            }
        }
    }

    subscript(name: String) -> String? { fields.first { $0.0 == name.lowercased() }?.1 }
}

private enum FileNumber {
    private static let counter = Mutex(0)
    static func next() -> Int {
        counter.withLock {
            $0 += 1; return $0
        }
    }
}

/// A blocking TCP client on 127.0.0.1, for what curl cannot show: half-read responses and pipelining.
private final class RawClient {
    private let fd: Int32
    private(set) var received: [UInt8] = []

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }

    deinit { close(fd) }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw POSIXError(.EIO) }
    }

    /// Reads until `needle` appears (or two seconds pass without data); returns everything read so far.
    func receive(untilContains needle: [UInt8]) -> [UInt8] {
        while !contains(needle) {
            guard readOnce() > 0 else { break }
        }
        return received
    }

    /// True when the peer closed (FIN or RST) within two seconds.
    func readsEndOfStream() -> Bool {
        while true {
            let count = readOnce()
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    private func readOnce() -> Int {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 { received += chunk[0..<count] }
        return count
    }

    private func contains(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, received.count >= needle.count else { return needle.isEmpty }
        for start in 0...(received.count - needle.count)
        where received[start..<start + needle.count].elementsEqual(needle) {
            return true
        }
        return false
    }
}
