import HaulManifest

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
///
/// On a GitHub Actions runner (`GITHUB_ACTIONS=true`) the log has a second reader: the runner takes a line holding
/// `##[name …]` anywhere, or starting with `::name …::` (after blanks), as a workflow command (`##[set-output
/// name=x;]y`, `::add-mask::…`), whatever program printed it and whichever stream. There every line is also kept
/// from being one (`WorkflowCommandScan`), whatever `--annotations` says; haul's own annotations, made by
/// `init(workflowCommand:)`, are the only lines that start with `::`.
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

    /// A workflow command haul itself gives the runner (`::error file=…::message`, its message already in the
    /// command's own escaping): the leading `::` is kept, everything after it escaped as in any line.
    package init(workflowCommand command: String) {
        guard command.hasPrefix("::") else {
            self.init(command)
            return
        }
        self.init(rendered: "::" + Self.escaping(String(command.dropFirst(2))))
    }

    private init(rendered: String) {
        self.rendered = rendered
    }

    /// The end of a line, for output written in pieces (`Output.stream`).
    package static let lineEnd = TerminalText(rendered: "\n")

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
    /// becomes a line. `workflowCommands`: whether a runner reads the text for workflow commands (see the type's
    /// comment); the text is taken as the start of a line.
    package static func escaping(_ text: String, workflowCommands: Bool = readByWorkflowRunner) -> String {
        // Nearly every line is free of them: one pass over the bytes, and the line is returned as it was.
        let mayStart = UnsafeScalar.mayStartTable
        guard text.utf8.contains(where: { mayStart[Int($0)] || (workflowCommands && WorkflowCommandScan.mayStart($0)) })
        else {
            return text
        }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count + 16)
        var commands = WorkflowCommandScan(atLineStart: true)
        for scalar in text.unicodeScalars {
            guard UnsafeScalar.contains(scalar) || (workflowCommands && commands.completesCommand(scalar)) else {
                escaped.unicodeScalars.append(scalar)
                continue
            }
            commands.escaped()
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            default: escaped += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
        }
        return escaped
    }

    /// Whether a GitHub Actions runner reads what haul writes for workflow commands: decided once, from the
    /// variable the runner sets for every step.
    package static let readByWorkflowRunner = Environment.current["GITHUB_ACTIONS"] == "true"
}

/// Where a line would hold the start of a workflow command, scalar by scalar as it is written: the `[` of a `##[`
/// anywhere, the second `:` of a `::` that starts the line after blanks (the runner trims what .NET calls white
/// space). Written as an escape instead (`##\u{5b}`, `:\u{3a}`), that one scalar leaves the text readable and no
/// command in either form. Asked by the escapers of lines a runner reads: `TerminalText.escaping`, `JSONValue`.
package struct WorkflowCommandScan {
    private enum LineStart {
        case blanks
        case colon
        case passed
    }

    private var lineStart: LineStart
    /// `#` written raw just before, in a row.
    private var hashes = 0

    package init(atLineStart: Bool) {
        lineStart = atLineStart ? .blanks : .passed
    }

    /// Whether `scalar`, written raw next, would complete a command. It is taken as written raw; the caller that
    /// writes an escape instead says so with `escaped`.
    package mutating func completesCommand(_ scalar: Unicode.Scalar) -> Bool {
        var completes = scalar == "[" && hashes >= 2
        hashes = scalar == "#" ? hashes + 1 : 0
        switch lineStart {
        case .blanks: lineStart = scalar == ":" ? .colon : scalar.properties.isWhitespace ? .blanks : .passed
        case .colon:
            lineStart = .passed
            completes = completes || scalar == ":"
        case .passed: break
        }
        return completes
    }

    /// The scalar just scanned was written as an escape: it completes nothing, and ends a run of `#` or of blanks.
    package mutating func escaped() {
        hashes = 0
        lineStart = .passed
    }

    /// A UTF-8 byte a command hinges on (`#`, `:`): text without one needs no scan.
    static func mayStart(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "#") || byte == UInt8(ascii: ":")
    }
}
