import Foundation
import Haul
import HaulEngine
import HaulManifest
import HaulPlanner

/// Text for people: the plan on stdout, failures and warnings on stderr as they happen, progress on stderr in
/// the chosen style, the summary on stdout.
final class HumanReporter: RunReporter, Sendable {
    let style: ProgressStyle
    let quiet: Bool
    let verbose: Bool
    let colour: Bool

    init(style: ProgressStyle, quiet: Bool, verbose: Bool, colour: Bool) {
        self.style = style
        self.quiet = quiet
        self.verbose = verbose
        self.colour = colour
    }

    func warning(_ text: String) { Output.errors(["warning: \(text)"]) }

    func plan(_ plan: Plan, acting: Bool) {
        guard !quiet, plan.hasChanges || !acting else { return }
        Output.lines(HumanReport.planLines(plan))
    }

    func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?) {
        if let signal {
            let stopped = result.failures.count
            Output.errors(["haul: interrupted by \(signal); \(stopped) unfinished "
                           + "\(stopped == 1 ? "entry keeps its" : "entries keep their") old content (partial downloads are kept to resume)"])
            return
        }
        if !quiet { Output.lines([HumanReport.syncSummary(result)]) }
    }

    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, retryIn: Double?) {
        guard verbose else { return }
        let next = retryIn.map { "; retrying in \(String(format: "%.1f", $0)) s" } ?? ""
        Output.errors(["warning: \(entry.destination): \(failure)\(next)"])
    }

    func entry(_ entry: FileEntry, finished outcome: EntryOutcome) {
        switch outcome {
        case .upToDate:
            break
        case .notModified:
            if verbose { Output.lines(["unchanged \(entry.destination) (the server answered 304)"]) }
        case .fetched(let file):
            if verbose { Output.lines(["fetched \(entry.destination) (\(ByteCount.format(file.size))) from \(file.sourceDisplayURL)"]) }
        case .failed(.transfer(let failure)) where failure.attempts.last?.reason == .interrupted:
            break  // one line for the whole interruption, not one per entry
        case .failed(let failure):
            Output.errors(HumanReport.failureLines(entry: entry, failure: failure))
        }
    }

    func pruned(_ destination: DestinationPath, outcome: PruneOutcome) {
        if case .deleted = outcome, verbose { Output.lines(["pruned \(destination)"]) }
        if let line = HumanReport.pruneLine(destination, outcome) { Output.errors([line]) }
    }
}
