import Glibc
import HaulDigest
import HaulEngine
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore
import HaulThreads
import Synchronization

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

    package init(jobs: Int = EngineConfiguration.defaultConcurrency,
                connectionsPerHost: Int = EngineConfiguration.defaultConnectionsPerHost, caFile: String? = nil,
                maxFileSize: Int64 = EngineConfiguration.defaultMaxBodyBytes, durability: Durability = .batched,
                prune: Bool = false) {
        self.jobs = jobs
        self.connectionsPerHost = connectionsPerHost
        self.caFile = caFile
        self.maxFileSize = maxFileSize
        self.durability = durability
        self.prune = prune
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
    func warning(_ text: String)
}

extension SyncObserver {
    package var wantsProgress: Bool { false }
    package func entry(_ entry: FileEntry, started source: String) {}
    package func entry(_ entry: FileEntry, progress: TransferProgress) {}
    package func warning(_ text: String) {}
}

/// manifest → observe → plan → execute → verify → commit. Each step is a separate call so that `plan` and
/// `sync --dry-run` stop after planning and nothing else is touched.
package struct Reconciler: Sendable {
    package let manifest: Manifest
    package let options: SyncOptions
    /// The root's private folder, checked; nil when root has none yet (only for commands that change nothing).
    package let area: PrivateArea?
    /// The state cache, read while the manifest was parsed (nil: `assess` reads it).
    private let state: StatePrefetch?

    package init(manifest: Manifest, options: SyncOptions, area: PrivateArea?, state: StatePrefetch? = nil) {
        self.manifest = manifest
        self.options = options
        self.area = area
        self.state = state
    }

    package var prunes: Bool { options.prune || manifest.prune }

    /// Observes the disk and decides. No network, no writes. A file whose identity matches the state cache is
    /// not hashed again; `rehash` ignores the cache and hashes everything (but still knows which files haul
    /// wrote: pruning and revalidation need that, and hashing cannot recover it).
    package func assess(rehash: Bool = false) -> Assessment {
        var (cache, warning, glances) = state?.take(area: area) ?? Self.load(area: area)
        let manifestKey = StateCache.manifestKey(path: manifest.sourcePath)
        let observed = Observation.observe(manifest, cache: cache, glances: rehash ? nil : glances, rehash: rehash,
                                           concurrency: Self.cores)
        glances = nil  // not needed any more: freed before the plan is built
        let candidates = prunes ? Observation.pruneCandidates(manifest, cache: cache, manifestKey: manifestKey,
                                                              rehash: rehash, concurrency: Self.cores) : []
        let plan = Planner.plan(manifest.files, observed: observed.states, pruning: candidates.map(\.candidate))
        return Assessment(plan: plan, records: observed.records, recordIsCached: observed.cached,
                          pruneIdentities: candidates.map(\.identity),
                          cache: cache, cacheWarning: warning, manifestKey: manifestKey)
    }

    private static func load(area: PrivateArea?) -> (cache: StateCache, warning: String?, glances: Glances?) {
        let (cache, warning) = StateCache.load(area: area)
        return (cache, warning, nil)
    }

    /// Fetches what the plan needs, verifies it while it streams, and commits it atomically, then prunes.
    /// A failed entry leaves its destination as it was; the others go on. Call it while holding the root's
    /// `RunLock`: it clears what earlier, interrupted runs left in haul's private area.
    package func apply(_ assessment: Assessment, observer: SyncObserver?, cancellation: Cancellation? = nil) -> SyncResult {
        let started = MonotonicClock.seconds()
        var result = execute(assessment, observer: observer, cancellation: cancellation)
        if cancellation?.isCancelled != true { result.prunes = prune(assessment, observer: observer) }
        // The whole of what the run did, pruning included.
        result.seconds = MonotonicClock.seconds() - started
        saveState(assessment, result, observer: observer)
        return result
    }

    /// Deletes only what the plan found unchanged since haul wrote it; the rest is reported and forgotten.
    private func prune(_ assessment: Assessment, observer: SyncObserver?) -> [(DestinationPath, PruneOutcome)] {
        let pruner = Pruner(root: manifest.root)
        return zip(assessment.plan.prunes, assessment.pruneIdentities).map { planned, identity in
            let outcome: PruneOutcome = switch planned.action {
            case .forget: .forgotten
            case .keep(let why): .kept(why)
            case .delete:
                if let identity {
                    switch pruner.delete(planned.destination, expected: identity) {
                    case .success: .deleted
                    case .failure(let error): .failed(error)
                    }
                } else {
                    .kept("could not be identified")
                }
            }
            observer?.pruned(planned.destination, outcome: outcome)
            return (planned.destination, outcome)
        }
    }

    /// The cache after this run claims exactly what is on disk: a fetched file with the identity it has now and
    /// where it came from, an untouched one as observed, nothing for a destination that is missing or not a
    /// regular file. Records of destinations the manifest no longer lists are kept until they are pruned (or
    /// found modified, or gone): pruning needs them. Written only when it changed.
    private func saveState(_ assessment: Assessment, _ result: SyncResult, observer: SyncObserver?) {
        // Copy-on-write: the cache is copied, and later written, only if some record actually differs.
        var cache = assessment.cache
        var changed = false
        /// Only to let too-recent records settle: worth a try, not worth a warning (a read-only root, say).
        var settles = false
        let authorship = Authorship(manifestKey: assessment.manifestKey)
        let fetched = result.counts.fetched
        // Room for every new record at once (a first sync adds 100,000), but only when some are coming: reserving
        // would copy a cache that a no-op leaves as it is.
        if fetched > 0 { cache.records.reserveCapacity(cache.records.count + fetched) }
        for index in result.plan.entries.indices {
            // Most entries of a no-op: kept, and recorded exactly as the cache has them.
            if assessment.recordIsCached[index], case .upToDate = result.outcomes[index] { continue }
            // Borrowed, not copied: a copy of an entry retains and releases a dozen strings and arrays.
            let destination = DestinationKey(result.plan.entries[index].entry.destination)
            var record = assessment.records[index]
            if let observed = record, observed.origin == nil, let earlier = cache.records[destination],
               earlier.digest == observed.digest {
                // Re-hashed after a touch or with --rehash: still the content haul wrote.
                record?.origin = earlier.origin
            }
            // Durable or not, the file is in place: the state says what is on disk.
            if let file = result.outcomes[index].fetchedFile {
                let origin = authorship.origin(of: result.plan.entries[index].entry, delivered: file)
                if let identity = result.committedIdentities[index] {
                    // A new file: one hash-table operation, not a lookup and then a store.
                    let written = StateRecord(identity: identity, digest: file.digest, origin: origin)
                    if cache.records.updateValue(written, forKey: destination) != written { changed = true }
                    continue
                }
                record = nil
            }
            if cache.records[destination] != record {
                cache.records[destination] = record
                changed = true
            } else if let record, Self.rewritingSettles(record, recordedAt: assessment.cache.writtenAt) {
                settles = true
            }
        }
        for (destination, outcome) in result.prunes {
            switch outcome {
            case .deleted, .forgotten, .kept:
                if cache.records.removeValue(forKey: DestinationKey(destination)) != nil { changed = true }
            case .failed: continue
            }
        }
        guard changed || settles, let area else { return }
        do {
            try cache.save(in: area)
        } catch {
            // The files are in place all the same; the next run re-hashes what it cannot find recorded.
            if changed { observer?.warning("the state could not be saved (\(error)); the next sync hashes the files again") }
        }
    }

    /// A record whose file is too recent to be trusted from the state alone (see `FileIdentity.isOlder(than:)`)
    /// becomes trustworthy once the state is written again later than the file's times, unless those lie in the
    /// future (a file dated 2300 is hashed on every run, and rewriting the state would not change that).
    private static func rewritingSettles(_ record: StateRecord, recordedAt: FileTime?) -> Bool {
        guard let recordedAt, !record.identity.isOlder(than: recordedAt) else { return false }
        return record.identity.isOlder(than: FileTime.now)
    }

    private func execute(_ assessment: Assessment, observer: SyncObserver?, cancellation: Cancellation?) -> SyncResult {
        let plan = assessment.plan
        let started = MonotonicClock.seconds()
        var outcomes: [EntryOutcome] = []
        outcomes.reserveCapacity(plan.entries.count)
        var identities: [Int: FileIdentity] = [:]
        var fetches: [Int] = []
        for index in plan.entries.indices {
            switch plan.entries[index].action {
            case .keep:
                outcomes.append(.upToDate)
            case .refuse(let why):
                outcomes.append(.failed(.refused(why)))
                observer?.entry(plan.entries[index].entry, finished: outcomes[index])
            case .fetch, .revalidate:
                // Replaced by the transfer's outcome below; an entry the engine never reports stays failed.
                outcomes.append(.failed(.refused("not attempted")))
                fetches.append(index)
            }
        }
        guard let area else {
            // Reached only by a caller that did not open root's private folder for a sync: nothing is fetched.
            for index in fetches { outcomes[index] = .failed(.refused("root's private folder is not open")) }
            return SyncResult(plan: plan, outcomes: outcomes, seconds: MonotonicClock.seconds() - started)
        }
        if fetches.isEmpty {
            // Nothing to fetch, so no partial is wanted: whatever an interrupted or killed run left goes.
            StagingArea.sweepLeftovers(in: area, isOwnName: TransferEngine.isStagingName)
        } else {
            let staging: StagingArea
            do {
                staging = try StagingArea(area: area)
                staging.sweep(keepingPartials: Set(fetches.compactMap { plan.entries[$0].entry.checksum }.map {
                    PartialStore.fileName(for: $0.digest)
                }), isOwnName: TransferEngine.isStagingName)
            } catch {
                for index in fetches {
                    outcomes[index] = .failed(.commit(error))
                    observer?.entry(plan.entries[index].entry, finished: outcomes[index])
                }
                return SyncResult(plan: plan, outcomes: outcomes, seconds: MonotonicClock.seconds() - started)
            }
            let execution = Execution(plan: plan, staging: staging,
                                      committer: Committer(root: manifest.root, staging: staging.temporary,
                                                           journal: OwnershipJournal(area: area), durability: options.durability),
                                      authorship: Authorship(manifestKey: assessment.manifestKey),
                                      observer: observer, expectedCount: fetches.count)
            let engine = TransferEngine(configuration: EngineConfiguration(
                temporaryDirectory: staging.temporary, maxConcurrentTransfers: options.jobs,
                maxConnectionsPerHost: options.connectionsPerHost, caFile: options.caFile,
                userAgent: "haul/\(HaulVersion.current)", partialDirectory: staging.partial,
                maxBodyBytes: options.maxFileSize, loops: Self.cores))
            let records = assessment.records
            let groups = Self.shareGroups(plan, fetches: fetches)
            engine.run(count: groups.leaders.count, request: { [self, groups] in
                            let index = groups.leaders[$0]
                            var request = transferRequest(for: plan.entries[index], id: index, record: records[index])
                            request.sharers = (groups.sharers[index] ?? []).map {
                                transferRequest(for: plan.entries[$0], id: $0, record: records[$0])
                            }
                            return request
                       },
                       delegate: execution, reportsProgress: observer?.wantsProgress ?? false,
                       cancellation: cancellation)
            let finished = execution.finish()
            for (index, outcome) in finished.outcomes { outcomes[index] = outcome }
            identities = finished.identities
        }
        var result = SyncResult(plan: plan, outcomes: outcomes, seconds: MonotonicClock.seconds() - started)
        result.committedIdentities = identities
        return result
    }

    /// Fetches grouped by what their first request would be (the same URL, headers and hash algorithm): one
    /// request per group goes to the engine, and its bytes are judged for every entry of the group (see
    /// `TransferRequest.sharers`), so a URL listed for 10,000 destinations is downloaded once. Revalidations are
    /// never grouped: their requests are conditional on each destination's own validators.
    /// `leaders`: the first entry of each group, in plan order; `sharers`: the others, by leader, for groups of
    /// more than one.
    static func shareGroups(_ plan: Plan, fetches: [Int]) -> (leaders: [Int], sharers: [Int: [Int]]) {
        var leaders: [Int] = []
        leaders.reserveCapacity(fetches.count)
        var sharers: [Int: [Int]] = [:]
        // By URL alone, the rest compared on the rare hit: hashing headers and the algorithm too for every one of
        // 100,000 distinct URLs cost more than the grouping saves them. A URL's first leader is kept unboxed (a
        // list per URL was an allocation per entry); leaders of one URL that differ in those are few.
        var firstLeader: [String: Int] = [:]
        firstLeader.reserveCapacity(fetches.count)
        var otherLeaders: [String: [Int]] = [:]
        func sameRequest(_ a: Int, _ b: Int) -> Bool {
            plan.entries[a].entry.headers == plan.entries[b].entry.headers
                && plan.entries[a].entry.checksum?.digest.algorithm == plan.entries[b].entry.checksum?.digest.algorithm
        }
        for index in fetches {
            // Fields read in place: a copy of an entry retains and releases a dozen strings and arrays, 100,000 times.
            guard plan.entries[index].action != .revalidate else {
                leaders.append(index)
                continue
            }
            let url = plan.entries[index].entry.url.expanded
            guard let first = firstLeader[url] else {
                firstLeader[url] = index
                leaders.append(index)
                continue
            }
            if let leader = sameRequest(first, index) ? first : otherLeaders[url]?.first(where: { sameRequest($0, index) }) {
                sharers[leader, default: []].append(index)
            } else {
                otherLeaders[url, default: []].append(index)
                leaders.append(index)
            }
        }
        return (leaders, sharers)
    }

    /// Headers go with `url` only: a mirror is another party and gets none of them. A revalidation asks
    /// conditionally only the source that delivered the copy on disk; its validators mean nothing elsewhere.
    func transferRequest(for planned: PlannedEntry, id: Int, record: StateRecord?) -> TransferRequest {
        let entry = planned.entry
        let headers = entry.headers.map { HTTPHeader(name: $0.name, value: $0.value.expanded) }
        let headerSecrets = entry.headers.flatMap(\.value.environmentValues)
        let origin = planned.action == .revalidate ? record?.origin : nil
        let sources = entry.sources.enumerated().map { index, url in
            var source = TransferSource(url: url.expanded, displayURL: url.description, headers: index == 0 ? headers : [],
                                        secrets: url.environmentValues + (index == 0 ? headerSecrets : []))
            if let origin, origin.sourceKey == source.key {
                source.conditional = HTTPValidators(etag: origin.etag, lastModified: origin.lastModified)
            }
            return source
        }
        var request = TransferRequest(id: id, sources: sources, expectedDigest: entry.checksum?.digest,
                                      expectedSize: entry.size, retries: entry.retries, stallTimeout: entry.timeout.value,
                                      fileMode: entry.mode.bits)
        request.alternativeDigests = entry.checksum?.alternatives ?? []
        return request
    }

    /// Threads for CPU-bound work, one per core: hashing local files, and driving many small transfers (one
    /// engine loop per core; the engine splits --jobs and --per-host between them).
    static var cores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// How many of `wanted` transfers fit in the open-file limit. Each holds a socket, its file, and for a large
    /// body a reader for its trailing hash; the rest of a run (the lock, haul's folders, the committer's folders,
    /// the hashing threads, each engine loop's wake-up pair, libcurl's resolver) holds a few dozen at most.
    package static func transfersFitting(_ limit: DescriptorLimit, wanted: Int) -> Int {
        limit.fitting(wanted, each: 3, reserve: 24 + 4 * cores)
    }
}

/// Receives the engine's events and turns verified files into commits, in batches, off the transfer thread.
///
/// Batching is what keeps durability affordable: one `syncfs` and one fsync per directory covers every file
/// that finished within the batch window, instead of an fsync pair per file.
private final class Execution: TransferDelegate, Sendable {
    private let plan: Plan
    private let staging: StagingArea
    private let committer: Committer
    private let authorship: Authorship
    private let observer: SyncObserver?
    /// Verified files on their way to a commit: the first of a batch waits `batchWindow` for company.
    private let batches = Mutex<BatchWindow<(Int, DownloadedFile)>?>(nil)
    private let outcomes = Mutex<[Int: EntryOutcome]>([:])
    /// Of each file committed, its identity just after the rename.
    private let identities = Mutex<[Int: FileIdentity]>([:])
    /// How long verified files wait for company before a batch is committed, in seconds.
    private static let batchWindow = 0.02

    /// `expectedCount`: how many outcomes to make room for (grown one by one, 100,000 would rehash many times).
    init(plan: Plan, staging: StagingArea, committer: Committer, authorship: Authorship, observer: SyncObserver?,
         expectedCount: Int) {
        self.plan = plan
        self.staging = staging
        self.committer = committer
        self.authorship = authorship
        self.observer = observer
        outcomes.withLock { $0.reserveCapacity(expectedCount) }
        identities.withLock { $0.reserveCapacity(expectedCount) }
        let window = BatchWindow<(Int, DownloadedFile)>(window: Self.batchWindow) { [unowned self] batch in commit(batch) }
        batches.withLock { $0 = window }
    }

    func transfer(_ id: Int, didProduce event: TransferEvent) {
        switch event {
        case .started(let source):
            observer?.entry(plan.entries[id].entry, started: source)
        case .progress(let progress):
            observer?.entry(plan.entries[id].entry, progress: progress)
        case .attemptFailed(let failure, let next):
            observer?.entry(plan.entries[id].entry, attemptFailed: failure, next: next)
        case .finished(.failure(let failure)):
            record(id, .failed(.transfer(failure)))
        case .notModified:
            record(id, .notModified)
        case .finished(.success(let file)):
            batches.withLock { $0 }?.add((id, file))
        }
    }

    /// Waits for the last batch and returns every outcome the engine produced, and the identities of the files
    /// committed.
    func finish() -> (outcomes: [Int: EntryOutcome], identities: [Int: FileIdentity]) {
        batches.withLock { $0.take() }?.finish()
        return (outcomes.withLock { $0 }, identities.withLock { $0 })
    }

    private func commit(_ batch: [(Int, DownloadedFile)]) {
        let requests = batch.map { id, file in
            let entry = plan.entries[id].entry
            return CommitRequest(temporaryName: file.temporaryName, destination: entry.destination, mode: entry.mode,
                                 hasMode: file.hasFileMode,
                                 ownership: Ownership(digest: file.digest, origin: authorship.origin(of: entry, delivered: file)))
        }
        for ((id, file), result) in zip(batch, committer.commit(requests)) {
            switch result {
            case .success(let committed):
                if let identity = committed.identity { identities.withLock { $0[id] = identity } }
                record(id, committed.notDurable.map { .fetchedNotDurable(file, $0) } ?? .fetched(file))
            case .failure(let error):
                staging.discard(file.temporaryName)
                record(id, .failed(.commit(error)))
            }
        }
    }

    private func record(_ id: Int, _ outcome: EntryOutcome) {
        outcomes.withLock { $0[id] = outcome }
        observer?.entry(plan.entries[id].entry, finished: outcome)
    }
}

/// Who wrote a file, as the state records it: this manifest, and for an unpinned file the source that delivered
/// it and its validators (what a later conditional request sends). Every pinned file shares one `Origin`.
struct Authorship: Sendable {
    let manifestKey: String
    private let pinned: Origin

    init(manifestKey: String) {
        self.manifestKey = manifestKey
        pinned = Origin(manifestKey: manifestKey)
    }

    func origin(of entry: FileEntry, delivered file: DownloadedFile) -> Origin {
        guard entry.checksum == nil else { return pinned }
        return Origin(manifestKey: manifestKey, sourceKey: TransferSource.key(entry.sources[file.sourceIndex].expanded),
                      etag: file.validators?.etag, lastModified: file.validators?.lastModified)
    }
}

package enum HaulVersion {
    package static let current = "0.1.0"
}
