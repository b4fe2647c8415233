import HaulDigest

/// Why one attempt at one URL failed.
package enum FailureReason: Error, Sendable, Equatable {
    /// The client side: no route, refused, reset, timeout, TLS verification, as libcurl reported it.
    case network(code: CurlCode, message: String)
    /// The server answered with a status outside 200..<300.
    case httpStatus(Int)
    /// `contentEncoding`: the server compressed the body although haul asked for no encoding (it sends no
    /// `Accept-Encoding`): what arrived is not the file, and the message says so.
    case digestMismatch(expected: Digest, actual: Digest, contentEncoding: String? = nil)
    case sizeMismatch(expected: Int64, actual: Int64, contentEncoding: String? = nil)
    /// More bytes than the pinned size arrived; the transfer was cut.
    case tooLarge(limit: Int64)
    /// A redirect haul refuses to follow (scheme, downgrade, loop, too many hops).
    case redirectRefused(RedirectRefusal)
    /// The server's answer to a resume cannot be spliced onto the bytes we have.
    /// `askedFrom`: the offset the resume asked for; `contentRange`: the server's answer (quoted safely), nil when it
    /// sent none.
    case resumeRejected(askedFrom: Int64, contentRange: String?)
    /// The answer breaks HTTP's rules (conflicting or malformed `Content-Length`, a status outside 100-599, a
    /// header block too large, a 206 nobody asked for): nothing it says can be believed, so that URL is not
    /// retried.
    case protocolViolation(ProtocolViolation)
    /// A proxy answered 407: it wants credentials. `variable` is the environment variable the proxy came from
    /// and `proxy` its URL with any userinfo shown as `***` (nil when haul cannot tell which proxy answered).
    case proxyAuthenticationRequired(variable: String?, proxy: String?)
    /// The proxy (`proxy`, shown redacted, set by `variable`: `--proxy` or an environment variable) failed the
    /// request before any origin was reached: `what` says how ("refused the connection", "answered 403 to
    /// CONNECT"). `transient`: whether asking again may help (a 502, a proxy restarting), not for a 403.
    case proxyFailed(variable: String, proxy: String, how: ProxyTrouble, transient: Bool)
    /// The server ended the TLS handshake for want of a client certificate (`given`: false), or refused the one
    /// `--cert` gave (`given`: true): asking again with the same settings cannot help.
    case clientCertificateRefused(given: Bool)
    /// The local side: the temporary file could not be created or written.
    case local(operation: LocalOperation, path: String, errno: Int32)
    /// The run was interrupted (SIGINT, SIGTERM) before this transfer finished.
    case interrupted
    /// The run's time limit (`--max-time`, shown as given) was reached before this transfer finished.
    case timeLimitReached(String)

    /// Whether trying the same URL again can help. Checksum and size mismatches move on to the next source
    /// instead: the same URL would most likely serve the same bytes.
    package var isTransient: Bool {
        switch self {
        case .network(let code, _):
            return !Self.permanentNetworkCodes.contains(code)
        case .httpStatus(let status):
            return status == 408 || status == 429 || (status >= 500 && status != 501 && status != 505)
        case .proxyFailed(_, _, _, let transient):
            return transient
        case .resumeRejected:
            // The retry starts from byte 0 (the bytes are dropped), which is likely to work.
            return true
        case .digestMismatch, .sizeMismatch, .tooLarge, .redirectRefused, .protocolViolation,
            .proxyAuthenticationRequired,
            .clientCertificateRefused, .local, .interrupted, .timeLimitReached:
            return false
        }
    }

    /// The bytes arrived and are not the file pinned (a checksum or size that differs): a verdict on one request's
    /// pin, not on the URL.
    package var isAboutTheBytes: Bool {
        switch self {
        case .digestMismatch, .sizeMismatch: true
        default: false
        }
    }

    /// Wrong bytes that arrived with a `Content-Encoding` haul did not ask for.
    package var isEncoded: Bool {
        switch self {
        case .digestMismatch(_, _, let encoding?), .sizeMismatch(_, _, let encoding?): !encoding.isEmpty
        default: false
        }
    }

    /// A failure to reach the host at all (no address, connection refused, timeout): other transfers of the run
    /// try that host after the ones that answer.
    var marksHostBad: Bool {
        guard case .network(let code, _) = self else { return false }
        return [.couldNotResolveHost, .couldNotConnect, .operationTimedOut].contains(code)
    }

    /// TLS verification failures, unsupported protocols and options this libcurl lacks are not going to change
    /// on a retry. A failed handshake (`sslConnectError`) may: a reset or a server restarting mid-handshake looks
    /// the same, so it is retried like a reset.
    private static let permanentNetworkCodes: Set<CurlCode> = [
        .unsupportedProtocol, .malformedURL, .notBuiltIn, .badFunctionArgument, .unknownOption,
        .peerFailedVerificationBefore762, .sslEngineNotFound, .sslEngineSetFailed, .sslCertificateProblem,
        .sslCipher, .peerFailedVerification, .useSSLFailed, .sslEngineInitFailed, .sslCACertificateBadFile,
        .sslShutdownFailed, .sslCRLBadFile, .sslIssuerError, .sslPinnedPublicKeyMismatch, .sslInvalidCertificateStatus,
    ]
}

/// Why a redirect was not followed.
package enum RedirectRefusal: Sendable, Equatable {
    case tooMany(limit: Int)
    case unparsableTarget
    /// To a scheme other than http and https (shown safely).
    case unsupportedScheme(String)
    /// From https to http.
    case downgrade
    case noHost
    case loop
}

/// How an answer broke HTTP's rules. Server text in it is already made safe (`ServerText.quoted`).
package enum ProtocolViolation: Sendable, Equatable {
    case headersTooLarge(kibibytes: Int)
    /// A status line libcurl read, outside 100-599.
    case statusOutOfRange(Int)
    case conflictingContentLength(Int64, Int64)
    case malformedContentLength(String)
    case contentLengthTooLarge(String)
    /// A 206 to a request without `Range`.
    case unaskedPartialContent
    /// libcurl 7.88 reports a header line over its 100 KiB limit as out of memory.
    case headerLineTooLong
    /// What libcurl found malformed (an invalid Content-Length, a status line it cannot read), in its words.
    case unreadableAnswer(String)
}

/// How a proxy failed a request before any origin was reached.
package enum ProxyTrouble: Sendable, Equatable {
    /// It answered a tunnel's CONNECT with this status.
    case refusedTunnel(status: Int)
    case unresolved
    case unreachable
}

/// What the engine was doing on the local side when a transfer failed there.
package enum LocalOperation: Sendable, Equatable {
    case createTemporaryFile, openPartialFile, usePartialFile, truncate, open, write, hash, readBack
    case moveVerifiedFile, copyVerifiedFile
    /// A libcurl handle could not be made (out of memory).
    case startLibcurl
    /// No descriptor for the file or the connection came back in time.
    case openFileOrConnection
}

/// A libcurl result code (CURLcode), named: code that decides on it reads `.operationTimedOut`, not 28.
package struct CurlCode: Sendable, Hashable, CustomStringConvertible {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    package static let unsupportedProtocol = CurlCode(rawValue: 1)
    package static let malformedURL = CurlCode(rawValue: 3)
    package static let notBuiltIn = CurlCode(rawValue: 4)
    package static let couldNotResolveProxy = CurlCode(rawValue: 5)
    package static let couldNotResolveHost = CurlCode(rawValue: 6)
    package static let couldNotConnect = CurlCode(rawValue: 7)
    package static let partialFile = CurlCode(rawValue: 18)
    package static let operationTimedOut = CurlCode(rawValue: 28)
    package static let sslConnectError = CurlCode(rawValue: 35)
    package static let badFunctionArgument = CurlCode(rawValue: 43)
    package static let unknownOption = CurlCode(rawValue: 48)
    /// CURLE_PEER_FAILED_VERIFICATION's number before libcurl 7.62.
    package static let peerFailedVerificationBefore762 = CurlCode(rawValue: 51)
    package static let sslEngineNotFound = CurlCode(rawValue: 53)
    package static let sslEngineSetFailed = CurlCode(rawValue: 54)
    package static let receiveError = CurlCode(rawValue: 56)
    package static let sslCertificateProblem = CurlCode(rawValue: 58)
    package static let sslCipher = CurlCode(rawValue: 59)
    package static let peerFailedVerification = CurlCode(rawValue: 60)
    package static let useSSLFailed = CurlCode(rawValue: 64)
    package static let sslEngineInitFailed = CurlCode(rawValue: 66)
    package static let sslCACertificateBadFile = CurlCode(rawValue: 77)
    package static let sslShutdownFailed = CurlCode(rawValue: 80)
    package static let sslCRLBadFile = CurlCode(rawValue: 82)
    package static let sslIssuerError = CurlCode(rawValue: 83)
    package static let sslPinnedPublicKeyMismatch = CurlCode(rawValue: 90)
    package static let sslInvalidCertificateStatus = CurlCode(rawValue: 91)

    package static let http2FramingError = CurlCode(rawValue: 16)
    package static let gotNothing = CurlCode(rawValue: 52)
    package static let sendError = CurlCode(rawValue: 55)
    package static let http2StreamError = CurlCode(rawValue: 92)

    /// `curl 28`: the number libcurl's documentation and `curl`'s own exit status use.
    package var description: String { "curl \(rawValue)" }
}

/// One failed attempt: which URL (display form), why.
package struct AttemptFailure: Sendable, Equatable {
    package var sourceDisplayURL: String
    package var reason: FailureReason
    /// Where a redirect to another origin led, when the answer came from there without the source's headers (haul
    /// sends them to their own origin only): shown safely (`RedirectedURL`). Set for a 401 or 403 only, where it
    /// explains the refusal.
    package var headersWithheldAt: String?
    package init(sourceDisplayURL: String, reason: FailureReason, headersWithheldAt: String? = nil) {
        self.sourceDisplayURL = sourceDisplayURL
        self.reason = reason
        self.headersWithheldAt = headersWithheldAt
    }
}

/// Every source failed. `attempts` lists each URL tried and why it failed, in order.
package struct TransferFailure: Error, Sendable {
    package var attempts: [AttemptFailure]
    package init(attempts: [AttemptFailure]) { self.attempts = attempts }
    /// The failure that ended each source, one per URL tried.
    package var lastFailurePerSource: [AttemptFailure] {
        var seen: [String: Int] = [:]
        var out: [AttemptFailure] = []
        for attempt in attempts {
            if let index = seen[attempt.sourceDisplayURL] {
                out[index] = attempt
            } else {
                seen[attempt.sourceDisplayURL] = out.count
                out.append(attempt)
            }
        }
        return out
    }
}
