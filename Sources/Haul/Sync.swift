import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore
import HaulThreads

/// Settings of a run that come from the command line, not the manifest.
package struct SyncOptions: Sendable {
    package var jobs: Int
    package var connectionsPerHost: Int
    package var caFile: String?
    /// Largest body accepted for an entry without `size`.
    package var maxFileSize: Int64
    package var durability: Durability
    /// Delete what this manifest wrote earlier and no longer lists (also on with the manifest's `prune: true`).
    package var prune: Bool
    /// Manage only this shard's entries, locking only them: the other shards may run at once.
    package var shard: Shard?
    /// The config file's URL rewrites (mirrors, pull-through proxies), applied to the entries being fetched.
    package var rewrites: URLRewriter
    /// A content cache (`--cache`, `HAUL_CACHE`) pinned entries are put in place from, and that every verified
    /// download of a pinned entry is added to (see `ContentCache`); nil: none.
    package var cacheDirectory: String?
    /// Logins and passwords by host (`--netrc`, the manifest's `netrc: true`), each sent to its own host only; nil:
    /// none.
    package var netrc: Netrc?
    /// `-H`: headers every entry's `url` gets (not its mirrors; scoped like `defaults.headers`), over the manifest's
    /// of the same name. Their values are the command line's, shown nowhere.
    package var commandLineHeaders: [HeaderField] = []
    /// `-A`: the User-Agent of every request (default `haul/VERSION`).
    package var userAgent: String?
    /// `--retries`, `--timeout`: over every entry's own and `defaults:`.
    package var retries: Int?
    package var stallTimeout: Double?
    /// `--limit-rate`: bytes per second for the whole run, all transfers together.
    package var maxBytesPerSecond: Int64?
    /// `--proxy`, `--noproxy`, `--connect-timeout`, `--cert`, `--key`: how every request reaches its server.
    package var connection = ConnectionSettings()
    /// `--retry-on-http`: statuses retried with backoff besides those that always are.
    package var transientStatuses: Set<Int> = []
    /// Ask the server about every unpinned file, even one it said is still fresh (`--refresh`).
    package var revalidatesFreshFiles = false
    /// `--adopt`: manifests (named relative to root, as `plan --prune` names them) whose files become this
    /// manifest's: pruned by it when it does not list them, recorded as its own from now on.
    package var adopts: Set<String> = []
    /// Seconds since the epoch: when a server's confirmation was, and whether it is still fresh. Injectable, so
    /// that freshness can be tested without waiting.
    package var wallClock: @Sendable () -> Double = RetryPolicy.systemWallClock
    /// How the run shares its open-file limit between its parts (`jobs` is its `transfers`); its thread counts also
    /// fit the address-space limit (`MemoryBudget`).
    package var descriptors: DescriptorBudget

    package init(
        jobs: Int = EngineConfiguration.defaultConcurrency,
        connectionsPerHost: Int = EngineConfiguration.defaultConnectionsPerHost, caFile: String? = nil,
        maxFileSize: Int64 = EngineConfiguration.defaultMaxBodyBytes, durability: Durability = .full,
        prune: Bool = false, shard: Shard? = nil, rewrites: URLRewriter = .none, cacheDirectory: String? = nil
    ) {
        self.jobs = jobs
        self.connectionsPerHost = connectionsPerHost
        self.caFile = caFile
        self.maxFileSize = maxFileSize
        self.durability = durability
        self.prune = prune
        self.shard = shard
        self.rewrites = rewrites
        self.cacheDirectory = cacheDirectory
        descriptors = .unlimited(transfers: jobs, cores: ProcessorCount.online)
    }
}

/// Told what a sync does as it does it. Called from the engine's thread and from the commit queue, possibly at
/// the same time: implementations must be thread-safe (they only record or print).
package protocol SyncObserver: AnyObject, Sendable {
    /// Whether `progress` should be called at all: measuring progress costs a little on every chunk.
    var wantsProgress: Bool { get }
    /// The entry's first request went out, to `source` (display form).
    func entry(_ entry: FileEntry, started source: String)
    /// At most ten times a second per transfer.
    func entry(_ entry: FileEntry, progress: TransferProgress)
    /// `next`: the source tried next and when (nil: the entry fails, and `finished` follows).
    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, next: NextAttempt?)
    func entry(_ entry: FileEntry, finished outcome: EntryOutcome)
    func pruned(_ destination: DestinationPath, outcome: PruneOutcome)
    /// A problem that does not fail the run (the state could not be saved, say).
    func warning(_ warning: SyncWarning)
}

/// What a sync says without failing: the run goes on. Values, worded by the CLI.
package enum SyncWarning: Sendable {
    /// The content cache cannot be opened at all: the sync goes without it.
    case cacheUnavailable(ContentCache.OpenFailure)
    /// A cache entry is not the content its name says: the destination is downloaded.
    case cacheEntryCorrupt(CorruptEntry, destination: DestinationPath)
    /// A cache entry over the size limit is not used: the destination is downloaded.
    case cacheEntryTooLarge(path: String, limit: Int64, destination: DestinationPath)
    /// The cache cannot be read (said once, for the first entry it failed): such entries are downloaded.
    case cacheUnreadable(StoreError, destination: DestinationPath)
    /// Files can no longer be added to the cache at `cachePath` in this run (said once).
    case cacheInsertionStopped(cachePath: String, StoreError)
    /// Files the state says `manifest` wrote, without haul's proof: not pruned (`Plan.unproven`).
    case unproven(manifest: String, files: Int)
    /// The root's key cannot be used: what this sync wrote is not pruned until `--adopt manifestKey` vouches for it.
    case ownerKeyUnusable(StoreError, manifestKey: String)
    /// The state is saved, but not yet durable: its journal is kept for the next sync to retire.
    case stateNotDurable(StoreError)
    /// The state could not be saved: the next sync hashes the files again.
    case stateNotSaved(StoreError)
}

extension SyncObserver {
    package var wantsProgress: Bool { false }
    package func entry(_ entry: FileEntry, started source: String) {}
    package func entry(_ entry: FileEntry, progress: TransferProgress) {}
}

/// `haul sync` as one straight pipeline, each step a value the next one takes: the manifest (`ManifestLoader`) →
/// `observe` → `plan` → `apply` (transfer, verify, commit, prune, save the state) → the caller's report. `plan`
/// and `sync --dry-run` stop after planning, with nothing touched.
package struct Sync: Sendable {
    package let manifest: Manifest
    package let options: SyncOptions
    /// The signed lists that pinned nothing this run, and the entries whose digest a list changed (`SignedLists`).
    private let unverifiedLists: Set<String>
    private let changedByList: Set<DestinationPath>

    /// With `options.shard`, the sync manages only that shard's entries (`Manifest.restricted(to:)`). `lists`: the
    /// manifest as its signed lists pinned it (then `manifest` is its `manifest`).
    package init(manifest: Manifest, options: SyncOptions, lists: SignedLists.Pins? = nil) {
        let pinned = lists?.manifest ?? manifest
        self.manifest = options.shard.map { pinned.restricted(to: $0) } ?? pinned
        self.options = options
        unverifiedLists = lists?.unverified ?? []
        changedByList = lists?.changed ?? []
    }

    package var prunes: Bool { options.prune || manifest.prune }

    /// What is on disk. A file whose identity matches the state is not hashed again; `rehash` hashes every
    /// pinned file whatever the state says (but the state still tells which files haul wrote: pruning and
    /// revalidation need that, and hashing cannot recover it).
    package func observe(_ access: Observation.Access, rehash: Bool = false) throws(ObservationFailure) -> Observation {
        try Observation(
            of: manifest, access: access, rehash: rehash, prunes: prunes, adopting: options.adopts,
            concurrency: options.descriptors.observers)
    }

    /// Decides from values (`Planner`), then says which fetches the content cache holds: one look at the cache
    /// (`cacheLookup`, nothing read or made), judged by `cacheHits`.
    package func plan(_ observation: Observation) -> Plan {
        let changed =
            changedByList.isEmpty
            ? []
            : Set(
                manifest.files.indices.filter {
                    changedByList.contains(manifest.files[$0].destination)
                })
        let context = PlanContext(
            shardScope: manifest.shardScope, unlistedCount: observation.unlistedCount,
            orphans: observation.orphans, unproven: observation.unproven, unverifiedLists: unverifiedLists,
            changedByList: changed)
        var plan = Planner.plan(
            manifest.files, observed: observation.states, pruning: observation.pruneCandidates,
            revalidation: revalidation(observation), context: context)
        plan.fromCache = cacheLookup().map { Self.cacheHits(plan, held: $0) }
        return plan
    }

    /// For each unpinned entry whose file is still the one the state records (by identity, or hashed), when its
    /// source last confirmed it: only a confirmation by one of the entry's own sources (as rewritten now) counts,
    /// as only that source is asked conditionally.
    private func revalidation(_ observation: Observation) -> Revalidation {
        var confirmations = [Confirmation?](repeating: nil, count: manifest.files.count)
        var written = [Bool](repeating: true, count: manifest.files.count)
        for index in manifest.files.indices where manifest.files[index].checksum == nil {
            let origin = observation.record(at: index, of: manifest.files)?.origin
            written[index] = origin != nil
            guard let origin,
                observation.owns(origin), let checkedAt = origin.checkedAt, let sourceKey = origin.sourceKey,
                options.rewrites.sources(of: manifest.files[index]).contains(where: {
                    TransferSource.key($0.url) == sourceKey
                })
            else { continue }
            confirmations[index] = Confirmation(
                checkedAt: Double(checkedAt), freshUntil: origin.freshUntil.map(Double.init))
        }
        return Revalidation(
            confirmations: confirmations, written: written, now: options.wallClock(),
            always: options.revalidatesFreshFiles)
    }

    /// Fetches what the plan needs, verifies it while it streams, and commits it atomically, then prunes and
    /// saves the state. A failed entry leaves its destination as it was; the others go on. `observation` must be
    /// `.exclusive`: the run lock is what makes clearing what earlier, interrupted runs left in haul's private
    /// area safe.
    /// `prefetched`: what a `HeadStart` downloaded while the manifest was read, put in place before the engine runs.
    package func apply(
        _ plan: Plan, observed observation: Observation, observer: SyncObserver?,
        cancellation: Cancellation? = nil, prefetched: Prefetched? = nil
    ) -> SyncResult {
        let started = MonotonicClock.seconds()
        SettledRun.forgetIfChanging(plan, manifest, observation)
        var result = transfer(
            plan, observed: observation, observer: observer, cancellation: cancellation,
            prefetched: prefetched)
        if cancellation?.isCancelled != true {
            closeDurabilityGaps(observation, &result, observer: observer)
            result.prunes = prune(plan, observed: observation, observer: observer)
        }
        // The whole of what the run did, pruning included.
        result.seconds = MonotonicClock.seconds() - started
        saveState(observation, result, observer: observer)
        if cancellation?.isCancelled != true { SettledRun.record(self, plan, observation, result) }
        return result
    }

    /// Files an earlier run put in place but could not make durable (the state marks them `unsynced`) and that this
    /// run left as they are: each file and its folder are synced now, and the mark goes (`closedGaps`). One that
    /// still cannot be synced is said again (`stillNotDurable`, exit 1) and keeps its mark. At `--durability none`
    /// nothing is flushed and the marks stay for a run that flushes.
    private func closeDurabilityGaps(_ observation: Observation, _ result: inout SyncResult, observer: SyncObserver?) {
        guard options.durability == .full, !observation.unsyncedEntries.isEmpty else { return }
        let files = result.plan.files
        let gaps = observation.unsyncedEntries.filter { index in
            if case .upToDate = result.outcomes[index] { return true }
            return false
        }
        for (index, failure) in zip(
            gaps, Committer.makeDurable(gaps.map { files[$0].destination }, root: manifest.root))
        {
            guard let failure else {
                result.closedGaps.insert(index)
                continue
            }
            result.outcomes[index] = .stillNotDurable(failure)
            observer?.entry(files[index], finished: result.outcomes[index])
        }
    }

    /// Deletes only what the plan found unchanged since haul wrote it; the rest is reported and forgotten.
    /// Records without proof are said as a warning: a sync that prunes nothing because of them must say why, even
    /// when it has nothing else to do and prints no plan.
    private func prune(
        _ plan: Plan, observed observation: Observation, observer: SyncObserver?
    )
        -> [(DestinationPath, PruneOutcome)]
    {
        for unproven in plan.unproven {
            observer?.warning(.unproven(manifest: unproven.manifest, files: unproven.files))
        }
        let pruner = Pruner(root: manifest.root)
        return zip(plan.prunes, observation.pruneIdentities).map { planned, identity in
            let outcome: PruneOutcome =
                switch planned.action {
                case .forget: .forgotten
                case .keep(let why): .kept(why)
                case .delete:
                    if let identity {
                        switch pruner.delete(planned.destination, expected: identity) {
                        case .success: .deleted
                        case .failure(let error): .failed(error)
                        }
                    } else {
                        .kept(.unidentified)
                    }
                }
            observer?.pruned(planned.destination, outcome: outcome)
            return (planned.destination, outcome)
        }
    }

    /// Writes what the run changed in the state (`stateUpdate`), when anything did. Written only when it changed.
    private func saveState(_ observation: Observation, _ result: SyncResult, observer: SyncObserver?) {
        let authorship = Authorship(
            manifestKey: observation.manifestKey, key: observation.ownerKey, rewrites: options.rewrites,
            wallClock: options.wallClock)
        let update = Self.stateUpdate(observation, result, authorship: authorship, now: FileTime.now)
        // Counting walks every outcome: only when the key failed.
        if let failure = observation.ownerKeyFailure {
            let counts = result.counts
            if counts.fetched + counts.cached > 0 {
                observer?.warning(.ownerKeyUnusable(failure, manifestKey: observation.manifestKey))
            }
        }
        // A journal left by an earlier run is retired by a save, even one with nothing new to record.
        guard !update.changes.records.isEmpty || update.settles || observation.cache.hasJournal,
            let area = observation.area
        else { return }
        do {
            if case .notDurable(let error) = try observation.saveState(update.changes, in: area) {
                observer?.warning(.stateNotDurable(error))
            }
        } catch {
            // The files are in place all the same; the next run re-hashes what it cannot find recorded.
            if !update.changes.records.isEmpty {
                observer?.warning(.stateNotSaved(error))
            }
        }
    }

    /// What the state records after a run, as a value.
    struct StateUpdate {
        /// The records that change (nil: forgotten).
        var changes = StateChanges()
        /// Whether writing the state now lets too-recent records settle: worth a try, not worth a warning (a
        /// read-only root, say), so not a change.
        var settles = false
    }

    /// The state after this run claims exactly what is on disk: a fetched file with the identity it has now and
    /// where it came from, an untouched one as observed, nothing for a destination that is missing or not a
    /// regular file. Records of destinations the manifest no longer lists are kept until they are pruned (or
    /// found modified, or gone): pruning needs them. `authorship` says who wrote a file and when its server
    /// confirmed it; `now` is when the state is written (for records too recent to trust, `rewritingSettles`).
    static func stateUpdate(
        _ observation: Observation, _ result: SyncResult, authorship: Authorship,
        now: FileTime
    ) -> StateUpdate {
        var update = StateUpdate()
        let cache = observation.cache
        // One record per file put in place: the count of those is known without walking the outcomes.
        update.changes.records.reserveCapacity(result.committedRecords.count)
        for index in result.plan.actions.indices {
            if let tree = observation.trees[index] {
                update.changes.records += treeChanges(
                    tree, outcome: result.outcomes[index], written: result.committedTrees[index],
                    cache: cache, authorship: authorship)
                continue
            }
            // Most entries of a no-op: kept, and recorded exactly as the cache has them (unless the run made an
            // earlier run's file durable: its mark goes).
            if observation.vouched[index], result.outcomes[index].leftInPlace {
                if !result.closedGaps.isEmpty, result.closedGaps.contains(index) {
                    let destination = DestinationKey(result.plan.files[index].destination)
                    if var record = cache.records[destination] {
                        record.unsynced = false
                        update.changes.records.append((destination, record))
                    }
                }
                continue
            }
            // Borrowed, not copied: a copy of an entry retains and releases a dozen strings and arrays.
            let destination = DestinationKey(result.plan.files[index].destination)
            var record = observation.vouched[index] ? cache.records[destination] : observation.found[index]
            if let observed = record, observed.origin == nil, let earlier = cache.records[destination],
                earlier.digest == observed.digest
            {
                // Re-hashed after a touch or with --rehash: still the content haul wrote (and proven as before).
                record?.origin = earlier.origin
                record?.ownerTag = earlier.ownerTag
                record?.unsynced = earlier.unsynced && (result.closedGaps.isEmpty || !result.closedGaps.contains(index))
            }
            // Its server confirmed it: when, and for how long it stays fresh.
            if case .notModified(let freshFor) = result.outcomes[index], let origin = record?.origin {
                record?.origin = authorship.confirmed(origin, freshFor: freshFor)
            }
            // Durable or not, the file is in place: the state says what is on disk.
            if result.outcomes[index].putInPlace {
                if let written = result.committedRecords[index] {
                    // A new file: recorded without looking up the old record first (a rename gives it a new
                    // identity anyway), one hash-table operation per fetched file, at the save.
                    update.changes.records.append((destination, written))
                    continue
                }
                record = nil
            }
            if cache.records[destination] != record {
                update.changes.records.append((destination, record))
            } else if let record, rewritingSettles(record, recordedAt: cache.writtenAt, now: now) {
                update.settles = true
            }
        }
        for (destination, outcome) in result.prunes {
            switch outcome {
            case .deleted, .forgotten, .kept:
                if cache.records[DestinationKey(destination)] != nil {
                    update.changes.records.append((DestinationKey(destination), nil))
                }
            case .failed: continue
            }
        }
        update.changes.records += ownersRenamed(in: cache, by: observation, except: update.changes.records)
        return update
    }

    /// What the state records of an `extract` entry's tree after the run: a new tree's members in place of the old
    /// tree's; after a 304, the same members confirmed (they share one origin, and go on sharing it); otherwise
    /// nothing changes (a tree left as it was keeps its records, a failed one too: it is still what is on disk).
    private static func treeChanges(
        _ tree: ObservedTree, outcome: EntryOutcome, written: [(DestinationKey, StateRecord)]?,
        cache: StateCache, authorship: Authorship
    ) -> [(DestinationKey, StateRecord?)] {
        switch outcome {
        case .fetched, .fetchedNotDurable:
            let written = written ?? []
            let kept = Set(written.map(\.0))
            return tree.memberKeys.filter { !kept.contains($0) }.map { ($0, nil) } + written.map { ($0.0, $0.1) }
        case .notModified(let freshFor):
            var confirmed: [ObjectIdentifier: Origin] = [:]
            return tree.memberKeys.compactMap { key in
                guard var record = cache.records[key], let origin = record.origin else { return nil }
                record.origin = confirmed[ObjectIdentifier(origin)] ?? authorship.confirmed(origin, freshFor: freshFor)
                confirmed[ObjectIdentifier(origin)] = record.origin
                return (key, record)
            }
        default:
            return []
        }
    }

    /// Records this manifest owns under another name (an older haul's, or a manifest `--adopt` names), recorded
    /// as its own from now on, and records of a manifest `--adopt` names that carry no proof, given one (the user
    /// vouches for them); `except`: records already changed. Empty, at the cost of one look at each record, when
    /// there are none.
    private static func ownersRenamed(
        in cache: StateCache, by observation: Observation,
        except changed: [(DestinationKey, StateRecord?)]
    ) -> [(DestinationKey, StateRecord?)] {
        guard cache.records.values.contains(where: { $0.origin.map(observation.mayChangeOwner) ?? false }) else {
            return []
        }
        let done = Set(changed.map(\.0))
        // One new origin per old one: every pinned file of a manifest shares its origin, and keeps sharing it.
        var renamed: [ObjectIdentifier: Origin] = [:]
        return cache.records.compactMap { destination, record in
            guard !done.contains(destination), let origin = record.origin, observation.mayChangeOwner(origin),
                let (owner, tag) = observation.newOwner(of: record, at: destination)
            else { return nil }
            var updated = record
            if owner != origin.manifestKey {
                updated.origin = renamed[ObjectIdentifier(origin), default: origin.owned(by: owner)]
                renamed[ObjectIdentifier(origin)] = updated.origin
            }
            updated.ownerTag = tag
            return (destination, updated)
        }
    }

    /// A record whose file is too recent to be trusted from the state alone (see `FileIdentity.isOlder(than:)`)
    /// becomes trustworthy once the state is written again later than the file's times, unless those lie in the
    /// future (a file dated 2300 is hashed on every run, and rewriting the state would not change that).
    private static func rewritingSettles(_ record: StateRecord, recordedAt: FileTime?, now: FileTime) -> Bool {
        guard let recordedAt, !record.identity.isOlder(than: recordedAt) else { return false }
        return record.identity.isOlder(than: now)
    }

}

package enum HaulVersion {
    package static let current = "0.1.0"
    /// What every request says it is, unless `-A` says otherwise.
    package static let userAgent = "haul/\(current)"

    /// `haul --version`: haul's version on the first line (`haul 0.1.0`, what scripts read), then the libraries it
    /// runs with.
    package static var report: String {
        "haul \(current)\n\(CurlLibrary.description)\n\(YAMLLibrary.description)"
    }
}
