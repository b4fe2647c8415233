import Glibc
import HaulThreads
import Synchronization

/// Reads the state cache on a thread of its own while the caller parses the manifest: for 100,000 files both
/// take a few hundred milliseconds, and a no-op sync is little more than the two.
///
/// The manifest names root, so reading starts when the parser has seen `root:` (`start`), and `take` hands over
/// the result for the root the manifest finally has. What was read is used only if the state file is still the
/// one read: another run may have rewritten it before this one took the lock. Otherwise it is read again.
public final class StatePrefetch: Sendable {
    private struct Started {
        let root: String
        let thread: pthread_t
    }
    private typealias Loaded = (cache: StateCache, warning: String?, file: FileIdentity?)

    private let started = Mutex<Started?>(nil)
    private let result = Mutex<Loaded?>(nil)

    public init() {}

    /// Starts reading the state under `root`; later calls are ignored. If no thread can be started, `take`
    /// reads it.
    public func start(root: String) {
        started.withLock { started in
            guard started == nil else { return }
            let thread = startThread { [self] in
                let loaded = StateCache.readFile(root: root)
                result.withLock { $0 = loaded }
            }
            if let thread { started = Started(root: root, thread: thread) }
        }
    }

    /// The state under `root`, as `StateCache.load` would return it now.
    public func take(root: String) -> (cache: StateCache, warning: String?) {
        let prefetched = started.withLock { started -> Started? in
            defer { started = nil }
            return started
        }
        guard let prefetched else { return StateCache.load(root: root) }
        pthread_join(prefetched.thread, nil)
        guard let loaded = result.withLock({ $0.take() }), FileSystem.normalizedRoot(prefetched.root) == FileSystem.normalizedRoot(root),
              loaded.file == FileIdentity.of(path: StateCache.path(root: root)) else {
            return StateCache.load(root: root)
        }
        return (loaded.cache, loaded.warning)
    }
}
