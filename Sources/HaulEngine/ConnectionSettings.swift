/// How a request reaches its server, from the command line (`--proxy`, `--noproxy`, `--connect-timeout`, `--cert`,
/// `--key`), each as curl's option of the same name means it; nil: libcurl's own way (the environment's proxy
/// variables, the stall window for connecting, no client certificate).
package struct ConnectionSettings: Sendable, Equatable {
    /// The proxy every request goes through instead of the environment's; "" (as `curl --proxy ""`): none at all.
    /// May hold credentials: shown only through `ProxySettings.redactingUserinfo`.
    package var proxy: String?
    /// Hosts reached without the proxy, curl's syntax: comma-separated names (a name also covers its subdomains),
    /// `*` for all. Over the environment's `no_proxy`.
    package var noProxy: String?
    /// Seconds the connection phase (name lookup, TCP, TLS handshake) may take; nil: the entry's stall window.
    package var connectTimeout: Double?
    /// A client certificate for servers that ask for one (mutual TLS): PEM files, read by libcurl at each handshake.
    package var clientCertificate: ClientCertificate?

    package init(
        proxy: String? = nil, noProxy: String? = nil, connectTimeout: Double? = nil,
        clientCertificate: ClientCertificate? = nil
    ) {
        self.proxy = proxy
        self.noProxy = noProxy
        self.connectTimeout = connectTimeout
        self.clientCertificate = clientCertificate
    }

    /// The userinfo of `proxy` (`user:secret`, and the password alone), which libcurl's own messages must not carry
    /// into haul's: scrubbed as a source's secrets are.
    var proxySecrets: [String] {
        guard let proxy, let userinfo = ProxySettings.userinfo(of: proxy) else { return [] }
        let password = userinfo.split(separator: ":", maxSplits: 1).dropFirst().first.map(String.init)
        return [userinfo] + (password.map { [$0] } ?? [])
    }

    /// `--connect-timeout` as messages say it: `5 s`, `0.5 s`.
    var connectTimeoutShown: String? {
        connectTimeout.map { $0 == $0.rounded() && $0 < 1e9 ? "\(Int($0)) s" : "\($0) s" }
    }
}

/// A certificate and its private key (`--cert`, `--key`); without `key`, the key is in the certificate's file, as
/// curl takes it.
package struct ClientCertificate: Sendable, Equatable {
    package var certificate: String
    package var key: String?

    package init(certificate: String, key: String? = nil) {
        self.certificate = certificate
        self.key = key
    }
}

/// nginx asks for a client certificate during the handshake but checks it only after, and answers a request that
/// came without one (or with one it does not trust) with a 400 whose page says so; the status alone would read as
/// a malformed request. Only the page's first bytes are looked at.
enum ClientCertificatePage {
    static let sniffedBytes = 512

    /// The refusal the 400's page states (whether a certificate was given is what the page says), or nil for any
    /// other answer.
    static func refusal(status: Int, body: [UInt8]) -> FailureReason? {
        guard status == 400, !body.isEmpty else { return nil }
        let text = String(decoding: body, as: UTF8.self)
        if text.contains("No required SSL certificate was sent") { return .clientCertificateRefused(given: false) }
        if text.contains("The SSL certificate error") { return .clientCertificateRefused(given: true) }
        return nil
    }
}
