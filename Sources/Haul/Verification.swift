import HaulManifest
import HaulPlanner
import HaulThreads

/// `haul verify`: hash every local file and compare with the manifest. No network, no writes.
package struct VerificationResult: Sendable {
    package var plan: Plan
    /// Entries whose local file is missing, differs, or cannot be checked. An unpinned file that is present is
    /// not one: with no checksum, there is nothing to verify it against.
    package var problems: [PlannedEntry] { plan.entries.filter { $0.action.isChange && $0.action != .revalidate } }
    package var exitStatus: ExitStatus { problems.isEmpty ? .success : .entryFailed }

    /// Every pinned file is hashed, whatever the state says; root's private folder is only checked. `concurrency`:
    /// hashing threads (the run's `DescriptorBudget.observers`).
    /// `unverifiedLists`: the signed lists whose kept copy did not check out (their entries are problems).
    package init(
        manifest: Manifest, unverifiedLists: Set<String> = [], concurrency: Int = ProcessorCount.online
    ) throws(ObservationFailure) {
        let observation = try Observation(of: manifest, access: .lookingOnly, rehash: true, concurrency: concurrency)
        plan = Planner.plan(
            manifest.files, observed: observation.states,
            context: PlanContext(shardScope: manifest.shardScope, unverifiedLists: unverifiedLists))
    }
}
