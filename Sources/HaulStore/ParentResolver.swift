import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Where a destination's parent directory stands, as far as haul is allowed to go.
enum ParentState: Sendable {
    /// Exists, is (or leads to) a directory inside root. The path goes through the caller's root string, not
    /// the resolved one, so that messages and syscalls see the tree the user named.
    case directory(String)
    /// Some component does not exist.
    case missing
    /// A symlink component resolves outside root (`FileProblem.parentEscapesRoot`).
    case escapes(FileProblem)
    /// A component cannot serve as a directory (a file, a dangling symlink).
    case blocked(errno: Int32, problem: FileProblem)
    /// A system call on a component failed.
    case failed(StoreError)
}

/// The observer's view of haul's path-safety rule: the same walk the committer makes (`ContainedWalk`), its
/// verdicts remembered by folder for one snapshot, so a manifest of 100,000 files in a few folders walks each
/// folder once. Looking only reads: a folder that passes is then read by path.
struct ParentResolver {
    let root: String
    private var walk: ContainedWalk
    /// By bytes: a real folder "caf\u{e9}" must not answer for a symlink named "cafe\u{301}".
    private var known: [DestinationKey: ParentState] = [:]

    init(root: String, walk: ContainedWalk) {
        self.root = root
        self.walk = walk
    }

    /// `parent`: a destination's `parent`, `a/b`.
    mutating func resolve(_ parent: Substring) -> ParentState {
        if parent.isEmpty { return .directory(root) }
        let relative = String(parent)
        if let state = known[DestinationKey(relative)] { return state }
        let state: ParentState =
            switch walk.folder(parent, create: false) {
            case .folder: .directory(FileSystem.join(root, relative))
            case .missing: .missing
            case .escapes(let problem): .escapes(problem)
            case .blocked(let code, let problem): .blocked(errno: code, problem: problem)
            case .failed(let failure): .failed(failure)
            }
        known[DestinationKey(relative)] = state
        return state
    }
}
