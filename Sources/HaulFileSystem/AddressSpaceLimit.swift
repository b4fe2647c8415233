import CLinuxShims
import Glibc

/// The process's address-space limit (`ulimit -v`, `RLIMIT_AS`), as a budget: what a run may map at once.
///
/// Under such a limit, what fails first is not memory in use but address space reserved: glibc gives every thread
/// a stack of `RLIMIT_STACK` (8 MiB) and every malloc arena past the first 64 MiB, mostly never touched. A run that
/// starts threads until an allocation fails then dies inside whatever allocated (libcurl, OpenSSL, Swift's own
/// arrays, which trap). So the limit is read at start and the run sized to it instead (`MemoryBudget`), like the
/// open-file limit (`DescriptorLimit`).
package struct AddressSpaceLimit: Sendable, Equatable {
    /// The limit in force after raising it, in bytes; nil: none.
    package let limit: Int?
    /// Bytes mapped when it was taken (the program, its libraries, what it allocated so far).
    package let inUse: Int

    package init(limit: Int?, inUse: Int) {
        self.limit = limit
        self.inUse = inUse
    }

    /// Raises the soft limit to the hard one (where it can) and says what there is.
    package static func raised() -> AddressSpaceLimit {
        var limits = rlimit()
        guard getrlimit(RLIMIT_AS_VALUE, &limits) == 0 else { return AddressSpaceLimit(limit: nil, inUse: mapped()) }
        if limits.rlim_cur < limits.rlim_max {
            var raised = limits
            raised.rlim_cur = limits.rlim_max
            if setrlimit(RLIMIT_AS_VALUE, &raised) == 0 { limits = raised }
        }
        // RLIM_INFINITY is all ones: no limit.
        let limit = limits.rlim_cur == rlim_t.max ? nil : Int(clamping: limits.rlim_cur)
        return AddressSpaceLimit(limit: limit, inUse: mapped())
    }

    /// Bytes the run may still map; nil: no limit.
    package var available: Int? { limit.map { max(0, $0 - inUse) } }

    /// Every thread started from now on without attributes of its own (haul's, libcurl's name lookups) gets a stack
    /// of `bytes`. False when glibc refused.
    @discardableResult
    package static func setThreadStacks(_ bytes: Int) -> Bool {
        var attributes = pthread_attr_t()
        guard pthread_attr_init(&attributes) == 0 else { return false }
        defer { pthread_attr_destroy(&attributes) }
        return pthread_attr_setstacksize(&attributes, bytes) == 0 && pthread_setattr_default_np(&attributes) == 0
    }

    /// At most `count` malloc arenas: threads share them rather than reserve 64 MiB each.
    package static func limitMallocArenas(_ count: Int) {
        _ = haul_limit_malloc_arenas(Int32(clamping: max(1, count)))
    }

    /// What malloc reserves for each arena past the first (glibc's `HEAP_MAX_SIZE` on 64-bit).
    package static let arenaReservation = 64 << 20

    /// VmSize: the first number of /proc/self/statm, in pages.
    private static func mapped() -> Int {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var text = [CChar](repeating: 0, count: 128)
        guard fgets(&text, Int32(text.count), file) != nil else { return 0 }
        let line = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let first = line.split(separator: " ").first, let pages = Int(first) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// `RLIMIT_AS` as the type `getrlimit` takes on glibc.
private let RLIMIT_AS_VALUE = __rlimit_resource_t(RLIMIT_AS.rawValue)
