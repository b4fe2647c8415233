/// `${NAME}` substitution for the fields that may reference the environment (url, mirrors, header values, root).
/// `${NAME:-text}` is `text` when NAME is unset or empty, as in a shell; `text` is the manifest's own (it ends at
/// the first `}`), and not a secret.
///
/// Values from the environment are treated as secrets: every message here names variables and quotes the
/// template, never a value.
enum EnvironmentExpansion {
    private static let dollar = UInt8(ascii: "$"), open = UInt8(ascii: "{"), close = UInt8(ascii: "}")

    /// Whether `text` holds a `${`, for fields where references are not expanded and would be a mistake.
    static func containsReference(_ text: String) -> Bool {
        text.withUTF8Buffer { bytes in
            var previous: UInt8 = 0
            for byte in bytes {
                if previous == dollar && byte == open { return true }
                previous = byte
            }
            return false
        }
    }

    /// Expands every reference; fails listing every problem in the template (unterminated, bad or unset names).
    /// What values add is taken from `budget`: past it, the expansion fails (with a message the first time).
    static func expand(
        _ template: String, environment: [String: String],
        budget: inout ExpansionBudget
    ) throws(RuleFailure) -> TemplatedString {
        // Fast path: most manifest strings reference nothing.
        guard template.containsByte(dollar) else { return TemplatedString(literal: template) }

        let bytes = Array(template.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var problems: [String] = []
        var reported = Set<String>()
        var values: [String] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == dollar, index + 1 < bytes.count, bytes[index + 1] == open else {
                out.append(byte)
                index += 1
                continue
            }
            guard let end = bytes[(index + 2)...].firstIndex(of: close) else {
                // A position, not the text: header values written in the manifest can be credentials too.
                let position = String(decoding: bytes[..<index], as: UTF8.self).count + 1
                problems.append("unterminated \"${\" at position \(position) (expected \"}\")")
                break
            }
            let reference = String(decoding: bytes[(index + 2)..<end], as: UTF8.self)
            let (name, fallback) = Self.split(reference)
            if !isValidName(name) {
                problems.append(
                    "invalid variable reference \(Quoted.text("${" + reference + "}")) "
                        + "(a name is a letter or _ followed by letters, digits or _; ${NAME:-default} gives a default)"
                )
            } else if let value = environment[name], !(fallback != nil && value.isEmpty) {
                guard budget.spend(value.utf8.count) else {
                    throw RuleFailure(messages: budget.reportExhaustion())
                }
                out.append(contentsOf: value.utf8)
                if !value.isEmpty { values.append(value) }
            } else if let fallback {
                out.append(contentsOf: fallback.utf8)
            } else if reported.insert(name).inserted {
                problems.append("environment variable \(name) is not set")
            }
            index = end + 1
        }
        guard problems.isEmpty else { throw RuleFailure(messages: problems) }
        return TemplatedString(
            template: template, expanded: String(decoding: out, as: UTF8.self), environmentValues: values)
    }

    /// Names referenced by a template that expanded cleanly, for messages that must blame a variable, not a value.
    static func referencedNames(in template: String) -> [String] {
        let bytes = Array(template.utf8)
        var names: [String] = []
        var index = 0
        while index + 1 < bytes.count {
            guard bytes[index] == dollar, bytes[index + 1] == open else {
                index += 1
                continue
            }
            guard let end = bytes[(index + 2)...].firstIndex(of: close) else { break }
            names.append(split(String(decoding: bytes[(index + 2)..<end], as: UTF8.self)).name)
            index = end + 1
        }
        return names
    }

    /// `NAME:-text` → (NAME, text); `NAME` → (NAME, nil).
    private static func split(_ reference: String) -> (name: String, fallback: String?) {
        guard let marker = reference.firstRange(of: ":-") else { return (reference, nil) }
        return (String(reference[..<marker.lowerBound]), String(reference[marker.upperBound...]))
    }

    /// `[A-Za-z_][A-Za-z0-9_]*`, the portable shell variable name.
    static func isValidName(_ name: String) -> Bool {
        var first = true
        for byte in name.utf8 {
            let isLetter = (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
            let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
            guard isLetter || byte == UInt8(ascii: "_") || (isDigit && !first) else { return false }
            first = false
        }
        return !first
    }
}

/// The bytes `${VAR}` values may add to a manifest. They count against the limit on its size as its own bytes do:
/// a few references to a long variable would otherwise make gigabytes out of a small file.
struct ExpansionBudget {
    private(set) var remaining: Int
    private var reported = false

    init(remaining: Int) { self.remaining = max(0, remaining) }

    /// Takes `count` bytes if they are left.
    mutating func spend(_ count: Int) -> Bool {
        guard count <= remaining else { return false }
        remaining -= count
        return true
    }

    /// Why an expansion failed, the first time; nothing afterwards (one message says it all, and the manifest is
    /// refused by it).
    mutating func reportExhaustion() -> [String] {
        defer { reported = true }
        return reported
            ? []
            : [
                "expanding environment variables makes the manifest larger than \(ManifestLoader.maximumSizeText), "
                    + "the most haul reads"
            ]
    }
}
