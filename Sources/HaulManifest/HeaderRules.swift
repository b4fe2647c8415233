/// Rules for `headers:` mappings. Names must be tokens and values single-line because both end up verbatim in an
/// HTTP request: a newline in a value (perhaps from an environment variable) would inject a header.
package enum HeaderRules {
    /// RFC 7230 §3.2.6 `token`.
    /// Headers a manifest may not set, in `canonicalName` form: haul's own resume, revalidation, encoding and
    /// framing depend on them.
    static let ownedByHaul: Set<String> = [
        "range", "if-range", "accept-encoding", "te", "host", "content-length", "transfer-encoding", "connection",
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "upgrade", "keep-alive",
    ].reduce(into: Set<String>()) { $0.insert(canonicalName($1)) }

    static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(isTokenByte)
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    static func hasForbiddenValueByte(_ text: String) -> Bool {
        text.utf8.contains { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") || $0 == 0 }
    }

    /// ASCII lowercase; header names are tokens, so no Unicode case folding is needed.
    static func canonicalName(_ name: String) -> String {
        guard name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return name }
        let lowered = name.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
        return String(decoding: lowered, as: UTF8.self)
    }

    /// `Name: value` as given to `-H` (curl's form): the same rules as a manifest's header, with the message
    /// naming the option. The value is the command line's own text, not expanded.
    package static func commandLineHeader(_ text: String) throws(HeaderLineError) -> HeaderField {
        guard let colon = text.firstIndex(of: ":") else {
            throw HeaderLineError("-H \(Quoted.text(text)): expected \"Name: value\"")
        }
        let name = String(text[..<colon])
        var value = text[text.index(after: colon)...]
        while value.first == " " || value.first == "\t" { value = value.dropFirst() }
        guard isToken(name) else {
            throw HeaderLineError(
                "-H: header name \(Quoted.text(name)) is not a token (letters, digits, !#$%&'*+-.^_`|~)")
        }
        guard !ownedByHaul.contains(canonicalName(name)) else {
            throw HeaderLineError("-H: haul sets \(name) itself (resume, revalidation and framing depend on it)")
        }
        guard !hasForbiddenValueByte(String(value)) else {
            throw HeaderLineError("-H \(name): a value must be one line (no CR, LF or NUL)")
        }
        return HeaderField(name: name, value: TemplatedString(literal: String(value)))
    }

    /// Per-file headers win over defaults by case-insensitive name; an overridden default keeps its place in the
    /// order, taking the entry's spelling, and new headers follow.
    package static func merge(defaults: [HeaderField], entry: [HeaderField]) -> [HeaderField] {
        guard !defaults.isEmpty else { return entry }
        guard !entry.isEmpty else { return defaults }
        var merged = defaults
        // Positions by name: looking each one up by a scan made this quadratic in the number of headers.
        var positions = Dictionary(
            defaults.indices.map { (canonicalName(defaults[$0].name), $0) },
            uniquingKeysWith: { first, _ in first })
        for field in entry {
            let name = canonicalName(field.name)
            if let index = positions[name] {
                merged[index] = field
            } else {
                positions[name] = merged.count
                merged.append(field)
            }
        }
        return merged
    }
}

/// A `-H` argument that cannot be a header: the message says why (it never quotes the value).
package struct HeaderLineError: Error, Sendable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
