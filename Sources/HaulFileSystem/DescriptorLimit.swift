import Glibc
import Synchronization

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

/// Out of descriptors: EMFILE (this process's limit) or ENFILE (the system's). Within haul's budget
/// (`DescriptorBudget`) it is a matter of waiting: another part of the run gives its descriptors back when its
/// transfer, copy or commit ends.
package enum DescriptorShortage {
    package static func means(_ code: Int32) -> Bool { code == EMFILE || code == ENFILE }

    /// How long a wait for a descriptor lasts before it is an error: long enough for any transfer of the run to
    /// give one back, short enough that descriptors something else holds for good end the run.
    package static let patienceSeconds = 30.0

    /// `attempt`, tried again while `isShortage` says its result is a shortage, with a pause between tries
    /// (1 ms, doubling to 50 ms), for at most `patienceSeconds`: then the last result. Once a wait has run out of
    /// patience, the descriptors are not coming back: later shortages in the process are not waited for again.
    package static func waiting<Value>(_ attempt: () -> Value, isShortage: (Value) -> Bool) -> Value {
        var result = attempt()
        guard isShortage(result), !gaveUp.load(ordering: .relaxed) else { return result }
        var pause = 0.001
        var waited = 0.0
        while isShortage(result) {
            guard waited < patienceSeconds else {
                gaveUp.store(true, ordering: .relaxed)
                break
            }
            var time = timespec(tv_sec: 0, tv_nsec: Int(pause * 1e9))
            _ = nanosleep(&time, nil)
            waited += pause
            pause = min(0.05, pause * 2)
            result = attempt()
        }
        return result
    }

    private static let gaveUp = Atomic<Bool>(false)
}

/// `RLIMIT_NOFILE` as the type `getrlimit` takes on glibc (an enum there, an Int32 elsewhere).
private let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
