import Glibc
import Haul
import HaulEngine
import HaulManifest
import HaulPlanner
import HaulThreads
import Synchronization

/// Bytes per second over the last few seconds, from samples of a cumulative counter.
///
/// Sampled on a timer rather than on every progress callback: a stalled transfer sends no callbacks, and its
/// rate must still fall to zero. A window of seconds smooths the bursts of a network read loop.
struct RateMeter {
    let window: Double
    private var samples: [(time: Double, bytes: Int64)] = []

    init(window: Double) { self.window = window }

    mutating func add(time: Double, bytes: Int64) {
        samples.append((time, bytes))
        // Keep one sample at or before the window's start, so the span covers the whole window.
        while samples.count > 2, samples[1].time <= time - window { samples.removeFirst() }
    }

    /// nil until the samples span a quarter of a second: a rate from one burst would be noise.
    var rate: Double? {
        guard let first = samples.first, let last = samples.last, last.time - first.time >= 0.25 else { return nil }
        return Double(max(0, last.bytes - first.bytes)) / (last.time - first.time)
    }
}

/// An entry the model expects to start: its pinned size, or `.no` when it is not (or no longer) expected.
struct PendingEntry: Equatable {
    /// Int64.min: not pending; -1: pending, size unknown; else the size.
    private let encoded: Int64

    static let no = PendingEntry(encoded: .min)

    private init(encoded: Int64) { self.encoded = encoded }
    init(size: Int64?) { encoded = size.map { max(0, $0) } ?? -1 }

    var size: Int64? { encoded >= 0 ? encoded : nil }
}

/// What is known about the run's transfers at one moment: counts, bytes, per-transfer state, rates. A value
/// type changed only through `ProgressTracker`'s lock; its methods take the time as an argument so that tests
/// drive it with a fake clock.
struct ProgressModel {
    struct Active {
        let name: String
        let started: Double
        /// The file's bytes so far, a resumed prefix included (what the bar shows).
        var written: Int64 = 0
        /// The server's announced length, else the manifest's `size`.
        var expected: Int64?
        /// Bytes received during this run (what the rate counts): a resumed prefix is not a download.
        var received: Int64 = 0
        var seenProgress = false
        var meter: RateMeter
        var note: String?
        var lastMentioned: Double?
        /// Set while the transfer waits out a backoff before its next attempt.
        var wait: Wait?
    }

    /// A backoff between two attempts: what the transfer waits for, and until when.
    struct Wait: Equatable {
        var until: Double
        /// The attempt it waits for is this retry of `url`, out of `retries`.
        var retry: Int
        var retries: Int
        var url: String

        /// `retry 2 of 3 for https://h/a.iso in 4 s` (the URL in display form, control characters escaped).
        func text(now: Double) -> String {
            let seconds = Int(max(0, until - now).rounded(.up))
            let target = ProgressFormatting.displayName(url)
            let what = retry > 0 ? "retry \(retry) of \(retries) for \(target)" : target
            return "\(what) in \(seconds) s"
        }
    }

    let rateWindow: Double
    private(set) var filesTotal = 0
    private(set) var filesDone = 0
    private(set) var failed = 0
    /// By entry index: whether the entry is still to start, and the size the manifest pins. An array, not a
    /// table keyed by name: 100,000 planned files are looked up as they start and finish.
    private var pending: [PendingEntry] = []
    private var unknownPending = 0
    private var knownPendingBytes: Int64 = 0
    /// By entry index.
    private(set) var active: [Int: Active] = [:]
    private var finishedBytes: Int64 = 0
    private var received: Int64 = 0
    private var meter: RateMeter
    /// When a heartbeat line last appeared (the run's start before the first): the limit is for the whole run.
    private var lastHeartbeat: Double
    /// The time of the latest `sample`: what a frame counts a wait's seconds from.
    private var sampledAt: Double

    init(rateWindow: Double, now: Double) {
        self.rateWindow = rateWindow
        meter = RateMeter(window: rateWindow)
        lastHeartbeat = now
        sampledAt = now
    }

    /// The entries this run will transfer: fetches and revalidations. Refused entries never start.
    mutating func expect(_ plan: Plan) {
        pending.reserveCapacity(plan.actions.count)
        for index in plan.actions.indices {
            switch plan.actions[index] {
            case .fetch, .revalidate: expect(plan.files[index].index, size: plan.files[index].size)
            case .keep, .fresh, .refuse: continue
            }
        }
    }

    mutating func expect(_ id: Int, size: Int64?) {
        guard id >= 0, !isPending(id), active[id] == nil else { return }
        if id >= pending.count { pending.append(contentsOf: repeatElement(.no, count: id + 1 - pending.count)) }
        let entry = PendingEntry(size: size)
        pending[id] = entry
        filesTotal += 1
        // Wrapping arithmetic: whatever sizes a manifest claims, adding and later subtracting never traps,
        // and the result is exact whenever the true total fits.
        if let size = entry.size { knownPendingBytes &+= size } else { unknownPending += 1 }
    }

    private func isPending(_ id: Int) -> Bool { id >= 0 && id < pending.count && pending[id] != .no }

    /// Takes entry `id` out of the pending ones, if it is there.
    private mutating func unpend(_ id: Int) -> Bool {
        guard isPending(id) else { return false }
        if let size = pending[id].size { knownPendingBytes &-= size } else { unknownPending -= 1 }
        pending[id] = .no
        return true
    }

    mutating func started(_ id: Int, _ name: String, size: Int64?, now: Double) {
        if !unpend(id) && active[id] == nil {
            filesTotal += 1  // not in the plan we were shown; count it all the same
        }
        guard active[id] == nil else { return }
        active[id] = Active(name: name, started: now, expected: size, meter: RateMeter(window: rateWindow))
    }

    /// `totalBytesWritten` counts the file from byte 0 and restarts when an attempt starts over; only what
    /// arrived is added to `received`. `bytesWritten` is what arrived since the attempt's previous report, which
    /// tells a resumed prefix (the first report's total minus it) from downloaded bytes.
    mutating func progress(_ id: Int, _ name: String, _ progress: TransferProgress, size: Int64?, now: Double) {
        if active[id] == nil { started(id, name, size: size, now: now) }
        guard var transfer = active[id] else { return }
        let total = progress.totalBytesWritten
        let delta =
            transfer.seenProgress && total >= transfer.written
            ? total - transfer.written
            : min(Int64(progress.bytesWritten), max(0, total))
        transfer.seenProgress = true
        transfer.written = total
        transfer.received += delta
        received += delta
        if let expected = progress.totalBytesExpected { transfer.expected = expected }
        transfer.note = nil
        transfer.wait = nil
        active[id] = transfer
    }

    /// Between a failed attempt and the next: the row says so instead of showing a rate, and during a backoff it
    /// says what it waits for (`retry 2 of 3 for URL in 4 s`) rather than a rate of nothing.
    mutating func attemptFailed(_ id: Int, next: NextAttempt?, now: Double) {
        guard active[id] != nil else { return }
        active[id]?.note = next != nil ? "retrying" : nil
        active[id]?.wait = next.flatMap { next in
            next.delay > 0
                ? Wait(until: now + next.delay, retry: next.retry, retries: next.retries, url: next.sourceDisplayURL)
                : nil
        }
    }

    /// The wait of a transfer still waiting at `now`.
    private func waitText(_ transfer: Active, now: Double) -> String? {
        guard let wait = transfer.wait, wait.until > now else { return nil }
        return wait.text(now: now)
    }

    enum Ending { case fetched(size: Int64), unchanged, failed }

    /// Fetched, unchanged (304), or failed: the entry leaves the view; its bytes count as done only if fetched.
    mutating func finished(_ id: Int, _ ending: Ending) {
        let wasPending = unpend(id)
        let transfer = active.removeValue(forKey: id)
        guard wasPending || transfer != nil else { return }  // a refusal, never one of the transfers
        filesDone += 1
        switch ending {
        case .fetched(let size):
            finishedBytes += size
            // The last chunks arrive after the last report (reports are rate-limited).
            received += max(0, size - (transfer?.written ?? 0))
        case .unchanged:
            break
        case .failed:
            failed += 1
        }
    }

    /// Feeds the meters; called on every tick of the display.
    mutating func sample(now: Double) {
        sampledAt = now
        meter.add(time: now, bytes: received)
        for (id, var transfer) in active {
            transfer.meter.add(time: now, bytes: transfer.received)
            active[id] = transfer
        }
    }

    var bytesDone: Int64 { ([finishedBytes] + active.values.map(\.written)).saturatingSum() }

    /// nil while any remaining entry's size is unknown: an ETA from a partial total would be wrong.
    var bytesTotal: Int64? {
        guard unknownPending == 0 else { return nil }
        var sizes = [finishedBytes, knownPendingBytes]
        for transfer in active.values {
            guard let expected = transfer.expected else { return nil }
            sizes.append(max(expected, transfer.written))
        }
        return sizes.saturatingSum()
    }

    var rate: Double? { meter.rate }

    /// Active transfers, oldest first: a stable order, so rows do not jump around between frames.
    var activeInOrder: [Active] {
        active.values.sorted { ($0.started, $0.name) < ($1.started, $1.name) }
    }

    /// The live view: an overall line, then up to `maxTransferLines` rows (fewer on a short terminal, so the
    /// frame never scrolls, which would break moving back up over it), then `… and N more`.
    func frame(columns: Int, rows: Int) -> [String] {
        var lines = [
            ProgressFormatting.overallLine(
                filesDone: filesDone, filesTotal: filesTotal, failed: failed,
                bytesDone: bytesDone, bytesTotal: bytesTotal, rate: rate,
                width: columns)
        ]
        let transfers = activeInOrder
        // Leave room for the overall line, the "more" line and the line the cursor rests on.
        let room = max(0, min(ProgressFormatting.maxTransferLines, rows - 3))
        let shown = min(transfers.count, room)
        lines += ProgressFormatting.transferLines(
            transfers.prefix(shown).map {
                ProgressFormatting.TransferRow(
                    name: $0.name, done: $0.written, total: $0.expected, rate: $0.meter.rate,
                    note: $0.note, wait: waitText($0, now: sampledAt))
            }, width: columns)
        if transfers.count > shown && rows >= 3 {
            lines.append(ProgressFormatting.moreLine(transfers.count - shown, width: columns))
        }
        return lines
    }

    /// The heartbeat of a log: at most one line per `interval` for the whole run, about a transfer running for
    /// at least `interval`, the one mentioned least recently, so that several long transfers take turns.
    mutating func heartbeat(now: Double, interval: Double) -> String? {
        guard now - lastHeartbeat >= interval else { return nil }
        let candidates = active.filter { now - $0.value.started >= interval }
        guard
            let (id, chosen) = candidates.min(by: {
                ($0.value.lastMentioned ?? -.infinity, $0.value.started, $0.value.name)
                    < ($1.value.lastMentioned ?? -.infinity, $1.value.started, $1.value.name)
            })
        else { return nil }
        lastHeartbeat = now
        active[id]?.lastMentioned = now
        if let wait = waitText(chosen, now: now) {
            return ProgressFormatting.heartbeatLine(name: chosen.name, waiting: wait)
        }
        return ProgressFormatting.heartbeatLine(
            name: chosen.name, done: chosen.written, total: chosen.expected,
            rate: chosen.meter.rate)
    }
}

/// The model behind a lock: the engine thread and the commit queue report into it while the ticker reads it.
final class ProgressTracker: Sendable {
    private let model: Mutex<ProgressModel>

    init(rateWindow: Double) {
        model = Mutex(ProgressModel(rateWindow: rateWindow, now: MonotonicClock.seconds()))
    }

    func update<T>(_ body: (inout ProgressModel, Double) -> T) -> T {
        let now = MonotonicClock.seconds()
        return model.withLock { body(&$0, now) }
    }
}

/// A `Ticker` that starts at most once: started when there is something to show, stopped for good at the end.
final class TickerSlot: Sendable {
    private enum State { case idle, running(Ticker), ended }
    private let state = Mutex(State.idle)

    /// Later calls, and calls after `stop()`, do nothing.
    func start(interval: Double, _ tick: @escaping @Sendable () -> Void) {
        state.withLock { state in
            guard case .idle = state else { return }
            state = .running(Ticker(interval: interval, tick))
        }
    }

    /// Returns once the last tick has finished.
    func stop() {
        let running: Ticker? = state.withLock { state in
            defer { state = .ended }
            if case .running(let ticker) = state { return ticker }
            return nil
        }
        running?.stop()
    }
}
