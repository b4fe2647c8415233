import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulThreads

/// Reaches a destination's folder from root's descriptor one component at a time, each opened without following
/// a symlink; a symlink component is followed by haul itself, and only while it stays inside root.
///
/// This is haul's path-safety rule, and the only place it is decided: a folder is reached by descriptor at the
/// moment it is used, so a parent swapped for a symlink during the run (`mv root/d root/d.old; ln -s /elsewhere
/// root/d`) is seen for what it is when the next file is committed there, and that entry fails instead of
/// landing outside root. A symlink pointing inside root, by a relative or an absolute target, is followed.
struct ContainedWalk {
    let root: DirectoryHandle
    /// root's real path, for absolute symlink targets and messages.
    let realRoot: String
    /// Folders reached lately, by path relative to root: manifests list files folder by folder, so most walks
    /// are repeats. Bounded: a manifest with 100,000 folders must not hold 100,000 descriptors. By bytes, as the
    /// kernel names folders.
    private var recent: [DestinationKey: DirectoryHandle] = [:]
    /// How many `recent` holds at most: a share of the run's descriptors (`DescriptorBudget`).
    private let recentLimit: Int
    /// What `recentLimit` is unless the caller's budget says otherwise.
    static let defaultRecentLimit = 16
    /// Symlinks followed in one walk before it is called a loop (the kernel's own limit).
    private static let maximumHops = 40

    /// Opens root (following symlinks: where root is is the user's choice), waiting for a descriptor if there is
    /// none (`DescriptorShortage`). `keeping`: how many folders it may hold between walks.
    static func start(root: String, keeping recentLimit: Int = defaultRecentLimit) -> Result<ContainedWalk, StoreError>
    {
        let handle: DirectoryHandle
        switch DescriptorShortage.waiting({ DirectoryHandle.open(root) }, isShortage: Self.isShortage) {
        case .success(let opened): handle = opened
        case .failure(let failure): return .failure(StoreError(operation: .open, path: root, errno: failure.errno))
        }
        switch FileSystem.realPath(root) {
        case .success(let real): return .success(ContainedWalk(root: handle, realRoot: real, keeping: recentLimit))
        case .failure(let failure):
            return .failure(StoreError(operation: .resolveRoot, path: root, errno: failure.code))
        }
    }

    init(root: DirectoryHandle, realRoot: String, keeping recentLimit: Int = defaultRecentLimit) {
        self.root = root
        self.realRoot = realRoot
        self.recentLimit = max(0, recentLimit)
    }

    private static func isShortage(_ opened: Result<DirectoryHandle, SystemError>) -> Bool {
        if case .failure(let failure) = opened { DescriptorShortage.means(failure.errno) } else { false }
    }

    /// Where a destination's folder stands.
    enum Reach {
        case folder(DirectoryHandle)
        /// Some component does not exist (only when not creating).
        case missing
        /// A symlink component leads outside root (`FileProblem.parentEscapesRoot`).
        case escapes(FileProblem)
        /// A component cannot serve as a folder (a file, a dangling symlink, a loop).
        case blocked(errno: Int32, problem: FileProblem)
        case failed(StoreError)

        var isOutOfDescriptors: Bool {
            if case .failed(let failure) = self { DescriptorShortage.means(failure.errno) } else { false }
        }
    }

    /// The folder `relative` (a destination's `parent`, `a/b`) names under root; with `create`, missing ones are
    /// made (0755, narrowed by the umask as `mkdir -p` does). Components reached through a symlink are never
    /// created: a dangling link blocks.
    mutating func folder(_ relative: Substring, create: Bool) -> Reach {
        if relative.isEmpty { return .folder(root) }
        let key = DestinationKey(String(relative))
        if let known = recent[key] { return .folder(known) }
        let components = DestinationPath.components(of: relative)
        var reach = walk(components, create: create)
        if reach.isOutOfDescriptors {
            // Out of descriptors: the folders held for later are worth less than this one, and then another part of
            // the run gives some back.
            recent.removeAll()
            reach = DescriptorShortage.waiting({ walk(components, create: create) }, isShortage: \.isOutOfDescriptors)
        }
        if case .folder(let handle) = reach, recentLimit > 0 {
            if recent.count >= recentLimit { recent.removeAll(keepingCapacity: true) }
            recent[key] = handle
        }
        return reach
    }

    /// Forgets the folders reached: the next walk looks again (after a failure that suggests the tree changed).
    mutating func forget() { recent.removeAll(keepingCapacity: true) }

    /// One folder at a time is held (the one reached so far, and the next while it is opened): a walk costs two
    /// descriptors beside root's however deep it goes. A `..` in a symlink's target walks again from root.
    private func walk(_ components: [String], create: Bool) -> Reach {
        /// Components still to walk, last first; `fromLink` names the link whose target they came from.
        var pending: [(name: String, fromLink: String?)] = components.reversed().map { ($0, nil) }
        var here = root
        /// Real names below root of the folders walked to reach `here`.
        var names: [String] = []
        /// The user's components walked so far, for messages.
        var written: [String] = []
        var hops = 0
        while let (name, fromLink) = pending.popLast() {
            if fromLink == nil { written.append(name) }
            let shown = written.joined(separator: "/")
            if name.isEmpty || name == "." { continue }
            if name == ".." {
                guard !names.isEmpty else {
                    return .escapes(.parentEscapesRoot(parent: shown, target: fromLink ?? ".."))
                }
                names.removeLast()
                switch reach(names) {
                case .success(let parent): here = parent
                case .failure(let failure):
                    return .failed(StoreError(operation: .inspect, path: shown, errno: failure.errno))
                }
                continue
            }
            switch here.subdirectory(name, creatingWithMode: create && fromLink == nil ? 0o755 : nil) {
            case .success(let next):
                here = next
                names.append(name)
                continue
            case .failure(let failure) where failure.errno == ENOENT:
                if let fromLink {
                    return .blocked(errno: ENOENT, problem: .parentLinkDangles(parent: shown, target: fromLink))
                }
                return .missing
            case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR:
                break  // a symlink, or not a folder at all: looked at below
            case .failure(let failure):
                return .failed(
                    StoreError(operation: create ? .createDirectory : .inspect, path: shown, errno: failure.errno))
            }
            guard case .success(let info) = here.status(of: name), info.st_mode & S_IFMT == S_IFLNK,
                let target = here.linkTarget(name)
            else {
                return .blocked(errno: ENOTDIR, problem: .parentNotADirectory(shown))
            }
            hops += 1
            guard hops <= Self.maximumHops else {
                return .blocked(errno: ELOOP, problem: .parentLinkLoop(shown))
            }
            let link = fromLink ?? target
            var rest = target.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            if target.hasPrefix("/") {
                // An absolute target is followed from root, if it lies under root's real path at all.
                let absolute = PathRules.normalizeAbsolute(target)
                guard let inside = PathText.relative(absolute, to: realRoot) else {
                    return .escapes(.parentEscapesRoot(parent: shown, target: absolute))
                }
                rest = inside
                here = root
                names = []
            } else if PathText.climbsAbove(rest, depth: names.count) {
                let absolute = PathRules.normalizeAbsolute(([realRoot] + names + rest).joined(separator: "/"))
                return .escapes(.parentEscapesRoot(parent: shown, target: absolute))
            }
            pending.append(contentsOf: rest.reversed().map { ($0, link) })
        }
        return .folder(here)
    }

    /// The folder `names` (real folders, no symlink among them) reach from root, one held at a time.
    private func reach(_ names: [String]) -> Result<DirectoryHandle, SystemError> {
        var here = root
        for name in names {
            switch here.subdirectory(name) {
            case .success(let next): here = next
            case .failure(let failure): return .failure(failure)
            }
        }
        return .success(here)
    }
}

/// Lexical path arithmetic for symlink targets: exact only over real directories, which is all `ContainedWalk`
/// applies it to.
enum PathText {
    /// The components of `path` below `base` (both normalized absolute paths), or nil when it is not under it.
    static func relative(_ path: String, to base: String) -> [String]? {
        let pathParts = path.split(separator: "/").map(String.init)
        let baseParts = base.split(separator: "/").map(String.init)
        // Byte for byte: `String ==` would take a canonically equivalent spelling for the same folder.
        guard pathParts.count >= baseParts.count,
            zip(pathParts, baseParts).allSatisfy({ $0.utf8.elementsEqual($1.utf8) })
        else { return nil }
        return Array(pathParts.dropFirst(baseParts.count))
    }

    /// Whether `components`, walked from `depth` folders below root, go above root at some point.
    static func climbsAbove(_ components: [String], depth: Int) -> Bool {
        var level = depth
        for component in components {
            if component == ".." { level -= 1 } else if component != "." { level += 1 }
            if level < 0 { return true }
        }
        return false
    }
}
