import ArgumentParser
import Haul
import HaulFileSystem
import HaulThreads

/// The process's limits (`ulimit -n`, `ulimit -v`), read once a command knows what it will do, and turned into the
/// run's shares of them; a limit too low for the run to work at all is a usage error (64) said at once, before
/// anything is touched.
enum RunLimits {
    /// Chosen and applied on first use, which `start` makes before any thread starts: thread stacks and malloc
    /// arenas sized to the address-space limit (`MemoryBudget.settings`).
    static let process: MemoryBudget.ProcessSettings = {
        let settings = MemoryBudget.settings(
            available: AddressSpaceLimit.raised().available, cores: ProcessorCount.online)
        if let stack = settings.threadStack { AddressSpaceLimit.setThreadStacks(stack) }
        if let arenas = settings.arenas { AddressSpaceLimit.limitMallocArenas(arenas) }
        return settings
    }()

    /// First thing in `main`: the process-wide settings, and exit 64 when the address space left is too little to
    /// read even a command line and a small manifest (`MemoryBudget.startFloor`).
    static func start() throws {
        _ = process
        let space = AddressSpaceLimit.raised()
        guard let available = space.available, available < MemoryBudget.startFloor else { return }
        throw refusal(memory: space, needed: MemoryBudget.startFloor, entries: nil)
    }

    /// Raises the open-file and address-space limits to their hard limits and shares them (`DescriptorBudget`,
    /// `MemoryBudget`) into `options`: its `descriptors`, and for a run that `transfers`, `jobs` (and
    /// `connectionsPerHost`) when fewer fit than were asked for, which `warning` says. `entries`: how many the
    /// manifest lists; `cache`: whether the run uses a content cache (by default, whether `options` names one).
    static func apply(
        to options: inout SyncOptions, transfers: Bool, entries: Int, cache: Bool? = nil,
        warning: (String) -> Void = { _ in }
    ) throws {
        let cache = cache ?? (options.cacheDirectory != nil)
        let cores = ProcessorCount.online
        let files = DescriptorLimit.raised()
        guard
            var budget = DescriptorBudget(
                available: files.available, wantedTransfers: options.jobs, cores: cores,
                transfers: transfers, cache: cache)
        else {
            let needed = DescriptorBudget.minimum(transfers: transfers, cache: cache)
            let enough = files.limit(leaving: needed)
            throw refusal(
                "the open-file limit (ulimit -n) is \(files.limit), too few for haul to run: it needs at least "
                    + "\(enough) here (\(needed) of its own, and the \(enough - needed) open when it started)")
        }
        let space = AddressSpaceLimit.raised()
        guard
            let memory = MemoryBudget(
                available: space.available, settings: process, entries: entries,
                wantedTransfers: options.jobs, cores: cores, transfers: transfers, cache: cache)
        else {
            let needed = MemoryBudget.minimum(entries: entries, transfers: transfers, cache: cache, settings: process)
            throw refusal(memory: space, needed: needed, entries: entries)
        }
        budget.observers = min(budget.observers, memory.observers)
        budget.cacheCopiers = min(budget.cacheCopiers, memory.cacheCopiers)
        budget.transfers = min(budget.transfers, memory.transfers)
        options.descriptors = budget
        guard transfers, budget.transfers < options.jobs else { return }
        let fitting = budget.transfers
        let which =
            memory.transfers == fitting
            ? "address-space limit (\(ByteCount.format(Int64(space.limit ?? 0))), see ulimit -v)"
            : "open-file limit (\(files.limit), see ulimit -n)"
        warning(
            "the \(which) allows \(fitting == 1 ? "1 transfer" : "\(fitting) transfers") at once, not \(options.jobs): "
                + "running \(fitting)")
        options.jobs = fitting
        options.connectionsPerHost = min(options.connectionsPerHost, fitting)
    }

    /// `error: the address-space limit (ulimit -v) is 60.0 MiB, too little for haul to run on 3000 entries: …`
    private static func refusal(memory space: AddressSpaceLimit, needed: Int, entries: Int?) -> ExitCode {
        let on = entries.map { " on \($0) \($0 == 1 ? "entry" : "entries")" } ?? ""
        return refusal(
            "the address-space limit (ulimit -v) is \(ByteCount.format(Int64(space.limit ?? 0))), too little for haul "
                + "to run\(on): it needs at least \(ByteCount.format(Int64(space.inUse + needed))) here "
                + "(\(ByteCount.format(Int64(needed))) of its own, and the \(ByteCount.format(Int64(space.inUse))) mapped already)"
        )
    }

    private static func refusal(_ message: String) -> ExitCode {
        Output.errors([TerminalText("error: " + message)])
        return ExitCode(ExitStatus.usage.rawValue)
    }
}
