import Glibc

/// When to try the same URL again. Pure arithmetic over injected randomness and wall clock, so that tests can
/// assert exact delays and run in milliseconds.
package struct RetryPolicy: Sendable {
    /// Delay before the first retry; doubled for each further one.
    package var baseDelay: Double
    /// Ceiling of the exponential backoff.
    package var maxDelay: Double
    /// Ceiling of a server's `Retry-After`: a server must not be able to park a CI job for a day.
    package var maxRetryAfter: Double
    /// Fraction of the backoff removed at random, so that many clients do not retry in step.
    package var jitter: Double
    /// A number in 0..<1.
    package var random: @Sendable () -> Double
    /// Seconds since the epoch, for `Retry-After` given as an HTTP date.
    package var wallClock: @Sendable () -> Double

    package init(
        baseDelay: Double = 1, maxDelay: Double = 30, maxRetryAfter: Double = 120, jitter: Double = 0.25,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        wallClock: @escaping @Sendable () -> Double = RetryPolicy.systemWallClock
    ) {
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
        self.jitter = jitter
        self.random = random
        self.wallClock = wallClock
    }

    /// Seconds to wait before retry number `retry` (1-based). `Retry-After` is a floor under the backoff, itself
    /// capped by `maxRetryAfter`.
    package func delay(beforeRetry retry: Int, retryAfter: RetryAfter?) -> Double {
        let exponential = min(maxDelay, baseDelay * Double(1 << min(max(retry - 1, 0), 30)))
        let backoff = exponential * (1 - jitter * random())
        guard let floor = retryAfter.map(seconds) else { return backoff }
        return max(backoff, min(maxRetryAfter, floor))
    }

    /// How long a server's `Retry-After` keeps its URL from being asked again, capped by `maxRetryAfter`.
    package func floor(for retryAfter: RetryAfter) -> Double { min(maxRetryAfter, seconds(retryAfter)) }

    private func seconds(_ retryAfter: RetryAfter) -> Double {
        switch retryAfter {
        case .seconds(let seconds): seconds
        case .date(let epoch): max(0, epoch - wallClock())
        }
    }

    package static let systemWallClock: @Sendable () -> Double = {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// A server's `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP date.
package enum RetryAfter: Sendable, Equatable {
    case seconds(Double)
    /// Seconds since the epoch.
    case date(Double)

    /// nil for anything that is neither form.
    package init?(headerValue: String) {
        let value = headerValue.trimmingWhitespace
        if !value.isEmpty, value.utf8.count <= 12,
            value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        {
            guard let seconds = Double(value) else { return nil }
            self = .seconds(seconds)
            return
        }
        guard let epoch = HTTPDate.parse(value) else { return nil }
        self = .date(epoch)
    }
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form RFC 9110 requires senders to use. Parsed by hand:
/// glibc's strptime and timegm are hidden from Swift, and the format is fixed-width.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the epoch, or nil.
    static func parse(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
            let day = Int(parts[1]), let monthIndex = months.firstIndex(of: String(parts[2])), let year = Int(parts[3])
        else { return nil }
        let time = parts[4].split(separator: ":")
        guard time.count == 3, let hour = Int(time[0]), let minute = Int(time[1]), let second = Int(time[2]),
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            (1970...9999).contains(year)  // bounded, so a hostile date cannot overflow the arithmetic below
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        return Double(days * 86_400 + hour * 3_600 + minute * 60 + second)
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
