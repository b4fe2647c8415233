import CPageCacheProbe
import Glibc

/// What the page cache holds of one file (cachestat(2)): whether bytes a process wrote are still dirty in memory or
/// already being written, or written, to disk. In pages.
public struct PageCacheStatus: Sendable, Equatable, CustomStringConvertible {
    public var cached: UInt64
    public var dirty: UInt64
    public var writeback: UInt64

    public static let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))

    public var dirtyBytes: UInt64 { dirty * Self.pageSize }
    public var cachedBytes: UInt64 { cached * Self.pageSize }

    public var description: String {
        "\(cachedBytes >> 20) MiB cached, \(dirtyBytes >> 20) MiB dirty, \((writeback * Self.pageSize) >> 20) MiB being written"
    }
}

/// Watches one file's pages through a descriptor held open until the watch is dropped: on ext4, closing a file
/// that was truncated to zero starts its writeback (`auto_da_alloc`), so a probe that opened and closed the file at
/// each look would cause what it is looking for.
public final class PageCacheWatch {
    private let descriptor: Int32

    /// Nil when the file cannot be opened or the kernel has no cachestat(2) (before Linux 6.5).
    public init?(_ path: String) {
        descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        guard status() != nil else {
            close(descriptor)
            return nil
        }
    }

    deinit { close(descriptor) }

    /// The file's pages now.
    public func status() -> PageCacheStatus? {
        var status = haul_page_cache_status()
        guard haul_page_cache_status(descriptor, &status) == 0 else { return nil }
        return PageCacheStatus(cached: status.cached, dirty: status.dirty, writeback: status.writeback)
    }
}

/// The memory-only file system `path` is on ("tmpfs", "ramfs"): one whose pages are never written back. Nil for
/// any other, or when it cannot be told.
public func memoryFileSystem(at path: String) -> String? {
    switch haul_file_system_magic(path) {
    case 0x0102_1994: "tmpfs"
    case 0x8584_58f6: "ramfs"
    default: nil
    }
}
