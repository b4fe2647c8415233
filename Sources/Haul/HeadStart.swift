import Glibc
import HaulDigest
import HaulEngine
import HaulManifest
import HaulStore
import HaulThreads
import Synchronization

/// Downloads, while a large manifest is still being read, what its plan is all but sure to fetch: so that the first
/// request of a first sync of a million entries leaves within a tenth of a second, not after the five seconds that
/// reading and checking the whole manifest take.
///
/// Why it cannot break "an invalid manifest touches nothing": it writes nowhere but a private folder under
/// `$TMPDIR` (`KeptDownloads`, a content cache), never in the root, and takes no lock there. What it downloaded is
/// used only once the manifest is valid and planned, and only by digest: an entry the plan fetches whose pinned
/// digest the head start holds is copied from it, hashed again on the way, and committed like a download
/// (`CacheSession.fill`). A wrong guess (a `root:` written after `files:`, `defaults:` headers it did not know,
/// an entry a later one clashes with) costs bandwidth, never correctness. The folder is removed by the run, or
/// by the next one if the run is killed.
///
/// It takes only pinned entries with a `size` (the budget counts it) and no `extract`, whose destination is
/// missing under the root as guessed before validation (so an unchanged tree is not downloaded again while its
/// manifest is read), in this run's shard, and not in the `--cache` (whose hits need no download). Each is tried
/// once, from its own sources only; at its first failure of any kind (say a 401 for want of `defaults:` headers)
/// the head start stops, and the sync proper does everything as it would have.
package final class HeadStart: Sendable {
    /// Smaller manifests are read in under a tenth of a second (about 5,000 entries): nothing to win.
    package static let minimumManifestBytes = 1 << 20
    /// The most it downloads, by pinned sizes, each file counted as at least `minimumFileCost` (a file takes a page
    /// of tmpfs, and what it was fetched from is kept in memory): its temporary folder may be in memory, and a wrong
    /// guess of the root could waste this much. At most 16,384 small files, a second or two of downloads here.
    static let byteBudget: Int64 = 64 << 20
    static let minimumFileCost: Int64 = 4096
    /// Requests per engine run: the head start runs the engine in rounds, as entries arrive.
    static let roundSize = 256

    private struct Feed {
        var pending: [FileEntry] = []
        /// No more entries are offered: the manifest is read (`finish`), or the head start stopped on its own.
        var closed = false
        var budget = HeadStart.byteBudget
        var requested: Set<Digest> = []
    }

    private let kept: KeptDownloads
    private let options: SyncOptions
    /// Where destinations are looked for (`ManifestFingerprint.declaredRoot`).
    private let root: String
    private let userCache: ContentCache?
    private let feed = Mutex(Feed())
    private let arrived = Semaphore()
    private let stopping = Cancellation()
    private let collector: Collector
    private let worker = Mutex<pthread_t?>(nil)

    private init(kept: KeptDownloads, options: SyncOptions, root: String) {
        self.kept = kept
        self.options = options
        self.root = root
        userCache = options.cacheDirectory.flatMap {
            try? ContentCache.open($0, create: false, holdingFolders: 1).get()
        }
        collector = Collector(kept: kept, stopping: stopping)
    }

    /// Starts one for a sync run with `options` (their `shard`, `cacheDirectory` and transfer settings) into `root`
    /// (`ManifestFingerprint.declaredRoot`: a `root:` written after `files:` is not known), or nil when its folder
    /// or thread cannot be made.
    package static func begin(options: SyncOptions, root: String) -> HeadStart? {
        guard let kept = try? KeptDownloads.make(prefix: "haul-sync") else { return nil }
        let headStart = HeadStart(kept: kept, options: options, root: root)
        guard let thread = startThread({ headStart.work() }) else {
            kept.remove()
            return nil
        }
        headStart.worker.withLock { $0 = thread }
        return headStart
    }

    /// Takes entries as the manifest's reader hands them out (`EarlyEntries.Handler`); false once it wants no more.
    /// Cheap on the reader's thread: entries are only queued, and dropped while the downloads are behind.
    package func offer(_ entries: [FileEntry]) -> Bool {
        let wanted = feed.withLock { feed in
            guard !feed.closed else { return false }
            if feed.pending.count < 4 * Self.roundSize { feed.pending += entries }
            return true
        }
        if wanted { arrived.signal() }
        return wanted
    }

    /// Stops: no more requests, those in flight are cancelled. What was downloaded and verified, or nil (the folder
    /// is then removed).
    package func finish() -> Prefetched? {
        stop()
        let files = collector.files
        guard !files.isEmpty else {
            kept.remove()
            return nil
        }
        return Prefetched(kept: kept, downloads: files)
    }

    /// Stops and removes everything it downloaded (the manifest was refused, say). Harmless after `finish`.
    package func abandon() {
        stop()
        kept.remove()
    }

    private func stop() {
        feed.withLock { $0.closed = true }
        stopping.cancel()
        arrived.signal()
        if let thread = worker.withLock({ thread in
            defer { thread = nil }; return thread
        }) {
            pthread_join(thread, nil)
        }
    }

    /// The head start's thread: rounds of requests as entries arrive, until it is stopped or one fails.
    private func work() {
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: kept.folder.folder, maxConcurrentTransfers: options.jobs,
                maxConnectionsPerHost: options.connectionsPerHost, caFile: options.caFile,
                userAgent: options.userAgent ?? HaulVersion.userAgent, maxBodyBytes: options.maxFileSize,
                maxBytesPerSecond: options.maxBytesPerSecond, connection: options.connection))
        while let requests = nextRound() {
            guard !requests.isEmpty else { continue }
            engine.run(requests, delegate: collector, cancellation: stopping)
            guard !stopping.isCancelled else { break }
        }
        feed.withLock { $0.closed = true }
    }

    /// The next round's requests (empty when none of the entries taken qualified); nil once stopped.
    private func nextRound() -> [TransferRequest]? {
        while true {
            let taken = feed.withLock { feed -> [FileEntry]? in
                guard !feed.closed else { return nil }
                let count = min(feed.pending.count, Self.roundSize)
                defer { feed.pending.removeFirst(count) }
                return Array(feed.pending.prefix(count))
            }
            guard let taken else { return nil }
            guard taken.isEmpty else { return requests(for: taken) }
            arrived.wait()
        }
    }

    private func requests(for entries: [FileEntry]) -> [TransferRequest] {
        // A digest already asked for needs no look at the disk: many entries may share one.
        let new = feed.withLock { feed in
            entries.filter { $0.checksum.map { !feed.requested.contains($0.digest) } ?? false }
        }
        let candidates = new.filter { entry in
            // An entry whose digest a signed list gives (`from:`) has none here: the list is read and its signature
            // checked by the sync. The validator refuses a checksum beside `from:`: this says so again.
            guard let checksum = entry.checksum, entry.listPin == nil, entry.size != nil, entry.extract == nil,
                ContentCache.holds(checksum.digest.algorithm), options.shard?.contains(entry.destination) ?? true
            else { return false }
            var info = stat()
            return lstat(root + "/" + entry.destination.description, &info) != 0 && errno == ENOENT
        }
        let uncached =
            userCache.map { cache in
                zip(candidates, cache.containing(candidates.compactMap { $0.checksum?.digest })).filter { !$0.1 }.map(
                    \.0)
            } ?? candidates
        return feed.withLock { feed in
            let requests = uncached.compactMap { entry -> TransferRequest? in
                guard let checksum = entry.checksum, let size = entry.size,
                    max(size, Self.minimumFileCost) <= feed.budget,
                    feed.requested.insert(checksum.digest).inserted
                else { return nil }
                feed.budget -= max(size, Self.minimumFileCost)
                var request = options.request(for: entry, id: entry.index, conditionalOn: nil)
                request.retries = 0
                return request
            }
            // Spent: this round is the last, and the reader is told to stop offering.
            if feed.budget < Self.minimumFileCost { feed.closed = true }
            return requests
        }
    }

    /// Keeps each verified file in the cache of `kept`, under its digest; the first failure stops everything.
    private final class Collector: TransferDelegate {
        private let kept: KeptDownloads
        private let stopping: Cancellation
        private let verified = Mutex<[Digest: DownloadedFile]>([:])

        init(kept: KeptDownloads, stopping: Cancellation) {
            self.kept = kept
            self.stopping = stopping
        }

        var files: [Digest: DownloadedFile] { verified.withLock { $0 } }

        func transfer(_ id: Int, didProduce event: TransferEvent) {
            guard case .finished(let result) = event else { return }
            guard case .success(let file) = result, kept.keep(file) == nil else {
                stopping.cancel()
                return
            }
            verified.withLock { $0[file.digest] = file }
        }
    }
}

/// What a head start downloaded: verified files in a content cache of their own, and how each was fetched (its
/// source, its server's answer), so that an entry placed from it is reported as the download it was.
package struct Prefetched: Sendable {
    let kept: KeptDownloads
    let downloads: [Digest: DownloadedFile]

    /// The folder and everything left in it.
    package func remove() { kept.remove() }
}
