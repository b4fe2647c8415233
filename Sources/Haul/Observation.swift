import HaulManifest
import HaulPlanner
import HaulStore

/// The "observe" step: what is on disk for each entry, in the planner's vocabulary, plus what the state cache
/// should remember of it.
enum Observation {
    static func observe(_ manifest: Manifest, cache: StateCache?, concurrency: Int) -> [(state: LocalState, record: StateRecord?)] {
        let requests = manifest.files.map {
            ObservationRequest(destination: $0.destination, algorithm: $0.checksum?.algorithm, expectedSize: $0.size,
                               known: cache?.records[$0.destination.description])
        }
        return LocalObserver(root: manifest.root).observeAllRecording(requests, concurrency: concurrency).map {
            (localState($0.file), $0.record)
        }
    }

    static func localStates(of manifest: Manifest, concurrency: Int) -> [LocalState] {
        observe(manifest, cache: nil, concurrency: concurrency).map(\.state)
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
    let cache: StateCache
    /// Set when the state cache existed but could not be used.
    public let cacheWarning: String?
}
