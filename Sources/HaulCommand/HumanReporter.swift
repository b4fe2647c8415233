import Glibc
import Haul
import HaulEngine
import HaulManifest
import HaulPlanner
import Synchronization

/// Text for people: the plan on stdout, failures and warnings on stderr as they happen, progress on stderr in
/// the chosen style, the summary on stdout.
///
/// | what             | none | plain                   | bar                      | --verbose adds            |
/// |------------------|------|-------------------------|--------------------------|---------------------------|
/// | plan, summary    | yes  | yes                     | yes (view erased first)  |                           |
/// | failures         | yes  | yes                     | above the view           |                           |
/// | a file done      |      | `fetched a (1.2 MiB)`   | (the view)               | the line in every style, with its URL |
/// | a retry          |      | `retry a: HTTP 503; …`  | above the view           | the line in every style, with the URL |
/// | a rewritten URL  |      |                         |                          | `fetch a ← URL (rewritten from URL)`; under the plan's entries, every URL tried |
/// | wrong bytes      | yes  | `warning: a: URL: …`    | above the view           | (once the entry is done)  |
/// | a backoff        |      | in the heartbeat        | in the transfer's row    |                           |
/// | a long transfer  |      | a heartbeat every 5 s   | (the view)               |                           |
///
/// Wrong bytes from a source are said even when a mirror then serves the right ones (and only in the error when none
/// does); a transfer waiting out a backoff says what it waits for (`retry 2 of 3 for URL in 4 s`). `--quiet` prints errors only. Plan and summary
/// text are exactly `HumanReport`'s, with what a manifest or a server chose escaped (`TerminalText`); colour, when
/// enabled, only paints the plan's markers and the `error:`/`warning:`/`retry` prefixes, so the words stay the same.
/// A file in place but not yet durable is fetched (its line, its bytes in the view) and an `error:` line.
final class HumanReporter: RunReporter, Sendable {
    let style: ProgressStyle
    let quiet: Bool
    let verbose: Bool
    /// The config's URL rewrites, for `--verbose`: which URL a rewritten one came from.
    let rewrites: URLRewriter
    /// The manifest's path as given, for the commands a failure names.
    let manifest: String
    /// Colour on stderr (`Colour.enabled` was asked about stderr).
    let colour: Bool
    /// Colour on stdout too: it may be a pipe (`haul sync | tee log`) while stderr is the terminal.
    private let colourStdout: Bool
    private let tracker: ProgressTracker?
    private let display: Display
    /// Per entry (by index), the warnings for sources that served wrong bytes, said once the entry is done.
    private let wrongBytes = Mutex<[Int: [String]]>([:])

    private enum Display: Sendable {
        case none
        case plain(PlainProgress)
        case bar(TerminalView)
    }

    init(
        style: ProgressStyle, quiet: Bool, verbose: Bool, rewrites: URLRewriter = .none, manifest: String = "haul.yaml",
        colour: Bool
    ) {
        self.style = style
        self.manifest = manifest
        self.quiet = quiet
        self.verbose = verbose
        self.rewrites = rewrites
        self.colour = colour
        colourStdout = colour && isatty(STDOUT_FILENO) == 1
        switch quiet ? .none : style {
        case .none:
            tracker = nil
            display = .none
        case .bar:
            let tracker = ProgressTracker(rateWindow: TerminalView.rateWindow)
            self.tracker = tracker
            display = .bar(TerminalView(tracker: tracker))
        case .plain, .auto:  // `auto` is resolved before this; unresolved, the safe choice is no cursor tricks
            let tracker = ProgressTracker(rateWindow: PlainProgress.rateWindow)
            self.tracker = tracker
            display = .plain(PlainProgress(tracker: tracker))
        }
    }

    /// Lines a log gets for each file done and each retry, without `--verbose`.
    private var linePerFile: Bool {
        if case .plain = display { return true }
        return false
    }

    var wantsProgress: Bool { tracker != nil }

    func warning(_ text: String) {
        guard !quiet else { return }
        Output.errors([paintDiagnostic("warning: \(text)")])
    }

    func lists(_ outcomes: [SignedLists.Outcome], verbose: Bool) {
        for outcome in outcomes {
            switch outcome.result {
            case .failure(let failure):
                Output.errors([paintDiagnostic("error: \(ListWording.failure(outcome, failure))")])
            case .success(let verified):
                guard !quiet, let line = ListWording.verified(outcome, verified, verbose: verbose) else { continue }
                Output.lines([TerminalText(line)])
            }
        }
    }

    func plan(_ plan: Plan, acting: Bool) {
        if !quiet, plan.hasChanges || !acting {
            let sources: ((FileEntry) -> [String])? =
                verbose && !rewrites.isEmpty ? { self.rewrittenSourceLines($0) } : nil
            // Written as it is worded: a million changes are never held as text all at once. A sync says unproven
            // records as a warning: not twice.
            Output.stream { emit in
                HumanReport.planLines(plan, sources: sources, members: verbose, unproven: !acting) { line in
                    emit(colourStdout ? paintPlanLine(line) : TerminalText(line))
                    emit(.lineEnd)
                }
            }
        }
        guard acting, let tracker else { return }
        let transfers = tracker.update { model, _ in
            model.expect(plan)
            return model.filesTotal
        }
        if transfers > 0 { startDisplay() }
    }

    /// The summary line, interrupted or not; after a signal, a line saying what it left unfinished.
    func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?) {
        endDisplay()
        if !quiet { Output.lines([TerminalText(HumanReport.syncSummary(result))]) }
        if let signal { Output.errors([TerminalText(HumanReport.interruptedLine(result, signal: signal))]) }
    }

    func entry(_ entry: FileEntry, started source: String) {
        if verbose, !quiet, !rewrites.isEmpty,
            let from = rewrites.sources(of: entry).first(where: { $0.displayURL == source })?.rewrittenFrom
        {
            log("fetch \(entry.destination) ← \(source) (rewritten from \(from))")
        }
        guard let tracker else { return }
        tracker.update { model, now in model.started(entry.index, name(entry), size: entry.size, now: now) }
        startDisplay()
    }

    func entry(_ entry: FileEntry, progress: TransferProgress) {
        tracker?.update { model, now in model.progress(entry.index, name(entry), progress, size: entry.size, now: now) }
    }

    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, next: NextAttempt?) {
        tracker?.update { model, now in model.attemptFailed(entry.index, next: next, now: now) }
        // An interruption is said once, in the summary, not once per transfer it stopped.
        guard !quiet, failure.reason != .interrupted else { return }
        let destination = entry.destination.description
        // Wrong bytes from a source are a warning in every style when a mirror then serves the right ones; when the
        // entry fails, its error names every source and what it served, once.
        if let warning = HumanReport.wrongBytesWarning(entry: entry, failure: failure) {
            return wrongBytes.withLock { $0[entry.index, default: []].append("warning: \(destination): \(warning)") }
        }
        // The URL that failed, and the one tried next when it is another: with mirrors, which one is flaky is
        // what the reader of a log wants to know.
        let cause = FailureWording.attempt(failure) + HumanReport.detail(failure.reason, verbose)
        if let next, next.delay > 0, verbose || tracker != nil {
            let elsewhere = next.sourceDisplayURL != failure.sourceDisplayURL ? " from \(next.sourceDisplayURL)" : ""
            Output.errors([
                paint("retry", ANSI.yellow, colour)
                    + " \(destination): \(cause); retrying in \(HumanReport.formatSeconds(next.delay))\(elsewhere)"
            ])
        } else if verbose {
            // This source is left for now: the next one is tried at once, or the entry fails with its own error.
            Output.errors([paintDiagnostic("warning: \(destination): \(cause)")])
        }
    }

    func entry(_ entry: FileEntry, finished outcome: EntryOutcome) {
        let destination = entry.destination.description
        let warnings = wrongBytes.withLock { $0.removeValue(forKey: entry.index) } ?? []
        if case .failed = outcome {} else if !warnings.isEmpty { Output.errors(warnings.map(paintDiagnostic)) }
        switch outcome {
        case .upToDate:
            break
        case .notModified:
            tracker?.update { model, _ in model.finished(entry.index, .unchanged) }
            if !quiet, verbose || linePerFile { log("unchanged \(destination) (the server answered 304)") }
        case .fetched(let file):
            fetched(entry, file)
        case .fetchedNotDurable(let file, let error):
            fetched(entry, file)
            Output.errors([paintDiagnostic(HumanReport.notDurableLine(entry: entry, error: error))])
        case .stillNotDurable(let error):
            Output.errors([paintDiagnostic(HumanReport.notDurableLine(entry: entry, error: error))])
        case .failed(let failure) where failure.wasInterrupted:
            tracker?.update { model, _ in model.finished(entry.index, .failed) }
        // one line for the whole interruption, not one per entry
        case .failed(let failure):
            tracker?.update { model, _ in model.finished(entry.index, .failed) }
            Output.errors(
                HumanReport.failureLines(entry: entry, failure: failure, verbose: verbose, manifest: manifest).map(
                    paintDiagnostic))
        }
    }

    /// A file in place: its bytes count in the view, and a log gets its line.
    private func fetched(_ entry: FileEntry, _ file: DownloadedFile) {
        tracker?.update { model, _ in model.finished(entry.index, .fetched(size: file.size)) }
        let destination = entry.destination.description
        if !quiet, let encoding = file.contentEncoding {
            Output.errors([
                paintDiagnostic("warning: \(destination): " + HumanReport.encodingWarning(encoding: encoding))
            ])
        }
        if !quiet, let unpacked = file.unpacked, !unpacked.keptFiles.isEmpty {
            Output.errors([
                paintDiagnostic("warning: " + HumanReport.keptFilesWarning(folder: destination, unpacked.keptFiles))
            ])
        }
        guard !quiet, verbose || linePerFile else { return }
        let line = HumanReport.doneLine(destination: destination, file)
        guard verbose, !file.fromCache else { return log(line) }
        let redirected =
            file.servedBy.isEmpty || file.servedBy == file.sourceDisplayURL ? "" : ", served by \(file.servedBy)"
        let version = file.httpVersion.map { " over HTTP/\($0)" } ?? ""
        log(
            line + " from " + file.sourceDisplayURL + rewrittenSuffix(entry, source: file.sourceIndex) + redirected
                + version)
    }

    /// ` (rewritten from URL)` when the entry's source `index` is a rewrite.
    private func rewrittenSuffix(_ entry: FileEntry, source index: Int) -> String {
        guard !rewrites.isEmpty else { return "" }
        let sources = rewrites.sources(of: entry)
        guard sources.indices.contains(index), let from = sources[index].rewrittenFrom else { return "" }
        return " (rewritten from \(from))"
    }

    /// Under an entry of the plan, when a rewrite applies to it: every URL it will try, in order.
    private func rewrittenSourceLines(_ entry: FileEntry) -> [String] {
        let sources = rewrites.sources(of: entry)
        guard sources.contains(where: { $0.rewrittenFrom != nil }) else { return [] }
        return sources.map { source in
            if let from = source.rewrittenFrom { return "    ← \(source.displayURL) (rewritten from \(from))" }
            let isFallback = sources.contains { $0.original == source.original && $0.rewrittenFrom != nil }
            return "    ← \(source.displayURL)" + (isFallback ? " (the original, tried last)" : "")
        }
    }

    func pruned(_ destination: DestinationPath, outcome: PruneOutcome) {
        if case .deleted = outcome, !quiet, verbose || linePerFile {
            log("pruned \(destination)")
        }
        if case .kept = outcome, quiet { return }  // a warning, and --quiet prints errors only
        if let line = HumanReport.pruneLine(destination, outcome) { Output.errors([paintDiagnostic(line)]) }
    }

    /// A line per file: in a plain log it may wait for the ticker (see `Output.logLines`); elsewhere, it is
    /// printed at once.
    private func log(_ line: String) {
        let text = TerminalText(line)
        if linePerFile { Output.logLines([text]) } else { Output.lines([text]) }
    }

    // MARK: Display

    private func name(_ entry: FileEntry) -> String { entry.destination.description }

    private func startDisplay() {
        switch display {
        case .none: break
        case .plain(let plain): plain.start()
        case .bar(let view): view.start()
        }
    }

    private func endDisplay() {
        switch display {
        case .none: break
        case .plain(let plain): plain.end()
        case .bar(let view): view.end()
        }
    }

    // MARK: Colour

    /// `+` green, `~` yellow, `↻` cyan, `-` red, `!` bold red: the marker only, the words stay as they are.
    private func paintPlanLine(_ line: String) -> TerminalText {
        guard let marker = line.first, line.dropFirst().first == " " else { return TerminalText(line) }
        let code: String? =
            switch marker {
            case "+": ANSI.green
            case "~": ANSI.yellow
            case "↻": ANSI.cyan
            case "-": ANSI.red
            case "!": ANSI.boldRed
            default: nil
            }
        guard let code else { return TerminalText(line) }
        return .painted(String(marker), code) + TerminalText(String(line.dropFirst()))
    }

    /// `error:` in bold red, `warning:` in yellow, on stderr when colour is on.
    private func paintDiagnostic(_ line: String) -> TerminalText {
        guard colour else { return TerminalText(line) }
        for (prefix, code) in [("error:", ANSI.boldRed), ("warning:", ANSI.yellow)] where line.hasPrefix(prefix) {
            return .painted(prefix, code) + TerminalText(String(line.dropFirst(prefix.count)))
        }
        return TerminalText(line)
    }

    private func paint(_ text: String, _ code: String, _ enabled: Bool) -> TerminalText {
        enabled ? .painted(text, code) : TerminalText(text)
    }
}
