import Glibc
import Synchronization

/// An HTTP/1.1 server on 127.0.0.1 for tests, written on raw sockets so tests can produce wire-level faults
/// (short bodies, resets, stalls) that framework servers smooth over.
///
/// It runs on its own kernel threads (one accepting, one per connection), never on the cooperative pool, so
/// it keeps answering while the code under test blocks. The handler runs on the connection's thread, may be
/// called concurrently for different connections, and may block, but `stop()` waits for running handlers
/// to return: a handler that sleeps should sleep briefly (stalls that `stop()` can cut short are `Fault`s).
public final class LoopbackHTTPServer: Sendable {
    public let port: UInt16
    /// The file set behind `init(files:)`, so a test can change content between runs.
    public let files: StaticFiles?
    private let core: ServerCore

    public convenience init(handler: @escaping @Sendable (RecordedRequest) -> ServerResponse) throws {
        try self.init(handler: handler, files: nil)
    }

    /// Serves static files with nginx-like validators and ranges; see `StaticFiles`.
    public convenience init(files: [String: [UInt8]]) throws {
        try self.init(files: StaticFiles(files))
    }

    public convenience init(files: StaticFiles) throws {
        try self.init(handler: { files.respond(to: $0) }, files: files)
    }

    /// Serves `files` as `init(files:)` does, every answer saying they stay fresh for `maxAge` seconds
    /// (`Cache-Control: max-age`).
    public convenience init(files: StaticFiles, maxAge: Int) throws {
        try self.init(
            handler: { request in
                var response = files.respond(to: request)
                response.setHeader("Cache-Control", "max-age=\(maxAge)")
                return response
            }, files: files)
    }

    private init(handler: @escaping @Sendable (RecordedRequest) -> ServerResponse, files: StaticFiles?) throws {
        let core = try ServerCore(handler: handler)
        self.core = core
        self.port = core.port
        self.files = files
    }

    /// The threads hold the core, not this object, so dropping the last reference still shuts everything down.
    deinit {
        core.stop()
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public func url(_ path: String) -> String { baseURL + path }

    /// Every request parsed so far, in arrival order.
    public var requests: [RecordedRequest] { core.state.withLock { $0.requests } }

    public func requests(path: String) -> [RecordedRequest] {
        core.state.withLock { $0.requests.filter { $0.path == path } }
    }

    /// Clears the request log; `connectionCount` keeps counting.
    public func resetLog() {
        core.state.withLock { $0.requests.removeAll() }
    }

    /// Each write of a `.metered` body, in the order the kernel took them: when (monotonic seconds) and how many
    /// bytes, across all connections.
    public var bodyWrites: [(time: Double, bytes: Int)] { core.state.withLock { $0.bodyWrites } }

    /// TCP connections accepted so far; with keep-alive, fewer connections than requests.
    public var connectionCount: Int { core.state.withLock { $0.connectionCount } }

    /// Closes the listener and every connection (even one stalled mid-body) and joins all server threads.
    /// Idempotent.
    public func stop() {
        core.stop()
    }
}

/// Everything the threads share. Kept apart from `LoopbackHTTPServer` so that threads never retain the
/// public object and `deinit` can act as a stop.
final class ServerCore: Sendable {
    struct State {
        var stopping = false
        var requests: [RecordedRequest] = []
        var connectionCount = 0
        /// Open connection sockets by connection ID; removed by the owning thread *before* it closes the
        /// descriptor, so `stop()` never shuts down a number the kernel has already reused.
        var sockets: [Int: Int32] = [:]
        var threads: [Int: pthread_t] = [:]
        var finished: [Int] = []
        var acceptThread: pthread_t?
        var bodyWrites: [(time: Double, bytes: Int)] = []
    }

    let port: UInt16
    let state = Mutex(State())
    private let listener: Int32
    /// A socket pair whose read end becomes readable, for good, when the server stops; every blocking wait
    /// polls it, which makes stalls and idle keep-alive connections end promptly.
    private let wakeReader: Int32
    private let wakeWriter: Int32
    private let handler: @Sendable (RecordedRequest) -> ServerResponse
    /// Serializes whole `stop()` calls so a second caller returns only once the first has joined everything.
    private let stopped = Mutex(false)

    private static let maxHeaderBytes = 64 * 1024
    private static let maxBodyBytes = 64 * 1024 * 1024

    init(handler: @escaping @Sendable (RecordedRequest) -> ServerResponse) throws {
        self.handler = handler
        let listener = socket(
            AF_INET,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
                | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard listener >= 0 else { throw SystemCallError(call: "socket", errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(listener, pointer, length) == 0 else { return errno }
                guard listen(listener, 128) == 0 else { return errno }
                guard getsockname(listener, pointer, &length) == 0 else { return errno }
                return 0
            }
        }
        guard bound == 0 else {
            close(listener)
            throw SystemCallError(call: "bind/listen/getsockname on 127.0.0.1:0", errno: bound)
        }
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            let error = errno
            close(listener)
            throw SystemCallError(call: "socketpair", errno: error)
        }
        self.listener = listener
        self.port = UInt16(bigEndian: address.sin_port)
        self.wakeReader = pair[0]
        self.wakeWriter = pair[1]
        do {
            let thread = try POSIXThread.spawn { [self] in acceptLoop() }
            state.withLock { $0.acceptThread = thread }
        } catch {
            closeDescriptors()
            throw error
        }
    }

    func stop() {
        stopped.withLock { done in
            guard !done else { return }
            done = true
            let acceptThread = state.withLock { state -> pthread_t? in
                state.stopping = true
                for fd in state.sockets.values { shutdown(fd, Int32(SHUT_RDWR)) }
                return state.acceptThread
            }
            var byte: UInt8 = 1
            _ = send(wakeWriter, &byte, 1, Int32(MSG_NOSIGNAL))
            if let acceptThread { POSIXThread.join(acceptThread) }
            // The accept thread has exited, so no thread can be added any more.
            let threads = state.withLock { state in
                defer { state.threads.removeAll(); state.finished.removeAll() }
                return Array(state.threads.values)
            }
            for thread in threads where !POSIXThread.isCurrent(thread) {
                POSIXThread.join(thread)
            }
            closeDescriptors()
        }
    }

    private func closeDescriptors() {
        close(listener)
        close(wakeReader)
        close(wakeWriter)
    }

    private func isStopping() -> Bool { state.withLock { $0.stopping } }

    /// Waits up to `seconds`; returns false if the server began stopping meanwhile.
    private func pause(_ seconds: Double) -> Bool {
        let deadline = monotonicSeconds() + max(0, seconds)
        var wake = pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0)
        while true {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return !isStopping() }
            let ready = poll(&wake, 1, Int32(min(remaining * 1000, 60_000).rounded(.up)))
            if ready > 0 { return false }
            if ready < 0 && errno != EINTR { return false }
        }
    }

    // MARK: Accepting

    private func acceptLoop() {
        while Socket.waitReadable(listener, wake: wakeReader) {
            let fd: Int32
            if let accept4 = GNUFunctions.accept4 {
                fd = accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            } else {
                fd = accept(listener, nil, nil)
            }
            if fd < 0 {
                switch errno {
                case EINTR, EAGAIN, EWOULDBLOCK, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM: _ = pause(0.01); continue
                default: return
                }
            }
            reapFinishedThreads()
            // Without this, a headers write and a body write each wait out a delayed ACK (~40 ms).
            Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            let id: Int? = state.withLock { state in
                guard !state.stopping else { return nil }
                state.connectionCount += 1
                state.sockets[state.connectionCount] = fd
                return state.connectionCount
            }
            guard let id else {
                close(fd)
                return
            }
            do {
                let thread = try POSIXThread.spawn { [self] in serve(connection: fd, id: id) }
                state.withLock { $0.threads[id] = thread }
            } catch {
                state.withLock { _ = $0.sockets.removeValue(forKey: id) }
                close(fd)
            }
        }
    }

    /// Joins connection threads that have finished, so a long test with many short connections does not
    /// pile up unjoined thread stacks.
    private func reapFinishedThreads() {
        let done: [pthread_t] = state.withLock { state in
            var threads: [pthread_t] = []
            var stillUnrecorded: [Int] = []
            for id in state.finished {
                if let thread = state.threads.removeValue(forKey: id) {
                    threads.append(thread)
                } else {
                    stillUnrecorded.append(id)
                }
            }
            state.finished = stillUnrecorded
            return threads
        }
        for thread in done { POSIXThread.join(thread) }
    }

    // MARK: Serving one connection

    private enum Parsed {
        case request(RecordedRequest, keepAlive: Bool)
        case reject(status: Int)
        case closed
    }

    private enum Ending { case keepAlive, close, reset }

    private func serve(connection fd: Int32, id: Int) {
        var buffer: [UInt8] = []
        var ending = Ending.close
        loop: while true {
            switch readRequest(fd, id: id, buffer: &buffer) {
            case .closed:
                ending = .close
                break loop
            case .reject(let status):
                var response = ServerResponse(status: status)
                response.setHeader("Connection", "close")
                _ = write(response, to: fd, method: "GET", keepAlive: false)
                ending = .close
                break loop
            case .request(let request, let keepAlive):
                state.withLock { $0.requests.append(request) }
                let response = handler(request)
                ending = write(response, to: fd, method: request.method, keepAlive: keepAlive)
                if ending != .keepAlive || isStopping() { break loop }
            }
        }
        state.withLock { state in
            state.sockets.removeValue(forKey: id)
            state.finished.append(id)
        }
        if ending == .reset {
            Socket.closeWithReset(fd)
        } else {
            close(fd)
        }
    }

    /// Reads more bytes into `buffer`; false on EOF, error or stop.
    private func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Bool {
        guard Socket.waitReadable(fd, wake: wakeReader) else { return false }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
    }

    private func readRequest(_ fd: Int32, id: Int, buffer: inout [UInt8]) -> Parsed {
        var scanned = 0
        var headerEnd: Int?
        while headerEnd == nil {
            headerEnd = Self.findHeaderEnd(buffer, from: max(0, scanned - 3))
            if headerEnd != nil { break }
            scanned = buffer.count
            if buffer.count > Self.maxHeaderBytes { return .reject(status: 431) }
            guard receive(fd, into: &buffer) else { return .closed }
        }
        guard let headerEnd else { return .closed }
        let head = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        // RFC 9112 asks servers to ignore empty lines before a request line.
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { return .reject(status: 400) }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, parts[2].hasPrefix("HTTP/1.") else {
            return .reject(status: 400)
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .reject(status: 400) }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(" ") else { return .reject(status: 400) }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            headers.append((name: name, value: value))
        }
        let version = String(parts[2])
        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }

        if header("transfer-encoding") != nil { return .reject(status: 501) }
        var bodyLength = 0
        if let value = header("content-length") {
            guard let length = Int(value), length >= 0 else { return .reject(status: 400) }
            guard length <= Self.maxBodyBytes else { return .reject(status: 413) }
            bodyLength = length
        }
        let bodyStart = headerEnd + 4
        if bodyLength > 0, buffer.count < bodyStart + bodyLength,
            header("expect")?.lowercased() == "100-continue"
        {
            guard Socket.sendAll(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return .closed }
        }
        while buffer.count < bodyStart + bodyLength {
            guard receive(fd, into: &buffer) else { return .closed }
        }
        let body = Array(buffer[bodyStart..<bodyStart + bodyLength])
        buffer.removeFirst(bodyStart + bodyLength)

        let connectionTokens = (header("connection") ?? "").lowercased()
            .split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
        let keepAlive =
            version == "HTTP/1.0"
            ? connectionTokens.contains("keep-alive")
            : !connectionTokens.contains("close")
        let request = RecordedRequest(
            method: String(parts[0]), target: String(parts[1]), version: version,
            headers: headers, body: body, connectionID: id)
        return .request(request, keepAlive: keepAlive)
    }

    private static func findHeaderEnd(_ buffer: [UInt8], from start: Int) -> Int? {
        guard buffer.count >= 4 else { return nil }
        var index = start
        while index + 3 < buffer.count {
            if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 {
                return index
            }
            index += 1
        }
        return nil
    }

    // MARK: Writing a response

    private func write(_ response: ServerResponse, to fd: Int32, method: String, keepAlive requested: Bool) -> Ending {
        if response.fault == .closeWithoutResponse { return .close }
        if let raw = response.rawHead {
            // Whatever framing the raw head claims, the body ends where the connection does.
            _ = Socket.sendAll(fd, raw) && Socket.sendAll(fd, response.body)
            shutdown(fd, Int32(SHUT_WR))
            return .close
        }
        var response = response
        let bodyless = (100..<200).contains(response.status) || response.status == 204 || response.status == 304
        let chunked = response.header("Transfer-Encoding")?.lowercased().contains("chunked") ?? false
        var closes = !requested || (response.header("Connection")?.lowercased().contains("close") ?? false)

        switch response.fault {
        case .lyingContentLength(let length):
            response.setHeader("Content-Length", String(length))
            closes = true
        case .noContentLength:
            response.removeHeader("Content-Length")
            closes = true
        case .closeAfter, .resetAfter:
            closes = true
            fallthrough
        default:
            if !bodyless && !chunked && response.header("Content-Length") == nil {
                response.setHeader("Content-Length", String(response.body.count))
            }
        }
        if closes && response.header("Connection") == nil { response.headers.append(("Connection", "close")) }
        if response.header("Date") == nil { response.headers.append(("Date", httpDate(time(nil)))) }

        var head = "HTTP/1.1 \(response.status) \(response.reason)\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        guard Socket.sendAll(fd, Array(head.utf8)) else { return .close }

        var wire: [UInt8] = []
        if method != "HEAD" && !bodyless {
            wire = chunked ? Self.chunkEncode(response.body) : response.body
        }
        let normalEnding: Ending = closes ? .close : .keepAlive
        /// `first` bytes of the wire, then `step` at a time with `interval` between.
        func trickle(first: Int, then step: Int, interval: Double) -> Ending {
            var offset = 0
            while offset < wire.count {
                if offset > 0 { guard pause(interval) else { return .close } }
                let end = min(offset + max(1, offset == 0 ? first : step), wire.count)
                guard Socket.sendAll(fd, wire[offset..<end]) else { return .close }
                offset = end
            }
            return normalEnding
        }

        switch response.fault {
        case nil, .lyingContentLength, .noContentLength, .closeWithoutResponse:
            guard Socket.sendAll(fd, wire) else { return .close }
            return normalEnding
        case .closeAfter(let bytes):
            _ = Socket.sendAll(fd, wire.prefix(max(0, bytes)))
            // FIN now, even if unread request bytes would otherwise make close() send an RST.
            shutdown(fd, Int32(SHUT_WR))
            return .close
        case .resetAfter(let bytes):
            _ = Socket.sendAll(fd, wire.prefix(max(0, bytes)))
            // An RST discards whatever still sits in our send queue, so wait (boundedly) until the client's
            // kernel has taken every byte; what reached it survives the RST. Then the client sees exactly
            // `bytes` body bytes, not a number that depends on scheduling.
            let deadline = monotonicSeconds() + 5
            while let queued = Socket.queuedOutput(fd), queued > 0, monotonicSeconds() < deadline {
                guard pause(0.001) else { break }
            }
            return .reset
        case .stallAfter(let bytes, let seconds):
            let first = min(max(0, bytes), wire.count)
            guard Socket.sendAll(fd, wire[0..<first]) else { return .close }
            guard pause(seconds) else { return .close }
            guard Socket.sendAll(fd, wire[first...]) else { return .close }
            return normalEnding
        case .metered(let bytesPerWrite):
            // A small send buffer: what the kernel takes is close to what the client has read.
            Socket.setOption(fd, SOL_SOCKET, SO_SNDBUF, 32 * 1024)
            var offset = 0
            while offset < wire.count {
                let end = min(offset + max(1, bytesPerWrite), wire.count)
                guard Socket.sendAll(fd, wire[offset..<end]) else { return .close }
                let now = monotonicSeconds()
                state.withLock { $0.bodyWrites.append((now, end - offset)) }
                offset = end
            }
            return normalEnding
        case .trickle(let bytesPerChunk, let interval):
            return trickle(first: bytesPerChunk, then: bytesPerChunk, interval: interval)
        case .burstThenTrickle(let burst, let bytesPerChunk, let interval):
            return trickle(first: burst, then: bytesPerChunk, interval: interval)
        }
    }

    private static func chunkEncode(_ body: [UInt8]) -> [UInt8] {
        var wire: [UInt8] = []
        wire.reserveCapacity(body.count + 64)
        var offset = 0
        while offset < body.count {
            let end = min(offset + 16 * 1024, body.count)
            wire += Array("\(String(end - offset, radix: 16))\r\n".utf8)
            wire += body[offset..<end]
            wire += [13, 10]
            offset = end
        }
        wire += Array("0\r\n\r\n".utf8)
        return wire
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var slice = self[...]
        while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}
