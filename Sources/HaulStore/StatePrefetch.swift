import Dispatch
import Glibc
import HaulManifest
import HaulThreads
import Synchronization

/// Reads the state cache on a thread of its own while the caller parses the manifest, and, asked to, looks at
/// each destination the state knows as soon as the parser has read its entry: for 100,000 files the parse, the
/// state and the `lstat`s each take a few hundred milliseconds, and a no-op sync is little more than the longest.
///
/// The manifest names root, so reading starts when the parser has seen `root:` (`start`), and `take` hands over
/// the result for the root the manifest finally has. What was read is used only if the state file is still the
/// one read: another run may have rewritten it before this one took the lock. Otherwise it is read again, and
/// nothing looked at early is used.
package final class StatePrefetch: Sendable {
    /// Whether to look at destinations early, and on what terms.
    package enum Looking: Sendable {
        case no
        /// For commands that change nothing (`plan`, `sync --dry-run`): they look without the run lock anyway.
        case withoutLock
        /// For a sync: only once root's run lock is held (taken here, handed over by `takeLock`), since a file
        /// seen before then may be replaced by the run that holds it. If root is busy, nothing is looked at.
        case underLock(holder: String)
    }

    private struct Started {
        let root: String
        let thread: pthread_t
    }

    private struct Loaded {
        var area: PrivateArea?
        var cache: StateCache
        var warning: String?
        var file: FileIdentity?
        var lock: RunLock?
        var glances: Glances?
    }

    /// Entries read by the parser and not yet looked at.
    private struct Feed {
        var pending: [(index: Int, request: ObservationRequest)] = []
        var ended = false
        /// The looking thread sleeps on `fed` until a batch is ready.
        var sleeping = false
    }

    private static let batch = 256

    private let looking: Looking
    private let started = Mutex<Started?>(nil)
    private let result = Mutex<Loaded?>(nil)
    private let feed = Mutex(Feed())
    private let fed = DispatchSemaphore(value: 0)

    package init(looking: Looking = .no) {
        self.looking = looking
    }

    deinit {
        // Never taken (the manifest failed, say): let the thread finish before what it uses goes away.
        endEntries()
        if let started = started.withLock({ $0.take() }) { pthread_join(started.thread, nil) }
    }

    /// Starts reading the state under `root`; later calls are ignored. If no thread can be started, `take`
    /// reads it.
    package func start(root: String) {
        started.withLock { started in
            guard started == nil else { return }
            let thread = startThread { [self] in
                let loaded = load(root: root)
                result.withLock { $0 = loaded }
            }
            if let thread { started = Started(root: root, thread: thread) }
        }
    }

    /// One more validated entry; its destination is looked at if the state knows it.
    package func entryRead(_ entry: FileEntry) {
        if case .no = looking { return }
        let wake = feed.withLock { feed -> Bool in
            guard !feed.ended else { return false }
            // Room for a batch at once: grown entry by entry, it would be reallocated a few times per batch.
            if feed.pending.capacity == 0 { feed.pending.reserveCapacity(2 * Self.batch) }
            feed.pending.append((entry.index, ObservationRequest(entry: entry, cache: nil)))
            guard feed.sleeping, feed.pending.count >= Self.batch else { return false }
            feed.sleeping = false
            return true
        }
        if wake { fed.signal() }
    }

    /// No more entries (the manifest is read, or failed).
    package func endEntries() {
        endEntries(dropping: false)
    }

    private func endEntries(dropping: Bool) {
        let wake = feed.withLock { feed -> Bool in
            feed.ended = true
            if dropping { feed.pending = [] }
            defer { feed.sleeping = false }
            return feed.sleeping
        }
        if wake { fed.signal() }
    }

    /// The run lock taken for `root` before looking, if any: the caller holds it from now on.
    package func takeLock(root: String) -> RunLock? {
        guard joined(root: root) else { return nil }
        return result.withLock { loaded in
            defer { loaded?.lock = nil }
            return loaded?.lock
        }
    }

    /// The state in `area` (the root's private folder, nil if it has none), as `StateCache.load` would return it
    /// now, and what was looked at early.
    package func take(area: PrivateArea?) -> (cache: StateCache, warning: String?, glances: Glances?) {
        guard let area, joined(root: area.root), let loaded = result.withLock({ $0.take() }), loaded.area != nil,
              loaded.file == StateCache.identity(in: area) else {
            let (cache, warning) = StateCache.load(area: area)
            return (cache, warning, nil)
        }
        return (loaded.cache, loaded.warning, loaded.glances)
    }

    /// Waits for the thread; whether it worked for `root`. A lock it took for another root is released.
    private func joined(root: String) -> Bool {
        endEntries()
        guard let prefetched = started.withLock({ $0.take() }) else {
            return result.withLock { $0 != nil }
        }
        pthread_join(prefetched.thread, nil)
        guard FileSystem.normalizedRoot(prefetched.root) == FileSystem.normalizedRoot(root) else {
            result.withLock { $0 = nil }
            return false
        }
        return true
    }

    /// Entries waiting to be looked at, and whether the thread is done (for tests: with nothing to look at,
    /// entries must not pile up for the whole manifest).
    var queuedEntryCount: Int { feed.withLock { $0.pending.count } }
    var hasLoaded: Bool { result.withLock { $0 != nil } }

    /// On the thread: the state, then, if asked and there is something to look at, the entries as they come.
    private func load(root: String) -> Loaded {
        // Nothing is made here (the manifest may yet turn out invalid, and an invalid manifest touches nothing):
        // without a private folder there is no state and nothing to look at. One that is not what haul made is
        // refused by the command itself, clearly; here it only means there is nothing to read.
        let area = try? PrivateArea.existing(root: root)
        let (cache, warning, file) = StateCache.readFile(area: area)
        var loaded = Loaded(area: area, cache: cache, warning: warning, file: file)
        if let area, !cache.records.isEmpty {
            switch looking {
            case .no:
                break
            case .withoutLock:
                loaded.glances = glance(root: root, cache: cache)
            case .underLock(let holder):
                if let lock = try? RunLock(area: area, wait: false, holder: holder) {
                    loaded.lock = lock
                    loaded.glances = glance(root: root, cache: cache)
                }
            }
        }
        // Nothing (more) to look at: entries the parser is still reading need not queue up.
        endEntries(dropping: true)
        return loaded
    }

    private func glance(root: String, cache: StateCache) -> Glances {
        var observer = GlanceObserver(root: root)
        defer { observer.close() }
        var glances = Glances(cache: cache)
        while let batch = nextBatch() {
            for (index, request) in batch {
                guard let known = glances.record(for: request.destination) else { continue }
                var request = request
                request.known = known
                request.knownAsOf = cache.writtenAt
                // Only what the state already says is kept: the rest is looked at (and hashed) with the others.
                guard let (file, record) = observer.observe(request), record == known else { continue }
                glances.add(index: index, destination: request.destination, file: file, record: known)
            }
        }
        return glances
    }

    private func nextBatch() -> [(index: Int, request: ObservationRequest)]? {
        while true {
            let (batch, ended) = feed.withLock { feed in
                guard feed.pending.count >= Self.batch || feed.ended else {
                    feed.sleeping = true
                    return ([(index: Int, request: ObservationRequest)](), false)
                }
                defer { feed.pending = [] }
                return (feed.pending, feed.ended)
            }
            if !batch.isEmpty { return batch }
            if ended { return nil }
            fed.wait()
        }
    }
}

/// Destinations looked at while the manifest was read, found exactly as the state cache records them, by entry
/// index: such a file is fully described by its record (and whether the entry asked for its digest).
package struct Glances: Sendable {
    private let cache: [DestinationKey: StateRecord]
    private var records: [StateRecord?] = []
    /// The destination each record was seen for (its text: the same string the manifest's entry holds).
    private var destinations: [String?] = []
    private var digestKnown: [Bool] = []

    init(cache: StateCache) {
        self.cache = cache.records
        // The manifest most likely lists about what the state knows: grown by doubling, 100,000 records would
        // briefly need room for three times as many.
        records.reserveCapacity(cache.records.count)
        destinations.reserveCapacity(cache.records.count)
        digestKnown.reserveCapacity(cache.records.count)
    }

    func record(for destination: DestinationPath) -> StateRecord? {
        cache[DestinationKey(destination)]
    }

    /// Keeps `file`, seen for entry `index`, if it is what `record` says it is.
    mutating func add(index: Int, destination: DestinationPath, file: ObservedFile, record: StateRecord) {
        guard index >= 0, case .regularFile(let size, let digest) = file, size == record.identity.size,
              digest == nil || digest == record.digest else { return }
        if index >= records.count { grow(to: index + 1) }
        records[index] = record
        destinations[index] = destination.description
        digestKnown[index] = digest != nil
    }

    private mutating func grow(to count: Int) {
        guard count > records.count else { return }
        records.append(contentsOf: repeatElement(nil, count: count - records.count))
        destinations.append(contentsOf: repeatElement(nil, count: count - destinations.count))
        digestKnown.append(contentsOf: repeatElement(false, count: count - digestKnown.count))
    }

    /// Per entry of `files` (in order), the record if its destination was seen exactly as recorded, else nil;
    /// handed over rather than copied (100,000 records).
    package consuming func records(for files: [FileEntry]) -> [StateRecord?] {
        grow(to: files.count)
        for (position, entry) in files.enumerated() where records[position] != nil {
            // By bytes, and at once when it is the entry's own string (it is, unless the manifest changed).
            if entry.index != position || destinations[position]?.hasSameBytes(as: entry.destination.description) != true {
                records[position] = nil
            }
        }
        // (Only a mismatch writes: the common case hands the array over without copying it.)
        if records.count > files.count { records.removeLast(records.count - files.count) }
        return records
    }

    /// What observation says of a file seen as its record says, for entry `index`.
    package func file(index: Int, record: StateRecord) -> ObservedFile {
        .regularFile(size: record.identity.size, digest: index < digestKnown.count && digestKnown[index] ? record.digest : nil)
    }
}
