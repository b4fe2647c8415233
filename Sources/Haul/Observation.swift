import HaulManifest
import HaulPlanner
import HaulStore

/// The "observe" step: what is on disk for each entry, in the planner's vocabulary, plus what the state cache
/// should remember of it.
enum Observation {
    /// With `rehash`, a pinned file is hashed whatever the cache says; an unpinned one still gets its record
    /// (nothing to hash it against, and its validators are what revalidation needs).
    /// `cached`: the record is the one the cache already holds (saving the state skips it without a lookup).
    static func observe(_ manifest: Manifest, cache: StateCache?, rehash: Bool = false,
                        concurrency: Int) -> [(state: LocalState, record: StateRecord?, cached: Bool)] {
        let requests = manifest.files.map {
            ObservationRequest(destination: $0.destination, algorithm: $0.checksum?.algorithm, expectedSize: $0.size,
                               known: rehash && $0.checksum != nil ? nil : cache?.records[$0.destination.description])
        }
        let observed = LocalObserver(root: manifest.root).observeAllRecording(requests, concurrency: concurrency)
        return zip(requests, observed).map { request, observed in
            (localState(observed.file), observed.record, observed.record != nil && observed.record == request.known)
        }
    }

    static func localStates(of manifest: Manifest, concurrency: Int) -> [LocalState] {
        observe(manifest, cache: nil, concurrency: concurrency).map(\.state)
    }

    /// Files this manifest wrote in earlier runs that it no longer lists, as they are now, with the identity
    /// they were observed with (the pruner deletes only a file that still has it).
    static func pruneCandidates(_ manifest: Manifest, cache: StateCache, manifestKey: String, rehash: Bool,
                                concurrency: Int) -> [(candidate: PruneCandidate, identity: FileIdentity?)] {
        let listed = Set(manifest.files.map(\.destination.description))
        let owned = cache.records.filter { $0.value.origin?.manifestKey == manifestKey && !listed.contains($0.key) }
            .sorted { $0.key < $1.key }
            // The cache is a hint, not an authority: only a path that is a valid destination outside haul's own
            // folder, spelled as the manifest would spell it, can be pruned.
            .compactMap { key, record -> (DestinationPath, StateRecord)? in
                guard let path = DestinationPath(key), path.description == key, path.components.first != ".haul" else { return nil }
                return (path, record)
            }
        let requests = owned.map { destination, record in
            ObservationRequest(destination: destination, algorithm: record.digest.algorithm,
                               expectedSize: record.identity.size, known: rehash ? nil : record)
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
        }
    }
}

/// A plan and what was observed to make it: `apply` needs both to leave an accurate state cache behind.
public struct Assessment: Sendable {
    public let plan: Plan
    /// Per entry, the cache record matching what is on disk now (nil: nothing known).
    let records: [StateRecord?]
    /// Per entry, whether `records` holds exactly what the cache holds for it.
    let recordIsCached: [Bool]
    /// Per planned prune, the identity of the file as observed (nil: not a regular file, or not hashed).
    let pruneIdentities: [FileIdentity?]
    let cache: StateCache
    /// Set when the state cache existed but could not be used.
    public let cacheWarning: String?
    let manifestKey: String
}
