import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// An archive's members, unpacked and verified in a folder of the staging area, that replace a destination folder
/// whole. The `Committer` puts it in place in the same passes as a batch's files, with the same guarantees:
///
/// 1. **Prepare** (nothing visible changes): the destination's parent is reached (made as needed) inside root; the
///    destination must be a folder or missing (anything else fails the request, untouched). Each `carried` file of
///    the old tree is hard-linked (`linkat`), or re-made (a symlink, a folder on the way), into the staged tree by
///    descriptor-relative, no-follow calls; one that cannot be (the new tree has that name, a link fails) fails the
///    request. The old tree keeps every link it had.
/// 2. **Journal**: the members' ownership, in the batch's append, before any rename.
/// 3. **Flush** (`full`): the batch's `syncfs` writes the staged tree's files and folders (carried links included)
///    to disk with the batch's files.
/// 4. **Switch**: `renameat2(RENAME_EXCHANGE)` of the staged folder with the destination folder (`RENAME_NOREPLACE`
///    when there is none); then the parent folder is synced (`full`). The old tree is now in the staging area under
///    the staged folder's name.
/// 5. **Clean**: the old tree is removed (`TreeRemoval`: descriptor-relative, never through a symlink), once the
///    parent's sync succeeded or failed (the rename happened either way; a failed sync makes it `notDurable`).
///
/// A kill at any system call leaves the destination old or new, never a mix, and loses none of the user's files:
/// - during 1, only the staging area changes (links and folders inside the staged tree; `mkdirat` of missing
///   parents, as for files); the destination is the old tree, whole, and the user's files are still linked in it;
/// - during 2 and 3, only `.haul/journal` changes; the next run reads the journal and hashes what it names, which
///   is still the old content;
/// - the exchange is one system call: before it, the destination is the old tree; after it, the new one, and both
///   trees hold the user's carried files;
/// - after it (the sync, the removal), the destination is the new tree; the old tree, whole or half removed, lies in
///   the staging area under a tree folder's name, which the next run's sweep removes (`isLeftover`), as it does a
///   staged tree a kill left before its exchange.
///
/// Where the file system does not take `RENAME_EXCHANGE` (`EINVAL`: FUSE file systems built on libfuse 2, some NFS),
/// the switch is two renames: the old tree into the staging area (`<folder>.aside`), then the new tree into its
/// place. A kill between the two leaves the destination missing (never a mix) until the next run fetches it again;
/// the old tree and the staged tree are then leftovers its sweep removes, and with them the user's carried files,
/// which were in no other place. Without `RENAME_NOREPLACE` too (`EINVAL`), a tree goes where nothing was by a plain
/// rename, which could replace at most an empty folder made there in the instant since it was found missing.
package struct StagedTree: Sendable {
    /// A folder in the committer's staging folder.
    package var folderName: String
    /// What the journal records for the tree: each member file's destination (under the tree's destination) and
    /// ownership.
    package var members: [(destination: DestinationPath, ownership: Ownership)]
    /// Files the user put in the old tree (paths relative to it): carried into the new one. A path that is gone from
    /// the old tree by the time of the commit is skipped (there is nothing left to keep); a folder carried where the
    /// new tree has a folder is that folder (nothing in it is lost: its files are carried by their own paths).
    package var carried: [String]

    package init(
        folderName: String, members: [(destination: DestinationPath, ownership: Ownership)], carried: [String] = []
    ) {
        self.folderName = folderName
        self.members = members
        self.carried = carried
    }
}

extension StagedTree {
    static let folderSuffix = ".tree"
    /// An old tree set aside by the two-rename switch.
    static let asideSuffix = ".aside"

    /// The folder a download's tree is staged in, named after the download's staging file: `<stem>.tree` for
    /// `<stem>.part`, so that the sweep knows it by the same grammar (`isLeftover`).
    package static func folderName(forTemporaryName name: String) -> String {
        let bytes = Array(name.utf8)[...]
        return String(decoding: withoutSuffix(".part", bytes) ?? bytes, as: UTF8.self) + folderSuffix
    }

    static func asideName(of folderName: String) -> String { folderName + asideSuffix }

    /// Whether `name` in a staging folder is a tree a killed run left there (staged, old, or set aside): `<stem>.tree`
    /// or `<stem>.tree.aside`, where `<stem>.part` is one of the staging names `isOwnName` accepts. By bytes.
    package static func isLeftover(_ name: String, isOwnName: (String) -> Bool) -> Bool {
        let bytes = Array(name.utf8)[...]
        guard let stem = withoutSuffix(folderSuffix, withoutSuffix(asideSuffix, bytes) ?? bytes) else { return false }
        return isOwnName(String(decoding: stem, as: UTF8.self) + ".part")
    }

    /// `bytes` without `suffix`, when they end in it after something else.
    private static func withoutSuffix(_ suffix: String, _ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        let tail = Array(suffix.utf8)
        guard bytes.count > tail.count, bytes.suffix(tail.count).elementsEqual(tail) else { return nil }
        return bytes.dropLast(tail.count)
    }
}

/// Links a user's file of the old tree into the staged tree, at the same path (see `StagedTree.carried`).
enum CarriedFile {
    /// nil when `path` is in the new tree (or no longer in the old one); else why it cannot be, the old tree untouched.
    /// `shown`: the path as messages name it (under the tree's destination).
    static func carry(
        _ path: String, from old: DirectoryHandle, into new: DirectoryHandle, shown: String
    ) -> StoreError? {
        let components = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        guard components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
            return StoreError(operation: .carryIntoNewTree, path: shown, errno: EINVAL, problem: .notInsideTree)
        }
        var from = old
        var into = new
        for (depth, name) in components.dropLast().enumerated() {
            let folder = components[...depth].joined(separator: "/")
            switch from.subdirectory(name) {
            case .success(let next): from = next
            case .failure(let failure) where failure.errno == ENOENT: return nil
            case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR:
                return StoreError(
                    operation: .carryIntoNewTree, path: shown, errno: failure.errno,
                    problem: .oldTreeFolderReplaced(folder))
            case .failure(let failure):
                return StoreError(operation: .carryIntoNewTree, path: shown, errno: failure.errno)
            }
            var info = stat()
            let mode = fstat(from.descriptor, &info) == 0 ? info.st_mode & 0o777 : 0o755
            switch into.subdirectory(name, creatingWithMode: mode) {
            case .success(let next): into = next
            case .failure(let failure) where failure.errno == ELOOP || failure.errno == ENOTDIR:
                return StoreError(
                    operation: .carryIntoNewTree, path: shown, errno: failure.errno, problem: .newTreeHasFile(folder))
            case .failure(let failure):
                return StoreError(operation: .carryIntoNewTree, path: shown, errno: failure.errno)
            }
        }
        let name = components[components.count - 1]
        let info: stat
        switch from.status(of: name) {
        case .success(let found): info = found
        case .failure(let failure) where failure.errno == ENOENT: return nil
        case .failure(let failure):
            return StoreError(operation: .carryIntoNewTree, path: shown, errno: failure.errno)
        }
        let failed: SystemError?
        switch info.st_mode & S_IFMT {
        case S_IFDIR: failed = into.subdirectory(name, creatingWithMode: info.st_mode & 0o777).failure
        case S_IFLNK: failed = from.copySymlink(name, as: name, in: into)
        default: failed = from.link(name, as: name, in: into)
        }
        guard let failed else { return nil }
        if failed.errno == EEXIST
            || (info.st_mode & S_IFMT == S_IFDIR && (failed.errno == ELOOP || failed.errno == ENOTDIR))
        {
            return StoreError(
                operation: .carryIntoNewTree, path: shown, errno: failed.errno, problem: .newTreeHasMember)
        }
        return StoreError(operation: .carryIntoNewTree, path: shown, errno: failed.errno)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
