/// Checks that a source URL is something the engine can fetch: absolute http(s) with a host.
///
/// The check runs on the expanded text (that is what gets fetched) but every message quotes the template, and a
/// part of the URL is named only when it comes from the template's literal text, never from a variable.
enum URLRules {
    static func check(_ url: TemplatedString) throws(RuleFailure) {
        var expanded = url.expanded
        // `withUTF8` reads a native string in place: no per-URL copy on the hot path.
        if let problem = expanded.withUTF8({ problem(in: $0, url: url) }) { throw RuleFailure(problem) }
    }

    private static func problem(in bytes: UnsafeBufferPointer<UInt8>, url: TemplatedString) -> String? {
        // Built only on failure: redaction and quoting cost more than the whole check.
        var shown: String { Quoted.text(url.description) }
        guard !bytes.isEmpty else {
            return url.template.isEmpty
                ? "expected an http:// or https:// URL, found an empty string"
                : "\(shown) expands to an empty URL"
        }
        if bytes.contains(where: isSpaceOrControl) {
            return url.template.utf8.contains(where: isSpaceOrControl)
                ? "URL \(shown) contains a space or control character"
                : "URL \(shown) contains a space or control character once environment variables are expanded"
        }
        guard let colon = schemeEnd(bytes) else {
            return "expected an absolute http:// or https:// URL, found \(shown)"
        }
        guard isHTTPScheme(UnsafeBufferPointer(rebasing: bytes[..<colon])) else {
            let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
            let template = url.template.utf8
            let schemeIsLiteral =
                template.count > colon && template.prefix(colon + 1).elementsEqual(bytes[...colon])
                && !template.prefix(colon + 1).contains(UInt8(ascii: "$"))
            return schemeIsLiteral
                ? "unsupported URL scheme \(Quoted.text(scheme)) (haul fetches http and https)"
                : "\(shown) does not expand to an http:// or https:// URL"
        }
        let slash = UInt8(ascii: "/")
        guard bytes.count > colon + 2, bytes[colon + 1] == slash, bytes[colon + 2] == slash else {
            return "expected an absolute http:// or https:// URL, found \(shown)"
        }
        return authorityProblem(bytes[(colon + 3)...]).map { "URL \(shown) \($0)" }
    }

    /// Index of the `:` ending a syntactically valid scheme (`[A-Za-z][A-Za-z0-9+.-]*`), if any.
    private static func schemeEnd(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        for (index, byte) in bytes.enumerated() {
            let isLetter = (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
            if byte == UInt8(ascii: ":") { return index > 0 ? index : nil }
            let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
            let isSymbol = byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            guard isLetter || (index > 0 && (isDigit || isSymbol)) else { return nil }
        }
        return nil
    }

    /// What is wrong with `host[:port]` (after any userinfo), phrased to follow "URL <url> ".
    private static func authorityProblem(_ rest: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        let authorityEnd =
            rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        var hostPort = rest[rest.startIndex..<authorityEnd]
        if let at = hostPort.lastIndex(of: UInt8(ascii: "@")) {
            hostPort = hostPort[(at + 1)...]
        }
        let portStart: Int
        if hostPort.first == UInt8(ascii: "[") {
            guard let bracket = hostPort.firstIndex(of: UInt8(ascii: "]")), bracket > hostPort.startIndex + 1 else {
                return "has an invalid IPv6 host"
            }
            portStart = bracket + 1
        } else {
            portStart = hostPort.firstIndex(of: UInt8(ascii: ":")) ?? hostPort.endIndex
            guard portStart > hostPort.startIndex else { return "has no host" }
        }
        let port = hostPort[portStart...]
        guard !port.isEmpty else { return nil }
        let digits = port.dropFirst()
        guard port.first == UInt8(ascii: ":"), digits.count <= 5,
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            digits.reduce(0, { $0 * 10 + Int($1 - UInt8(ascii: "0")) }) <= 65535
        else {
            return "has an invalid port"
        }
        return nil
    }

    /// `http` or `https` in any case, compared on bytes (no lowercased copy per URL).
    private static func isHTTPScheme(_ scheme: UnsafeBufferPointer<UInt8>) -> Bool {
        guard scheme.count == 4 || (scheme.count == 5 && scheme[4] | 0x20 == UInt8(ascii: "s")) else { return false }
        return scheme[0] | 0x20 == UInt8(ascii: "h") && scheme[1] | 0x20 == UInt8(ascii: "t")
            && scheme[2] | 0x20 == UInt8(ascii: "t") && scheme[3] | 0x20 == UInt8(ascii: "p")
    }

    /// What no URL may hold (a request line would carry it, or libcurl refuses it): space, C0 controls, DEL.
    static func containsSpaceOrControl(_ text: String) -> Bool { text.utf8.contains(where: isSpaceOrControl) }

    private static func isSpaceOrControl(_ byte: UInt8) -> Bool { byte <= 0x20 || byte == 0x7f }
}
