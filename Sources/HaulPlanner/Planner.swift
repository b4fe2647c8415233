import HaulDigest
import HaulFailures
import HaulManifest

/// What is on disk at one destination, as far as planning needs to know. The store observes it; the planner
/// never touches the file system, so every decision below is a function of values and can be tested from values.
package enum LocalState: Sendable, Equatable {
    case missing
    /// `digest` is nil when it was not computed: no checksum to compare with, or the size already disagrees.
    case file(size: Int64, digest: Digest?)
    /// A symlink sits at the destination; it is replaced by a regular file, never written through.
    case symlink
    /// Something haul must not delete is in the way (a directory, a fifo, a device).
    case obstructed(Obstacle)
    /// The destination cannot be reached safely (a parent symlink leading outside root, EACCES on a folder, …).
    case inaccessible(StoreError)
    /// A regular file whose content cannot be read (EIO, EACCES): whatever it holds, it is not what was pinned.
    case unreadable(StoreError)
    /// An `extract` entry's folder, judged against the records of what haul unpacked there: what produced it (nil
    /// when no record says: a folder haul did not unpack), and the members not as recorded (none: intact).
    ///
    /// Indirect: held inline, its payload made every entry's state 136 bytes (56 without it), 80 MB of a
    /// million-entry plan, for the few entries that unpack an archive.
    indirect case tree(UnpackedFrom?, changed: [MemberChange])
}

/// Why a destination cannot be synced as it stands, or why a path that is no longer listed is kept. Values, so
/// that every decision is compared in tests; the command words them.
package enum Obstacle: Sendable, Equatable {
    /// Something haul does not replace is at the destination (a directory, a FIFO, a device).
    case inTheWay(FileKind)
    /// Something that is not a folder is where an archive's tree is unpacked.
    case inTheWayOfTree(FileKind)
    /// A tree's folder holds files the archive did not put there (the user's, these, sorted): it is kept with them.
    case holdsUsersFiles([String])
    /// The destination cannot be reached or read (a parent symlink leading outside root, EACCES, …).
    case failed(StoreError)
    /// The entry takes its digest from a signed list (`from:`) whose signature did not check out this run, or that
    /// could not be fetched: nothing it names is touched.
    case listUnverified(String)
    /// The signed list checked out but names no file `name`: there is no digest to pin it by.
    case notInList(list: String, name: String)
}

/// Why a prune keeps a file haul wrote.
package enum KeepReason: Sendable, Equatable {
    case modified
    /// A tree's symlink points elsewhere than where haul unpacked it.
    case pointsElsewhere
    case replacedBySymlink
    /// Its identity could not be read, so it is not known to be haul's.
    case unidentified
    indirect case obstacle(Obstacle)
}

/// Why a file must be fetched.
package enum FetchReason: Sendable, Equatable {
    case missing
    /// Indirect: inline, its digest made every entry's action 48 bytes for the few files that changed.
    indirect case digestMismatch(local: Digest)
    case sizeMismatch(local: Int64, expected: Int64)
    case replacesSymlink
    /// The local copy could not be checked against the pin; it is not trusted.
    case unverified
    /// The local copy cannot be read at all; replacing it is the way to make it right. Indirect, as the mismatch.
    indirect case unreadable(StoreError)
    /// An unpinned entry's file that haul did not write: there are no validators to ask with, so the server's copy
    /// replaces whatever is there.
    case notWrittenByHaul
    /// An extracted tree whose members changed, went missing, or whose archive or rules are not the entry's: it is
    /// unpacked again (the user's own files in it are carried over).
    case treeChanged(TreeChange)
}

/// Why an extracted tree on disk is not the one the entry asks for.
package enum TreeChange: Sendable, Equatable {
    /// Members were edited, removed or replaced since haul unpacked them.
    case membersChanged([MemberChange])
    /// The folder holds no tree haul unpacked (or its records are gone).
    case notUnpackedByHaul
    /// Unpacked from another archive, with other rules, or to another tree than the one pinned.
    case otherArchive
}

/// A member of an unpacked tree that is not as haul unpacked it.
package struct MemberChange: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// Its content (or a symlink's target, or its identity with content unknown) differs.
        case edited
        case missing
        /// Something of another kind (a folder, a FIFO) is where it was.
        case replaced
    }

    /// Relative to the tree's folder.
    package var path: String
    package var kind: Kind

    package init(_ path: String, _ kind: Kind) {
        self.path = path
        self.kind = kind
    }
}

/// What one entry needs.
package enum Action: Sendable, Equatable {
    /// Nothing to do: the pinned content is in place.
    case keep
    /// Fetch and commit. `.missing` is a download, anything else replaces existing content.
    case fetch(FetchReason)
    /// An unpinned file is present: only its server can say whether it is current, so it is asked with a
    /// conditional request; an unchanged answer (304) writes nothing.
    case revalidate
    /// An unpinned file its server confirmed recently and said stays fresh (or the entry's `refresh` interval has
    /// not passed): kept without a request, for this many more seconds.
    case fresh(for: Double)
    /// The entry cannot be synced as things stand. Nothing is touched.
    ///
    /// Indirect: inline, a store failure made every entry's action 40 bytes (17 without it), for the few refused.
    indirect case refuse(Obstacle)

    package var isChange: Bool {
        switch self {
        case .keep, .fresh: false
        case .fetch, .revalidate, .refuse: true
        }
    }
}

/// When an unpinned file's server last confirmed the copy on disk, and until when it said the copy stays fresh
/// (seconds since the epoch).
package struct Confirmation: Sendable, Equatable {
    package var checkedAt: Double
    package var freshUntil: Double?

    package init(checkedAt: Double, freshUntil: Double?) {
        self.checkedAt = checkedAt
        self.freshUntil = freshUntil
    }
}

/// What deciding whether to ask a server again needs: per entry, its last confirmation (nil: none that counts),
/// whether haul wrote the file there (nil: not known, taken as yes), the time now, and whether to ask anyway
/// (`--refresh`).
package struct Revalidation: Sendable {
    package var confirmations: [Confirmation?]
    package var written: [Bool]?
    package var now: Double
    package var always: Bool

    package init(confirmations: [Confirmation?], written: [Bool]? = nil, now: Double, always: Bool = false) {
        self.confirmations = confirmations
        self.written = written
        self.now = now
        self.always = always
    }
}

package struct PlannedEntry: Sendable {
    package var entry: FileEntry
    package var action: Action
}

/// A file haul wrote for this manifest in an earlier run, at a destination the manifest no longer lists, and
/// what is there now.
package struct PruneCandidate: Sendable, Equatable {
    package var destination: DestinationPath
    package var written: Digest
    package var local: LocalState
    /// For a symlink a tree haul unpacked held: the digest of where it points now (its record's digest is that of
    /// where it pointed).
    package var linkTarget: Digest?

    package init(destination: DestinationPath, written: Digest, local: LocalState, linkTarget: Digest? = nil) {
        self.destination = destination
        self.written = written
        self.local = local
        self.linkTarget = linkTarget
    }
}

package enum PruneAction: Sendable, Equatable {
    /// Still exactly what haul wrote: deleted.
    case delete
    /// No longer what haul wrote (the user changed or replaced it): kept, with a warning saying why.
    case keep(KeepReason)
    /// Already gone: only haul's record of it is dropped.
    case forget
}

package struct PlannedPrune: Sendable, Equatable {
    package var destination: DestinationPath
    package var action: PruneAction
}

/// What the observation found around the entries, which the plan reports and decides nothing on: the shard it
/// covers, and files haul wrote that no entry lists (see `Plan`'s fields of the same names).
package struct PlanContext: Sendable {
    package var shardScope: ShardScope?
    package var unlistedCount: Int
    package var orphans: [(manifest: String, files: Int)]
    package var unproven: [(manifest: String, files: Int)]
    /// The signed lists (`lists:`) whose signature did not check out, or that could not be fetched, this run.
    package var unverifiedLists: Set<String>
    /// Entries (by index) whose digest the signed list changed since its last verified copy: the plan says so.
    package var changedByList: Set<Int>

    package init(
        shardScope: ShardScope? = nil, unlistedCount: Int = 0, orphans: [(manifest: String, files: Int)] = [],
        unproven: [(manifest: String, files: Int)] = [], unverifiedLists: Set<String> = [],
        changedByList: Set<Int> = []
    ) {
        self.shardScope = shardScope
        self.unlistedCount = unlistedCount
        self.orphans = orphans
        self.unproven = unproven
        self.unverifiedLists = unverifiedLists
        self.changedByList = changedByList
    }
}

/// The decision for every entry, in manifest order, and for every file to prune, with the totals a summary needs.
package struct Plan: Sendable {
    /// The manifest's entries: the same storage, not a copy (copying 100,000 entries into planned ones cost a
    /// tenth of a no-op sync, and as much memory again).
    package let files: [FileEntry]
    /// What each entry needs, by index into `files`.
    package let actions: [Action]
    /// Empty unless pruning is on.
    package var prunes: [PlannedPrune]
    /// Set when the plan covers one shard of the manifest.
    package var shardScope: ShardScope? { context.shardScope }
    /// Without pruning: files haul wrote for this manifest that it no longer lists, left alone (`--prune` would
    /// look at them).
    package var unlistedCount: Int { context.unlistedCount }
    /// With pruning: files haul wrote for manifests that are gone (named relative to root), never pruned by this
    /// one unless it adopts them.
    package var orphans: [(manifest: String, files: Int)] { context.orphans }
    /// With pruning: by manifest (named relative to root: this one, for files it no longer lists, or one that is
    /// gone), how many files the state says it wrote without the proof that haul wrote them (a state an older haul
    /// wrote, or lines haul did not write): never pruned unless `--adopt` names the manifest.
    package var unproven: [(manifest: String, files: Int)] { context.unproven }
    package let context: PlanContext
    /// Fetches a content cache (`--cache`) holds, by entry index: put in place from it, without a request. nil
    /// until the cache was looked at (`Sync.plan`); not a decision of the planner's, and the transfer step
    /// tries exactly these rather than looking again.
    package var fromCache: Set<Int>?
    /// Entries a settled snapshot showed up to date without reading the manifest (`SettledRun`): counted as
    /// kept, listed nowhere (`files` and `actions` are then empty).
    package var settledCount = 0
    /// The time the freshness of unpinned entries was judged at (`Revalidation.now`); nil when it was not.
    package var decidedAt: Double?

    /// Until when every entry kept fresh (`.fresh`) stays so: the earliest end of their freshness; nil when none is.
    package var freshUntil: Double? {
        guard let decidedAt else { return nil }
        var earliest: Double?
        for action in actions {
            if case .fresh(let remaining) = action { earliest = min(earliest ?? remaining, remaining) }
        }
        return earliest.map { decidedAt + $0 }
    }

    package init(
        files: [FileEntry], actions: [Action], prunes: [PlannedPrune] = [], context: PlanContext = PlanContext()
    ) {
        precondition(files.count == actions.count, "one action per entry")
        self.files = files
        self.actions = actions
        self.prunes = prunes
        self.context = context
    }

    package init(entries: [PlannedEntry], prunes: [PlannedPrune] = [], context: PlanContext = PlanContext()) {
        self.init(files: entries.map(\.entry), actions: entries.map(\.action), prunes: prunes, context: context)
    }

    /// Each entry with its action.
    package var entries: Entries { Entries(files: files, actions: actions) }

    package struct Entries: RandomAccessCollection, Sendable {
        fileprivate let files: [FileEntry]
        fileprivate let actions: [Action]
        package var startIndex: Int { 0 }
        package var endIndex: Int { actions.count }
        package subscript(index: Int) -> PlannedEntry { PlannedEntry(entry: files[index], action: actions[index]) }
    }

    package var downloads: [PlannedEntry] {
        entries.filter { if case .fetch(.missing) = $0.action { true } else { false } }
    }
    package var replacements: [PlannedEntry] {
        entries.filter { if case .fetch(let reason) = $0.action { reason != .missing } else { false } }
    }
    package var fetches: [PlannedEntry] { entries.filter { if case .fetch = $0.action { true } else { false } } }
    package var revalidations: [PlannedEntry] { entries.filter { $0.action == .revalidate } }
    package var refusals: [PlannedEntry] { entries.filter { if case .refuse = $0.action { true } else { false } } }
    package var deletions: [PlannedPrune] { prunes.filter { $0.action == .delete } }
    package var upToDateCount: Int { settledCount + actions.count { !$0.isChange } }
    /// Bytes to fetch, counting only entries whose size the manifest pins.
    package var knownBytesToFetch: Int64 { tally.knownBytesToFetch }
    /// Whether applying it may change anything on disk (a revalidation may).
    package var hasChanges: Bool { actions.contains { $0.isChange } || !deletions.isEmpty }

    /// The totals a summary shows, in one pass: each of the filters above copies its share of 100,000 entries.
    package var tally: Tally {
        var tally = Tally()
        tally.upToDate = settledCount
        for index in actions.indices {
            switch actions[index] {
            case .keep, .fresh: tally.upToDate += 1
            case .fetch(.missing): tally.downloads.add(files[index].size)
            case .fetch: tally.replacements.add(files[index].size)
            case .revalidate: tally.revalidations += 1
            case .refuse: tally.refusals += 1
            }
        }
        tally.deletions = prunes.count { $0.action == .delete }
        return tally
    }

    package struct Tally: Sendable, Equatable {
        /// How many, and the bytes of those whose size the manifest pins.
        package struct Fetches: Sendable, Equatable {
            package var count = 0
            package var sized = 0
            package var knownBytes: Int64 = 0

            mutating func add(_ size: Int64?) {
                count += 1
                guard let size else { return }
                sized += 1
                let (sum, overflow) = knownBytes.addingReportingOverflow(size)
                knownBytes = overflow ? .max : sum
            }
        }

        package var downloads = Fetches()
        package var replacements = Fetches()
        package var revalidations = 0
        package var refusals = 0
        package var upToDate = 0
        package var deletions = 0

        /// Bytes to fetch, counting only entries whose size the manifest pins.
        package var knownBytesToFetch: Int64 { [downloads.knownBytes, replacements.knownBytes].saturatingSum() }
        /// `Plan.hasChanges`, from the counts.
        package var hasChanges: Bool {
            downloads.count + replacements.count + revalidations + refusals + deletions > 0
        }
    }
}

/// Desired state + observed state → plan. Pure: no I/O, no clock, no environment (the time is an input).
package enum Planner {
    package static func plan(
        _ files: [FileEntry], observed: [LocalState], pruning candidates: [PruneCandidate] = [],
        revalidation: Revalidation? = nil, context: PlanContext = PlanContext()
    ) -> Plan {
        precondition(files.count == observed.count, "one observation per entry")
        precondition(revalidation.map { $0.confirmations.count == files.count } ?? true, "one confirmation per entry")
        var plan = Plan(
            files: files,
            actions: files.indices.map { index in
                let action = decide(files[index], observed[index], unverifiedLists: context.unverifiedLists)
                guard action == .revalidate, let revalidation else { return action }
                if revalidation.written?[index] == false { return .fetch(.notWrittenByHaul) }
                guard !revalidation.always,
                    let remaining = freshness(files[index], revalidation.confirmations[index], now: revalidation.now)
                else { return action }
                return .fresh(for: remaining)
            },
            prunes: candidates.map { PlannedPrune(destination: $0.destination, action: decide($0)) },
            context: context)
        plan.decidedAt = revalidation?.now
        return plan
    }

    /// Seconds the copy stays fresh from `now`: until the entry's `refresh` interval after the last confirmation
    /// when it sets one, else until what the server said; nil when that has passed or nothing was said, and when the
    /// confirmation is dated after `now` (taken while the clock was ahead, since set back): its freshness was counted
    /// from a time that has not come, so the server is asked again.
    package static func freshness(_ entry: FileEntry, _ confirmation: Confirmation?, now: Double) -> Double? {
        guard let confirmation, confirmation.checkedAt <= now + clockSkewTolerance else { return nil }
        guard let until = entry.refresh.map({ confirmation.checkedAt + $0.value }) ?? confirmation.freshUntil,
            until > now
        else { return nil }
        return until - now
    }

    /// How far in the future a confirmation may be dated and still count: clocks set by NTP step by less.
    package static let clockSkewTolerance: Double = 60

    /// Only haul's own, unchanged bytes are deleted: anything else at that path is the user's now.
    package static func decide(_ candidate: PruneCandidate) -> PruneAction {
        switch candidate.local {
        case .missing:
            return .forget
        case .file(_, let digest):
            return digest == candidate.written ? .delete : .keep(.modified)
        case .symlink where candidate.linkTarget != nil:
            return candidate.linkTarget == candidate.written
                ? .delete : .keep(.pointsElsewhere)
        case .symlink:
            return .keep(.replacedBySymlink)
        case .obstructed(let obstacle):
            return .keep(.obstacle(obstacle))
        case .inaccessible(let failure), .unreadable(let failure):
            return .keep(.obstacle(.failed(failure)))
        case .tree:
            return .keep(.obstacle(.inTheWay(.directory)))
        }
    }

    /// Content is identity: a pinned file whose digest matches is kept whatever its URL says.
    /// `unverifiedLists`: the signed lists (`lists:`) that did not check out this run.
    package static func decide(
        _ entry: FileEntry, _ local: LocalState, unverifiedLists: Set<String> = []
    ) -> Action {
        if let pin = entry.listPin, entry.checksum == nil {
            // Never revalidated as an unpinned file would be: without its list's digest it is not to be trusted.
            return unverifiedLists.contains(pin.list)
                ? .refuse(.listUnverified(pin.list)) : .refuse(.notInList(list: pin.list, name: pin.name))
        }
        if let rule = entry.extract { return decide(entry, rule, local) }
        switch local {
        case .tree:
            return .refuse(.inTheWay(.directory))
        case .missing:
            return .fetch(.missing)
        case .symlink:
            return .fetch(.replacesSymlink)
        case .obstructed(let obstacle):
            return .refuse(obstacle)
        case .inaccessible(let failure):
            return .refuse(.failed(failure))
        case .unreadable(let failure):
            return .fetch(.unreadable(failure))
        case .file(let size, let digest):
            if let expected = entry.size, expected != size {
                return .fetch(.sizeMismatch(local: size, expected: expected))
            }
            guard let checksum = entry.checksum else { return .revalidate }
            guard let digest else { return .fetch(.unverified) }
            return checksum.accepts(digest) ? .keep : .fetch(.digestMismatch(local: digest))
        }
    }

    /// An `extract` entry: its folder is kept when it is intact and was unpacked from what the entry pins (the
    /// archive, the tree, both) with the entry's rules; an intact tree of an entry that pins neither is asked
    /// about, as an unpinned file is. Anything but a folder at the destination is in the way.
    static func decide(_ entry: FileEntry, _ rule: ExtractRule, _ local: LocalState) -> Action {
        switch local {
        case .missing:
            return .fetch(.missing)
        case .file:
            return .refuse(.inTheWayOfTree(.regular))
        case .symlink:
            return .refuse(.inTheWayOfTree(.symlink))
        case .obstructed(let obstacle):
            return .refuse(obstacle)
        case .inaccessible(let failure), .unreadable(let failure):
            return .refuse(.failed(failure))
        case .tree(nil, _):
            return .fetch(.treeChanged(.notUnpackedByHaul))
        case .tree(_, let changed) where !changed.isEmpty:
            return .fetch(.treeChanged(.membersChanged(changed)))
        case .tree(let from?, _):
            let archiveMatches = entry.checksum.map { $0.accepts(from.archive) } ?? true
            let treeMatches = rule.tree.map { $0 == from.tree } ?? true
            guard archiveMatches, treeMatches, from.rules == rule.fingerprint else {
                return .fetch(.treeChanged(.otherArchive))
            }
            return entry.checksum == nil && rule.tree == nil ? .revalidate : .keep
        }
    }
}

extension Sequence<Int64> {
    /// Totals for display: saturate rather than trap, whatever sizes a manifest claims.
    package func saturatingSum() -> Int64 {
        reduce(0) { total, next in
            let (sum, overflow) = total.addingReportingOverflow(next)
            return overflow ? .max : sum
        }
    }
}
