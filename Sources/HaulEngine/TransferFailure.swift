import Glibc
import HaulDigest

/// Why one attempt at one URL failed.
public enum FailureReason: Error, Sendable, Equatable, CustomStringConvertible {
    /// The client side: no route, refused, reset, timeout, TLS verification. `code` is libcurl's CURLcode.
    case network(code: Int, message: String)
    /// The server answered with a status outside 200..<300.
    case httpStatus(Int)
    /// `contentEncoding`: the server compressed the body although haul asked for no encoding (it sends no
    /// `Accept-Encoding`): what arrived is not the file, and the message says so.
    case digestMismatch(expected: Digest, actual: Digest, contentEncoding: String? = nil)
    case sizeMismatch(expected: Int64, actual: Int64, contentEncoding: String? = nil)
    /// More bytes than the pinned size arrived; the transfer was cut.
    case tooLarge(limit: Int64)
    /// A redirect haul refuses to follow (scheme, downgrade, loop, too many hops).
    case redirectRefused(String)
    /// The server's answer to a resume cannot be spliced onto the bytes we have.
    case resumeRejected(String)
    /// The answer breaks HTTP's rules (conflicting or malformed `Content-Length`, a status outside 100-599, a
    /// header block too large, a 206 nobody asked for): nothing it says can be believed, so that URL is not
    /// retried.
    case protocolViolation(String)
    /// A proxy answered 407: it wants credentials. `variable` is the environment variable the proxy came from
    /// and `proxy` its URL with any userinfo shown as `***` (nil when haul cannot tell which proxy answered).
    case proxyAuthenticationRequired(variable: String?, proxy: String?)
    /// The local side: the temporary file could not be created or written.
    case local(operation: String, path: String, errno: Int32)
    /// The run was interrupted (SIGINT, SIGTERM) before this transfer finished.
    case interrupted
    /// The run's time limit (`--max-time`, shown as given) was reached before this transfer finished.
    case timeLimitReached(String)

    public var description: String {
        switch self {
        case .network(_, let message): message
        case .httpStatus(let status): "HTTP \(status)"
        case .digestMismatch(let expected, let actual, let encoding):
            "checksum mismatch: expected \(expected), got \(actual)" + Self.servedWith(encoding)
        case .sizeMismatch(let expected, let actual, let encoding):
            "size mismatch: expected \(expected) bytes, got \(actual)" + Self.servedWith(encoding)
        case .tooLarge(let limit): "more than the expected \(limit) bytes"
        case .redirectRefused(let why): "redirect refused: \(why)"
        case .resumeRejected(let why): "resume refused: \(why)"
        case .protocolViolation(let what): "protocol error: \(what)"
        case .proxyAuthenticationRequired(let variable, let proxy):
            if let variable, let proxy {
                "the proxy \(proxy) (from \(variable)) answered 407: it wants credentials; give them in the "
                    + "variable as curl reads it: \(variable)=\(ProxySettings.credentialsExample(for: proxy))"
            } else {
                "HTTP 407: a proxy wants credentials; give them in the proxy variable as curl reads it: "
                    + "https_proxy=http://user:pass@host:port (http_proxy for http URLs)"
            }
        case .local(let operation, let path, let code): "cannot \(operation) \(path): \(String(cString: strerror(code)))"
        case .interrupted: "interrupted"
        case .timeLimitReached(let limit): "stopped: the run's time limit (\(limit)) was reached"
        }
    }

    /// Whether trying the same URL again can help. Checksum and size mismatches move on to the next source
    /// instead: the same URL would most likely serve the same bytes.
    public var isTransient: Bool {
        switch self {
        case .network(let code, _):
            return !Self.permanentNetworkCodes.contains(code)
        case .httpStatus(let status):
            return status == 408 || status == 429 || (status >= 500 && status != 501 && status != 505)
        case .resumeRejected:
            // The retry starts from byte 0 (the bytes are dropped), which is likely to work.
            return true
        case .digestMismatch, .sizeMismatch, .tooLarge, .redirectRefused, .protocolViolation, .proxyAuthenticationRequired,
             .local, .interrupted, .timeLimitReached:
            return false
        }
    }

    /// ` (served with Content-Encoding: gzip)`, or nothing.
    private static func servedWith(_ encoding: String?) -> String {
        encoding.map { " (served with Content-Encoding: \($0))" } ?? ""
    }

    /// A failure to reach the host at all (no address, connection refused, timeout): other transfers of the run
    /// try that host after the ones that answer.
    var marksHostBad: Bool {
        guard case .network(let code, _) = self else { return false }
        return Self.unreachableCodes.contains(code)
    }

    private static let unreachableCodes: Set<Int> = [
        6,  // CURLE_COULDNT_RESOLVE_HOST
        7,  // CURLE_COULDNT_CONNECT
        28, // CURLE_OPERATION_TIMEDOUT (connect timeout, or haul's stall window)
    ]

    /// TLS verification failures and unsupported protocols are not going to change on a retry.
    private static let permanentNetworkCodes: Set<Int> = [
        1,  // CURLE_UNSUPPORTED_PROTOCOL
        3,  // CURLE_URL_MALFORMAT
        35, // CURLE_SSL_CONNECT_ERROR (handshake refused)
        51, // obsolete alias of 60 before 7.62
        53, 54, 58, 59, 60, 64, 66, 77, 80, 82, 83, 90, 91,
    ]
}

/// One failed attempt: which URL (display form), why.
public struct AttemptFailure: Sendable, Equatable, CustomStringConvertible {
    public var sourceDisplayURL: String
    public var reason: FailureReason
    public init(sourceDisplayURL: String, reason: FailureReason) {
        self.sourceDisplayURL = sourceDisplayURL
        self.reason = reason
    }
    public var description: String { "\(sourceDisplayURL): \(reason)" }
}

/// Every source failed. `attempts` lists each URL tried and why it failed, in order.
public struct TransferFailure: Error, Sendable, CustomStringConvertible {
    public var attempts: [AttemptFailure]
    public var description: String { attempts.map(\.description).joined(separator: "; ") }
    /// The failure that ended each source, one per URL tried.
    public var lastFailurePerSource: [AttemptFailure] {
        var seen: [String: Int] = [:]
        var out: [AttemptFailure] = []
        for attempt in attempts {
            if let index = seen[attempt.sourceDisplayURL] { out[index] = attempt } else {
                seen[attempt.sourceDisplayURL] = out.count
                out.append(attempt)
            }
        }
        return out
    }
}
