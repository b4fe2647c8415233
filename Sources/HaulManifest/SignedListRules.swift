import HaulSignature

/// The values of `lists:` and `from:` that are more than a URL or a duration: a list's keys, the day a key retires,
/// the name an entry's file has in its list.
enum SignedListRules {
    /// A key as `keys:` writes it: an inline key (`RW…`, an SSH public key line) that `TrustedKey` reads, or else a
    /// key file's path, resolved against the manifest's folder. An inline key that does not read is refused here,
    /// so that a mistake in one is found when the manifest is read, not at the first sync that checks the list.
    static func key(_ text: String, manifestDirectory: String) throws(RuleFailure) -> ListKey {
        guard !text.isEmpty else {
            throw RuleFailure("expected a key or a key file's path, found an empty string")
        }
        switch TrustedKey.inline(text) {
        case nil:
            guard !text.utf8.contains(0) else {
                throw RuleFailure("a key file's path must not contain a NUL character")
            }
            return ListKey(key: PathRules.resolve(text, against: manifestDirectory), isFile: true)
        case .success:
            return ListKey(key: text, isFile: false)
        case .failure(let failure):
            let kind =
                text.drop { $0 == " " }.hasPrefix("RW") ? "a minisign or signify public key" : "an SSH public key"
            // base64 has no `.` (nor a key line, but in its comment): with one, the text more likely names a file.
            let hint =
                text.contains(".") && !text.contains(" ")
                ? " (a key file's name that starts so is written \(Quoted.text("./" + text)))" : ""
            throw RuleFailure("not \(kind): \(problem(failure))\(hint)")
        }
    }

    /// Why `TrustedKey.inline` refused a key, in words.
    static func problem(_ failure: SignatureFailure) -> String {
        switch failure {
        case .unreadableKey(let malformation), .unreadableSignature(let malformation):
            switch malformation {
            case .missingLine, .unexpectedLine: "a key is one line"
            case .notBase64: "its base64 does not decode"
            case .wrongLength(let expected, let found): "it decodes to \(found) bytes, not \(expected)"
            case .unknownAlgorithm(let tag): "unknown algorithm \(Quoted.text(String(decoding: tag, as: UTF8.self)))"
            case .notOfFormat: "its type and its encoded key disagree"
            case .unsupportedVersion(let version): "unsupported version \(version)"
            case .invalidPoint: "the key is not a point of its curve"
            case .badEncoding: "its encoded key is malformed"
            }
        case .unsupportedAlgorithm(let name):
            "\(Quoted.text(name)) keys are not supported (ssh-ed25519 and ecdsa-sha2-nistp256, -nistp384 and "
                + "-nistp521 are)"
        case .signedByAnotherKey, .wrongNamespace, .messageMismatch, .trustedCommentMismatch:
            "not a key haul reads"
        }
    }

    /// `retired: YYYY-MM-DD`: the first instant after that day ends, UTC, in seconds since the epoch (a key is
    /// trusted through the whole of its last day, and refused once the time is past this).
    static func retirementDate(_ text: String) throws(RuleFailure) -> Double {
        let bytes = Array(text.utf8)
        let isDigit = { (byte: UInt8) in byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes.indices.allSatisfy({ $0 == 4 || $0 == 7 || isDigit(bytes[$0]) })
        else {
            throw RuleFailure("expected a date as YYYY-MM-DD, such as \"2026-06-30\", found \(Quoted.text(text))")
        }
        let number = { (range: Range<Int>) in bytes[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } }
        let (year, month, day) = (number(0..<4), number(5..<7), number(8..<10))
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...lengths[month - 1]).contains(day) else {
            throw RuleFailure("there is no such day as \(Quoted.text(text))")
        }
        return Double(daysSinceEpoch(year: year, month: month, day: day) + 1) * 86_400
    }

    /// Days from 1970-01-01 to a day of the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The name a file has in its list when `from:` gives none: the last segment of its URL's path (before any `?`
    /// or `#`), percent-decoded (`tool%2B1.tgz` is listed as `tool+1.tgz`); nil when the path ends in no name.
    static func fileName(inURL url: String) -> String? {
        var bytes = Array(url.utf8)
        if let end = bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            bytes.removeSubrange(end...)
        }
        // The path starts after `scheme://authority`; a URL with no path names no file.
        guard let schemeEnd = bytes.firstIndex(of: UInt8(ascii: ":")), bytes.count > schemeEnd + 2,
            let pathStart = bytes[(schemeEnd + 3)...].firstIndex(of: UInt8(ascii: "/"))
        else { return nil }
        let segment = bytes[(bytes[pathStart...].lastIndex(of: UInt8(ascii: "/")) ?? pathStart) + 1..<bytes.count]
        guard !segment.isEmpty else { return nil }
        let decoded = EntryDraft.percentDecoded(Array(segment))
        guard !decoded.isEmpty, !decoded.contains(0), !decoded.contains(UInt8(ascii: "/")),
            let name = String(validating: decoded, as: UTF8.self)
        else { return String(decoding: segment, as: UTF8.self) }
        return name
    }
}
