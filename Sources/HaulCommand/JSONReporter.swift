import Haul
import HaulEngine
import HaulManifest
import HaulPlanner
import Synchronization

/// `--json`: one JSON object per line on stdout and nothing else there; warnings are `warning` events.
final class JSONReporter: RunReporter, Sendable {
    /// Progress of one transfer at most this often: enough for a dashboard, not a flood in a log.
    static let progressInterval = 0.5
    private let lastProgress = Mutex<[Int: Double]>([:])
    /// Per entry (by index), the sources that served wrong bytes.
    private let wrongBytes = Mutex<[Int: [String]]>([:])
    /// The config's URL rewrites: `start` and `done` events of a rewritten URL say where it came from.
    private let rewrites: URLRewriter
    /// The manifest's path as given, for the commands a failure names.
    private let manifest: String

    init(rewrites: URLRewriter = .none, manifest: String = "haul.yaml") {
        self.rewrites = rewrites
        self.manifest = manifest
    }

    var wantsProgress: Bool { true }

    /// Through `TerminalText` like every line, which leaves it as it is: the encoder already writes every scalar
    /// that `TerminalText` would escape as a JSON `\u` escape, so the line is exact JSON of the exact strings.
    private func emit(_ event: JSONValue?) {
        if let event { Output.lines([TerminalText(event.encoded())]) }
    }

    func warning(_ text: String) { emit(JSONEvents.warning(dest: nil, message: text)) }

    func lists(_ outcomes: [SignedLists.Outcome], verbose: Bool) {
        for outcome in outcomes { emit(JSONEvents.list(outcome)) }
    }

    /// Written as it is encoded (`Output.stream`): one line, never held whole.
    func plan(_ plan: Plan, acting: Bool) {
        Output.stream { emit in
            JSONEvents.plan(plan) { emit(TerminalText($0)) }
            emit(.lineEnd)
        }
    }

    func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?) {
        emit(JSONEvents.summary(result, exitStatus: exitStatus, interruptedBy: signal))
    }

    func entry(_ entry: FileEntry, started source: String) {
        let from = rewrites.isEmpty ? nil : rewrites.sources(of: entry).first { $0.displayURL == source }?.rewrittenFrom
        emit(JSONEvents.start(entry, source: source, rewrittenFrom: from))
    }

    func entry(_ entry: FileEntry, progress: TransferProgress) {
        let now = MonotonicClock.seconds()
        let due = lastProgress.withLock { last in
            guard now - (last[entry.index] ?? 0) >= Self.progressInterval else { return false }
            last[entry.index] = now
            return true
        }
        if due { emit(JSONEvents.progress(entry, progress)) }
    }

    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, next: NextAttempt?) {
        // Said once the entry is done, and only if it succeeds: a `failed` event's sources name them otherwise.
        if let message = HumanReport.wrongBytesWarning(entry: entry, failure: failure) {
            wrongBytes.withLock { $0[entry.index, default: []].append(message) }
        }
        emit(JSONEvents.retry(entry, failure, next: next))
    }

    func entry(_ entry: FileEntry, finished outcome: EntryOutcome) {
        let warnings = wrongBytes.withLock { $0.removeValue(forKey: entry.index) } ?? []
        if case .failed = outcome {
        } else {
            for message in warnings { emit(JSONEvents.warning(dest: entry.destination.description, message: message)) }
        }
        if let file = outcome.fetchedFile, let encoding = file.contentEncoding {
            emit(
                JSONEvents.warning(
                    dest: entry.destination.description, message: HumanReport.encodingWarning(encoding: encoding)))
        }
        var from: String?
        if !rewrites.isEmpty, let file = outcome.fetchedFile {
            let sources = rewrites.sources(of: entry)
            from = sources.indices.contains(file.sourceIndex) ? sources[file.sourceIndex].rewrittenFrom : nil
        }
        emit(JSONEvents.finished(entry, outcome, rewrittenFrom: from, manifest: manifest))
    }

    func pruned(_ destination: DestinationPath, outcome: PruneOutcome) { emit(JSONEvents.pruned(destination, outcome)) }
}
