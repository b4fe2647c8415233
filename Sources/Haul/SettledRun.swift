import HaulDigest
import HaulEngine
import HaulManifest
import HaulPlanner
import HaulStore
import HaulThreads

/// The settled fast path: a run of a manifest that an earlier run left wholly in place, found so again without
/// validating the manifest or reading the state (see ARCHITECTURE, "The settled fast path").
///
/// The earlier run (`record`) writes a `SettledSnapshot` when it ended with every entry in place (pinned ones
/// verified and durable, unpinned ones kept fresh) and nothing else to say; the next run (`check`) believes it when
/// the key matches (the manifest's fingerprint, haul's version, the shard), every file still has the identity
/// recorded, and no unpinned entry is due. Anything else, and the run goes the whole way: read, validate, observe,
/// plan.
package enum SettledRun {
    /// The plan of a run with nothing to do: every entry up to date, counted, none listed.
    package struct Verdict: Sendable {
        package var plan: Plan
        /// How long finding it took, for the summary.
        package var seconds = 0.0
        /// Held until the run ends, as an observation holds it.
        let lock: RunLock?
    }

    /// What the snapshot's key covers besides the manifest: the haul that wrote it (another version may read or
    /// decide otherwise) and the shard.
    static func key(_ fingerprint: ManifestFingerprint, shard: Shard?, version: String) -> Digest {
        let text = "haul settled\t\(version)\t\(shard?.description ?? "all")\t\(fingerprint.digest.hex)"
        return StreamingHasher.digest(Array(text.utf8), algorithm: .sha256)
    }

    /// Before validation: the verdict when a snapshot shows there is nothing to do, nil when the manifest must be
    /// read (no snapshot, another key, a file changed, another run holds root; `prunes`, `adopts` and `rehash`,
    /// which ask for what only the whole way does: pruning, new owners in the state, hashing).
    ///
    /// `access` as the observation would take it: a sync holds the run lock while it looks at the files, as the
    /// whole way does. Nothing is made: a root without a snapshot of this manifest is left as found.
    ///
    /// A snapshot that keeps unpinned entries because their servers said they stay fresh is believed only until the
    /// first of them is due (by `now`), only when the run would ask the same sources the same way (`freshnessDiffers`:
    /// `--refresh`, or URL rewrites), and only by a run that lists no plan (`listsPlan`: `plan` and `--dry-run` show a
    /// line for each such entry, which takes the manifest).
    package static func check(
        _ input: ManifestInput, environment: [String: String], commandLineHeaders: Set<String>,
        shard: Shard?, prunes: Bool, adopts: Bool, rehash: Bool, access: Observation.Access,
        listsPlan: Bool, freshnessDiffers: Bool, now: Double = RetryPolicy.systemWallClock(),
        concurrency: Int = ProcessorCount.online,
        version: String = HaulVersion.current
    ) -> Verdict? {
        guard !prunes, !adopts, !rehash, let path = input.path,
            let root = ManifestFingerprint.declaredRoot(input, environment: environment),
            let area = try? PrivateArea.existing(root: root),
            let snapshot = SettledSnapshot.read(
                named: SettledSnapshot.name(manifestPath: path, shard: shard), in: area),
            snapshot.header.isFor(root: root),
            let fingerprint = ManifestFingerprint.of(
                input, variables: snapshot.header.variables, environment: environment,
                commandLineHeaders: commandLineHeaders),
            key(fingerprint, shard: shard, version: version) == snapshot.header.key,
            snapshot.header.freshness.map({ stillFresh($0, now: now) && !listsPlan && !freshnessDiffers }) ?? true
        else { return nil }
        var lock: RunLock?
        if case .exclusive(let wait, let holder) = access {
            guard let taken = try? RunLock(area: area, shard: shard, wait: wait, holder: holder) else { return nil }
            lock = taken
        }
        guard let count = snapshot.stillHolds(concurrency: concurrency) else { return nil }
        var plan = Plan(
            files: [], actions: [],
            context: PlanContext(
                shardScope: shard.map { ShardScope(shard: $0, manifestEntries: snapshot.header.manifestEntries) }))
        plan.settledCount = count
        return Verdict(plan: plan, lock: lock)
    }

    /// Whether unpinned entries judged fresh are still: before the first is due, on a clock not set back past when
    /// they were judged (by more than the planner tolerates for a confirmation).
    static func stillFresh(_ freshness: SettledSnapshot.Freshness, now: Double) -> Bool {
        now < freshness.until && freshness.judgedAt <= now + Planner.clockSkewTolerance
    }

    /// Before a sync changes anything: what it changes may change what another run of the manifest (another
    /// shard's, or one of an earlier version of it) would decide, so every snapshot of the manifest goes first.
    static func forgetIfChanging(_ plan: Plan, _ manifest: Manifest, _ observation: Observation) {
        guard plan.hasChanges, let path = manifest.fingerprint?.path, let area = observation.area else { return }
        SettledSnapshot.forget(manifestPath: path, in: area)
    }

    /// After a sync: writes its snapshot when it left every entry verified, durable and in place (pinned), or kept
    /// fresh (unpinned, without rewrites). A run that cannot be told by counts alone (warnings, notes, files it no
    /// longer lists, pruning, archives) writes none.
    static func record(
        _ sync: Sync, _ plan: Plan, _ observation: Observation, _ result: SyncResult,
        version: String = HaulVersion.current
    ) {
        let manifest = sync.manifest
        guard let fingerprint = manifest.fingerprint, let area = observation.area, result.exitStatus == .success,
            !sync.prunes, manifest.lists.isEmpty, manifest.warnings.isEmpty, manifest.omittedWarnings == 0,
            observation.stateProblems.isEmpty,
            plan.unlistedCount == 0, plan.orphans.isEmpty, plan.unproven.isEmpty, result.prunes.isEmpty
        else { return }
        // What the state now records of each file, without looking records up by name: a file this run committed
        // by what the commit recorded, a file kept as it was (planned `keep`: its digest is the pinned one) by the
        // identity it was judged by. Fields are read in place: a copy of an entry retains a dozen strings.
        let entries = plan.files
        guard observation.unsyncedEntries.isEmpty, observation.identities.count == entries.count else { return }
        var files: [(destination: String, identity: FileIdentity)] = []
        files.reserveCapacity(entries.count)
        for index in entries.indices {
            guard entries[index].extract == nil else { return }
            guard let checksum = entries[index].checksum else {
                // Unpinned: settled only while its server's word keeps it fresh, asked of the sources it has now.
                guard case .fresh = plan.actions[index], result.outcomes[index].leftInPlace,
                    sync.options.rewrites.isEmpty, let seen = observation.identities[index]
                else { return }
                files.append((entries[index].destination.description, seen))
                continue
            }
            let identity: FileIdentity
            if result.outcomes[index].putInPlace {
                guard let record = result.committedRecords[index], !record.unsynced, checksum.accepts(record.digest)
                else { return }
                identity = record.identity
            } else {
                guard plan.actions[index] == .keep, result.outcomes[index].leftInPlace,
                    let seen = observation.identities[index]
                else { return }
                identity = seen
            }
            files.append((entries[index].destination.description, identity))
        }
        let snapshot = SettledSnapshot(
            key: key(fingerprint, shard: manifest.shardScope?.shard, version: version),
            variables: manifest.environmentNames, root: manifest.root,
            manifestEntries: manifest.shardScope?.manifestEntries ?? manifest.files.count,
            freshness: plan.freshUntil.flatMap { until in
                plan.decidedAt.map { SettledSnapshot.Freshness(judgedAt: $0, until: until) }
            },
            files: files)
        _ = snapshot.write(
            named: SettledSnapshot.name(manifestPath: fingerprint.path, shard: manifest.shardScope?.shard),
            in: area)
    }
}
