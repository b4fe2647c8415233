import HaulManifest
import HaulPlanner
import HaulStore

/// The "observe" step: what is on disk for each entry, in the planner's vocabulary.
enum Observation {
    static func localStates(of manifest: Manifest, concurrency: Int) -> [LocalState] {
        let requests = manifest.files.map {
            ObservationRequest(destination: $0.destination, algorithm: $0.checksum?.algorithm, expectedSize: $0.size)
        }
        return LocalObserver(root: manifest.root).observeAll(requests, concurrency: concurrency).map(localState)
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
