import HaulEngine
import HaulFileSystem

/// A failed attempt in a user's words: the engine says what happened as values (`FailureReason`, `CurlCode`), and
/// only the command knows the options and variables that fix it.
enum FailureWording {
    /// `https://h/a.csv: HTTP 404`: the URL tried and why it failed.
    static func attempt(_ failure: AttemptFailure) -> String {
        "\(failure.sourceDisplayURL): \(reason(failure.reason))"
    }

    /// Every attempt of a transfer that failed, in order.
    static func transfer(_ failure: TransferFailure) -> String {
        failure.attempts.map(attempt).joined(separator: "; ")
    }

    static func reason(_ reason: FailureReason) -> String {
        switch reason {
        case .network(let code, let message): plainWords(code) ?? message
        case .httpStatus(let status): "HTTP \(status)"
        case .digestMismatch(let expected, let actual, let encoding):
            "checksum mismatch: expected \(expected), got \(actual)" + servedWith(encoding)
        case .sizeMismatch(let expected, let actual, let encoding):
            "size mismatch: expected \(expected) bytes, got \(actual)" + servedWith(encoding)
        case .tooLarge(let limit): "more than the expected \(limit) bytes"
        case .redirectRefused(let why): "redirect refused: \(words(why))"
        case .resumeRejected(let offset, let range):
            "resume refused: asked for the bytes from \(offset), the server answered with "
                + (range.map { "Content-Range: \($0)" } ?? "no Content-Range")
        case .protocolViolation(let what): "protocol error: \(words(what))"
        case .proxyAuthenticationRequired(let variable, let proxy):
            if let variable, let proxy {
                // Credentials in the proxy's URL show as `***@`: a 407 to them is a refusal, not a request for some.
                "the proxy \(proxy) (from \(variable)) answered 407: "
                    + (proxy.contains("***@")
                        ? "it refused the credentials given in \(variable); correct them there: "
                        : variable == "--proxy"
                            ? "it wants credentials; give them in the proxy's URL: "
                            : "it wants credentials; give them in the variable as curl reads it: ")
                    + (variable == "--proxy" ? "--proxy " : variable + "=")
                    + ProxySettings.credentialsExample(for: proxy)
            } else {
                "HTTP 407: a proxy wants credentials; give them in the proxy variable as curl reads it: "
                    + "https_proxy=http://user:pass@host:port (http_proxy for http URLs)"
            }
        case .proxyFailed(let variable, let proxy, let how, _): "the proxy \(proxy) (from \(variable)) \(words(how))"
        case .clientCertificateRefused(let given):
            given
                ? "the server refused the client certificate it was given (--cert, or the manifest's cert:)"
                : "the server wants a client certificate (mutual TLS); give one with --cert (and --key)"
        case .local(let operation, let path, let code): "cannot \(words(operation)) \(path): \(Errno(code).description)"
        case .interrupted: "interrupted"
        case .timeLimitReached(let limit): "stopped: the run's time limit (\(limit)) was reached"
        }
    }

    static func words(_ refusal: RedirectRefusal) -> String {
        switch refusal {
        case .tooMany(let limit): "more than \(limit) redirects"
        case .unparsableTarget: "unparsable redirect target"
        case .unsupportedScheme(let scheme): "redirect to unsupported scheme \"\(scheme)\""
        case .downgrade: "redirect from https to http"
        case .noHost: "redirect target has no host"
        case .loop: "redirect loop"
        }
    }

    static func words(_ violation: ProtocolViolation) -> String {
        switch violation {
        case .headersTooLarge(let kibibytes): "response headers over \(kibibytes) KiB"
        case .statusOutOfRange(let status): "status \(status) is outside 100-599"
        case .conflictingContentLength(let first, let second):
            "conflicting Content-Length values: \(first) and \(second)"
        case .malformedContentLength(let field): "malformed Content-Length: \(field)"
        case .contentLengthTooLarge(let text): "Content-Length above 2^63-1: \(text)"
        case .unaskedPartialContent: "partial content (206) that haul did not ask for"
        case .headerLineTooLong: "a response header line over 100 KiB"
        case .unreadableAnswer(let message): message
        }
    }

    /// Follows the proxy's name: "the proxy … (from …) could not be resolved".
    static func words(_ trouble: ProxyTrouble) -> String {
        switch trouble {
        case .refusedTunnel(let status): "answered \(status) to CONNECT"
        case .unresolved: "could not be resolved"
        case .unreachable: "could not be reached (refused, or no route to it)"
        }
    }

    /// What was attempted, phrased to follow "cannot" and come before the path.
    static func words(_ operation: LocalOperation) -> String {
        switch operation {
        case .createTemporaryFile: "create temporary file"
        case .openPartialFile: "open partial file"
        case .usePartialFile: "use partial file"
        case .truncate: "truncate"
        case .open: "open"
        case .write: "write"
        case .hash: "hash"
        case .readBack: "read back"
        case .moveVerifiedFile: "move verified file to"
        case .copyVerifiedFile: "copy verified file to"
        case .startLibcurl: "initialize libcurl for"
        case .openFileOrConnection: "open a file or a connection for"
        }
    }

    /// libcurl's own message, for a network failure `reason` says in haul's words: what `--verbose` adds.
    static func libcurlDetail(_ reason: FailureReason) -> String? {
        guard case .network(let code, let message) = reason, plainWords(code) != nil, !message.isEmpty else {
            return nil
        }
        return message
    }

    /// The failure in a user's words, for the codes whose libcurl message reads as libcurl's internals ("Failed to
    /// connect to h port 443 after 3 ms: Couldn't connect to server", "Recv failure: Connection reset by peer");
    /// nil where libcurl's message is the best there is, or where the engine wrote its own (timeouts).
    static func plainWords(_ code: CurlCode) -> String? {
        switch code {
        case .couldNotResolveHost: "the host name could not be resolved"
        case .couldNotConnect: "could not connect (refused, or no route to the host)"
        case .http2FramingError: "the HTTP/2 connection failed"
        case .partialFile: "the connection closed before the whole body arrived"
        case .sslConnectError: "the TLS handshake failed"
        case .gotNothing: "the server closed the connection without answering"
        case .sendError: "the connection failed while sending the request"
        case .receiveError: "the connection failed while receiving (reset by the server?)"
        case .peerFailedVerification, .peerFailedVerificationBefore762, .sslIssuerError:
            "the server's TLS certificate could not be verified"
        case .sslCACertificateBadFile: "the CA bundle could not be read"
        case .http2StreamError: "the server reset the HTTP/2 stream"
        default: nil
        }
    }

    /// ` (served with Content-Encoding: gzip)`, or nothing.
    static func servedWith(_ encoding: String?) -> String {
        encoding.map { " (served with Content-Encoding: \($0))" } ?? ""
    }
}
