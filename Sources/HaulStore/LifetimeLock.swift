import Glibc
import HaulFileSystem

/// "The process that made this is still running", said by a file itself: an open-file-description write lock on
/// the whole file, taken by its maker right after creating it and released by the kernel when the maker closes it
/// or dies, however it dies (SIGKILL included). It marks what `haul add` keeps outside any root, where no run lock
/// covers it: its scratch folders under `$TMPDIR` (through a `lock` file inside) and the temporary file it writes
/// beside a manifest. A later `add` that can take the lock knows the maker is gone and removes the litter; one
/// that cannot leaves the file alone, however old it is, so a second `add` running at the same time is never
/// robbed of its files. A lock rather than a pid in the name: a pid is reused, and is another number in another
/// pid namespace sharing the folder.
///
/// The maker creates the file, then locks it, then checks the file is still linked: between the two a sweeper may
/// have locked and removed it (it found no lock yet), and the maker then starts again with a new name.
package final class LifetimeLock: Sendable {
    /// The locked file, open for writing.
    let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }  // the lock goes with the descriptor

    /// Takes the lock on a file this process has just created (`descriptor`, open for writing, which the lock
    /// now owns); nil when a sweeper removed the file first (the descriptor is then closed): make another.
    static func claim(_ descriptor: Int32) -> LifetimeLock? {
        var info = stat()
        guard RunLock.lock(descriptor, wholeFile, exclusive: true, wait: false) == nil,
            fstat(descriptor, &info) == 0, info.st_nlink > 0
        else {
            close(descriptor)
            return nil
        }
        return LifetimeLock(descriptor: descriptor)
    }

    /// Runs `remove` if the regular file `name` in `folder` is abandoned (it exists, is owned by this user when
    /// `ownedByUs`, and nobody holds its lock), while holding its lock so that nobody can claim it meanwhile.
    /// True when `remove` ran.
    @discardableResult
    static func whenAbandoned(
        _ name: String, in folder: DirectoryHandle, ownedByUs: Bool = false, remove: () -> Void
    ) -> Bool {
        guard case .success(let descriptor) = folder.openFile(name, flags: O_RDWR | O_NONBLOCK) else { return false }
        defer { close(descriptor) }
        var opened = stat()
        guard fstat(descriptor, &opened) == 0, opened.st_mode & S_IFMT == S_IFREG,
            !ownedByUs || opened.st_uid == geteuid(),
            RunLock.lock(descriptor, wholeFile, exclusive: true, wait: false) == nil,
            // Still the file under that name: only then is what `remove` deletes the abandoned one.
            case .success(let named) = folder.status(of: name), named.st_dev == opened.st_dev,
            named.st_ino == opened.st_ino
        else { return false }
        remove()
        return true
    }

    /// From the first byte to any size the file may reach.
    private static let wholeFile: Range<Int64> = 0..<Int64.max
}
