import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore
import HaulThreads

/// The observe step, in one place: root's private folder and run lock, the state cache, and every destination as
/// it is on disk now, in the planner's terms, with what the state should remember of it.
package struct Observation: Sendable {
    /// What a command may do to root while it looks.
    package enum Access: Sendable {
        /// `plan`, `sync --dry-run`, `verify`: nothing is made or locked; root's private folder is only checked.
        case lookingOnly
        /// `sync`: root and its private folder are made if missing, and the run lock is taken before anything is
        /// read and held as long as this observation lives (a file seen before another run is done with it may be
        /// replaced by that run).
        case exclusive(wait: RunLock.Waiting, holder: String)
    }

    /// Per entry, in manifest order: what is on disk.
    package let states: [LocalState]
    /// Per entry: the state's record proves the file unchanged (it was not read, and the record stays as it is).
    let vouched: [Bool]
    /// For entries the state did not vouch for, what it should record now (absent: nothing), by entry index.
    let found: [Int: StateRecord]
    /// For a sync (`.exclusive`), per entry: the identity of the regular file found there, as seen before it was
    /// judged (nil: none, or not a regular file); empty when only looking. What a settled snapshot records of a
    /// file kept as it is, without looking its record up by name again.
    let identities: [FileIdentity?]
    /// Entries whose record says an earlier run could not sync the file into place (`StateRecord.unsynced`): the
    /// sync closes that gap. Found while the records are looked up anyway: a no-op pays nothing for it.
    let unsyncedEntries: [Int]
    /// Files this manifest wrote earlier and no longer lists, as they are now (empty unless pruning).
    package let pruneCandidates: [PruneCandidate]
    /// Per prune candidate, the identity it was observed with (the pruner deletes only a file that still has it).
    let pruneIdentities: [FileIdentity?]
    /// Without pruning: how many files the state says this manifest wrote and no longer lists (what `--prune`
    /// would look at). 0 when pruning (they are candidates then).
    package let unlistedCount: Int
    let cache: StateCache
    /// Why the state (or its journal) existed but could not be used, or only in part.
    package let stateProblems: [StateProblem]
    /// Names this manifest in the state: pruning deletes only what it wrote.
    let manifestKey: String
    /// Other names whose files are this manifest's too: its name before haul named manifests relative to root,
    /// and the manifests `--adopt` names.
    private let ownedKeys: Set<String>
    /// Owners whose records make their files prunable without a tag the root's key proves: the manifests
    /// `--adopt` names (the user vouches for them), and with this manifest's own name its older name too.
    private let vouchedKeys: Set<String>
    /// With pruning: manifests gone from their place relative to root whose files the state still holds, with
    /// how many the root's key proves they wrote (nothing of theirs is pruned; `--adopt NAME` makes this manifest
    /// their owner).
    package let orphans: [(manifest: String, files: Int)]
    /// With pruning: records without proof (a state an older haul wrote, or lines haul did not write) that name
    /// this manifest as the writer of a file it no longer lists, then those that name a manifest that is gone, with
    /// how many: never pruned until `--adopt` vouches for them, and never said to be what haul wrote.
    package let unproven: [(manifest: String, files: Int)]
    /// The root's key, which proves the records of files haul wrote (`OwnerKey`); nil when the root has none and
    /// none could be made (`ownerKeyFailure` says why) or when only looking at a root that has none.
    let ownerKey: OwnerKey?
    let ownerKeyFailure: StoreError?
    /// Root's private folder, checked; nil when root has none yet (only when looking).
    let area: PrivateArea?
    let lock: RunLock?
    /// The shard observed (nil: the whole manifest).
    let shard: Shard?
    /// Per `extract` entry: what was found in its folder beside what haul unpacked there (`ObservedTree`).
    let trees: [Int: ObservedTree]

    /// With `rehash`, a pinned file is hashed whatever the state says; an unpinned one still gets its record
    /// (nothing to hash it against, and its validators are what revalidation needs). `prunes`: find what this
    /// manifest wrote and no longer lists.
    /// `concurrency`: threads looking at and hashing files (the run's `DescriptorBudget.observers`).
    package init(
        of manifest: Manifest, access: Access, rehash: Bool = false, prunes: Bool = false,
        adopting adopted: Set<String> = [], concurrency: Int = ProcessorCount.online
    ) throws(ObservationFailure) {
        (area, lock) = try Self.open(root: manifest.root, shard: manifest.shardScope?.shard, access)
        (ownerKey, ownerKeyFailure) = Self.ownerKey(area: area, lock: lock, access)
        manifestKey = StateCache.manifestKey(path: manifest.sourcePath, root: manifest.root)
        let legacyKey = StateCache.legacyManifestKey(path: manifest.sourcePath)
        ownedKeys = adopted.union([manifestKey, legacyKey])
        vouchedKeys = adopted.contains(manifestKey) ? adopted.union([legacyKey]) : adopted
        shard = manifest.shardScope?.shard
        let observer = LocalObserver(root: manifest.root)
        let files = manifest.files
        // Reading a 100,000-file state and looking at as many files each take a few hundred milliseconds: the
        // state is read on a thread of its own meanwhile. (With --rehash, every pinned file is read anyway.)
        let area = self.area
        let ((cache, problems), looks) = concurrently({ StateCache.load(area: area) }) {
            rehash ? nil : observer.look(at: files.map(\.destination), concurrency: concurrency)
        }
        self.cache = cache
        stateProblems = problems
        var keepsIdentities = false
        if case .exclusive = access { keepsIdentities = true }
        var judged = Self.judge(
            files, looks: looks, cache: cache, rehash: rehash, observer: observer, concurrency: concurrency,
            keepingIdentities: keepsIdentities)
        trees = Self.observeTrees(
            files, cache: cache, root: manifest.root, rehash: rehash, observer: observer,
            concurrency: concurrency)
        for (index, tree) in trees {
            judged.states[index] = tree.state
            judged.vouched[index] = false
            judged.found[index] = nil
        }
        (states, vouched, found, unsyncedEntries, identities) = judged
        let owned = Self.ownedButUnlisted(
            manifest, cache: cache, owners: ownedKeys,
            listedMembers: Set(trees.values.flatMap(\.memberKeys)))
        let (ownerKey, vouchedKeys) = (self.ownerKey, self.vouchedKeys)
        let proven = owned.filter { destination, record in
            record.origin.map { vouchedKeys.contains($0.manifestKey) } == true
                || ownerKey?.proves(record, at: DestinationKey(destination)) == true
        }
        let gone =
            prunes
            ? Self.orphans(in: cache, root: manifest.root, owners: ownedKeys, key: ownerKey)
            : (proven: [], unproven: [])
        let unprovenOwn = owned.count - proven.count
        unproven = prunes && unprovenOwn > 0 ? [(manifestKey, unprovenOwn)] + gone.unproven : gone.unproven
        orphans = gone.proven
        let candidates =
            prunes ? Self.pruneCandidates(proven, cache: cache, root: manifest.root, concurrency: concurrency) : []
        pruneCandidates = candidates.map(\.candidate)
        pruneIdentities = candidates.map(\.identity)
        unlistedCount = prunes ? 0 : proven.count
    }

    /// The root's key: made if missing for a sync (which writes records that need it), only read when looking. A
    /// root whose key cannot be made (read-only, full) still syncs: what it writes is then kept by pruning.
    private static func ownerKey(area: PrivateArea?, lock: RunLock?, _ access: Access) -> (OwnerKey?, StoreError?) {
        guard let area else { return (nil, nil) }
        guard case .exclusive = access else { return (OwnerKey.load(area: area), nil) }
        switch OwnerKey.loadOrCreate(area: area, lock: lock) {
        case .success(let key): return (key, nil)
        case .failure(let failure): return (nil, failure)
        }
    }

    /// Root's private folder (made, and locked, for a sync).
    private static func open(
        root: String, shard: Shard?, _ access: Access
    ) throws(ObservationFailure)
        -> (PrivateArea?, RunLock?)
    {
        switch access {
        case .lookingOnly:
            do { return (try PrivateArea.existing(root: root), nil) } catch { throw .privateArea(error) }
        case .exclusive(let wait, let holder):
            let area: PrivateArea
            do { area = try PrivateArea.create(root: root) } catch { throw .privateArea(error) }
            do { return (area, try RunLock(area: area, shard: shard, wait: wait, holder: holder)) } catch {
                throw .lock(error)
            }
        }
    }

    /// Each entry's file, from what lstat showed and what the state records of it where that is proof enough;
    /// the rest is read and hashed.
    /// `keepingIdentities`: also say, per entry, the identity of the regular file found.
    private static func judge(
        _ files: [FileEntry], looks: [FileLook]?, cache: StateCache, rehash: Bool,
        observer: LocalObserver, concurrency: Int, keepingIdentities: Bool
    )
        -> (
            states: [LocalState], vouched: [Bool], found: [Int: StateRecord], unsynced: [Int],
            identities: [FileIdentity?]
        )
    {
        var states: [LocalState] = []
        var vouched: [Bool] = []
        var found: [Int: StateRecord] = [:]
        var unsynced: [Int] = []
        var identities: [FileIdentity?] = []
        if keepingIdentities { identities.reserveCapacity(files.count) }
        states.reserveCapacity(files.count)
        vouched.reserveCapacity(files.count)
        var unsettled: [(index: Int, request: ObservationRequest)] = []
        for index in files.indices {
            // Fields read in place: a copy of an entry retains and releases a dozen strings and arrays.
            let pinned = files[index].checksum != nil
            let known = rehash && pinned ? nil : cache.records[DestinationKey(files[index].destination)]
            // (Not looked up for a pinned file under --rehash: its mark is kept for the next run.)
            if known?.unsynced == true { unsynced.append(index) }
            let request = ObservationRequest(
                destination: files[index].destination, algorithm: files[index].checksum?.algorithm,
                expectedSize: files[index].size, known: known, knownAsOf: cache.writtenAt)
            if keepingIdentities {
                if case .regularFile(let identity) = looks?[index] {
                    identities.append(identity)
                } else {
                    identities.append(nil)
                }
            }
            guard let settled = looks.flatMap({ request.settle($0[index]) }) else {
                unsettled.append((index, request))
                states.append(.missing)  // a placeholder, replaced below
                vouched.append(false)
                continue
            }
            states.append(localState(settled.file))
            vouched.append(settled.record != nil)
        }
        let read = observer.observeAllRecording(unsettled.map(\.request), concurrency: concurrency)
        for ((index, request), (file, record)) in zip(unsettled, read) {
            states[index] = localState(file)
            if keepingIdentities { identities[index] = record?.identity }
            guard let record else { continue }
            // A record too recent to be proof is kept, but the state is rewritten so that it can be next time.
            if request.known == record && request.knownRecordIsProof(for: record.identity) {
                vouched[index] = true
            } else {
                found[index] = record
            }
        }
        return (states, vouched, found, unsynced, identities)
    }

    /// Whether a file whose origin is `origin` is this manifest's.
    func owns(_ origin: Origin) -> Bool { ownedKeys.contains(origin.manifestKey) }

    /// Whether the state's records of `origin`'s manifest may need a new owner or a new proof: this manifest owns
    /// them under another name (an older haul's, or adopted), or `--adopt` names their manifest (this one
    /// included: the user vouches for them). One set lookup or two: asked of every record.
    func mayChangeOwner(_ origin: Origin) -> Bool {
        (origin.manifestKey != manifestKey && owns(origin))
            || (!vouchedKeys.isEmpty && vouchedKeys.contains(origin.manifestKey))
    }

    /// The owner and tag the state should record for `record` from now on, nil when neither changes: this
    /// manifest's name for a record it owns under another, with a tag only when the record was proven or vouched
    /// for (a name an older haul wrote carries no proof, and a new name gives it none); a tag for a record of a
    /// vouched manifest that has none the key proves.
    func newOwner(of record: StateRecord, at destination: DestinationKey) -> (owner: String, tag: OwnerTag?)? {
        guard let origin = record.origin else { return nil }
        let vouched = vouchedKeys.contains(origin.manifestKey)
        let proven = vouched || ownerKey?.proves(record, at: destination) == true
        if origin.manifestKey != manifestKey && owns(origin) {
            return (
                manifestKey,
                proven
                    ? ownerKey?.tag(destination: destination.text, digest: record.digest, manifestKey: manifestKey)
                    : nil
            )
        }
        guard vouched, ownerKey?.proves(record, at: destination) != true,
            let tag = ownerKey?.tag(
                destination: destination.text, digest: record.digest, manifestKey: origin.manifestKey)
        else { return nil }
        return (origin.manifestKey, tag)
    }

    /// Manifests named in the state, by a path relative to root, that are no longer there: by manifest, how many
    /// of its records `key` proves (`proven`), and how many it does not (`unproven`: a record anyone who can write
    /// `.haul` could have added, which the plan must not call a file that manifest wrote).
    private static func orphans(
        in cache: StateCache, root: String, owners: Set<String>, key: OwnerKey?
    )
        -> (proven: [(manifest: String, files: Int)], unproven: [(manifest: String, files: Int)])
    {
        var counts: [String: Int] = [:]
        for record in cache.records.values {
            guard let name = record.origin?.manifestKey, !owners.contains(name) else { continue }
            counts[name, default: 0] += 1
        }
        let gone = Set(
            counts.keys.filter { name in
                // A hash (an older haul's name) says nothing about where its manifest is: not reported.
                guard name != "-",
                    !(name.utf8.count == 32
                        && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
                else { return false }
                return Glibc.access(root + "/" + name, F_OK) != 0
            })
        guard !gone.isEmpty else { return ([], []) }
        // Only the records of manifests that are gone (rare) get their tag checked.
        var proven: [String: Int] = [:], unproven: [String: Int] = [:]
        for (destination, record) in cache.records {
            guard let name = record.origin?.manifestKey, gone.contains(name) else { continue }
            if key?.proves(record, at: destination) == true {
                proven[name, default: 0] += 1
            } else {
                unproven[name, default: 0] += 1
            }
        }
        let sorted = { (counts: [String: Int]) in
            counts.map { (manifest: $0.key, files: $0.value) }.sorted { $0.manifest < $1.manifest }
        }
        return (sorted(proven), sorted(unproven))
    }

    /// What the state says this manifest wrote in earlier runs and no longer lists, by name (`listedMembers`: the
    /// members of trees it still lists, which are listed through their entry).
    private static func ownedButUnlisted(
        _ manifest: Manifest, cache: StateCache, owners: Set<String>,
        listedMembers: Set<DestinationKey>
    ) -> [(DestinationPath, StateRecord)] {
        // Most states hold nothing of the kind: no set of 100,000 names is built to find that out.
        guard cache.records.values.contains(where: { $0.origin.map { owners.contains($0.manifestKey) } ?? false })
        else { return [] }
        // By bytes: a listed "caf\u{e9}" keeps a written "cafe\u{301}" no more than any other name.
        let listed = Set(manifest.files.map { DestinationKey($0.destination) })
        let shard = manifest.shardScope?.shard
        return cache.records.filter {
            ($0.value.origin.map { owners.contains($0.manifestKey) } ?? false) && !listed.contains($0.key)
                && !listedMembers.contains($0.key)
        }
        .sorted { $0.key < $1.key }
        // The cache is a hint, not an authority: only a path that is a valid destination outside haul's own
        // folder, spelled as the manifest would spell it, can be pruned; under a shard, only one of its own.
        .compactMap { key, record -> (DestinationPath, StateRecord)? in
            guard let path = DestinationPath(key.text), DestinationKey(path) == key,
                path.firstComponent != DestinationPath.privateFolder,
                shard?.contains(path) ?? true
            else { return nil }
            return (path, record)
        }
    }

    /// The files of `owned` as they are now, with the identity they were observed with. Each is hashed, whatever
    /// the state says of its identity: a file is deleted only when its bytes are what the record's tag proves haul
    /// wrote there (the identity in a record is no part of the proof; anyone who can write the state can set it).
    /// Of a tree whose entry is gone, its symlinks are pruned when they still point where the archive said, and
    /// the user's own files in its folder keep the folder (a candidate kept, so that the user is told).
    private static func pruneCandidates(
        _ owned: [(DestinationPath, StateRecord)], cache: StateCache, root: String,
        concurrency: Int
    ) -> [(candidate: PruneCandidate, identity: FileIdentity?)] {
        let trees = PrunedTrees(owned, cache: cache, root: root)
        let requests = owned.map { destination, record in
            // (A record only journaled by a run that crashed knows no size: the file is hashed whatever its size.)
            ObservationRequest(
                destination: destination, algorithm: record.digest.algorithm,
                expectedSize: record.identity.size >= 0 ? record.identity.size : nil)
        }
        let observed = LocalObserver(root: root).observeAllRecording(requests, concurrency: concurrency)
        return zip(owned, observed).map { owned, observed in
            if case .symlink = observed.file, let link = trees.links[DestinationKey(owned.0)] {
                return (
                    PruneCandidate(
                        destination: owned.0, written: owned.1.digest, local: .symlink,
                        linkTarget: TreeJudgement.digest(ofTarget: link.target)), link.identity
                )
            }
            return (
                PruneCandidate(
                    destination: owned.0, written: owned.1.digest, local: localState(observed.file)),
                observed.record?.identity
            )
        } + trees.keptFolders.map { (candidate: $0, identity: nil) }
    }

    /// Writes the state with `changes` applied, under the state's lock. Applied to the state as this observation
    /// read it, or, for a shard, to the state as it is now: the other shards save theirs meanwhile, and each
    /// changes only records of its own destinations.
    func saveState(_ changes: StateChanges, in area: PrivateArea) throws(StoreError) -> StateCache.Saved {
        let shard = self.shard
        let observed = cache
        let save = { () throws(StoreError) -> StateCache.Saved in
            var current = shard == nil ? observed : StateCache.load(area: area).cache
            // Room for every new record at once (a first sync adds 100,000): grown one by one, the table would be
            // rehashed a dozen times.
            current.records.reserveCapacity(current.records.count + changes.records.count)
            for (destination, record) in changes.records { current.records[destination] = record }
            return try current.save(in: area)
        }
        guard let lock else { return try save() }
        return try lock.withStateLock(exclusive: true, save)
    }

    /// What the state should record of entry `index`'s file as observed (nil: nothing). For an `extract` entry, one
    /// of its members' records: they share one origin, which a revalidation asks with.
    func record(at index: Int, of files: [FileEntry]) -> StateRecord? {
        if let tree = trees[index] { return tree.memberKeys.first.flatMap { cache.records[$0] } }
        return vouched[index] ? cache.records[DestinationKey(files[index].destination)] : found[index]
    }

    /// Each `extract` entry's folder: walked (as `find` walks it, no file opened), judged against the records of
    /// its members; the member files a record cannot vouch for unread (or all, with `rehash`) are hashed.
    private static func observeTrees(
        _ files: [FileEntry], cache: StateCache, root: String, rehash: Bool,
        observer: LocalObserver, concurrency: Int
    ) -> [Int: ObservedTree] {
        let members = treeMembers(files, cache: cache)
        var trees: [Int: ObservedTree] = [:]
        for index in files.indices where files[index].extract != nil {
            let destination = files[index].destination
            let recorded = members[index] ?? [:]
            let keys = recorded.keys.map { DestinationKey(destination.description + "/" + $0) }
            let state: LocalState
            var usersFiles: [String] = []
            var usersLinks: [String: String] = [:]
            switch TreeWalk.look(at: destination, root: root) {
            case .missing:
                state = .missing
            case .notAFolder(let kind):
                state = .obstructed(.inTheWayOfTree(kind))
            case .inaccessible(let failure):
                state = .inaccessible(failure)
            case .folder(let nodes):
                var judged = TreeJudgement.judge(nodes: nodes, members: recorded) { record, identity in
                    !rehash && cache.trusts(record, for: identity)
                }
                if case .tree(let from, _) = judged.state, !judged.unproven.isEmpty {
                    judged.state = .tree(
                        from,
                        changed: edited(
                            judged.unproven, under: destination, observer: observer,
                            concurrency: concurrency))
                }
                state = judged.state
                usersFiles = judged.usersFiles
                usersLinks = judged.usersLinks
            }
            trees[index] = ObservedTree(state: state, usersFiles: usersFiles, usersLinks: usersLinks, memberKeys: keys)
        }
        return trees
    }

    /// The files of `unproven` that no longer hash to their record's digest.
    private static func edited(
        _ unproven: [(path: String, record: StateRecord)], under destination: DestinationPath,
        observer: LocalObserver, concurrency: Int
    ) -> [MemberChange] {
        let requests = unproven.compactMap { member -> ObservationRequest? in
            guard let path = DestinationPath(destination.description + "/" + member.path) else { return nil }
            return ObservationRequest(
                destination: path, algorithm: member.record.digest.algorithm,
                expectedSize: member.record.identity.size)
        }
        guard requests.count == unproven.count else { return unproven.map { MemberChange($0.path, .edited) } }
        return zip(unproven, observer.observeAllRecording(requests, concurrency: concurrency)).compactMap {
            member, observed in
            if case .regularFile(_, let digest?) = observed.file, digest == member.record.digest { return nil }
            return MemberChange(member.path, .edited)
        }
    }

    /// The records of each `extract` entry's members, by entry and by path relative to its folder: one pass over the
    /// state, each unpacked record's folder (which the state keeps) looked up among the entries' destinations.
    private static func treeMembers(_ files: [FileEntry], cache: StateCache) -> [Int: [String: StateRecord]] {
        var entryOf: [DestinationKey: Int] = [:]
        for index in files.indices where files[index].extract != nil {
            entryOf[DestinationKey(files[index].destination)] = index
        }
        guard !entryOf.isEmpty else { return [:] }
        var members: [Int: [String: StateRecord]] = [:]
        for (key, record) in cache.records {
            guard let folder = record.origin?.unpacked?.folder, let index = entryOf[DestinationKey(folder)] else {
                continue
            }
            // The state file keeps a member's record only under its folder (`StateFile`): the rest is its path in it.
            members[index, default: [:]][
                String(decoding: key.text.utf8.dropFirst(folder.utf8.count + 1), as: UTF8.self)] = record
        }
        return members
    }

    /// What the planner needs of what was found at a destination.
    static func localState(_ observed: ObservedFile) -> LocalState {
        switch observed {
        case .missing: .missing
        case .regularFile(let size, let digest): .file(size: size, digest: digest)
        case .symlink: .symlink
        case .directory: .obstructed(.inTheWay(.directory))
        case .otherKind(let kind): .obstructed(.inTheWay(kind))
        case .escapesRoot(let error), .unreadable(let error): .inaccessible(error)
        case .unreadableContent(let error): .unreadable(error)
        }
    }
}

/// An `extract` entry's folder as the observation found it.
struct ObservedTree: Sendable {
    var state: LocalState
    /// Files and symlinks in it that no record names: the user's, carried into a new tree.
    var usersFiles: [String]
    /// Where the user's symlinks among them point (`TreeJudgement.usersLinks`).
    var usersLinks: [String: String]
    /// The state's records of what haul unpacked there (replaced when the tree is).
    var memberKeys: [DestinationKey]
}

/// The folders of trees whose entries are gone, as a prune finds them: their symlinks (which the observer does not
/// read), and a kept candidate for each folder that holds files no record names, the user's.
struct PrunedTrees {
    var links: [DestinationKey: (target: String, identity: FileIdentity)] = [:]
    var keptFolders: [PruneCandidate] = []

    init(_ owned: [(DestinationPath, StateRecord)], cache: StateCache, root: String) {
        var folders: [String: Digest] = [:]
        for (_, record) in owned { if let folder = record.origin?.unpacked?.folder { folders[folder] = record.digest } }
        for (folder, anyDigest) in folders.sorted(by: { $0.key < $1.key }) {
            guard let path = DestinationPath(folder), case .folder(let nodes) = TreeWalk.look(at: path, root: root)
            else { continue }
            var usersFiles: [String] = []
            for node in nodes {
                let key = DestinationKey(folder + "/" + node.path)
                switch node.kind {
                case .folder: continue
                case .symlink(let target, let identity): links[key] = (target, identity)
                case .file, .other: break
                }
                if cache.records[key] == nil { usersFiles.append(folder + "/" + node.path) }
            }
            guard !usersFiles.isEmpty else { continue }
            keptFolders.append(
                PruneCandidate(destination: path, written: anyDigest, local: .obstructed(.holdsUsersFiles(usersFiles))))
        }
    }
}

/// What a run changes in the state, destination by destination (nil: forget it).
struct StateChanges {
    var records: [(DestinationKey, StateRecord?)] = []
}

/// Why root could not be observed. Nothing was changed.
package enum ObservationFailure: Error, Sendable {
    /// Root's private folder is not what haul made (a symlink, the wrong kind of file), or cannot be made.
    case privateArea(PrivateAreaError)
    /// Another run holds root, or the lock could not be taken.
    case lock(RunLock.Failure)
}
