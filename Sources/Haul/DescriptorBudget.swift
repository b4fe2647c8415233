import HaulFileSystem
import HaulStore

/// How a run spends the descriptors its open-file limit leaves it (`DescriptorLimit.available`): every part that
/// holds descriptors while others run is sized here, so that together they stay under the limit, and a part that
/// meets EMFILE anyway (a deeper walk than counted, a descriptor another library keeps) waits for one to come back
/// (`DescriptorShortage`) instead of failing. Below `minimum`, a run cannot work at all: the command says so at once.
///
/// What holds descriptors at the same time, at most (the costs below):
/// - always: root's `.haul`, its lock, `tmp/` and `partial/`, the state or journal being read or written;
/// - observing (before any transfer): per thread, its parent walk (root, and two folders however deep:
///   `ContainedWalk`), the folder it holds, the file it hashes;
/// - transferring: per engine loop, its wake-up pair and a name lookup's pair; per transfer, its file, its
///   connection, one kept alive for the next request, and a trailing hasher's reader;
/// - committing (beside the transfers): root, the folders of one walk and the journal, and the folders the walk
///   keeps between destinations (`commitFolders`);
/// - with `--cache`: the cache's folder; per copying thread (filling hits before the engine, inserting downloads
///   beside it) the entry, the copy and the folders reached for them; and the `sha256/ab` folders the cache keeps
///   for the run (`cacheFolders`).
///
/// Transfers come first (they are what the run is for), then copying threads, then folders kept open, which only
/// save `openat` calls.
package struct DescriptorBudget: Sendable, Equatable {
    /// Threads observing the destinations.
    package var observers: Int
    /// Transfers at once (`--jobs`, or fewer).
    package var transfers: Int
    /// Threads copying to or from the cache.
    package var cacheCopiers: Int
    /// Folders the commit keeps open between destinations.
    package var commitFolders: Int
    /// `sha256/ab` folders the cache keeps open for the run.
    package var cacheFolders: Int

    package static let runFiles = 6
    package static let perObserver = 5
    package static let perLoop = 4
    package static let perTransfer = 4
    package static let commit = 6
    package static let cacheFolder = 1
    package static let perCacheCopier = 5

    /// Every part as large as it would be without a limit.
    package static func unlimited(transfers: Int, cores: Int) -> DescriptorBudget {
        DescriptorBudget(
            observers: cores, transfers: transfers, cacheCopiers: cores,
            commitFolders: Committer.defaultHeldFolders, cacheFolders: ContentCache.allFolders)
    }

    /// The fewest descriptors a run needs beyond those open when it starts: one of each part. `transfers`: the run
    /// downloads (not only `plan` or `verify`); `cache`: with a content cache.
    package static func minimum(transfers: Bool, cache: Bool) -> Int {
        let observing = runFiles + perObserver
        guard transfers else { return observing }
        let transferring = runFiles + commit + perLoop + perTransfer + (cache ? cacheFolder + perCacheCopier : 0)
        return max(observing, transferring)
    }

}

extension DescriptorBudget {
    /// The shares of `available` descriptors; nil when that is below `minimum`. `wantedTransfers`: `--jobs`;
    /// `cores`: the threads CPU-bound parts would use.
    package init?(available: Int, wantedTransfers: Int, cores: Int, transfers: Bool, cache: Bool) {
        guard available >= Self.minimum(transfers: transfers, cache: cache) else { return nil }
        let cores = max(1, cores)
        observers = max(1, min(cores, (available - Self.runFiles) / Self.perObserver))
        guard transfers else {
            // Looking at the cache (`plan --cache`) comes after observing: the folders may have all the rest.
            self.transfers = 0
            cacheCopiers = 0
            commitFolders = 0
            cacheFolders =
                cache ? min(ContentCache.allFolders, max(0, available - Self.runFiles - Self.cacheFolder)) : 0
            return
        }
        // One of each, then transfers up to what was asked, then copiers, then folders.
        var left = available - Self.minimum(transfers: true, cache: cache)
        var count = 1
        while count < max(1, wantedTransfers) {
            // The second and later loops (one per core) cost their pair as well.
            let cost = Self.perTransfer + (count < cores ? Self.perLoop : 0)
            guard left >= cost else { break }
            left -= cost
            count += 1
        }
        self.transfers = count
        var copiers = cache ? 1 : 0
        while cache, copiers < cores, left >= Self.perCacheCopier {
            left -= Self.perCacheCopier
            copiers += 1
        }
        cacheCopiers = copiers
        commitFolders = min(Committer.defaultHeldFolders, left)
        left -= commitFolders
        cacheFolders = cache ? min(ContentCache.allFolders, left) : 0
    }
}
