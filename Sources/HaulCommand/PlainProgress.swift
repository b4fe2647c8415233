import Haul

/// `--progress plain`: for logs and pipes. No cursor movement and no escape sequences; the reporter prints one
/// line per finished file, and this prints a heartbeat for a long transfer, so a CI log shows the job is alive
/// without filling up with progress.
final class PlainProgress: Sendable {
    /// At most one heartbeat line per this many seconds, for the whole run (not per transfer), and only about
    /// a transfer that has run at least this long.
    static let heartbeatInterval = 5.0
    /// Often enough that a heartbeat is late by at most this much; rates are sampled at the same pace.
    static let tickInterval = 0.5
    /// The rate in a heartbeat is the average since the previous one, more or less.
    static let rateWindow = 5.0

    private let tracker: ProgressTracker
    private let ticker = TickerSlot()

    init(tracker: ProgressTracker) {
        self.tracker = tracker
    }

    func start() {
        ticker.start(interval: Self.tickInterval) { [self] in tick() }
    }

    func end() {
        ticker.stop()
        Output.flushLog()
    }

    /// Also writes the held lines of files done (`Output.logLines`): a log line is late by half a second at most.
    private func tick() {
        let line = tracker.update { model, now in
            model.sample(now: now)
            return model.heartbeat(now: now, interval: Self.heartbeatInterval)
        }
        if let line { Output.errors([TerminalText(line)]) } else { Output.flushLog() }
    }
}
