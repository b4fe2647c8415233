import Glibc
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulStore

/// What `haul add` downloaded, kept to be put in place rather than downloaded again by the next sync (multi-GB
/// assets would otherwise cross the network twice).
///
/// A private folder under `$TMPDIR` holding a content cache (`ContentCache`, in `cache/`, beside the folder's lock):
/// downloads land in the folder and are renamed into the cache, and placing the new entries is then an ordinary
/// sync of those entries with that cache, so they get the run's lock, commit, durability and
/// state records like any other, and every byte is hashed again on its way into the root. Nothing here writes to
/// the root itself.
package final class KeptDownloads: Sendable {
    let folder: ScratchDirectory
    let cache: ContentCache
    /// The cache inside `folder`: a folder of its own, since a cache holds nothing but what a cache makes.
    private static let cacheName = "cache"

    private init(folder: ScratchDirectory, cache: ContentCache) {
        self.folder = folder
        self.cache = cache
    }

    /// `prefix`: the folder's name before its random part, one per kind of user (`haul add`, a sync's `HeadStart`).
    package static func make(prefix: String = "haul-add") throws(StoreError) -> KeptDownloads {
        let folder = try ScratchDirectory.make(prefix: prefix)
        // Made a cache (marked) while it is empty: the sync that places the files uses it as one.
        switch ContentCache.open(folder.path + "/" + cacheName, create: true) {
        case .success(let cache): return KeptDownloads(folder: folder, cache: cache)
        case .failure(let failure):
            folder.remove()
            switch failure {
            case .failed(let error): throw error
            case .missing(let path): throw StoreError(operation: .useAsCache, path: path, errno: ENOENT)
            case .notACache(let path, let stranger):
                throw StoreError(operation: .useAsCache, path: path, errno: 0, problem: .notACache(stranger: stranger))
            }
        }
    }

    /// The verified download, in the folder already, becomes the cache entry of its digest (a rename).
    func keep(_ file: DownloadedFile) -> StoreError? {
        cache.adopt(file.digest, from: file.folder(in: folder.folder), name: file.temporaryName)
    }

    /// Puts in place the entries of `manifest` whose destinations are `destinations`, from what was kept: a sync of
    /// only those (never pruning), holding root's lock (waiting for another run as `wait` says). The other entries
    /// are neither looked at nor touched, and their records are kept.
    package func place(
        _ destinations: Set<String>, of manifest: Manifest, options: SyncOptions, wait: RunLock.Waiting = .no,
        holder: String, cancellation: Cancellation?
    ) throws(ObservationFailure) -> SyncResult {
        var options = options
        options.cacheDirectory = folder.path + "/" + Self.cacheName
        options.prune = false
        var subset = manifest
        subset.prune = false
        subset.files = manifest.files.filter { destinations.contains($0.destination.description) }
        let sync = Sync(manifest: subset, options: options)
        let observation = try sync.observe(.exclusive(wait: wait, holder: holder))
        return sync.apply(sync.plan(observation), observed: observation, observer: nil, cancellation: cancellation)
    }

    /// The folder and everything left in it.
    package func remove() {
        folder.remove()
    }
}
