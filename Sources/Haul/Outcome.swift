import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore

/// What happened to one entry in a sync.
package enum EntryOutcome: Sendable {
    case upToDate
    /// Revalidated: the server said the copy on disk is current (304); nothing was written. `freshFor`: how long
    /// it said the copy stays fresh (`Freshness`), which the state records.
    case notModified(freshFor: Double?)
    case fetched(DownloadedFile)
    /// Fetched and renamed into place, but its folder could not be synced afterwards (the error says why): the
    /// destination holds the new content, which a crash may still take back. Neither done nor failed, and said as
    /// such: it counts as fetched (the state records the file; a failure would promise the old content, which is
    /// gone) and makes the run exit 1. Boxed: rare, and inline it would make every entry's outcome, 100,000 of them
    /// in a large sync, half as large again.
    indirect case fetchedNotDurable(DownloadedFile, StoreError)
    /// Already in place, put there by an earlier run that could not sync it (the state kept the mark), and this run
    /// could not sync it either (the error says why): still not crash-proof, said again, and the run exits 1.
    indirect case stillNotDurable(StoreError)
    case failed(EntryFailure)

    /// Put in place from the content cache (`--cache`), durably or not: no request was made for it.
    package var isFromCache: Bool { fetchedFile?.fromCache ?? false }

    /// The file was there before the run and still is, untouched: up to date, or still not durable.
    var leftInPlace: Bool {
        switch self {
        case .upToDate, .stillNotDurable: true
        case .notModified, .fetched, .fetchedNotDurable, .failed: false
        }
    }

    /// This run put the file in place, durably or not. (Asked without `fetchedFile`: binding the file copies it,
    /// which a save of 100,000 outcomes pays for in milliseconds.)
    var putInPlace: Bool {
        switch self {
        case .fetched, .fetchedNotDurable: true
        case .upToDate, .stillNotDurable, .notModified, .failed: false
        }
    }

    /// The file this run put in place, durably or not.
    package var fetchedFile: DownloadedFile? {
        switch self {
        case .fetched(let file), .fetchedNotDurable(let file, _): file
        case .upToDate, .stillNotDurable, .notModified, .failed: nil
        }
    }
}

/// What happened to one file the manifest no longer lists.
package enum PruneOutcome: Sendable {
    case deleted
    /// Not what haul wrote any more: left in place, and no longer managed by haul.
    case kept(KeepReason)
    /// Already gone; the record of it is dropped.
    case forgotten
    case failed(StoreError)
}

/// Why an entry could not be brought to its desired state. Its destination keeps its old content.
package enum EntryFailure: Error, Sendable {
    /// The plan refused it (a directory in the way, a parent symlink leading outside root, …).
    case refused(Obstacle)
    /// Its tree was not unpacked or not the pinned one: nothing was put in place.
    case tree(TreeFailure)
    /// Planned for a fetch that never ran (a caller that did not open root's private folder, say).
    case notAttempted
    /// Every source failed to deliver the right bytes.
    case transfer(TransferFailure)
    /// The bytes were right but could not be moved into place.
    case commit(StoreError)

    /// Stopped by SIGINT or SIGTERM before it finished (queued, in flight, or waiting to retry), rather than failed
    /// on its own account.
    package var wasInterrupted: Bool {
        if case .transfer(let failure) = self { failure.attempts.last?.reason == .interrupted } else { false }
    }
}

/// The result of `sync`, in manifest order.
package struct SyncResult: Sendable {
    package var plan: Plan
    package var outcomes: [EntryOutcome]
    package var prunes: [(DestinationPath, PruneOutcome)] = []
    package var seconds: Double
    /// Per fetched entry (by index), what the state records of it: the destination's identity as the commit left
    /// it, and the ownership journaled before its rename (marked unsynced when its folder could not be synced).
    var committedRecords: [Int: StateRecord] = [:]
    /// Per fetched `extract` entry: the records of its new tree's members, by destination.
    var committedTrees: [Int: [(DestinationKey, StateRecord)]] = [:]
    /// Entries whose files an earlier run left not durable and this run synced (`Sync.closeDurabilityGaps`): the
    /// state drops their mark.
    var closedGaps: Set<Int> = []

    package init(plan: Plan, outcomes: [EntryOutcome], seconds: Double) {
        self.plan = plan
        self.outcomes = outcomes
        self.seconds = seconds
    }

    /// Walks the outcomes, not the entries: an entry is only touched when it failed (100,000 copies of entries
    /// that did not cost as much as the rest of a no-op's report).
    package var failures: [(entry: FileEntry, failure: EntryFailure)] {
        outcomes.indices.compactMap { index in
            if case .failed(let failure) = outcomes[index] { return (plan.files[index], failure) }
            return nil
        }
    }

    /// What a summary says of the outcomes.
    package struct Counts: Sendable, Equatable {
        /// Downloaded, durable or not (files from the cache are `cached`, not counted here).
        package var fetched = 0
        /// Saturating: a display total.
        package var fetchedBytes: Int64 = 0
        /// Put in place from the content cache, with no request, durable or not.
        package var cached = 0
        /// Saturating.
        package var cachedBytes: Int64 = 0
        package var notModified = 0
        package var failed = 0
        /// Of those failed, the ones a signal stopped before they finished (`EntryFailure.wasInterrupted`).
        package var interrupted = 0
        /// In place, but not yet durable: fetched by this run, or by an earlier one whose gap this run could not
        /// close.
        package var notDurable = 0
    }

    /// One pass that copies no outcome: the summary of a first sync used to gather 100,000 downloaded files into an
    /// array just to count them.
    package var counts: Counts {
        var counts = Counts()
        for index in outcomes.indices {
            switch outcomes[index] {
            case .fetched(let file), .fetchedNotDurable(let file, _):
                if file.fromCache {
                    counts.cached += 1
                    let (sum, overflow) = counts.cachedBytes.addingReportingOverflow(file.size)
                    counts.cachedBytes = overflow ? .max : sum
                } else {
                    counts.fetched += 1
                    let (sum, overflow) = counts.fetchedBytes.addingReportingOverflow(file.size)
                    counts.fetchedBytes = overflow ? .max : sum
                }
                if case .fetchedNotDurable = outcomes[index] { counts.notDurable += 1 }
            case .notModified: counts.notModified += 1
            case .stillNotDurable: counts.notDurable += 1
            case .failed(let failure):
                counts.failed += 1
                if failure.wasInterrupted { counts.interrupted += 1 }
            case .upToDate: continue
            }
        }
        return counts
    }

    package var pruneFailures: [(DestinationPath, StoreError)] {
        prunes.compactMap { if case .failed(let error) = $0.1 { ($0.0, error) } else { nil } }
    }

    package var deletedCount: Int { prunes.count { if case .deleted = $0.1 { true } else { false } } }

    package var failedCount: Int { outcomes.count { if case .failed = $0 { true } else { false } } }

    /// A file in place but not durable is not in its desired state yet: the run exits 1 for it too.
    package var exitStatus: ExitStatus {
        let notDurable = outcomes.contains {
            switch $0 {
            case .fetchedNotDurable, .stillNotDurable: true
            default: false
            }
        }
        return failedCount == 0 && !notDurable && pruneFailures.isEmpty ? .success : .entryFailed
    }
}

/// The exit statuses of the CLI contract.
package enum ExitStatus: Int32, Sendable {
    /// Every file is in its desired state (for `plan`: nothing to do).
    case success = 0
    /// At least one entry failed (or is in place but not yet durable); files that succeeded stay.
    case entryFailed = 1
    /// `plan` found changes pending.
    case changesPending = 2
    /// The manifest is invalid: nothing touched, no request made.
    case invalidManifest = 3
    /// Another haul is syncing the same root (without `--wait`).
    case rootBusy = 4
    /// Something in root's `.haul` folder is a symlink or of the wrong kind: the root was refused untouched.
    case unsafePrivateFolder = 5
    case usage = 64
    /// Standard output could not be written (a full disk, an I/O error), in a run that would otherwise have exited
    /// 0: its report is lost (sysexits' EX_IOERR, as `usage` is EX_USAGE).
    case outputFailed = 74
}
