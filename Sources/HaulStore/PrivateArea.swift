import Glibc
import HaulFailures
import HaulFileSystem

/// `<root>/.haul`, haul's own folder: the run lock, the state and its journal, the key that proves which records
/// haul wrote (`OwnerKey`), temporary files (`tmp`) and resumable partial downloads (`partial`).
///
/// It is reached only through a directory descriptor opened without following symlinks, and everything in it
/// by name relative to that descriptor: a symlink planted at `.haul`, `tmp` or `partial` would otherwise send
/// haul's writes, renames and cleanup somewhere outside root. Anything there that is not what haul made (a
/// symlink, a FIFO, a directory where a file belongs) makes every command refuse the root before touching it;
/// `root` itself may be a symlink: that is the user's choice.
package final class PrivateArea: Sendable {
    /// Root as the user named it (normalized), for messages.
    package let root: String
    /// `<root>/.haul`, opened with `O_NOFOLLOW`.
    package let folder: DirectoryHandle

    package static let name = ".haul"

    private init(root: String, folder: DirectoryHandle) {
        self.root = root
        self.folder = folder
    }

    /// What lives in haul's folder, and what each must be.
    enum Member: String, CaseIterable {
        case temporary = "tmp"
        case partial = "partial"
        case state = "state"
        case lock = "lock"
        case journal = "journal"
        case key = "key"
        case settled = "settled"
        /// The last verified copy of each signed checksum list (`ListCache`).
        case lists = "lists"

        var isDirectory: Bool { self == .temporary || self == .partial || self == .settled || self == .lists }

        var role: PrivateRole {
            switch self {
            case .temporary, .partial, .settled, .lists: .folder
            case .state: .state
            case .lock: .lock
            case .journal: .journal
            case .key: .key
            }
        }
    }

    /// Opens `<root>/.haul` after checking it and everything haul keeps in it, making root and `.haul` as needed.
    package static func create(root: String) throws(PrivateAreaError) -> PrivateArea {
        guard let area = try open(root: root, creating: true) else {
            throw .system(StoreError(operation: .createDirectory, path: FileSystem.join(root, name), errno: ENOENT))
        }
        return area
    }

    /// The same without making anything: nil when there is no such folder yet (or no root).
    package static func existing(root: String) throws(PrivateAreaError) -> PrivateArea? {
        try open(root: root, creating: false)
    }

    private static func open(root: String, creating: Bool) throws(PrivateAreaError) -> PrivateArea? {
        let root = FileSystem.normalizedRoot(root)
        if creating, let code = FileSystem.makeDirectories(root, mode: 0o755) {
            throw .system(StoreError(operation: .createDirectory, path: root, errno: code))
        }
        let rootFolder: DirectoryHandle
        switch DirectoryHandle.open(root) {
        case .success(let opened): rootFolder = opened
        case .failure(let failure) where !creating && (failure.errno == ENOENT || failure.errno == ENOTDIR): return nil
        case .failure(let failure): throw .system(StoreError(operation: .open, path: root, errno: failure.errno))
        }
        let path = FileSystem.join(root, name)
        switch rootFolder.status(of: name) {
        case .success(let info):
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw .unsafe(path: path, found: describe(info, name: name, in: rootFolder), rule: .folder)
            }
        case .failure(let failure) where failure.errno == ENOENT:
            if !creating { return nil }
        case .failure(let failure):
            throw .system(StoreError(operation: .inspect, path: path, errno: failure.errno))
        }
        let folder: DirectoryHandle
        switch rootFolder.subdirectory(name, creatingWithMode: creating ? 0o700 : nil) {
        case .success(let opened): folder = opened
        case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR:
            // Swapped for something else since it was looked at: refused all the same.
            throw .unsafe(path: path, found: .noLongerADirectory, rule: .folder)
        case .failure(let failure):
            throw .system(StoreError(operation: .open, path: path, errno: failure.errno))
        }
        let area = PrivateArea(root: root, folder: folder)
        try area.checkMembers()
        return area
    }

    /// Every member that exists is of its kind.
    private func checkMembers() throws(PrivateAreaError) {
        for member in Member.allCases {
            switch folder.status(of: member.rawValue) {
            case .success(let info):
                let isDirectory = info.st_mode & S_IFMT == S_IFDIR
                let fits = member.isDirectory ? isDirectory : info.st_mode & S_IFMT == S_IFREG
                if !fits {
                    throw .unsafe(
                        path: folder.displayPath(of: member.rawValue),
                        found: Self.describe(info, name: member.rawValue, in: folder), rule: member.role)
                }
            case .failure(let failure) where failure.errno == ENOENT:
                continue
            case .failure(let failure):
                throw .system(StoreError(operation: .inspect, path: failure.path, errno: failure.errno))
            }
        }
    }

    /// A symlink with its target when it can be read ("a symlink to /elsewhere"), else the kind ("a FIFO").
    private static func describe(_ info: stat, name: String, in folder: DirectoryHandle) -> PrivateAreaError.Found {
        let kind = FileKind(info)
        guard kind == .symlink, let target = folder.linkTarget(name) else { return .kind(kind) }
        return .symlink(to: target)
    }

    /// `tmp` or `partial`, made (0700) if missing, and closed to others if found open: temporary files carry
    /// their final mode before they are verified, so nobody else may reach them meanwhile.
    func privateFolder(_ member: Member) throws(StoreError) -> DirectoryHandle {
        let path = folder.displayPath(of: member.rawValue)
        let opened: DirectoryHandle
        switch folder.subdirectory(member.rawValue, creatingWithMode: 0o700) {
        case .success(let handle): opened = handle
        case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR:
            throw StoreError(
                operation: .use, path: path, errno: failure.errno, problem: .privateMemberNotReal(member.role))
        case .failure(let failure):
            throw StoreError(operation: .createDirectory, path: path, errno: failure.errno)
        }
        var info = stat()
        if fstat(opened.descriptor, &info) == 0, info.st_mode & 0o077 != 0, let failure = opened.setOwnMode(0o700) {
            throw StoreError(operation: .makePrivate, path: path, errno: failure.errno)
        }
        return opened
    }

    /// `.haul` itself closed to others, as `privateFolder` does for its members.
    func makePrivate() throws(StoreError) {
        var info = stat()
        if fstat(folder.descriptor, &info) == 0, info.st_mode & 0o077 != 0, let failure = folder.setOwnMode(0o700) {
            throw StoreError(operation: .makePrivate, path: folder.path, errno: failure.errno)
        }
    }
}

/// Why haul will not use a root's private folder.
package enum PrivateAreaError: Error, Sendable {
    /// Something in haul's folder is not what haul made there (`found`, where `rule` wants a real directory or a
    /// regular file): the root is refused before anything is touched.
    case unsafe(path: String, found: Found, rule: PrivateRole)
    /// A system call failed (permission, I/O).
    case system(StoreError)

    package enum Found: Sendable, Equatable {
        case kind(FileKind)
        case symlink(to: String)
        /// Swapped for something else since it was looked at.
        case noLongerADirectory
    }
}
