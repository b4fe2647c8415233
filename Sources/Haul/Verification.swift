import HaulManifest
import HaulPlanner

/// `haul verify`: hash every local file and compare with the manifest. No network, no writes.
public struct VerificationResult: Sendable {
    public var plan: Plan
    /// Entries whose local file is missing, differs, or cannot be checked.
    public var problems: [PlannedEntry] { plan.entries.filter { $0.action.isChange } }
    public var exitStatus: ExitStatus { problems.isEmpty ? .success : .entryFailed }

    public init(manifest: Manifest) {
        plan = Planner.plan(manifest.files, observed: Observation.localStates(of: manifest, concurrency: Reconciler.hashingThreads))
    }

    public func lines() -> [String] {
        var lines = problems.map { planned -> String in
            let destination = planned.entry.destination.description
            switch planned.action {
            case .keep: return "ok \(destination)"
            case .fetch(.missing): return "missing \(destination)"
            case .fetch(let reason): return "differs \(destination) (\(HumanReport.describe(reason, checksum: planned.entry.checksum)))"
            case .refuse(let why): return "unreadable \(destination) (\(why))"
            }
        }
        let unpinned = plan.entries.count { $0.action == .keep && $0.entry.checksum == nil }
        let verified = plan.entries.count { $0.action == .keep } - unpinned
        var summary = "Verified \(HumanReport.count(verified, "file"))"
        if unpinned > 0 { summary += ", \(unpinned) unpinned present" }
        if !problems.isEmpty { summary += ", \(problems.count) with problems" }
        lines.append(summary + ".")
        return lines
    }
}
