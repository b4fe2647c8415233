import Glibc
import HaulDigest
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore
import HaulThreads
import Synchronization

/// A sync's use of a content cache (`--cache`, `HAUL_CACHE`; the store itself is `ContentCache`): pinned entries
/// planned as fetches are put in place from it before the engine runs (`fill`), and every verified download of a
/// pinned entry is added to it from the commit thread (`insert`).
///
/// A cache that cannot be used never fails a sync: the run says so once, as a warning, and goes on without it
/// (a cache that cannot be opened), or without adding to it (one that is read-only, full or not ours to write).
final class CacheSession: Sendable {
    let cache: ContentCache
    private let observer: SyncObserver?
    /// Threads that fill hits (insertions take at most two of them): the run's `DescriptorBudget.cacheCopiers`.
    private let copiers: Int
    /// Set by the first failed insertion: later ones are not tried (a read-only or full cache would fail them all,
    /// each after copying a file), and the warning is given once.
    private let insertionStopped = Atomic<Bool>(false)
    /// Staging names of hits: `<run prefix>-<counter>.part` in hex, the engine's form, so that what an
    /// interrupted run leaves is swept like its downloads (`TransferEngine.isStagingName`). The prefix is a random
    /// number of its own: the engine's counter runs in the same folder.
    private let namePrefix = String(UInt64.random(in: 1...UInt64.max), radix: 16)
    /// The process's umask, read once: copies are created with their entry's mode, as the engine creates downloads.
    private let umask = ProcessUmask.read()
    /// For a head start's cache (`Prefetched`): how each file in it was downloaded by this run. A copy is then
    /// delivered as that download, not as a cache hit. Empty for a `--cache`.
    private let downloads: [Digest: DownloadedFile]

    /// Bytes each filling thread reads at a time: a small file is one read, and a large one few enough syscalls
    /// that hashing dominates.
    static let bufferSize = 1 << 20

    private init(cache: ContentCache, observer: SyncObserver?, copiers: Int, downloads: [Digest: DownloadedFile] = [:])
    {
        self.cache = cache
        self.observer = observer
        self.copiers = max(1, copiers)
        self.downloads = downloads
    }

    /// What a head start downloaded, put in place by `fill` as it would be from a cache, silently (a file that
    /// fails its check is downloaded again, as if the head start had never had it), and never added to.
    static func prefetched(_ prefetched: Prefetched, descriptors: DescriptorBudget) -> CacheSession {
        CacheSession(
            cache: prefetched.kept.cache, observer: nil, copiers: descriptors.cacheCopiers,
            downloads: prefetched.downloads)
    }

    /// The cache at `directory` (made if missing), or nil with a warning when it cannot be opened at all, or is a
    /// folder that is not a cache. `descriptors`: the cache's share of them, in folders held and copying threads.
    static func open(_ directory: String, descriptors: DescriptorBudget, observer: SyncObserver?) -> CacheSession? {
        let folders = descriptors.cacheFolders
        switch ContentCache.open(directory, create: true, holdingFolders: folders) {
        case .success(let cache):
            return CacheSession(cache: cache, observer: observer, copiers: descriptors.cacheCopiers)
        case .failure(let error):
            // A cache that cannot even be made may still exist, read-only: it is used for hits all the same.
            if case .failed = error,
                case .success(let cache) = ContentCache.open(directory, create: false, holdingFolders: folders)
            {
                return CacheSession(cache: cache, observer: observer, copiers: descriptors.cacheCopiers)
            }
            observer?.warning(.cacheUnavailable(error))
            return nil
        }
    }

    /// Puts in place from the cache every pinned entry among `fetches` (planned `.fetch`, with a checksum of an
    /// algorithm the cache holds) whose digest it has: each is copied into the staging folder and verified while
    /// copied (`ContentCache.copyVerified`), then handed to `deliver`, which commits it as it would a download
    /// (same batches, durability, journal and state records). Runs on a thread per core (as many as the
    /// descriptor budget allows): copying and hashing are CPU-bound on a local file system, and the commit thread
    /// works beside them.
    ///
    /// Returns the entries still to download, in plan order: misses, entries whose cache entry failed its check
    /// (removed, with a warning), and any the cache could not serve.
    /// `startsWriteback`: copies are written to disk as they are made, for a commit that flushes them.
    /// `maxFileSize`: the most an entry without `size` may take, from the cache as from a download (a larger entry
    /// is not copied; the entry is downloaded, under the same limit).
    func fill(
        _ plan: Plan, fetches: [Int], staging: StagingArea, startsWriteback: Bool, maxFileSize: Int64,
        cancellation: Cancellation?, deliver: @escaping @Sendable (Int, DownloadedFile) -> Void
    ) -> [Int] {
        let candidates =
            downloads.isEmpty
            // The plan's own look at the cache when it had one (`Sync.plan`): each entry is looked up once.
            ? plan.fromCache.map { hits in fetches.filter(hits.contains) } ?? fetches.filter { Self.mayServe(plan, $0) }
            : fetches.filter {
                Self.mayServe(plan, $0) && plan.files[$0].checksum.map { downloads[$0.digest] != nil } == true
            }
        guard !candidates.isEmpty else { return fetches }
        let unusable = Atomic<Bool>(false)
        // Chunks of 16 keep the shared counter off a 100,000-file fill; a handful of large files must still be
        // spread over every thread (a chunk of 16 would give two 512 MiB files to one thread, hashed in series).
        let threads = copiers
        let served = concurrentMap(
            count: candidates.count, threads: threads, chunk: max(1, min(16, candidates.count / (8 * threads))),
            makeContext: { ReadBuffer.allocate(Self.bufferSize) },
            close: { ReadBuffer.free($0) }
        ) { [self] buffer, position -> Bool in
            if cancellation?.isCancelled == true { return false }
            let index = candidates[position]
            // Fields read in place: a copy of an entry retains and releases a dozen strings, 100,000 times.
            guard let digest = plan.files[index].checksum?.digest else { return false }
            let name = "\(namePrefix)-\(String(position, radix: 16)).part"
            let hit =
                buffer.map { buffer in
                    cache.copyVerified(
                        digest, size: plan.files[index].size, maxSize: maxFileSize, to: staging.temporary, name: name,
                        mode: plan.files[index].mode.bits, umask: umask, buffer: buffer,
                        startsWriteback: startsWriteback)
                } ?? .unusable(StoreError(operation: .read, path: cache.path, errno: ENOMEM))
            switch hit {
            case .copied(let size, let hasMode):
                let path = staging.temporary.displayPath(of: name)
                guard var download = downloads[digest] else {
                    deliver(
                        index,
                        .fromCache(
                            temporaryPath: path, temporaryName: name, size: size, digest: digest,
                            cachePath: cache.path, hasFileMode: hasMode))
                    return true
                }
                (download.temporaryPath, download.temporaryName, download.temporaryFolder) = (path, name, nil)
                (download.size, download.hasFileMode) = (size, hasMode)
                deliver(index, download)
                return true
            case .missing:
                return false
            case .corrupt(let entry):
                observer?.warning(.cacheEntryCorrupt(entry, destination: plan.files[index].destination))
                return false
            case .tooLarge(let path, let limit):
                observer?.warning(
                    .cacheEntryTooLarge(path: path, limit: limit, destination: plan.files[index].destination))
                return false
            case .unusable(let error):
                // Said once: a cache that cannot be read fails every entry the same way.
                if !unusable.exchange(true, ordering: .relaxed) {
                    observer?.warning(.cacheUnreadable(error, destination: plan.files[index].destination))
                }
                return false
            }
        }
        var hit = Set<Int>(minimumCapacity: candidates.count)
        for (position, wasServed) in served.enumerated() where wasServed { hit.insert(candidates[position]) }
        return hit.isEmpty ? fetches : fetches.filter { !hit.contains($0) }
    }

    /// Whether entry `index` is one the cache could serve: planned as a fetch and pinned by an algorithm it holds.
    static func mayServe(_ plan: Plan, _ index: Int) -> Bool {
        guard case .fetch = plan.actions[index], let checksum = plan.files[index].checksum else { return false }
        return ContentCache.holds(checksum.digest.algorithm)
    }

    /// Adds the verified downloads of `batch` (staged in `folder`, not yet renamed into place) to the cache, on
    /// the commit thread before the batch's renames. Why then and from there: the staged file is haul's alone
    /// (a private folder, not yet visible to anyone), so it is exactly the bytes that were verified, whereas a
    /// destination reopened after its rename may already have been edited by someone; and the copy is a reflink or
    /// an in-kernel copy from the page cache, cheap next to the download it follows. Only pinned entries, under the
    /// digest the manifest pins (the one the engine verified), never a file from the cache itself.
    func insert(_ batch: some Sequence<(Int, DownloadedFile)>, plan: Plan, from folder: StagingArea) {
        guard !insertionStopped.load(ordering: .relaxed) else { return }
        let wanted = batch.filter { id, file in
            !file.fromCache && plan.files[id].checksum?.digest == file.digest
                && ContentCache.holds(file.digest.algorithm)
        }
        guard !wanted.isEmpty else { return }
        // Large files on a file system without reflinks are copied by the kernel at memory speed: two threads
        // halve a batch of them; small ones cost a few syscalls each, which two threads also share.
        let threads = min(2, copiers)
        _ = concurrentMap(
            count: wanted.count, threads: threads, chunk: max(1, min(8, wanted.count / (4 * threads))),
            makeContext: { () }
        ) { [self] _, position -> Bool in
            guard !insertionStopped.load(ordering: .relaxed) else { return false }
            let (_, file) = wanted[position]
            guard
                let failure = cache.insert(
                    file.digest, size: file.size, from: file.folder(in: folder.temporary),
                    name: file.temporaryName)
            else {
                return true
            }
            if !insertionStopped.exchange(true, ordering: .relaxed) {
                observer?.warning(.cacheInsertionStopped(cachePath: cache.path, failure))
            }
            return false
        }
    }
}

extension Sync {
    /// The content cache's answer to "which of these digests do you hold?" (`ContentCache.containing`: a look,
    /// nothing read, nothing made), or nil without `--cache` or when the cache cannot be opened (the transfer step
    /// then says why).
    func cacheLookup() -> (([Digest]) -> [Bool])? {
        guard let directory = options.cacheDirectory,
            case .success(let cache) = ContentCache.open(
                directory, create: false, holdingFolders: options.descriptors.cacheFolders)
        else { return nil }
        return cache.containing
    }

    /// Which of the plan's fetches `held` says the cache holds, for the plan to say so and for the transfer step to
    /// try: those it may serve (planned `.fetch`, pinned by an algorithm it holds), asked about all at once. A hit
    /// may still fail its check when it is copied, and be downloaded after all.
    static func cacheHits(_ plan: Plan, held: ([Digest]) -> [Bool]) -> Set<Int> {
        let candidates = plan.actions.indices.compactMap { index in
            CacheSession.mayServe(plan, index) ? plan.files[index].checksum.map { (index, $0.digest) } : nil
        }
        return Set(zip(candidates, held(candidates.map(\.1))).lazy.filter(\.1).map(\.0.0))
    }
}
