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
package struct SourceRotation: Sendable, Equatable {
    /// Retries per URL after its first attempt.
    package let retries: Int
    /// Per URL, in the request's order (one array: a rotation is made for every request of a run).
    private var sources: [Source]
    /// 0 while URLs get their first attempt; n during their n-th retries.
    package private(set) var round = 0

    private struct Source: Sendable, Equatable {
        /// Failed attempts.
        var failures = 0
        /// Not tried again: a permanent failure, or no retries left.
        var exhausted = false
        /// The earliest time (the engine's clock) it may be asked again: a server's `Retry-After`.
        var notBefore = -Double.infinity
    }

    package init(sources count: Int, retries: Int) {
        self.retries = max(0, retries)
        sources = Array(repeating: Source(), count: count)
    }

    /// How an attempt at a URL ended.
    package enum Outcome: Sendable, Equatable {
        /// Trying the same URL later may work (refused, timeout, 5xx, 429, a cut body). `notBefore`: the time
        /// the server asked to be left alone until.
        case transient(notBefore: Double? = nil)
        /// It will not get better on that URL (4xx, wrong bytes, TLS verification, protocol violation).
        case permanent
    }

    /// What to do next.
    package struct Step: Sendable, Equatable {
        /// The URL to try (index into the request's sources).
        package var source: Int
        /// Its failed attempts so far: 0 for a first attempt, n for its n-th retry.
        package var retry: Int
        /// The backoff round this step starts (its retry number for the backoff formula), or 0 when it follows
        /// at once.
        package var backoffRound: Int

        package init(source: Int, retry: Int, backoffRound: Int) {
            self.source = source
            self.retry = retry
            self.backoffRound = backoffRound
        }
    }

    /// Failed attempts at `source` so far.
    package func failures(at source: Int) -> Int { sources.indices.contains(source) ? sources[source].failures : 0 }

    package mutating func record(_ outcome: Outcome, at source: Int) {
        guard sources.indices.contains(source) else { return }
        sources[source].failures += 1
        switch outcome {
        case .permanent:
            sources[source].exhausted = true
        case .transient(let until):
            if sources[source].failures > retries { sources[source].exhausted = true }
            if let until { sources[source].notBefore = max(sources[source].notBefore, until) }
        }
    }

    /// The first URL of a request: the first one not on a host known to be bad (`bad[i]` for URL i; empty: none
    /// is), else the first. Nothing is recorded.
    package func first(avoiding bad: [Bool]) -> Int {
        if !bad.contains(true) { return sources.firstIndex { !$0.exhausted } ?? 0 }
        return preferred(bad).first { !sources[$0].exhausted } ?? 0
    }

    /// The next URL to try, or nil when every URL is exhausted. Starts a new round (with a backoff) when every URL
    /// still in play has been tried in this one.
    package mutating func next(avoiding bad: [Bool]) -> Step? {
        let order = preferred(bad)
        if let due = order.first(where: { isDue($0) }) {
            return Step(source: due, retry: sources[due].failures, backoffRound: 0)
        }
        guard order.contains(where: { !sources[$0].exhausted }) else { return nil }
        round += 1
        guard let due = order.first(where: { isDue($0) }) else { return nil }
        return Step(source: due, retry: sources[due].failures, backoffRound: round)
    }

    /// Seconds to wait before `step`: the backoff of its round (from `backoff`, given the round number), at least
    /// until the server's `Retry-After`, measured from `now`.
    package func delay(before step: Step, now: Double, backoff: (Int) -> Double) -> Double {
        let wait = step.backoffRound > 0 ? backoff(step.backoffRound) : 0
        let floor = sources.indices.contains(step.source) ? sources[step.source].notBefore - now : 0
        return max(wait, floor, 0)
    }

    private func isDue(_ source: Int) -> Bool { !sources[source].exhausted && sources[source].failures <= round }

    /// Good hosts first, each group in the entry's order.
    private func preferred(_ bad: [Bool]) -> [Int] {
        let indices = Array(sources.indices)
        guard bad.contains(true) else { return indices }
        let isBad = { (index: Int) in bad.indices.contains(index) && bad[index] }
        return indices.filter { !isBad($0) } + indices.filter(isBad)
    }
}
