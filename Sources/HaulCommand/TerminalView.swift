import Glibc
import Haul
import HaulEngine

/// `--progress bar`: the live view at the bottom of the terminal, on stderr.
///
/// The callbacks only update the model; a ticker draws it at a steady 8 Hz, however fast or slow progress
/// arrives, so the screen neither flickers under a flood of callbacks nor freezes when a transfer stalls.
/// Each frame is one write(2) (see `Output.showLive`); lines printed meanwhile appear above the view.
final class TerminalView: Sendable {
    /// Frames per second: smooth enough to read as motion, cheap enough to forget about.
    static let interval = 0.125
    /// A run that is over within this time never shows the view: a flash of a frame is noise, not progress.
    static let firstFrameAfter = 0.3
    /// Seconds of history behind each rate: long enough to smooth bursts, short enough to follow a change.
    static let rateWindow = 3.0

    private let tracker: ProgressTracker
    private let ticker = TickerSlot()

    init(tracker: ProgressTracker) {
        self.tracker = tracker
    }

    /// Starts drawing; later calls do nothing, and nothing starts again after `end()`.
    func start() {
        let startedAt = MonotonicClock.seconds()  // kept by the first call's closure only
        ticker.start(interval: Self.interval) { [self] in draw(startedAt: startedAt) }
    }

    /// Stops drawing (waiting for a frame being drawn) and erases the view, so the summary takes its place.
    func end() {
        ticker.stop()
        Output.endLive()
    }

    private func draw(startedAt: Double) {
        let size = TerminalSize.current(STDERR_FILENO)
        let frame: [String]? = tracker.update { model, now in
            model.sample(now: now)
            return now - startedAt >= Self.firstFrameAfter ? model.frame(columns: size.columns, rows: size.rows) : nil
        }
        if let frame { Output.showLive(frame.map { TerminalText($0) }) }
    }
}
