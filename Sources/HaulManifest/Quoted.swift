/// Renders user-written text inside a message: quoted, control characters escaped and long values shortened,
/// so that a stray newline or a 10 kB value cannot garble a terminal.
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
                if scalar.value < 0x20 || scalar.value == 0x7f || (escapingNonASCII && scalar.value > 0x7f) {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
