import HaulFileSystem

/// How a run spends the address space its limit (`ulimit -v`) leaves it (`AddressSpaceLimit.available`), as
/// `DescriptorBudget` does the open files: every part that maps memory is counted at a fixed cost before it starts,
/// so that no allocation fails (Swift traps on a failed allocation of its own, and libcurl or OpenSSL failing one
/// deep inside a callback is no better). Below `minimum`, the command says so at once.
///
/// What is reserved is what counts, not what is touched: under a limit, threads get smaller stacks than glibc's
/// 8 MiB and malloc fewer arenas than its 8 a core, 64 MiB each (`ProcessSettings`, chosen at start). Then:
/// - the run itself: libcurl and OpenSSL (a CA store), its tables, its output (`runHeap`), and per entry its plan,
///   state record and outcome (`perEntry`; the manifest is read already when the budget is made), and its
///   long-lived threads (the signal watcher, the commit and its batch window, the progress ticker);
/// - per observing thread, and per thread copying to or from the cache, a stack and a read buffer;
/// - per engine loop, a stack and its multi handle with its connections; per transfer, libcurl's buffers and TLS,
///   and a trailing hasher's stack and buffer.
package struct MemoryBudget: Sendable, Equatable {
    package var observers: Int
    package var transfers: Int
    package var cacheCopiers: Int

    /// What the whole process is told before it starts a thread.
    package struct ProcessSettings: Sendable, Equatable {
        /// Every thread's stack; nil: glibc's default (`RLIMIT_STACK`).
        package var threadStack: Int?
        /// malloc arenas at most; nil: glibc's default.
        package var arenas: Int?

        /// The address space the arenas past the first reserve.
        var arenaReservations: Int { max(0, (arenas ?? 1) - 1) * AddressSpaceLimit.arenaReservation }
    }

    /// A thread's stack under a limit: far more than any of haul's threads, libcurl's or OpenSSL's use.
    package static let limitedThreadStack = 2 << 20
    package static let runHeap = 8 << 20
    package static let perEntry = 1 << 10
    package static let longLivedThreads = 4
    package static let readBuffer = 1 << 20
    /// A libcurl handle's buffers (a 256 KiB receive buffer among them) and its TLS state; a multi handle's own.
    package static let perHandle = 512 << 10
    /// Below this much room at start, not even the command line and a small manifest can be read.
    package static let startFloor = 16 << 20

    /// Without a limit, nothing changes; under one, small stacks, and arenas on at most a quarter of the room.
    package static func settings(available: Int?, cores: Int) -> ProcessSettings {
        guard let available else { return ProcessSettings(threadStack: nil, arenas: nil) }
        let usual = 8 * max(1, cores)
        let arenas = max(1, min(usual, available / 4 / AddressSpaceLimit.arenaReservation))
        return ProcessSettings(threadStack: limitedThreadStack, arenas: arenas < usual ? arenas : nil)
    }

    private static func thread(_ settings: ProcessSettings) -> Int { settings.threadStack ?? (8 << 20) }

    /// The fewest bytes a run of `entries` needs beyond what is mapped already: one of each part.
    package static func minimum(entries: Int, transfers: Bool, cache: Bool, settings: ProcessSettings) -> Int {
        let stack = thread(settings)
        var bytes =
            settings.arenaReservations + runHeap + entries * perEntry + longLivedThreads * stack + stack + readBuffer
        if transfers {
            bytes += stack + perHandle + perHandle + stack + readBuffer
            if cache { bytes += stack + readBuffer }
        }
        return bytes
    }

    /// Every part as large as it would be without a limit.
    package static func unlimited(transfers: Int, cores: Int) -> MemoryBudget {
        MemoryBudget(observers: cores, transfers: transfers, cacheCopiers: cores)
    }
}

extension MemoryBudget {
    /// The shares of `available` bytes (nil: no limit); nil when that is below `minimum`. Transfers first, then
    /// observing threads, then copying threads.
    package init?(
        available: Int?, settings: ProcessSettings, entries: Int, wantedTransfers: Int, cores: Int, transfers: Bool,
        cache: Bool
    ) {
        let cores = max(1, cores)
        guard let available else {
            self = .unlimited(transfers: transfers ? wantedTransfers : 0, cores: cores)
            return
        }
        let least = Self.minimum(entries: entries, transfers: transfers, cache: cache, settings: settings)
        guard available >= least else { return nil }
        let stack = Self.thread(settings)
        var left = available - least
        var count = transfers ? 1 : 0
        while transfers, count < max(1, wantedTransfers) {
            // A transfer, its trailing hasher, and up to one loop a core.
            let cost = Self.perHandle + stack + Self.readBuffer + (count < cores ? stack + Self.perHandle : 0)
            guard left >= cost else { break }
            left -= cost
            count += 1
        }
        self.transfers = count
        var observers = 1
        while observers < cores, left >= stack + Self.readBuffer {
            left -= stack + Self.readBuffer
            observers += 1
        }
        self.observers = observers
        var copiers = transfers && cache ? 1 : 0
        while transfers, cache, copiers < cores, left >= stack + Self.readBuffer {
            left -= stack + Self.readBuffer
            copiers += 1
        }
        cacheCopiers = copiers
    }
}
