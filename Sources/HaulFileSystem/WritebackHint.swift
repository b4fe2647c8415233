import CLinuxShims
import Glibc

/// Starts the kernel writing a file's pages to disk while the file is still being written, a step behind its
/// writer (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: it queues the writes and returns without waiting for them).
///
/// Why: a durable commit flushes each file before its rename. Left to itself the kernel holds a large download's
/// pages dirty until that flush, so the disk idles while the bytes arrive and then the run waits for all of them
/// at once: the two costs add up. Started a step behind the writer, the disk works while the network does, and
/// the flush before the rename finds at most a step left to write. Asking costs nothing where there is no disk
/// (tmpfs returns at once) and is only a hint: a file system that refuses it is flushed at the commit as before.
package struct WritebackHint {
    /// Bytes between two requests: enough for one request to keep a disk busy, little enough that the flush at
    /// the commit is short.
    package static let step: Int64 = 8 << 20

    /// Writeback has been asked for the file's bytes before this offset.
    private var requestedUpTo: Int64 = 0

    package init() {}

    /// The file's bytes before `end` are written: asks for writeback of those not yet asked for, once a whole
    /// step of them has accumulated. `descriptor` may be open for reading only.
    package mutating func written(upTo end: Int64, of descriptor: Int32) {
        guard end - requestedUpTo >= Self.step else { return }
        _ = sync_file_range(
            descriptor, __off64_t(requestedUpTo), __off64_t(end - requestedUpTo), haul_SYNC_FILE_RANGE_WRITE)
        requestedUpTo = end
    }
}
