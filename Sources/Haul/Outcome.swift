import HaulEngine
import HaulManifest
import HaulPlanner
import HaulStore

/// What happened to one entry in a sync.
public enum EntryOutcome: Sendable {
    case upToDate
    case fetched(DownloadedFile)
    case failed(EntryFailure)
}

/// Why an entry could not be brought to its desired state. Its destination keeps its old content.
public enum EntryFailure: Error, Sendable {
    /// The plan refused it (a directory in the way, a parent symlink leading outside root, …).
    case refused(String)
    /// Every source failed to deliver the right bytes.
    case transfer(TransferFailure)
    /// The bytes were right but could not be moved into place.
    case commit(StoreError)
}

/// The result of `sync`, in manifest order.
public struct SyncResult: Sendable {
    public var plan: Plan
    public var outcomes: [EntryOutcome]
    public var seconds: Double

    public var failures: [(entry: FileEntry, failure: EntryFailure)] {
        zip(plan.entries, outcomes).compactMap { planned, outcome in
            if case .failed(let failure) = outcome { return (planned.entry, failure) }
            return nil
        }
    }

    public var fetchedFiles: [DownloadedFile] {
        outcomes.compactMap { if case .fetched(let file) = $0 { file } else { nil } }
    }

    public var exitStatus: ExitStatus { failures.isEmpty ? .success : .entryFailed }
}

/// The exit statuses of the CLI contract.
public enum ExitStatus: Int32, Sendable {
    /// Every file is in its desired state (for `plan`: nothing to do).
    case success = 0
    /// At least one entry failed; files that succeeded stay.
    case entryFailed = 1
    /// `plan` found changes pending.
    case changesPending = 2
    /// The manifest is invalid: nothing touched, no request made.
    case invalidManifest = 3
    /// Another haul is syncing the same root (without `--wait`).
    case rootBusy = 4
    case usage = 64
}
