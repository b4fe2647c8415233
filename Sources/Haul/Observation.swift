import HaulManifest
import HaulPlanner
import HaulStore

/// The "observe" step: what is on disk for each entry, in the planner's vocabulary, plus what the state cache
/// should remember of it.
enum Observation {
    /// Per entry, in manifest order: what is on disk, the cache record matching it (nil: nothing known), and
    /// whether that record is exactly the one the cache holds (saving the state skips it without a lookup).
    struct Observed {
        var states: [LocalState] = []
        var records: [StateRecord?] = []
        var cached: [Bool] = []
    }

    /// With `rehash`, a pinned file is hashed whatever the cache says; an unpinned one still gets its record
    /// (nothing to hash it against, and its validators are what revalidation needs).
    /// `glances`: destinations already seen (while the manifest was read) exactly as the cache records them.
    static func observe(_ manifest: Manifest, cache: StateCache?, glances: Glances? = nil, rehash: Bool = false,
                        concurrency: Int) -> Observed {
        let count = manifest.files.count
        let observer = LocalObserver(root: manifest.root)
        if let same = observer.sameForEveryDestination() {
            // A first sync into an empty root: 100,000 requests built and answered one by one would say just this.
            return Observed(states: Array(repeating: localState(same), count: count),
                            records: Array(repeating: nil, count: count), cached: Array(repeating: false, count: count))
        }
        var observed = Observed()
        observed.states.reserveCapacity(count)
        observed.cached.reserveCapacity(count)
        var rest: [Int] = []
        if let glances {
            observed.records = glances.records(for: manifest.files)
        } else {
            observed.records = Array(repeating: nil, count: count)
        }
        for position in 0..<count {
            if let record = observed.records[position], let glances {
                observed.states.append(localState(glances.file(index: position, record: record)))
                observed.cached.append(true)
            } else {
                // A placeholder, replaced below.
                observed.states.append(.missing)
                observed.cached.append(false)
                rest.append(position)
            }
        }
        let requests = rest.map { position in
            let entry = manifest.files[position]
            // With --rehash a pinned file is hashed whatever the cache says.
            return ObservationRequest(entry: entry, cache: rehash && entry.checksum != nil ? nil : cache)
        }
        let looked = observer.observeAllRecording(requests, concurrency: concurrency)
        for (offset, position) in rest.enumerated() {
            let record = looked[offset].record
            observed.states[position] = localState(looked[offset].file)
            observed.records[position] = record
            // A record too recent to be proof is kept, but the state is rewritten so that it can be next time.
            observed.cached[position] = record.map { requests[offset].known == $0 && requests[offset].knownRecordIsProof(for: $0.identity) } ?? false
        }
        return observed
    }

    static func localStates(of manifest: Manifest, concurrency: Int) -> [LocalState] {
        observe(manifest, cache: nil, concurrency: concurrency).states
    }

    /// Files this manifest wrote in earlier runs that it no longer lists, as they are now, with the identity
    /// they were observed with (the pruner deletes only a file that still has it).
    static func pruneCandidates(_ manifest: Manifest, cache: StateCache, manifestKey: String, rehash: Bool,
                                concurrency: Int) -> [(candidate: PruneCandidate, identity: FileIdentity?)] {
        // By bytes: a listed "caf\u{e9}" keeps a written "cafe\u{301}" no more than any other name.
        let listed = Set(manifest.files.map { DestinationKey($0.destination) })
        let owned = cache.records.filter { $0.value.origin?.manifestKey == manifestKey && !listed.contains($0.key) }
            .sorted { $0.key < $1.key }
            // The cache is a hint, not an authority: only a path that is a valid destination outside haul's own
            // folder, spelled as the manifest would spell it, can be pruned.
            .compactMap { key, record -> (DestinationPath, StateRecord)? in
                guard let path = DestinationPath(key.text), DestinationKey(path) == key, path.components.first != ".haul"
                else { return nil }
                return (path, record)
            }
        let requests = owned.map { destination, record in
            // (A record only journaled by a run that crashed knows no size: the file is hashed whatever its size.)
            ObservationRequest(destination: destination, algorithm: record.digest.algorithm,
                               expectedSize: record.identity.size >= 0 ? record.identity.size : nil,
                               known: rehash ? nil : record, knownAsOf: cache.writtenAt)
        }
        let observed = LocalObserver(root: manifest.root).observeAllRecording(requests, concurrency: concurrency)
        return zip(owned, observed).map { owned, observed in
            (PruneCandidate(destination: owned.0, written: owned.1.digest, local: localState(observed.file)),
             observed.record?.identity)
        }
    }

    static func localState(_ observed: ObservedFile) -> LocalState {
        switch observed {
        case .missing: .missing
        case .regularFile(let size, let digest): .file(size: size, digest: digest)
        case .symlink: .symlink
        case .directory: .obstructed("a directory is in the way")
        case .otherKind: .obstructed("something that is not a regular file is in the way")
        case .escapesRoot(let why): .inaccessible(why)
        case .unreadable(let error): .inaccessible(error.description)
        case .unreadableContent(let error): .unreadable(error.description)
        }
    }
}

/// A plan and what was observed to make it: `apply` needs both to leave an accurate state cache behind.
package struct Assessment: Sendable {
    package let plan: Plan
    /// Per entry, the cache record matching what is on disk now (nil: nothing known).
    let records: [StateRecord?]
    /// Per entry, whether `records` holds exactly what the cache holds for it.
    let recordIsCached: [Bool]
    /// Per planned prune, the identity of the file as observed (nil: not a regular file, or not hashed).
    let pruneIdentities: [FileIdentity?]
    let cache: StateCache
    /// Set when the state cache existed but could not be used.
    package let cacheWarning: String?
    let manifestKey: String
}
