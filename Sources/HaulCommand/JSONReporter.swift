import Haul
import HaulEngine
import HaulManifest
import HaulPlanner

/// `--json`: one JSON object per line on stdout, nothing else there.
final class JSONReporter: RunReporter, Sendable {
    func warning(_ text: String) {}
    func plan(_ plan: Plan, acting: Bool) {}
    func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?) {}
    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, retryIn: Double?) {}
    func entry(_ entry: FileEntry, finished outcome: EntryOutcome) {}
    func pruned(_ destination: DestinationPath, outcome: PruneOutcome) {}
}
