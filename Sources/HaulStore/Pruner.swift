import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Deletes destinations a manifest no longer lists. The planner has already decided that each one is still
/// exactly what haul wrote; the pruner checks, right before unlinking, that the file is still the one that was
/// observed (same identity), so a file the user touched in the meantime survives. Folders are reached by
/// descriptor from root (`ContainedWalk`), so nothing outside root can be deleted, whatever changed meanwhile.
package struct Pruner: Sendable {
    package let root: String

    package init(root: String) {
        self.root = FileSystem.normalizedRoot(root)
    }

    /// Removes `destination` if its identity is still `expected`, then every parent directory this leaves empty,
    /// up to (not including) root. A directory with anything in it stays: rmdir(2) only removes empty ones.
    package func delete(_ destination: DestinationPath, expected: FileIdentity) -> Result<Void, StoreError> {
        var walk: ContainedWalk
        switch ContainedWalk.start(root: root) {
        case .success(let started): walk = started
        case .failure(let failure): return .failure(failure)
        }
        guard case .folder(let folder) = walk.folder(destination.parent, create: false) else {
            return .failure(
                StoreError(operation: .delete, path: destination.description, errno: 0, problem: .parentChanged))
        }
        // A symlink is deleted only as a tree's member, which the planner judged by its target.
        guard case .success(let info) = folder.status(of: destination.fileName),
            info.st_mode & S_IFMT == S_IFREG || info.st_mode & S_IFMT == S_IFLNK,
            FileIdentity(info) == expected
        else {
            return .failure(
                StoreError(operation: .delete, path: destination.description, errno: 0, problem: .changedSinceObserved))
        }
        if let failure = folder.remove(destination.fileName) {
            return .failure(StoreError(operation: .delete, path: destination.description, errno: failure.errno))
        }
        for emptied in destination.ancestors where emptied.firstComponent != PrivateArea.name {
            guard case .folder(let parent) = walk.folder(emptied.parent, create: false),
                parent.removeEmptyDirectory(emptied.fileName) == nil
            else { break }
        }
        if let failure = folder.synchronize(), failure.errno != ENOENT {
            return .failure(
                StoreError(operation: .syncDirectoryOf, path: destination.description, errno: failure.errno))
        }
        return .success(())
    }
}
