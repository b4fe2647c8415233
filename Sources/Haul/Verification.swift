import HaulManifest
import HaulPlanner

/// `haul verify`: hash every local file and compare with the manifest. No network, no writes.
package struct VerificationResult: Sendable {
    package var plan: Plan
    /// Entries whose local file is missing, differs, or cannot be checked. An unpinned file that is present is
    /// not one: with no checksum, there is nothing to verify it against.
    package var problems: [PlannedEntry] { plan.entries.filter { $0.action.isChange && $0.action != .revalidate } }
    package var exitStatus: ExitStatus { problems.isEmpty ? .success : .entryFailed }

    package init(manifest: Manifest) {
        plan = Planner.plan(manifest.files, observed: Observation.localStates(of: manifest, concurrency: Reconciler.cores))
    }

    package func lines() -> [String] {
        var lines = problems.map { planned -> String in
            let destination = planned.entry.destination.description
            switch planned.action {
            case .keep, .revalidate: return "ok \(destination)"
            case .fetch(.missing): return "missing \(destination)"
            case .fetch(.unreadable(let why)): return "unreadable \(destination) (\(why))"
            case .fetch(let reason): return "differs \(destination) (\(HumanReport.describe(reason, checksum: planned.entry.checksum)))"
            case .refuse(let why): return "unreadable \(destination) (\(why))"
            }
        }
        let unpinned = plan.revalidations.count
        let verified = plan.upToDateCount
        var summary = "Verified \(HumanReport.count(verified, "file"))"
        if unpinned > 0 { summary += ", \(unpinned) unpinned present" }
        if !problems.isEmpty { summary += ", \(problems.count) with problems" }
        lines.append(summary + ".")
        return lines
    }
}
