/// Readers for the typed scalars of a manifest. They take the scalar's text, not a YAML-resolved value, so that
/// `mode: 0644` means octal 644 whatever YAML 1.1 or 1.2 would make of it.
package enum ScalarRules {
    /// Plain decimal digits only: `retries: "5"` or `retries: 5.0` are mistakes worth pointing out.
    static func integer(_ text: String) -> Int64? {
        text.withUTF8Buffer { bytes -> Int64? in
            let negative = bytes.first == UInt8(ascii: "-")
            let digits = bytes.dropFirst(negative ? 1 : 0)
            guard !digits.isEmpty, digits.count <= 18 else { return nil }
            var value: Int64 = 0
            for byte in digits {
                let digit = byte &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int64(digit)
            }
            return negative ? -value : value
        }
    }

    /// Whether `text` is a non-negative decimal integer too large for `integer` (more than 18 digits): a size of
    /// 2^63 - 1 bytes or beyond is a number, only an impossible one, and is refused as such.
    static func isHugeNaturalNumber(_ text: String) -> Bool {
        text.withUTF8Buffer { bytes in
            bytes.count > 18 && bytes.allSatisfy { $0 &- UInt8(ascii: "0") < 10 }
        }
    }

    /// YAML 1.2 core-schema booleans; `yes`/`on` are refused rather than guessed at.
    static func boolean(_ text: String) -> Bool? {
        switch text {
        case "true", "True", "TRUE": true
        case "false", "False", "FALSE": false
        default: nil
        }
    }

    /// `403,404` or `500-504`: HTTP statuses (100-599), one by one or as ranges, comma-separated without spaces, as
    /// `retry_on:` and `--retry-on-http` take them; in ascending order, each once.
    package static func httpStatuses(_ text: String) throws(RuleFailure) -> [Int] {
        var statuses: Set<Int> = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = item.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            let number = { (text: Substring) -> Int? in
                text.utf8.count == 3 && text.utf8.allSatisfy { (0x30...0x39).contains($0) } ? Int(text) : nil
            }
            guard let low = number(bounds[0]), let high = bounds.count == 2 ? number(bounds[1]) : low,
                (100...599).contains(low), (100...599).contains(high), low <= high
            else {
                throw RuleFailure(
                    "expected HTTP statuses from 100 to 599, comma-separated, each alone or as a range such "
                        + "as 500-504, found \(Quoted.text(String(item)))")
            }
            statuses.formUnion(low...high)
        }
        return statuses.sorted()
    }

    /// `60s`, `5m`, `1h`, `250ms`, `1.5s` or bare seconds; at least 1 ms: a shorter stall window fails every
    /// attempt before any network could answer (and a zero one at once), which is a typo, not a setting.
    static func duration(_ text: String) throws(RuleFailure) -> Seconds {
        let expectation =
            "expected a duration such as \"30s\", \"5m\", \"1h\", \"250ms\" or a number of seconds, "
            + "found \(Quoted.text(text))"
        var number = Substring(text)
        var scale = 1.0
        for (suffix, factor) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] where number.hasSuffix(suffix) {
            number = number.dropLast(suffix.count)
            scale = factor
            break
        }
        guard isDecimal(number), let value = Double(number) else { throw RuleFailure(expectation) }
        guard value > 0 else { throw RuleFailure("must be greater than zero, found \(Quoted.text(text))") }
        guard value * scale >= minimumDuration else {
            throw RuleFailure("must be at least 1ms, found \(Quoted.text(text))")
        }
        // A stall window longer than a day is a typo, and an unbounded one would overflow the engine's timers.
        guard value * scale <= 86_400 else { throw RuleFailure("must be at most 24h, found \(Quoted.text(text))") }
        return Seconds(value * scale)
    }

    static let minimumDuration = 0.001

    /// Octal permission bits, with or without a leading `0` or `0o`.
    static func mode(_ text: String) throws(RuleFailure) -> FileMode {
        let bits = text.withUTF8Buffer { bytes -> UInt32? in
            var digits = bytes[...]
            if digits.count > 2, digits[0] == UInt8(ascii: "0"), digits[1] | 0x20 == UInt8(ascii: "o") {
                digits = digits.dropFirst(2)
            }
            guard !digits.isEmpty else { return nil }
            var value: UInt32 = 0
            for byte in digits {
                let digit = byte &- UInt8(ascii: "0")
                guard digit < 8 else { return nil }
                value = value * 8 + UInt32(digit)
                guard value <= 0o7777 else { return nil }
            }
            return value
        }
        guard let bits else {
            throw RuleFailure(
                "expected octal permission bits from \"0000\" to \"7777\" such as \"0644\", "
                    + "found \(Quoted.text(text))")
        }
        // A downloaded file must not become setuid/setgid when haul runs as root in CI.
        guard bits & 0o7000 == 0 else {
            throw RuleFailure(
                "setuid, setgid and sticky bits are not applied to downloaded files; "
                    + "use at most \"0777\", found \(Quoted.text(text))")
        }
        return FileMode(bits)
    }

    /// `digits` or `digits.digits`: no sign, exponent, `inf` or `nan`, which `Double(_:)` would otherwise accept.
    private static func isDecimal(_ text: Substring) -> Bool {
        var sawDigit = false, sawPoint = false, digitAfterPoint = false
        for byte in text.utf8 {
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                sawDigit = true
                if sawPoint { digitAfterPoint = true }
            } else if byte == UInt8(ascii: "."), sawDigit, !sawPoint {
                sawPoint = true
            } else {
                return false
            }
        }
        return sawDigit && (!sawPoint || digitAfterPoint)
    }
}

/// A number of bytes as people write one: `1048576`, `512K`, `500M`, `2G`, `1T`. Units are binary (K = 1024), in
/// any case, with or without `B` or `iB` (`2GiB`, `2gb`). The command line's sizes (`--max-file-size`, `--limit-rate`)
/// and a manifest's `max_unpacked` are read by this one reader, so that both take the same spellings; the command
/// line also takes a decimal (`2.5M` = 2.5 × 1024², rounded down to whole bytes), as curl does.
package enum ByteSizeText {
    package static func parse(_ text: String, fractions: Bool = false) throws(RuleFailure) -> Int64 {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = text.uppercased()
        if digits.hasSuffix("IB") { digits.removeLast(2) } else if digits.hasSuffix("B") { digits.removeLast() }
        var multiplier: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            multiplier = unit
            digits.removeLast()
        }
        let parts = digits.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let fraction = parts.count == 2 && fractions ? parts[1] : ""
        // `Int64(_:)` alone would take a leading "+"; a fraction is digits only, at least one.
        guard !digits.hasPrefix("+"), let whole = Int64(parts[0]), parts.count == 1 || !fraction.isEmpty,
            fraction.allSatisfy({ $0.isASCII && $0.isNumber })
        else {
            throw RuleFailure(
                fractions
                    ? "expected a number of bytes, optionally followed by K, M, G or T (K = 1024), such as 500K, 2.5M or 2G"
                    : "expected a whole number of bytes, optionally followed by K, M, G or T (K = 1024), such as 500K or 2G"
            )
        }
        let (product, overflow) = whole.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw RuleFailure("too large: at most 8 exabytes") }
        var total = product
        if !fraction.isEmpty, let exact = Double(parts[0] + "." + fraction) {
            // In floating point: whole bytes are what counts, and 53 bits hold any size a fraction is written for.
            let bytes = (exact * Double(multiplier)).rounded(.down)
            guard bytes < Double(Int64.max) else { throw RuleFailure("too large: at most 8 exabytes") }
            total = Int64(bytes)
        }
        guard total > 0 else { throw RuleFailure("must be greater than zero") }
        return total
    }
}
