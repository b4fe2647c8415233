/// A line on its way to a person: to a terminal, or to a log someone will `cat` in one. The only thing the CLI's
/// `Output` writes, so that no text reaches a terminal without passing through `escaping`.
///
/// Much of what haul prints is not haul's to choose: a destination is the manifest's (`cr\rerror: FAKE`,
/// `clear\e[2J.bin`, `bidi-\u202Etxt.exe` are all valid file names), a URL is the manifest's, an error may quote a
/// file name or what libcurl read from a server. Written raw, a terminal obeys such text instead of showing it: ESC
/// starts a sequence that moves the cursor, clears the screen or recolours; CR goes back to the start of the line,
/// so what follows overwrites it (a fake `error:`); LF starts a line of its own; a C1 control is an ESC sequence in
/// one character to some terminals; a bidi control reorders what follows (`bidi-\u202Etxt.exe` reads
/// `bidi-exe.txt`). Each such scalar is therefore shown as an escape, in the notation of the manifest's own
/// diagnostics (`Quoted`): `\n`, `\r`, `\t`, otherwise `\u{1b}`, `\u{202e}` — so the name stays readable and
/// what is odd about it is visible. Printable text, non-ASCII included, is left as it is, and so is a backslash:
/// escaping it would change every ordinary name that has one, for an ambiguity that moves no cursor.
///
/// Escaping whole lines here, at the one place they are written, rather than each value where it is interpolated,
/// is what makes the rule hold for text nobody thought of as untrusted (a libcurl message quoting a certificate's
/// name). The lines haul composes hold no control character of their own; colour, haul's only escape sequence in a
/// line, is added by `painted`, after the text it paints is escaped.
package struct TerminalText: Sendable, Equatable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The text as written: printable scalars, and the SGR sequences of `painted`.
    package let rendered: String

    /// `text` with every control and bidi scalar escaped.
    package init(_ text: String) {
        rendered = Self.escaping(text)
    }

    package init(stringLiteral value: String) {
        self.init(value)
    }

    /// `"error: \(destination): …"` as a line: the whole of it escaped, interpolated values included.
    package init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    private init(rendered: String) {
        self.rendered = rendered
    }

    package var description: String { rendered }

    /// `text` (escaped) in an SGR colour, reset after it: a colour that leaks past its word would paint the rest of
    /// the terminal. Only for a stream `Colour.enabled` said yes to.
    package static func painted(_ text: String, _ sgr: String) -> TerminalText {
        TerminalText(rendered: "\u{1B}[\(sgr)m" + escaping(text) + "\u{1B}[0m")
    }

    package static func + (lhs: TerminalText, rhs: TerminalText) -> TerminalText {
        TerminalText(rendered: lhs.rendered + rhs.rendered)
    }

    /// The rule itself, for text that must be measured in columns once escaped (the live view's names) before it
    /// becomes a line.
    package static func escaping(_ text: String) -> String {
        // Nearly every line is free of them: one pass over the bytes, and the line is returned as it was.
        guard text.utf8.contains(where: mayStartEscapedScalar) else { return text }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                escaped.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            default: escaped += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
        }
        return escaped
    }

    /// C0 controls, DEL, C1 controls, and bidi controls (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069):
    /// what a terminal may act on. `--json` writes the same set as `\u` escapes (`JSONValue`).
    package static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        // Below U+061C, only the controls; the Unicode property lookup only for what could be a bidi control.
        return value < 0x20 || (0x7F...0x9F).contains(value) || (value >= 0x61C && scalar.properties.isBidiControl)
    }

    /// A UTF-8 byte that is such a scalar or may begin one: below 0x20, DEL, 0xC2 (C1 controls), 0xD8 (U+061C),
    /// 0xE2 (the other bidi controls). A false positive only costs the exact pass.
    private static func mayStartEscapedScalar(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == 0xC2 || byte == 0xD8 || byte == 0xE2
    }
}
