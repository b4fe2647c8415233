import Glibc
import HaulFileSystem

/// A folder the engine may write into, held open as a sync holds its staging folders; made if it does not exist.
/// The tests' folders are their own temporary directories: one that cannot be made or opened means the machine
/// is broken, and the test stops there.
func heldOpen(_ path: String) -> DirectoryHandle {
    _ = mkdir(path, 0o700)
    switch DirectoryHandle.open(path) {
    case .success(let folder): return folder
    case .failure(let failure): preconditionFailure("cannot open the test's staging folder: \(failure)")
    }
}
