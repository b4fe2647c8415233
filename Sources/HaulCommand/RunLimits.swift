import ArgumentParser
import Haul
import HaulFileSystem
import HaulThreads

/// The process's limits, read once a command knows what it will do, and turned into the run's shares of them; a
/// limit too low for the run to work at all is a usage error (64) said at once, before anything is touched.
enum RunLimits {
    /// Raises the open-file limit to its hard limit and shares it (`DescriptorBudget`) into `options`: its
    /// `descriptors`, and for a run that `transfers`, `jobs` (and `connectionsPerHost`) when fewer fit than were
    /// asked for, which `warning` says. `cache`: whether the run uses a content cache (by default, whether
    /// `options` names one).
    static func apply(to options: inout SyncOptions, transfers: Bool, cache: Bool? = nil, warning: (String) -> Void = { _ in }) throws {
        let limit = DescriptorLimit.raised()
        let cache = cache ?? (options.cacheDirectory != nil)
        guard let budget = DescriptorBudget(available: limit.available, wantedTransfers: options.jobs,
                                            cores: ProcessorCount.online, transfers: transfers, cache: cache) else {
            let needed = DescriptorBudget.minimum(transfers: transfers, cache: cache)
            let enough = limit.limit(leaving: needed)
            Output.errors([TerminalText(
                "error: the open-file limit (ulimit -n) is \(limit.limit), too few for haul to run: it needs at least "
                    + "\(enough) here (\(needed) of its own, and the \(enough - needed) open when it started)")])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        options.descriptors = budget
        guard transfers, budget.transfers < options.jobs else { return }
        let fitting = budget.transfers
        warning("the open-file limit (\(limit.limit), see ulimit -n) allows \(fitting == 1 ? "1 transfer" : "\(fitting) transfers") "
                + "at once, not \(options.jobs): running \(fitting)")
        options.jobs = fitting
        options.connectionsPerHost = min(options.connectionsPerHost, fitting)
    }
}
