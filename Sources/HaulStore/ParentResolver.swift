import Glibc
import HaulManifest

/// Where a destination's parent directory stands, as far as haul is allowed to go.
enum ParentState: Sendable {
    /// Exists, is (or leads to) a directory inside root. The path goes through the caller's root string, not
    /// the resolved one, so that messages and syscalls see the tree the user named.
    case directory(String)
    /// Some component does not exist (only when not creating).
    case missing
    /// A symlink component resolves outside root; the message names it.
    case escapes(String)
    /// A component cannot serve as a directory (a file, a dangling symlink); `reason` names it.
    case blocked(errno: Int32, reason: String)
    /// A system call on a component failed.
    case failed(StoreError)

    var isDirectory: Bool {
        if case .directory = self { true } else { false }
    }
}

/// The one implementation of haul's path-safety rule, shared by the observer and the committer: a destination's
/// parent is walked component by component with lstat, and a symlink component is accepted only when its
/// realpath stays within realpath(root). Walking instead of calling realpath on the whole parent lets the
/// message name the offending component and lets the committer create what is missing as it goes.
///
/// Results are memoized by relative prefix, so a manifest of 100,000 files in a few folders lstats each folder
/// once. The committer keeps one resolver for its lifetime and remembers only directories (a failure may be
/// fixed by the user between batches); the observer uses a fresh one per snapshot and remembers everything.
///
/// Checks and later uses are separate system calls, so a parent swapped for a symlink in between is not
/// caught; haul guards against a tree that is misconfigured, not one being raced by a hostile local user.
struct ParentResolver: Sendable {
    let root: String
    let realRoot: String
    let remembersFailures: Bool
    /// By bytes: a real folder "caf\u{e9}" must not answer for a symlink named "cafe\u{301}".
    private var known: [DestinationKey: ParentState] = [:]

    init(root: String, realRoot: String, remembersFailures: Bool) {
        self.root = root
        self.realRoot = realRoot
        self.remembersFailures = remembersFailures
    }

    /// With `create`, missing components are made (0755, narrowed by the umask like `mkdir -p`).
    mutating func resolve(_ components: ArraySlice<String>, create: Bool) -> ParentState {
        if components.isEmpty { return .directory(root) }
        if components.count > 1, let state = known[DestinationKey(components.joined(separator: "/"))] { return state }
        var relative = ""
        var state = ParentState.directory(root)
        for component in components {
            relative = relative.isEmpty ? component : relative + "/" + component
            if let remembered = known[DestinationKey(relative)] {
                state = remembered
            } else {
                state = inspect(relative, create: create)
                if remembersFailures || state.isDirectory { known[DestinationKey(relative)] = state }
            }
            guard state.isDirectory else { return state }
        }
        return state
    }

    /// Drops everything remembered: after a rename found a parent gone, the tree changed under us.
    mutating func forget() {
        known.removeAll(keepingCapacity: true)
    }

    func isInsideRoot(_ resolved: String) -> Bool {
        if resolved == realRoot || realRoot == "/" { return true }
        return resolved.hasPrefix(realRoot) && resolved.utf8.dropFirst(realRoot.utf8.count).first == UInt8(ascii: "/")
    }

    private mutating func inspect(_ relative: String, create: Bool) -> ParentState {
        let absolute = FileSystem.join(root, relative)
        // A concurrent mkdir between our lstat and our mkdir (EEXIST) is resolved by looking once more.
        for _ in 0..<2 {
            switch FileSystem.linkStatus(absolute) {
            case .success(let info):
                switch FileKind(mode: info.st_mode) {
                case .directory: return .directory(absolute)
                case .symlink: return inspectSymlink(relative, absolute: absolute)
                case .regular, .other: return .blocked(errno: ENOTDIR, reason: "parent \"\(relative)\" is not a directory")
                }
            case .failure(ENOENT):
                guard create else { return .missing }
                // No fsync of the new entry here: the committer creates parents before its syncfs, which covers them.
                guard let failure = FileSystem.makeDirectory(absolute, mode: 0o755) else { return .directory(absolute) }
                if failure == EEXIST { continue }
                return .failed(StoreError(operation: "create directory", path: relative, errno: failure))
            case .failure(let code):
                return .failed(StoreError(operation: "inspect", path: relative, errno: code))
            }
        }
        return .failed(StoreError(operation: "create directory", path: relative, errno: EEXIST))
    }

    private func inspectSymlink(_ relative: String, absolute: String) -> ParentState {
        switch FileSystem.realPath(absolute) {
        case .failure(ENOENT):
            let target = FileSystem.linkTarget(absolute) ?? "?"
            return .blocked(errno: ENOENT, reason: "parent \"\(relative)\" is a symlink to \(target), which does not exist")
        case .failure(let code):
            return .failed(StoreError(operation: "resolve", path: relative, errno: code))
        case .success(let resolved):
            guard isInsideRoot(resolved) else {
                return .escapes("parent \"\(relative)\" is a symlink to \(resolved), outside root")
            }
            if case .success(let info) = FileSystem.status(resolved), FileKind(mode: info.st_mode) == .directory {
                return .directory(absolute)
            }
            return .blocked(errno: ENOTDIR, reason: "parent \"\(relative)\" is a symlink to \(resolved), which is not a directory")
        }
    }
}
