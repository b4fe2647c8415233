import Glibc
import HaulFailures
import HaulFileSystem

/// A file the engine writes, by its name in a staging folder held open: every operation on it is relative to
/// the folder's descriptor, so a staging folder swapped for a symlink while a run goes on can never send a
/// write, a rename or a deletion anywhere else.
struct StagedFile: Sendable {
    let folder: DirectoryHandle
    let name: String

    /// For messages.
    var path: String { folder.displayPath(of: name) }

    /// `open(2)`, never through a symlink.
    func open(_ flags: Int32, mode: mode_t = 0o600) -> Result<Int32, SystemError> {
        folder.openFile(name, flags: flags, mode: mode)
    }

    /// Removes it; a name already gone is not an error.
    func remove() { folder.remove(name) }

    /// Moves it to `newName` in `target`.
    func move(to newName: String, in target: DirectoryHandle) -> Result<StagedFile, SystemError> {
        if let failure = folder.rename(name, to: newName, in: target) { return .failure(failure) }
        return .success(StagedFile(folder: target, name: newName))
    }
}
