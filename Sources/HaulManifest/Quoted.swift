/// The scalars no text haul shows may hold raw, whoever chose it (a manifest, a server, the command line): C0
/// controls, DEL, C1 controls, bidi controls (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069), and the line and
/// paragraph separators (U+2028, U+2029), at which terminals and log viewers may break the line. What a terminal may
/// act on, or a reader be misled by. Every escaper asks this one predicate: `Quoted` here, and the CLI's
/// `TerminalText` and `JSONValue`.
package enum UnsafeScalar {
    package static func contains(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        // Below U+061C, only the controls; the Unicode property lookup only for what could be a bidi control.
        return value < 0x20 || (0x7F...0x9F).contains(value)
            || (value >= 0x61C && (value == 0x2028 || value == 0x2029 || scalar.properties.isBidiControl))
    }

    /// A UTF-8 byte that is such a scalar or may begin one: below 0x20, DEL, 0xC2 (C1 controls), 0xD8 (U+061C),
    /// 0xE2 (the other bidi controls, the separators). A false positive only costs an exact pass.
    package static func mayStart(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == 0xC2 || byte == 0xD8 || byte == 0xE2
    }

    /// `mayStart` of every byte value, for the escapers' pass over every byte of what they write: read once per
    /// text, then indexed in the loop. Another module's function called for each byte (the compiler does not inline
    /// it across modules here) made `plan --json` of a million entries 4% slower.
    package static let mayStartTable: [Bool] = (0...255).map { mayStart(UInt8($0)) }
}

/// Renders user-written text inside a message: quoted, unsafe scalars escaped (`UnsafeScalar`) and long values
/// shortened, so that a stray newline, a bidi override or a 10 kB value cannot garble a terminal.
package enum Quoted {
    static let limit = 80

    package static func text(_ value: some StringProtocol) -> String {
        render(value, escapingNonASCII: false)
    }

    /// The first few of `items` (each rendered by `render`), then how many more: `"a", "b", "c" and 2 more`. A
    /// message names enough to find them, whatever their number.
    package static func firstFew<Item>(_ items: some Collection<Item>, _ render: (Item) -> String) -> String {
        items.prefix(3).map(render).joined(separator: ", ") + (items.count > 3 ? " and \(items.count - 3) more" : "")
    }

    /// Every non-ASCII scalar escaped (`"cafe\u{301}"`): two spellings that a terminal draws alike, such as
    /// the Unicode normalization forms of one name, are told apart.
    package static func scalars(_ value: some StringProtocol) -> String {
        render(value, escapingNonASCII: true)
    }

    private static func render(_ value: some StringProtocol, escapingNonASCII: Bool) -> String {
        var out = "\""
        var count = 0
        for scalar in value.unicodeScalars {
            if count == limit {
                out += "…"
                break
            }
            count += 1
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if UnsafeScalar.contains(scalar) || (escapingNonASCII && scalar.value > 0x7f) {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
