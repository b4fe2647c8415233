import Glibc

/// The process's open-file limit, as a budget: what a run may hold at once.
///
/// A shell's `ulimit -n` (or a service manager's) is a soft limit that is often far below the hard one; haul raises
/// it to the hard limit at start, as most servers do, and sizes its concurrency to what is left.
package struct DescriptorLimit: Sendable, Equatable {
    /// The limit in force after raising it.
    package let limit: Int
    /// The descriptors open when it was taken (standard streams, what the caller left open), by number, ascending.
    package let open: [Int]

    package init(limit: Int, open: [Int]) {
        self.limit = limit
        self.open = open.sorted()
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
        return DescriptorLimit(limit: Int(clamping: limits.rlim_cur), open: openDescriptors())
    }

    /// Descriptors open that take numbers the process could open: only those below the limit. One inherited above
    /// it (a shell's `exec 255<…`) takes none of them.
    package var inUse: Int { inUse(below: limit) }

    /// Descriptors the run may still open.
    package var available: Int { max(0, limit - inUse) }

    /// The lowest limit that would leave `needed` descriptors available: raising the limit also brings the
    /// descriptors open above the present one within it.
    package func limit(leaving needed: Int) -> Int {
        var candidate = needed
        while candidate - inUse(below: candidate) < needed { candidate += 1 }
        return candidate
    }

    private func inUse(below limit: Int) -> Int { open.prefix { $0 < limit }.count }

    /// The numbers in /proc/self/fd, but that of the directory read.
    private static func openDescriptors() -> [Int] {
        guard let directory = opendir("/proc/self/fd") else { return [0, 1, 2] }
        let own = Int(dirfd(directory))
        defer { closedir(directory) }
        var numbers: [Int] = []
        while let entry = readdir(directory) {
            let number = withUnsafeBytes(of: entry.pointee.d_name) { name -> Int? in
                Int(String(decoding: name.prefix { $0 != 0 }, as: UTF8.self))
            }
            if let number, number != own { numbers.append(number) }
        }
        return numbers
    }
}

/// `RLIMIT_NOFILE` as the type `getrlimit` takes on glibc (an enum there, an Int32 elsewhere).
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
