import Glibc
import HaulFileSystem
import HaulManifest

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
    private static let recentLimit = 16
    /// Symlinks followed in one walk before it is called a loop (the kernel's own limit).
    private static let maximumHops = 40

    /// Opens root (following symlinks: where root is is the user's choice).
    static func start(root: String) -> Result<ContainedWalk, StoreError> {
        let handle: DirectoryHandle
        switch DirectoryHandle.open(root) {
        case .success(let opened): handle = opened
        case .failure(let failure): return .failure(StoreError(operation: "open", path: root, errno: failure.errno))
        }
        switch FileSystem.realPath(root) {
        case .success(let real): return .success(ContainedWalk(root: handle, realRoot: real))
        case .failure(let code): return .failure(StoreError(operation: "resolve root", path: root, errno: code))
        }
    }

    init(root: DirectoryHandle, realRoot: String) {
        self.root = root
        self.realRoot = realRoot
    }

    /// Where a destination's folder stands.
    enum Reach {
        case folder(DirectoryHandle)
        /// Some component does not exist (only when not creating).
        case missing
        /// A symlink component leads outside root; the message names it.
        case escapes(String)
        /// A component cannot serve as a folder (a file, a dangling symlink, a loop); `reason` names it.
        case blocked(errno: Int32, reason: String)
        case failed(StoreError)
    }

    /// The folder `components` name under root; with `create`, missing ones are made (0755, narrowed by the
    /// umask as `mkdir -p` does). Components reached through a symlink are never created: a dangling link blocks.
    mutating func folder(_ components: ArraySlice<String>, create: Bool) -> Reach {
        if components.isEmpty { return .folder(root) }
        let key = DestinationKey(components.joined(separator: "/"))
        if let known = recent[key] { return .folder(known) }
        var reach = walk(components, create: create)
        if case .failed(let failure) = reach, failure.errno == EMFILE || failure.errno == ENFILE, !recent.isEmpty {
            // Out of descriptors: the folders held for later are worth less than this one.
            recent.removeAll()
            reach = walk(components, create: create)
        }
        if case .folder(let handle) = reach {
            if recent.count >= Self.recentLimit { recent.removeAll(keepingCapacity: true) }
            recent[key] = handle
        }
        return reach
    }

    /// Forgets the folders reached: the next walk looks again (after a failure that suggests the tree changed).
    mutating func forget() { recent.removeAll(keepingCapacity: true) }

    private func walk(_ components: ArraySlice<String>, create: Bool) -> Reach {
        /// Components still to walk, last first; `fromLink` names the link whose target they came from.
        var pending: [(name: String, fromLink: String?)] = components.reversed().map { ($0, nil) }
        var position: [DirectoryHandle] = [root]
        /// Real names below root of the folders in `position`.
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
                    return .escapes("parent \"\(shown)\" is a symlink to \(fromLink ?? ".."), outside root")
                }
                names.removeLast()
                position.removeLast()
                continue
            }
            guard let here = position.last else { return .failed(StoreError(operation: "walk to", path: shown, errno: EINVAL)) }
            switch here.subdirectory(name, creatingWithMode: create && fromLink == nil ? 0o755 : nil) {
            case .success(let next):
                position.append(next)
                names.append(name)
                continue
            case .failure(let failure) where failure.errno == ENOENT:
                if let fromLink {
                    return .blocked(errno: ENOENT, reason: "parent \"\(shown)\" is a symlink to \(fromLink), which does not exist")
                }
                return .missing
            case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR:
                break  // a symlink, or not a folder at all: looked at below
            case .failure(let failure):
                return .failed(StoreError(operation: create ? "create directory" : "inspect", path: shown, errno: failure.errno))
            }
            guard case .success(let info) = here.status(of: name), info.st_mode & S_IFMT == S_IFLNK,
                  let target = here.linkTarget(name) else {
                return .blocked(errno: ENOTDIR, reason: "parent \"\(shown)\" is not a directory")
            }
            hops += 1
            guard hops <= Self.maximumHops else {
                return .blocked(errno: ELOOP, reason: "parent \"\(shown)\" is a symlink loop")
            }
            let link = fromLink ?? target
            var rest = target.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            if target.hasPrefix("/") {
                // An absolute target is followed from root, if it lies under root's real path at all.
                let absolute = PathRules.normalizeAbsolute(target)
                guard let inside = PathText.relative(absolute, to: realRoot) else {
                    return .escapes("parent \"\(shown)\" is a symlink to \(absolute), outside root")
                }
                rest = inside
                position = [root]
                names = []
            } else if PathText.climbsAbove(rest, depth: names.count) {
                let absolute = PathRules.normalizeAbsolute(([realRoot] + names + rest).joined(separator: "/"))
                return .escapes("parent \"\(shown)\" is a symlink to \(absolute), outside root")
            }
            pending.append(contentsOf: rest.reversed().map { ($0, link) })
        }
        return position.last.map(Reach.folder) ?? .folder(root)
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
              zip(pathParts, baseParts).allSatisfy({ $0.utf8.elementsEqual($1.utf8) }) else { return nil }
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
