import Glibc

/// Text a server chose (a `Content-Range`, a `Content-Encoding`, a header value) as it may appear in a message:
/// control characters and anything not printable ASCII become `?` and it is cut at `limit` characters, so a
/// hostile server can neither move the cursor of the terminal that shows the error nor flood it. (The manifest's
/// own text is quoted by HaulManifest's `Quoted`, which the engine does not depend on; server text is not the
/// user's, so it is not escaped for reading back but reduced to what is safe to show.)
enum ServerText {
    static func quoted(_ text: some StringProtocol, limit: Int = 80) -> String {
        var out = ""
        var count = 0
        for byte in text.utf8 {
            if count == limit {
                out += "…"
                break
            }
            out.unicodeScalars.append((0x20..<0x7F).contains(byte) ? Unicode.Scalar(byte) : "?")
            count += 1
        }
        return out
    }
}

/// The proxy a request goes through, found the way libcurl finds it (`--proxy`, else the environment), so that a
/// proxy's refusal or 407 can name the proxy and where it was set. Only for messages: libcurl itself applies the
/// settings and reads the environment for the transfer.
package enum ProxySettings {
    /// Where the proxy for `url` was set (`--proxy`, or the variable libcurl reads) and its URL with any userinfo
    /// shown as `***`; nil when the request goes direct (no proxy, or the host is in `--noproxy`/`no_proxy`).
    static func proxy(
        for url: String, settings: ConnectionSettings = ConnectionSettings()
    ) -> (variable: String, redactedURL: String)? {
        let noProxy = settings.noProxy ?? environment("no_proxy") ?? environment("NO_PROXY")
        if let noProxy, let host = URLOrigin(url)?.host, bypasses(host: host, noProxy: noProxy) { return nil }
        if let proxy = settings.proxy { return proxy.isEmpty ? nil : ("--proxy", redactingUserinfo(proxy)) }
        let scheme = url.prefix { $0 != ":" }.lowercased()
        // libcurl reads `http_proxy` only in lower case (an upper-case one could come from a CGI request header);
        // other schemes in both cases, then `all_proxy`.
        var names = ["\(scheme)_proxy"]
        if scheme != "http" { names.append("\(scheme.uppercased())_PROXY") }
        names += ["all_proxy", "ALL_PROXY"]
        for name in names {
            if let value = environment(name) { return (name, redactingUserinfo(value)) }
        }
        return nil
    }

    /// Whether `host` is reached directly under a `no_proxy` list as libcurl reads one: `*`, or a name equal to the
    /// host or one of its parent domains (a leading dot changes nothing), compared without case.
    static func bypasses(host: String, noProxy: String) -> Bool {
        let host = host.lowercased().trimmingBrackets
        return noProxy.split(separator: ",").contains { item in
            var name = String(item).trimmingWhitespace.lowercased()
            if name == "*" { return true }
            while name.hasPrefix(".") { name.removeFirst() }
            name = name.trimmingBrackets
            return !name.isEmpty && (host == name || host.hasSuffix("." + name))
        }
    }

    private static func environment(_ name: String) -> String? {
        guard let pointer = getenv(name) else { return nil }
        let value = String(cString: pointer)
        return value.isEmpty ? nil : value
    }

    /// `http://user:secret@proxy:3128` → `user:secret`; nil without userinfo.
    static func userinfo(of proxy: String) -> String? {
        let (_, rest) = split(proxy)
        let authority = rest.prefix(while: { $0 != "/" })
        guard let at = authority.lastIndex(of: "@") else { return nil }
        return String(authority[..<at])
    }

    /// `http://user:secret@proxy:3128` → `http://***@proxy:3128`.
    static func redactingUserinfo(_ proxy: String) -> String {
        let (scheme, rest) = split(proxy)
        guard let at = rest.prefix(while: { $0 != "/" }).lastIndex(of: "@") else { return proxy }
        return scheme + "***" + rest[at...]
    }

    /// What the variable should hold: the same proxy with placeholder credentials (`http://user:pass@proxy:3128`).
    package static func credentialsExample(for proxy: String) -> String {
        var (scheme, rest) = split(proxy)
        if let at = rest.prefix(while: { $0 != "/" }).lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        return (scheme.isEmpty ? "http://" : scheme) + "user:pass@" + rest.prefix { $0 != "/" }
    }

    /// `("http://", "user@host:1/")`; a proxy without a scheme (`host:3128`, which libcurl takes as http) has none.
    private static func split(_ proxy: String) -> (scheme: String, rest: Substring) {
        let bytes = Array(proxy.utf8)
        for index in bytes.indices.dropLast(2) where bytes[index] == UInt8(ascii: ":") {
            guard bytes[index + 1] == UInt8(ascii: "/"), bytes[index + 2] == UInt8(ascii: "/") else { break }
            let end = proxy.utf8.index(proxy.utf8.startIndex, offsetBy: index + 3)
            return (String(proxy[..<end]), proxy[end...])
        }
        return ("", proxy[...])
    }
}

extension String {
    /// `[::1]` → `::1`: an IPv6 host as a URL writes it and as `no_proxy` may.
    fileprivate var trimmingBrackets: String {
        hasPrefix("[") && hasSuffix("]") ? String(dropFirst().dropLast()) : self
    }
}
