import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// One node under a folder, as `lstat` saw it: what the no-op compares with the state's records of a tree.
package struct TreeNode: Sendable, Equatable {
    /// Relative to the folder walked, `/`-separated.
    package var path: String
    package var kind: Kind

    package enum Kind: Sendable, Equatable {
        case file(FileIdentity)
        case folder(FileIdentity)
        /// `identity`: the symlink's own (lstat), which the state records for a symlink haul unpacked.
        case symlink(target: String, identity: FileIdentity)
        /// A FIFO, a socket, a device: nothing a tree holds.
        case other
    }

    package init(path: String, kind: Kind) {
        self.path = path
        self.kind = kind
    }
}

/// Every node under a folder, at the cost of `find DIR -printf '%s %T@'`: one `openat` per folder (no-follow), its
/// listing, and one `fstatat` (no-follow) per entry. No file is opened and no symlink followed: a symlink where a
/// folder was is listed as the symlink it is.
package enum TreeWalk {
    /// The nodes under `folder` (not the folder itself), sorted by the bytes of their paths; `path` names the
    /// folder in messages. A node removed during the walk is left out; a folder that cannot be read, or that
    /// was replaced between its `lstat` and its opening, fails the walk, naming it.
    package static func nodes(under folder: DirectoryHandle, shownAs path: String) -> Result<[TreeNode], StoreError> {
        var nodes: [TreeNode] = []
        if let failure = visit(folder, relative: "", shownAs: path, into: &nodes) { return .failure(failure) }
        // Each folder's names are listed in byte order already; a path's own order differs only where a name
        // sorts below "/" (`a.b` before `a/b`), so the sort mostly meets runs already in order.
        nodes.sort { $0.path.bytesPrecede($1.path) }
        return .success(nodes)
    }

    private static func visit(
        _ folder: DirectoryHandle, relative: String, shownAs shown: String,
        into nodes: inout [TreeNode]
    ) -> StoreError? {
        let names: [String]
        switch TreeFolder.sortedNames(in: folder, shownAs: shown) {
        case .success(let listed): names = listed
        case .failure(let failure): return failure
        }
        for name in names {
            let path = relative.isEmpty ? name : relative + "/" + name
            let info: stat
            switch folder.status(of: name) {
            case .success(let found): info = found
            case .failure(let failure) where failure.errno == ENOENT: continue
            case .failure(let failure):
                return StoreError(operation: .inspect, path: TreeFolder.join(shown, name), errno: failure.errno)
            }
            switch FileKind(info) {
            case .regular:
                nodes.append(TreeNode(path: path, kind: .file(FileIdentity(info))))
            case .symlink:
                switch TreeFolder.linkTarget(name, in: folder, shownAs: TreeFolder.join(shown, name)) {
                case .success(let target):
                    nodes.append(TreeNode(path: path, kind: .symlink(target: target, identity: FileIdentity(info))))
                case .failure(let failure): return failure
                }
            case .directory:
                nodes.append(TreeNode(path: path, kind: .folder(FileIdentity(info))))
                let shownPath = TreeFolder.join(shown, name)
                switch TreeFolder.open(name, in: folder, seen: info, shownAs: shownPath) {
                case .success(let child):
                    if let failure = visit(child, relative: path, shownAs: shownPath, into: &nodes) { return failure }
                case .failure(let failure):
                    return failure
                }
            default:
                nodes.append(TreeNode(path: path, kind: .other))
            }
        }
        return nil
    }
}

/// What the tree walk and the tree digest read of a folder, through its descriptor: its names and its symlinks'
/// targets as text, and its subfolders. A name or a target that is not UTF-8 fails, naming it: a tree's paths
/// become the state's keys, which are text.
enum TreeFolder {
    /// The names in `folder` but `.` and `..`, sorted by their bytes (as Nix sorts a directory's entries).
    static func sortedNames(in folder: DirectoryHandle, shownAs path: String) -> Result<[String], StoreError> {
        var names: [String] = []
        var undecodable: String?
        let failure = folder.forEachName { bytes in
            if let name = String(validating: bytes, as: UTF8.self) {
                names.append(name)
            } else if undecodable == nil {
                undecodable = String(decoding: bytes, as: UTF8.self)
            }
        }
        if let failure { return .failure(StoreError(operation: .readFolder, path: path, errno: failure.errno)) }
        if let undecodable {
            return .failure(
                StoreError(operation: .read, path: join(path, undecodable), errno: EILSEQ, problem: .nameNotUTF8))
        }
        names.sort { $0.bytesPrecede($1) }
        return .success(names)
    }

    /// The target of the symlink `name`, exactly as it is written.
    static func linkTarget(
        _ name: String, in folder: DirectoryHandle, shownAs path: String
    ) -> Result<String, StoreError> {
        switch folder.linkTargetBytes(name) {
        case .success(let bytes):
            guard let target = String(validating: bytes, as: UTF8.self) else {
                return .failure(
                    StoreError(operation: .readSymlink, path: path, errno: EILSEQ, problem: .targetNotUTF8))
            }
            return .success(target)
        case .failure(let failure):
            return .failure(StoreError(operation: .readSymlink, path: path, errno: failure.errno))
        }
    }

    /// Opens the folder `name`, which `lstat` showed as `seen`: never through a symlink, and only if it is still
    /// that folder (the same device and inode), so that one folder's identity never goes with another's names.
    static func open(
        _ name: String, in folder: DirectoryHandle, seen: stat, shownAs path: String
    )
        -> Result<DirectoryHandle, StoreError>
    {
        let replaced = StoreError(operation: .readFolder, path: path, errno: 0, problem: .replacedWhileTreeRead)
        let child: DirectoryHandle
        switch folder.subdirectory(name) {
        case .success(let opened): child = opened
        case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR || failure.errno == ENOENT:
            return .failure(replaced)
        case .failure(let failure):
            return .failure(StoreError(operation: .readFolder, path: path, errno: failure.errno))
        }
        var opened = stat()
        guard fstat(child.descriptor, &opened) == 0 else {
            return .failure(StoreError(operation: .inspect, path: path, errno: errno))
        }
        guard opened.st_dev == seen.st_dev, opened.st_ino == seen.st_ino else { return .failure(replaced) }
        return .success(child)
    }

    /// `name` in the folder shown as `folder`.
    static func join(_ folder: String, _ name: String) -> String {
        folder.isEmpty ? name : FileSystem.join(folder, name)
    }
}

/// What is at an `extract` entry's destination, reached from root as a commit reaches it (never through a symlink
/// leading outside root), and, when it is a folder, its walk.
package enum TreeLook: Sendable {
    case missing
    /// Something that is not a folder is where the tree belongs.
    case notAFolder(FileKind)
    /// The destination cannot be reached or read safely (a parent leading outside root, EACCES, a folder
    /// replaced while it was read).
    case inaccessible(StoreError)
    case folder([TreeNode])
}

extension TreeWalk {
    /// `destination` under `root`: the folder's nodes, or why there are none.
    package static func look(at destination: DestinationPath, root: String) -> TreeLook {
        var walk: ContainedWalk
        switch ContainedWalk.start(root: FileSystem.normalizedRoot(root)) {
        case .success(let started): walk = started
        case .failure(let failure): return .inaccessible(failure)
        }
        let parent: DirectoryHandle
        switch walk.folder(destination.parent, create: false) {
        case .folder(let reached): parent = reached
        case .missing: return .missing
        case .escapes(let problem):
            return .inaccessible(
                StoreError(operation: .inspect, path: destination.description, errno: 0, problem: problem))
        case .blocked(let code, let problem):
            return .inaccessible(
                StoreError(operation: .inspect, path: destination.description, errno: code, problem: problem))
        case .failed(let failure):
            return .inaccessible(failure)
        }
        switch parent.status(of: destination.fileName) {
        case .failure(let failure) where failure.errno == ENOENT:
            return .missing
        case .failure(let failure):
            return .inaccessible(StoreError(operation: .inspect, path: destination.description, errno: failure.errno))
        case .success(let info) where FileKind(mode: info.st_mode) != .directory:
            return .notAFolder(FileKind(info))
        case .success:
            break
        }
        switch parent.subdirectory(destination.fileName) {
        case .success(let folder):
            switch nodes(under: folder, shownAs: destination.description) {
            case .success(let nodes): return .folder(nodes)
            case .failure(let failure): return .inaccessible(failure)
            }
        case .failure(let failure):
            return .inaccessible(StoreError(operation: .inspect, path: destination.description, errno: failure.errno))
        }
    }
}
