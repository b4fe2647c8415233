import Glibc

/// One request as the server parsed it off the wire, before the handler ran, so a test can assert what the
/// client actually sent (headers, ranges, validators) even when the handler misbehaves on purpose.
public struct RecordedRequest: Sendable {
    public let method: String
    /// The request-target exactly as sent, query included.
    public let target: String
    /// The target up to `?`, not percent-decoded: tests compare what the client put on the wire.
    public let path: String
    public let query: String?
    public let version: String
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// 1-based number of the TCP connection that carried the request; equal numbers mean a reused connection.
    public let connectionID: Int

    /// Public so handlers such as `StaticFiles` can be exercised directly, without sockets.
    public init(
        method: String, target: String, version: String = "HTTP/1.1",
        headers: [(name: String, value: String)] = [], body: [UInt8] = [], connectionID: Int = 0
    ) {
        self.method = method
        self.target = target
        if let question = target.firstIndex(of: "?") {
            path = String(target[..<question])
            query = String(target[target.index(after: question)...])
        } else {
            path = target
            query = nil
        }
        self.version = version
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
    }

    /// The first header with this name, compared case-insensitively as HTTP requires.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}

/// Wire-level misbehaviour, applied after the handler has built an otherwise honest response.
/// Byte counts are body bytes on the wire after the header block (chunk framing included when the response
/// is chunked).
public enum Fault: Sendable, Equatable {
    /// Send the headers with the honest Content-Length and this many body bytes, then FIN.
    case closeAfter(bytes: Int)
    /// Same, then RST (SO_LINGER 0).
    case resetAfter(bytes: Int)
    /// Send this many body bytes, go silent for `seconds` (cut short by `stop()`), then send the rest and
    /// carry on normally, so one fault covers both "client gives up" and "client waits it out".
    case stallAfter(bytes: Int, seconds: Double)
    /// Send the body in chunks of this size with a pause between them; the connection stays usable.
    case trickle(bytesPerChunk: Int, interval: Double)
    /// Send `burst` body bytes at once, then the rest as `trickle` does: a rate that is high for a moment, then low.
    case burstThenTrickle(burst: Int, bytesPerChunk: Int, interval: Double)
    /// Announce this Content-Length, send the body as it is, then close.
    case lyingContentLength(Int)
    /// No Content-Length: the body runs until the server closes the connection.
    case noContentLength
    /// Read the request, then close without sending anything (curl: "Empty reply from server").
    case closeWithoutResponse
    /// Not a fault but a meter: send the body in writes of this size through a small send buffer, logging when the
    /// kernel took each (`LoopbackHTTPServer.bodyWrites`), so that a test sees the rate the client reads at.
    case metered(bytesPerWrite: Int)
}

public struct ServerResponse: Sendable {
    public var status: Int
    public var reason: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var fault: Fault?
    /// Sent verbatim in place of the status line and header block the server would write from the fields above
    /// (nothing added: no Content-Length, Date or Connection), then `body`, then the connection is closed. For
    /// answers no honest server writes: conflicting lengths, odd status lines, huge header blocks.
    public var rawHead: [UInt8]?

    /// The server adds Content-Length (from `body`), Date and, when it will close, `Connection: close`
    /// unless the handler set them; a `Transfer-Encoding: chunked` header makes it chunk the body.
    public init(
        status: Int = 200, reason: String? = nil, headers: [(String, String)] = [],
        body: [UInt8] = [], fault: Fault? = nil
    ) {
        self.status = status
        self.reason = reason ?? ServerResponse.reasonPhrase(status)
        self.headers = headers
        self.body = body
        self.fault = fault
    }

    public static func ok(_ body: [UInt8], headers: [(String, String)] = []) -> ServerResponse {
        ServerResponse(status: 200, headers: headers, body: body)
    }

    public static func ok(_ text: String, headers: [(String, String)] = []) -> ServerResponse {
        ServerResponse(status: 200, headers: headers, body: Array(text.utf8))
    }

    public static func status(_ status: Int, body: [UInt8] = [], headers: [(String, String)] = []) -> ServerResponse {
        ServerResponse(status: status, headers: headers, body: body)
    }

    /// A response written byte for byte: `statusLine` and each of `headerLines` end with CRLF, then a blank line,
    /// then `body` (see `rawHead`).
    public static func raw(_ statusLine: String, _ headerLines: [String] = [], body: [UInt8] = []) -> ServerResponse {
        var response = ServerResponse(status: 0, reason: "", body: body)
        response.rawHead = Array(([statusLine] + headerLines).map { $0 + "\r\n" }.joined().utf8) + [13, 10]
        return response
    }

    public static var notFound: ServerResponse {
        ServerResponse(status: 404, headers: [("Content-Type", "text/plain")], body: Array("not found\n".utf8))
    }

    public static func redirect(to location: String, status: Int = 302) -> ServerResponse {
        ServerResponse(status: status, headers: [("Location", location)])
    }

    /// Lets a handler wrap another one's response: `files.respond(to: r).with(fault: .resetAfter(bytes: 10))`.
    public func with(fault: Fault?) -> ServerResponse {
        var copy = self
        copy.fault = fault
        return copy
    }

    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.0.lowercased() == wanted }?.1
    }

    /// Replaces every header of that name (case-insensitively) with one value.
    public mutating func setHeader(_ name: String, _ value: String) {
        removeHeader(name)
        headers.append((name, value))
    }

    public mutating func removeHeader(_ name: String) {
        let wanted = name.lowercased()
        headers.removeAll { $0.0.lowercased() == wanted }
    }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }
}

/// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), built by hand because strftime follows the locale and
/// Foundation's formatters are not needed for one fixed format.
func httpDate(_ seconds: Int) -> String {
    var time = time_t(seconds)
    var parts = tm()
    gmtime_r(&time, &parts)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let day = days[Int(parts.tm_wday) % 7]
    let month = months[Int(parts.tm_mon) % 12]
    return "\(day), \(two(parts.tm_mday)) \(month) \(parts.tm_year + 1900) "
        + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
}
