import Glibc
import HaulFailures
import HaulFileSystem

/// A file's identity as the kernel reports it. If all of it is unchanged, the content is the content haul saw:
/// writing a file changes its mtime and ctime, and ctime cannot be set back from user space. (Unless the
/// write falls in the same tick of the file system's clock as the identity was taken: see
/// `FileIdentity.isOlder(than:)`.)
package struct FileIdentity: Sendable, Hashable {
    package var device: UInt64
    package var inode: UInt64
    package var size: Int64
    package var modified: FileTime
    package var changed: FileTime

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = FileTime(info.st_mtim)
        changed = FileTime(info.st_ctim)
    }

    init(device: UInt64, inode: UInt64, size: Int64, modified: FileTime, changed: FileTime) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modified = modified
        self.changed = changed
    }

    /// The identity of the file at `path` (not following a final symlink), nil if there is none.
    package static func of(path: String) -> FileIdentity? {
        guard case .success(let info) = FileSystem.linkStatus(path), FileKind(mode: info.st_mode) == .regular else {
            return nil
        }
        return FileIdentity(info)
    }

    /// Whether both of the file's times are strictly before `moment` (a time taken from the same file system).
    ///
    /// A file whose mtime or ctime is not older than the moment its identity was recorded may have been written
    /// again within the same tick of the file system's clock (a second on ext3, FAT, NFS and many FUSE mounts;
    /// a jiffy elsewhere), and then its identity does not show the change: git's "racily clean" entries. Only
    /// an identity older than the moment it was recorded proves the content unchanged.
    package func isOlder(than moment: FileTime) -> Bool {
        modified < moment && changed < moment
    }
}

/// A time as a file system keeps it: seconds and nanoseconds since the epoch, compared as a pair. Any time a
/// file can carry fits, however far from 1970 (a tar archive's bogus date included): nothing here multiplies
/// them into one 64-bit count of nanoseconds, which overflows past the year 2262.
package struct FileTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    package var seconds: Int64
    /// 0 ..< 1,000,000,000, as in `timespec` (a time before 1970 has negative seconds and positive nanoseconds).
    package var nanoseconds: Int32

    package init(seconds: Int64, nanoseconds: Int32) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    init(_ time: timespec) {
        seconds = Int64(time.tv_sec)
        nanoseconds = Int32(truncatingIfNeeded: time.tv_nsec)
    }

    /// From a count of nanoseconds since the epoch (the state file's earlier format).
    init(nanosecondsSinceEpoch value: Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: 1_000_000_000)
        if remainder < 0 {
            self.init(seconds: quotient - 1, nanoseconds: Int32(remainder + 1_000_000_000))
        } else {
            self.init(seconds: quotient, nanoseconds: Int32(remainder))
        }
    }

    /// The wall clock now (what a file written now would carry, give or take the file system's tick).
    package static var now: FileTime {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return FileTime(time)
    }

    package static func < (a: FileTime, b: FileTime) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }

    /// `seconds.nanoseconds`, nine digits after the point: what the state file stores.
    package var description: String {
        let fraction = String(nanoseconds)
        return "\(seconds)." + String(repeating: "0", count: max(0, 9 - fraction.count)) + fraction
    }
}
