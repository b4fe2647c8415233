/// How long a server says its response stays fresh (RFC 9111 4.2), for an unpinned file: while it is fresh, a
/// sync trusts the copy on disk without asking again. Only what a private client may use: `max-age` (not
/// `s-maxage`, which is for shared caches), else `Expires` against the response's own `Date` (without one, the
/// two clocks cannot be compared: no freshness); `no-cache` and `no-store` mean ask every time, and `Age` (time
/// already spent in caches on the way) is taken off. What a server grants is honoured for `longestLifetime` at
/// most: a server cannot keep haul from asking again for years.
package enum Freshness {
    /// The longest a response is trusted without asking again: a year.
    package static let longestLifetime: Double = 365 * 86_400

    /// Seconds from the response's arrival; nil: none (ask again next time).
    package static func lifetime(cacheControl: String?, expires: String?, date: String?, age: String?) -> Double? {
        var maxAge: Double?
        for directive in (cacheControl ?? "").split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1)
            let name = String(parts[0]).trimmingWhitespace.lowercased()
            if name == "no-cache" || name == "no-store" { return nil }
            if name == "max-age", parts.count == 2 {
                var value = String(parts[1]).trimmingWhitespace
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                    value = String(value.dropFirst().dropLast())
                }
                // A malformed max-age makes the response stale (RFC 9111 4.2.1): no freshness at all.
                guard let seconds = deltaSeconds(value) else { return nil }
                maxAge = seconds
            }
        }
        var lifetime: Double
        if let maxAge {
            lifetime = maxAge
        } else if let expires, let sent = date.flatMap(HTTPDate.parse) {
            // An Expires that is not a date ("0", "-1") means already expired.
            guard let expiresAt = HTTPDate.parse(expires) else { return nil }
            lifetime = expiresAt - sent
        } else {
            return nil
        }
        if let age, let spent = deltaSeconds(age.trimmingWhitespace) { lifetime -= spent }
        return lifetime > 0 ? min(lifetime, longestLifetime) : nil
    }

    /// RFC 9111 1.2.2's delta-seconds: digits only, leading zeros allowed, and a value past 2³¹ taken as 2³¹; nil
    /// for anything else (a sign, a fraction, an exponent, nothing).
    static func deltaSeconds(_ text: String) -> Double? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        let ceiling = 2_147_483_648
        var value = 0
        for digit in digits {
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
            if value >= ceiling { return Double(ceiling) }
        }
        return Double(value)
    }
}
