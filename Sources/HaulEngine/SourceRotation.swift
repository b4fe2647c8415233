/// Which of a request's URLs to try next, and whether a backoff comes first: the retry and mirror order as a pure
/// value, decided from counts alone (the engine supplies the clock, the randomness and which hosts it has seen
/// fail).
///
/// Why rounds: a URL that refuses connections or answers 503 says nothing about its mirrors, and waiting out a
/// backoff on it while a mirror could answer now costs a minute per file for nothing. So a failure moves to the
/// next URL at once; only when every URL has been tried in the current round does a backoff start, and the next
/// round goes round the URLs again. Each URL still gets at most `retries` + 1 attempts (`retries: N` is N retries
/// after the first attempt, per URL). A URL whose answer cannot improve (a 404, a checksum mismatch, a TLS
/// verification failure, a protocol violation) is not tried again at all.
///
/// Within a round, URLs on hosts that refused or timed out earlier in the run come after the others; the order of
/// the entry's URLs is otherwise kept.
public struct SourceRotation: Sendable, Equatable {
    /// Retries per URL after its first attempt.
    public let retries: Int
    /// Failed attempts per URL.
    public private(set) var failures: [Int]
    /// URLs that are not tried again: a permanent failure, or no retries left.
    public private(set) var exhausted: [Bool]
    /// Per URL, the earliest time (the engine's clock) it may be asked again: a server's `Retry-After`.
    public private(set) var notBefore: [Double]
    /// 0 while URLs get their first attempt; n during their n-th retries.
    public private(set) var round = 0

    public init(sources: Int, retries: Int) {
        self.retries = max(0, retries)
        failures = Array(repeating: 0, count: sources)
        exhausted = Array(repeating: false, count: sources)
        notBefore = Array(repeating: -.infinity, count: sources)
    }

    /// How an attempt at a URL ended.
    public enum Outcome: Sendable, Equatable {
        /// Trying the same URL later may work (refused, timeout, 5xx, 429, a cut body). `notBefore`: the time
        /// the server asked to be left alone until.
        case transient(notBefore: Double? = nil)
        /// It will not get better on that URL (4xx, wrong bytes, TLS verification, protocol violation).
        case permanent
    }

    /// What to do next.
    public struct Step: Sendable, Equatable {
        /// The URL to try (index into the request's sources).
        public var source: Int
        /// Its failed attempts so far: 0 for a first attempt, n for its n-th retry.
        public var retry: Int
        /// The backoff round this step starts (its retry number for the backoff formula), or 0 when it follows
        /// at once.
        public var backoffRound: Int

        public init(source: Int, retry: Int, backoffRound: Int) {
            self.source = source
            self.retry = retry
            self.backoffRound = backoffRound
        }
    }

    public mutating func record(_ outcome: Outcome, at source: Int) {
        guard failures.indices.contains(source) else { return }
        failures[source] += 1
        switch outcome {
        case .permanent:
            exhausted[source] = true
        case .transient(let until):
            if failures[source] > retries { exhausted[source] = true }
            if let until { notBefore[source] = max(notBefore[source], until) }
        }
    }

    /// The first URL of a request: the first one not on a host known to be bad (`bad[i]` for URL i), else the
    /// first. Nothing is recorded.
    public func first(avoiding bad: [Bool]) -> Int {
        preferred(bad).first { !exhausted[$0] } ?? 0
    }

    /// The next URL to try, or nil when every URL is exhausted. Starts a new round (with a backoff) when every URL
    /// still in play has been tried in this one.
    public mutating func next(avoiding bad: [Bool]) -> Step? {
        let order = preferred(bad)
        if let due = order.first(where: { isDue($0) }) {
            return Step(source: due, retry: failures[due], backoffRound: 0)
        }
        guard order.contains(where: { !exhausted[$0] }) else { return nil }
        round += 1
        guard let due = order.first(where: { isDue($0) }) else { return nil }
        return Step(source: due, retry: failures[due], backoffRound: round)
    }

    /// Seconds to wait before `step`: the backoff of its round (from `backoff`, given the round number), at least
    /// until the server's `Retry-After`, measured from `now`.
    public func delay(before step: Step, now: Double, backoff: (Int) -> Double) -> Double {
        let wait = step.backoffRound > 0 ? backoff(step.backoffRound) : 0
        return max(wait, notBefore.indices.contains(step.source) ? notBefore[step.source] - now : 0, 0)
    }

    private func isDue(_ source: Int) -> Bool { !exhausted[source] && failures[source] <= round }

    /// Good hosts first, each group in the entry's order.
    private func preferred(_ bad: [Bool]) -> [Int] {
        let indices = Array(failures.indices)
        guard bad.contains(true) else { return indices }
        let isBad = { (index: Int) in bad.indices.contains(index) && bad[index] }
        return indices.filter { !isBad($0) } + indices.filter(isBad)
    }
}
