import Glibc
import HaulThreads

/// The clock a file system stamps files with, read from a file of its own.
///
/// A record is trusted only when the file's times are older than the state that holds it (see
/// `FileIdentity.isOlder(than:)`). A file haul renamed into place a moment before saving carries a ctime from the
/// same tick of the file system's clock as the state (a few milliseconds on ext4 and tmpfs, a whole second on FAT,
/// ext3, NFS and many FUSE mounts), so without waiting the next run could not trust what this run just wrote and
/// would hash it again: on every `plan`, which saves nothing. git leaves such racy entries to the next run; haul
/// waits the tick out while it still holds the lock, and only when a record needs it.
package enum FileSystemClock {
    /// The longest haul waits: a whole-second clock needs up to one second. A record newer than that is dated in
    /// the future (a tar archive's bogus date, a server's clock) and cannot be outwaited: it stays untrusted, and
    /// its file is hashed on each run, as before.
    static let longestWait = FileTime(seconds: 2, nanoseconds: 0)

    /// Makes `descriptor`'s mtime later than `time`, by writing its last byte again until the file system's clock
    /// has moved past `time`. The content is unchanged. Returns false, having changed nothing more, when `time` is
    /// further ahead than `longestWait` or the file cannot be written or inspected; the records are then untrusted
    /// by the next run, never wrongly trusted.
    @discardableResult
    package static func stamp(_ descriptor: Int32, laterThan time: FileTime) -> Bool {
        guard var stamped = modified(descriptor) else { return false }
        guard !(time < stamped) else { return true }
        guard time < stamped.adding(longestWait) else { return false }
        var lastByte: UInt8 = 0
        let size = lseek(descriptor, 0, SEEK_END)
        guard size > 0, pread(descriptor, &lastByte, 1, size - 1) == 1 else { return false }
        // Short sleeps first (a nanosecond file system's tick is a few milliseconds), then 50 ms steps: a
        // whole-second clock is outwaited within 50 ms of its turn.
        // Counted in time slept, not read from the wall clock, which may be set back meanwhile.
        var pause = 0.001, slept = 0.0
        while !(time < stamped) {
            guard slept < Double(longestWait.seconds) else { return false }
            sleepThread(seconds: pause)
            slept += pause
            pause = min(pause * 2, 0.05)
            guard pwrite(descriptor, &lastByte, 1, size - 1) == 1, let now = modified(descriptor) else { return false }
            stamped = now
        }
        return true
    }

    private static func modified(_ descriptor: Int32) -> FileTime? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? FileTime(info.st_mtim) : nil
    }
}

extension FileTime {
    func adding(_ other: FileTime) -> FileTime {
        let nanoseconds = Int64(self.nanoseconds) + Int64(other.nanoseconds)
        let (sum, overflow) = seconds.addingReportingOverflow(other.seconds + nanoseconds / 1_000_000_000)
        return overflow
            ? FileTime(seconds: .max, nanoseconds: 999_999_999)
            : FileTime(seconds: sum, nanoseconds: Int32(nanoseconds % 1_000_000_000))
    }
}

extension FileIdentity {
    /// The later of the file's two times: what the moment that vouches for it must be later than.
    var newestTime: FileTime { max(modified, changed) }
}
