import Glibc

/// The process's open-file limit, as a budget: what a run may hold at once.
///
/// A shell's `ulimit -n` (or a service manager's) is a soft limit that is often far below the hard one; haul raises
/// it to the hard limit at start, as most servers do, and sizes its concurrency to what is left.
package struct DescriptorLimit: Sendable, Equatable {
    /// The limit in force after raising it.
    package let limit: Int
    /// Descriptors open when it was taken (standard streams, the run lock, …).
    package let inUse: Int

    package init(limit: Int, inUse: Int) {
        self.limit = limit
        self.inUse = inUse
    }

    /// Raises the soft limit to the hard one (where it can) and says what there is.
    package static func raised() -> DescriptorLimit {
        var limits = rlimit()
        if getrlimit(RLIMIT_NOFILE_VALUE, &limits) == 0 {
            if limits.rlim_cur < limits.rlim_max {
                var raised = limits
                raised.rlim_cur = limits.rlim_max
                if setrlimit(RLIMIT_NOFILE_VALUE, &raised) == 0 { limits = raised }
            }
        }
        // RLIM_INFINITY is all ones: clamped, it is as good as no limit.
        let limit = Int(clamping: limits.rlim_cur)
        return DescriptorLimit(limit: limit, inUse: openDescriptors())
    }

    /// Descriptors the run may still open.
    package var available: Int { max(0, limit - inUse) }

    /// How many of `wanted` things that hold `each` descriptors fit, after `reserve` for everything else; at least 1.
    package func fitting(_ wanted: Int, each: Int, reserve: Int) -> Int {
        max(1, min(wanted, (available - reserve) / max(1, each)))
    }

    /// Counted in /proc/self/fd (the directory's own descriptor is not counted).
    private static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 3 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return max(0, count - 1)
    }
}

/// `RLIMIT_NOFILE` as the type `getrlimit` takes on glibc (an enum there, an Int32 elsewhere).
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
