import Glibc

/// The clock the kernel stamps files with (`CLOCK_REALTIME_COARSE`: a write's mtime and ctime are read from it). A
/// test that needs something written later to carry a later time than what was written before (the racy-clean
/// rule, an edit of the same size) waits for this clock to tick instead of sleeping a guess.
public enum FileClock {
    public static var now: timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &time)
        return time
    }

    /// Returns once the clock reads later than it did at the call: everything stamped before the call is then
    /// older than anything stamped after the return (a few milliseconds: one tick of the kernel's clock).
    public static func waitForATick() {
        let start = now
        while true {
            let current = now
            if current.tv_sec > start.tv_sec || (current.tv_sec == start.tv_sec && current.tv_nsec > start.tv_nsec) {
                return
            }
            usleep(500)
        }
    }

    /// The same for a file system that keeps whole seconds (FAT, many FUSE mounts): returns once the clock's second
    /// is later than at the call, so that everything stamped before the call is older, in whole seconds, than
    /// anything stamped after the return.
    public static func waitForANewSecond() {
        let start = now.tv_sec
        while now.tv_sec == start { usleep(5_000) }
    }
}
