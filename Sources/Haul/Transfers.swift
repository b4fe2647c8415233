import Glibc
import HaulArchive
import HaulDigest
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore
import HaulThreads
import Synchronization

/// The transfer and commit steps of `apply`: planned fetches become engine requests (one per group of entries
/// fetching the same thing), and verified files become commits, in batches, off the transfer threads.
extension Sync {
    func transfer(
        _ plan: Plan, observed observation: Observation, observer: SyncObserver?,
        cancellation: Cancellation?, prefetched: Prefetched?
    ) -> SyncResult {
        let started = MonotonicClock.seconds()
        var outcomes: [EntryOutcome] = []
        outcomes.reserveCapacity(plan.actions.count)
        var committed: [Int: StateRecord] = [:]
        var committedTrees: [Int: [(DestinationKey, StateRecord)]] = [:]
        var fetches: [Int] = []
        for index in plan.actions.indices {
            switch plan.actions[index] {
            case .keep, .fresh:
                outcomes.append(.upToDate)
            case .refuse(let why):
                outcomes.append(.failed(.refused(why)))
                observer?.entry(plan.files[index], finished: outcomes[index])
            case .fetch, .revalidate:
                // Replaced by the transfer's outcome below; an entry the engine never reports stays failed.
                outcomes.append(.failed(.notAttempted))
                fetches.append(index)
            }
        }
        guard let area = observation.area else {
            // Reached only by a caller that did not open root's private folder for a sync: nothing is fetched.
            for index in fetches { outcomes[index] = .failed(.notAttempted) }
            return SyncResult(plan: plan, outcomes: outcomes, seconds: MonotonicClock.seconds() - started)
        }
        if fetches.isEmpty {
            // Nothing to fetch, so no partial is wanted: whatever an interrupted or killed run left goes.
            StagingArea.sweepLeftovers(
                in: area, shard: observation.shard, isOwnName: TransferEngine.isStagingName,
                isLoopFolder: TransferEngine.isLoopFolderName)
        } else {
            let staging: StagingArea
            do {
                staging = try StagingArea(area: area, shard: observation.shard)
                staging.sweep(
                    keepingPartials: Set(
                        fetches.compactMap { plan.files[$0].checksum }.map {
                            PartialStore.fileName(for: $0.digest)
                        }), isOwnName: TransferEngine.isStagingName, isLoopFolder: TransferEngine.isLoopFolderName)
            } catch {
                for index in fetches {
                    outcomes[index] = .failed(.commit(error))
                    observer?.entry(plan.files[index], finished: outcomes[index])
                }
                return SyncResult(plan: plan, outcomes: outcomes, seconds: MonotonicClock.seconds() - started)
            }
            let cache = options.cacheDirectory.flatMap {
                CacheSession.open($0, descriptors: options.descriptors, observer: observer)
            }
            let unpackings = Self.unpackings(plan, fetches: fetches, staging: staging.temporary)
            let execution = Execution(
                plan: plan, outcomes: outcomes, staging: staging, cache: cache, unpackings: unpackings,
                trees: observation.trees,
                root: manifest.root, flushesEarly: options.durability == .full,
                committer: Committer(
                    root: manifest.root, staging: staging.temporary,
                    journal: OwnershipJournal(area: area, lock: observation.lock),
                    durability: options.durability,
                    heldFolders: options.descriptors.commitFolders),
                authorship: Authorship(
                    manifestKey: observation.manifestKey, key: observation.ownerKey,
                    rewrites: options.rewrites, wallClock: options.wallClock),
                observer: observer, expectedCount: fetches.count)
            outcomes = []
            let engine = TransferEngine(
                configuration: EngineConfiguration(
                    temporaryDirectory: staging.temporary, maxConcurrentTransfers: options.jobs,
                    maxConnectionsPerHost: options.connectionsPerHost, caFile: options.caFile,
                    userAgent: options.userAgent ?? HaulVersion.userAgent, partialDirectory: staging.partial,
                    maxBodyBytes: options.maxFileSize, loops: ProcessorCount.online,
                    startsWriteback: options.durability == .full, maxBytesPerSecond: options.maxBytesPerSecond,
                    connection: options.connection))
            // Hits first, committed as they are copied (a head start's downloads, then the cache's); the engine gets
            // what neither could serve.
            let startsWriteback = options.durability == .full
            let fill = { (session: CacheSession, fetches: [Int]) in
                session.fill(
                    plan, fetches: fetches, staging: staging, startsWriteback: startsWriteback,
                    maxFileSize: options.maxFileSize, cancellation: cancellation
                ) {
                    execution.transfer($0, didProduce: .finished(.success($1)))
                }
            }
            let early =
                prefetched.map { fill(CacheSession.prefetched($0, descriptors: options.descriptors), fetches) }
                ?? fetches
            let downloads = cache.map { fill($0, early) } ?? early
            let groups = Self.shareGroups(plan, fetches: downloads)
            engine.run(
                count: groups.leaders.count,
                request: { [self, groups] in
                    let index = groups.leaders[$0]
                    var request = transferRequest(
                        for: plan.entries[index], id: index,
                        record: observation.record(at: index, of: plan.files))
                    request.bodyReading = unpackings[index]
                    request.sharers = (groups.sharers[index] ?? []).map {
                        transferRequest(
                            for: plan.entries[$0], id: $0, record: observation.record(at: $0, of: plan.files))
                    }
                    return request
                },
                delegate: execution, reportsProgress: observer?.wantsProgress ?? false,
                cancellation: cancellation)
            let finished = execution.finish()
            staging.removeLoopFolders(isLoopFolder: TransferEngine.isLoopFolderName)
            outcomes = finished.outcomes
            committed = finished.records
            committedTrees = finished.trees
        }
        var result = SyncResult(plan: plan, outcomes: outcomes, seconds: MonotonicClock.seconds() - started)
        result.committedRecords = committed
        result.committedTrees = committedTrees
        return result
    }

    /// An `ArchiveUnpacking` per `extract` entry to fetch: its request's body reader, and what commits its tree.
    private static func unpackings(_ plan: Plan, fetches: [Int], staging: DirectoryHandle) -> [Int: ArchiveUnpacking] {
        let names = TreeFolderNames(
            prefix: StreamingHasher.digest(
                Array("\(getpid())-\(MonotonicClock.seconds())".utf8),
                algorithm: .sha256
            ).hex.prefix(12).description)
        var unpackings: [Int: ArchiveUnpacking] = [:]
        for index in fetches {
            guard let rule = plan.files[index].extract else { continue }
            let entry = plan.files[index]
            // The loader compiled these patterns already; a rule that does not compile keeps nothing.
            let selection = try? MemberSelection(rule)
            unpackings[index] = ArchiveUnpacking(
                archive: entry.destination.description, rule: rule,
                urlFormat: ArchiveFormat.named(byURL: entry.url.expanded),
                selects: { selection?.keeps($0) ?? false }, staging: staging, names: names)
        }
        return unpackings
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
            plan.files[a].headers == plan.files[b].headers
                && plan.files[a].checksum?.digest.algorithm == plan.files[b].checksum?.digest.algorithm
        }
        for index in fetches {
            // Fields read in place: a copy of an entry retains and releases a dozen strings and arrays, 100,000 times.
            // An archive is unpacked by its own request's reader: never shared.
            guard plan.actions[index] != .revalidate, plan.files[index].extract == nil else {
                leaders.append(index)
                continue
            }
            let url = plan.files[index].url.expanded
            guard let first = firstLeader[url] else {
                firstLeader[url] = index
                leaders.append(index)
                continue
            }
            if let leader = sameRequest(first, index)
                ? first : otherLeaders[url]?.first(where: { sameRequest($0, index) })
            {
                sharers[leader, default: []].append(index)
            } else {
                otherLeaders[url, default: []].append(index)
                leaders.append(index)
            }
        }
        return (leaders, sharers)
    }

    func transferRequest(for planned: PlannedEntry, id: Int, record: StateRecord?) -> TransferRequest {
        options.request(for: planned.entry, id: id, conditionalOn: planned.action == .revalidate ? record?.origin : nil)
    }
}

extension SyncOptions {
    /// The engine's request for `entry`. Headers go with `url` only: a mirror is another party and gets none of
    /// them. A revalidation (`origin`: the record of the copy on disk) asks conditionally only the source that
    /// delivered that copy; its validators mean nothing elsewhere. The config's rewrites apply here, to fetched
    /// entries only (`URLRewriter` says which source gets headers).
    func request(for entry: FileEntry, id: Int, conditionalOn origin: Origin?) -> TransferRequest {
        let fields = HeaderRules.merge(defaults: entry.headers, entry: commandLineHeaders)
        let headers = fields.map { HTTPHeader(name: $0.name, value: $0.value.expanded) }
        let headerSecrets =
            entry.headers.flatMap(\.value.environmentValues)
            + commandLineHeaders.map(\.value.expanded).filter { !$0.isEmpty }
        let sources = rewrites.sources(of: entry).map { place in
            // A mirror's own headers go to it as written, not to a rewrite of it (another origin).
            let mirrorFields =
                place.original > 0 && place.rewrittenFrom == nil && place.original <= entry.mirrorHeaders.count
                ? entry.mirrorHeaders[place.original - 1] : []
            let (placeHeaders, placeSecrets) =
                place.sendsHeaders
                ? (headers, headerSecrets)
                : (
                    mirrorFields.map { HTTPHeader(name: $0.name, value: $0.value.expanded) },
                    mirrorFields.flatMap(\.value.environmentValues)
                )
            var source = TransferSource(
                url: place.url, displayURL: place.displayURL, headers: placeHeaders,
                secrets: place.secrets + placeSecrets)
            // Likewise a client certificate: the entry's for its url, a mirror's own for that mirror as written.
            let mirrorCertificate =
                place.original > 0 && place.rewrittenFrom == nil && place.original <= entry.mirrorCertificates.count
                ? entry.mirrorCertificates[place.original - 1] : nil
            if let files = place.sendsHeaders ? entry.clientCertificate : mirrorCertificate {
                source.clientCertificate = ClientCertificate(certificate: files.certificate, key: files.key)
            }
            if let origin, origin.sourceKey == source.key {
                source.conditional = HTTPValidators(etag: origin.etag, lastModified: origin.lastModified)
            }
            return source.authenticated(by: netrc)
        }
        var request = TransferRequest(
            id: id, sources: sources, expectedDigest: entry.checksum?.digest,
            expectedSize: entry.size, retries: retries ?? entry.retries,
            stallTimeout: stallTimeout ?? entry.timeout.value, fileMode: entry.mode.bits)
        request.alternativeDigests = entry.checksum?.alternatives ?? []
        request.transientStatuses = transientStatuses.union(entry.retryOn)
        return request
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
    /// Where verified downloads of pinned entries are also added; nil: no `--cache`.
    private let cache: CacheSession?
    /// Per `extract` entry: its archive's unpacking, and what was found in its folder (the user's files, carried).
    private let unpackings: [Int: ArchiveUnpacking]
    private let trees: [Int: ObservedTree]
    private let root: String
    /// The commit makes trees durable: their flush may start before a tree's digest is read (`StagingArea.startFlush`).
    private let flushesEarly: Bool
    private let authorship: Authorship
    private let observer: SyncObserver?
    /// Verified files on their way to a commit, with what the journal will say of each (nil for an archive, whose
    /// tree says it): the first of a batch waits `batchWindow` for company.
    private let batches = Mutex<BatchWindow<Verified>?>(nil)
    /// Every entry's outcome, in plan order: the transfer step's, each fetched entry's replaced as it ends. Kept in
    /// place rather than gathered and merged: 100,000 outcomes moved once more cost 0.1 s at the end of a run.
    private let outcomes: Mutex<[EntryOutcome]>
    /// Of each file committed, what the state records: its identity just after the rename, and its ownership.
    private let records = Mutex<[Int: StateRecord]>([:])
    /// Of each tree committed, the records of its members.
    private let treeRecords = Mutex<[Int: [(DestinationKey, StateRecord)]]>([:])
    /// How long verified files wait for company before a batch is committed, in seconds.
    private static let batchWindow = 0.02

    /// A verified file and its ownership. The ownership (a digest of the destination under the root's key, for the
    /// proof) is worked out by the thread that verified the file: the commit thread is the one a fill of many
    /// small files waits for at its end.
    private typealias Verified = (id: Int, file: DownloadedFile, ownership: Ownership?)

    /// `outcomes`: every entry's outcome so far, in plan order. `expectedCount`: how many records to make room
    /// for (grown one by one, 100,000 would rehash many times).
    init(
        plan: Plan, outcomes: [EntryOutcome], staging: StagingArea, cache: CacheSession?,
        unpackings: [Int: ArchiveUnpacking],
        trees: [Int: ObservedTree], root: String, flushesEarly: Bool, committer: Committer, authorship: Authorship,
        observer: SyncObserver?, expectedCount: Int
    ) {
        self.flushesEarly = flushesEarly
        self.plan = plan
        self.staging = staging
        self.cache = cache
        self.unpackings = unpackings
        self.trees = trees
        self.root = root
        self.committer = committer
        self.authorship = authorship
        self.observer = observer
        self.outcomes = Mutex(outcomes)
        records.withLock { $0.reserveCapacity(expectedCount) }
        let window = BatchWindow<Verified>(window: Self.batchWindow) { [unowned self] batch in commit(batch) }
        batches.withLock { $0 = window }
    }

    func transfer(_ id: Int, didProduce event: TransferEvent) {
        switch event {
        case .started(let source):
            observer?.entry(plan.files[id], started: source)
        case .progress(let progress):
            observer?.entry(plan.files[id], progress: progress)
        case .attemptFailed(let failure, let next):
            observer?.entry(plan.files[id], attemptFailed: failure, next: next)
        case .finished(.failure(let failure)):
            record(id, .failed(.transfer(failure)))
        case .notModified(_, let freshFor):
            record(id, .notModified(freshFor: freshFor))
        case .finished(.success(let file)):
            let ownership =
                plan.files[id].extract == nil ? authorship.ownership(of: plan.files[id], delivered: file) : nil
            batches.withLock { $0 }?.add((id, file, ownership))
        }
    }

    /// Waits for the last batch and returns every entry's outcome (in plan order, the engine's in place of the
    /// fetched entries'), and the records of the files committed.
    func finish() -> (
        outcomes: [EntryOutcome], records: [Int: StateRecord], trees: [Int: [(DestinationKey, StateRecord)]]
    ) {
        batches.withLock { $0.take() }?.finish()
        return (
            outcomes.withLock { outcomes in
                defer { outcomes = [] }
                return outcomes
            }, records.withLock { $0 }, treeRecords.withLock { $0 }
        )
    }

    private func commit(_ batch: [Verified]) {
        // Before the renames, from the staged files: see `CacheSession.insert`. (An archive goes in as it came.)
        cache?.insert(batch.lazy.map { ($0.id, $0.file) }, plan: plan, from: staging)
        var ready: [(id: Int, file: DownloadedFile, tree: StagedUnpack?)] = []
        var requests: [CommitRequest] = []
        ready.reserveCapacity(batch.count)
        requests.reserveCapacity(batch.count)
        for (id, file, ownership) in batch {
            // Fields read in place: a copy of the entry retains and releases a dozen strings per file.
            guard let rule = plan.files[id].extract else {
                ready.append((id, file, nil))
                requests.append(
                    CommitRequest(
                        temporaryName: file.temporaryName, in: file.temporaryFolder,
                        destination: plan.files[id].destination, mode: plan.files[id].mode,
                        hasMode: file.hasFileMode, ownership: ownership))
                continue
            }
            switch stageTree(of: plan.files[id], at: id, rule: rule, delivered: file) {
            case .success(let (request, staged)):
                ready.append((id, file, staged))
                requests.append(request)
            case .failure(let failure):
                discard(file)
                record(id, .failed(.tree(failure)))
            }
        }
        for ((id, file, tree), (request, result)) in zip(ready, zip(requests, committer.commit(requests))) {
            if let tree {
                // The archive was only the way in: the tree is what is in place (and the cache keeps the archive).
                discard(file)
                switch result {
                case .success(let committed):
                    var delivered = file
                    delivered.unpacked = UnpackSummary(
                        files: request.tree?.members.count ?? tree.tree.files, bytes: tree.tree.bytes,
                        tree: request.tree?.members.first?.ownership.origin.unpacked?.tree,
                        keptFiles: request.tree?.carried ?? [])
                    treeRecords.withLock {
                        $0[id] = records(of: request, tree: tree, unsynced: committed.notDurable != nil)
                    }
                    record(id, committed.notDurable.map { .fetchedNotDurable(delivered, $0) } ?? .fetched(delivered))
                case .failure(let error):
                    staging.discardTree(tree.folderName)
                    record(id, .failed(.commit(error)))
                }
                continue
            }
            switch result {
            case .success(let committed):
                if let identity = committed.identity, let ownership = request.ownership {
                    let written = StateRecord(
                        identity: identity, digest: ownership.digest, origin: ownership.origin,
                        ownerTag: ownership.tag, unsynced: committed.notDurable != nil)
                    records.withLock { $0[id] = written }
                }
                record(id, committed.notDurable.map { .fetchedNotDurable(file, $0) } ?? .fetched(file))
            case .failure(let error):
                discard(file)
                record(id, .failed(.commit(error)))
            }
        }
    }

    /// A verified file that will not be committed.
    private func discard(_ file: DownloadedFile) {
        file.folder(in: staging.temporary).remove(file.temporaryName)
    }

    /// The verified archive's tree, staged and checked (its digest, when the entry pins it): the commit request that
    /// puts it in place, with every member's ownership and the user's files to carry; or why it cannot be.
    /// `position`: the entry's place in the plan (and the observation), which keys the unpackings and the trees;
    /// `entry.index` is its place in the manifest, another number when the plan holds some entries only.
    private func stageTree(
        of entry: FileEntry, at position: Int, rule: ExtractRule, delivered file: DownloadedFile
    )
        -> Result<(CommitRequest, StagedUnpack), TreeFailure>
    {
        guard
            let result = unpackings[position]?.unpackDelivered(
                archiveNamed: file.temporaryName,
                in: file.folder(in: staging.temporary), size: file.size)
        else {
            return .failure(.archiveNotRead(entry.destination))
        }
        let staged: StagedUnpack
        switch result {
        case .success(let unpacked): staged = unpacked
        case .failure(let failure): return .failure(.unpack(failure))
        }
        var tree: Digest?
        if let pinned = rule.tree {
            if flushesEarly { staging.startFlush() }
            let computed: Result<Digest, StoreError> =
                switch staging.temporary.subdirectory(staged.folderName) {
                case .success(let folder): TreeDigest.of(folder: folder, shownAs: entry.destination.description)
                case .failure(let failure):
                    .failure(StoreError(operation: .open, path: failure.path, errno: failure.errno))
                }
            switch computed {
            case .success(let digest) where digest == pinned:
                tree = digest
            case .success(let digest):
                staging.discardTree(staged.folderName)
                return .failure(.treeMismatch(unpacked: digest, pinned: pinned))
            case .failure(let failure):
                staging.discardTree(staged.folderName)
                return .failure(.digest(failure))
            }
        }
        let origin = authorship.origin(of: entry, delivered: file)
            .unpacking(
                UnpackedFrom(
                    archive: file.digest, rules: rule.fingerprint, tree: tree,
                    folder: entry.destination.description))
        let folder = entry.destination.description
        let members = staged.tree.members.compactMap {
            member -> (destination: DestinationPath, ownership: Ownership)? in
            let digest: Digest
            switch member.kind {
            case .file(_, _, let content): digest = content
            case .symlink(let target): digest = TreeJudgement.digest(ofTarget: target)
            case .directory: return nil
            }
            guard let destination = DestinationPath(folder + "/" + member.path) else { return nil }
            return (
                destination,
                Ownership(
                    digest: digest, origin: origin,
                    tag: authorship.key?.tag(
                        destination: destination.description, digest: digest,
                        manifestKey: authorship.manifestKey))
            )
        }
        let carried = trees[position].map { carriedFiles($0, into: staged.tree, folder: entry.destination) } ?? []
        return .success(
            (
                CommitRequest(
                    tree: StagedTree(folderName: staged.folderName, members: members, carried: carried),
                    destination: entry.destination), staged
            ))
    }

    /// The user's files to carry into the new tree: all but those the new tree holds already, byte for byte (a
    /// folder unpacked by hand before haul managed it). One that differs from the member of its name is carried,
    /// and the commit refuses it, the old tree left as it was: the user's bytes are never dropped.
    private func carriedFiles(_ observed: ObservedTree, into tree: UnpackedTree, folder: DestinationPath) -> [String] {
        guard !observed.usersFiles.isEmpty else { return [] }
        let members = Dictionary(tree.members.map { ($0.path, $0.kind) }, uniquingKeysWith: { first, _ in first })
        let observer = LocalObserver(root: root)
        return observed.usersFiles.filter { path in
            switch members[path] {
            case .symlink(let target)?:
                return observed.usersLinks[path] != target
            case .file(let size, _, let digest)?:
                guard let destination = DestinationPath(folder.description + "/" + path),
                    case .regularFile(_, let found?) = observer.observe(
                        ObservationRequest(
                            destination: destination, algorithm: .sha256,
                            expectedSize: size))
                else { return true }
                return found != digest
            case .directory?, nil:
                return true
            }
        }
    }

    /// The state's records of a tree just put in place: each member with its identity there now.
    private func records(
        of request: CommitRequest, tree: StagedUnpack, unsynced: Bool
    ) -> [(DestinationKey, StateRecord)] {
        guard let staged = request.tree, case .folder(let nodes) = TreeWalk.look(at: request.destination, root: root)
        else { return [] }
        let folder = request.destination.description + "/"
        var identities: [String: FileIdentity] = [:]
        for node in nodes {
            switch node.kind {
            case .file(let identity), .symlink(_, let identity): identities[folder + node.path] = identity
            case .folder, .other: continue
            }
        }
        return staged.members.compactMap { destination, ownership in
            guard let identity = identities[destination.description] else { return nil }
            return (
                DestinationKey(destination),
                StateRecord(
                    identity: identity, digest: ownership.digest, origin: ownership.origin,
                    ownerTag: ownership.tag, unsynced: unsynced)
            )
        }
    }

    private func record(_ id: Int, _ outcome: EntryOutcome) {
        // A tree that is not put in place goes now, not when its pass is released: the thread that holds the pass
        // last may outlive the process.
        if !outcome.putInPlace { unpackings[id]?.abandon() }
        outcomes.withLock { $0[id] = outcome }
        observer?.entry(plan.files[id], finished: outcome)
    }
}

/// Why an archive's tree cannot be put in place, in the words the entry's failure shows.
/// Why an archive's tree was not put in place.
package enum TreeFailure: Error, Sendable {
    /// The unpacking never delivered (the archive's bytes were not read).
    case archiveNotRead(DestinationPath)
    case unpack(UnpackFailure)
    /// The unpacked tree is not the one the entry pins.
    case treeMismatch(unpacked: Digest, pinned: Digest)
    /// The tree's digest could not be computed.
    case digest(StoreError)
}

/// Who wrote a file, as the state records it: this manifest, and for an unpinned file the source that delivered
/// it, its validators (what a later conditional request sends) and how long that source said it stays fresh.
/// Every pinned file shares one `Origin`.
struct Authorship: Sendable {
    let manifestKey: String
    /// The root's key, whose tag on each record proves that haul wrote it; nil: the root has none (what this run
    /// writes is then kept by pruning until adopted).
    let key: OwnerKey?
    private let pinned: Origin
    /// The request's sources are the entry's, rewritten: `file.sourceIndex` counts those.
    private let rewrites: URLRewriter
    private let wallClock: @Sendable () -> Double

    init(manifestKey: String, key: OwnerKey?, rewrites: URLRewriter, wallClock: @escaping @Sendable () -> Double) {
        self.manifestKey = manifestKey
        self.key = key
        pinned = Origin(manifestKey: manifestKey)
        self.rewrites = rewrites
        self.wallClock = wallClock
    }

    /// What the journal and the state say of `file`, put in place for `entry`: who wrote it, and the proof.
    func ownership(of entry: FileEntry, delivered file: DownloadedFile) -> Ownership {
        let origin = origin(of: entry, delivered: file)
        return Ownership(
            digest: file.digest, origin: origin,
            tag: key?.tag(destination: entry.destination.description, digest: file.digest, manifestKey: manifestKey))
    }

    func origin(of entry: FileEntry, delivered file: DownloadedFile) -> Origin {
        guard entry.checksum == nil else { return pinned }
        let now = wallClock()
        return Origin(
            manifestKey: manifestKey,
            sourceKey: rewrites.url(of: entry, source: file.sourceIndex).map(TransferSource.key),
            etag: file.validators?.etag, lastModified: file.validators?.lastModified,
            checkedAt: file.fromCache ? nil : Int64(now), freshUntil: file.freshFor.map { Int64(now + $0) })
    }

    /// `origin` confirmed by its source just now (a 304), fresh for `freshFor` from now.
    func confirmed(_ origin: Origin, freshFor: Double?) -> Origin {
        let now = wallClock()
        return origin.confirmed(at: Int64(now), freshUntil: freshFor.map { Int64(now + $0) })
    }
}
