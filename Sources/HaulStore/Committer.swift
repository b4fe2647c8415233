import CLinuxShims
import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulThreads
import Synchronization

package struct CommitRequest: Sendable {
    /// A verified file in the staging folder (the engine's temporary file, by name), closed.
    package var temporaryName: String
    /// The folder `temporaryName` lies in (a transfer loop's own, in the staging folder); nil: the staging folder.
    package var folder: DirectoryHandle?
    /// A verified tree that replaces the destination folder whole (see `StagedTree`); nil for a file. When set,
    /// `temporaryName`, `mode`, `hasMode` and `ownership` are not used.
    package var tree: StagedTree?
    package var destination: DestinationPath
    package var mode: FileMode
    /// The temporary file already has `mode` exactly (it was created with it): no chmod before the rename.
    package var hasMode: Bool
    /// What the state will say of the file (its digest and who wrote it), journaled before the rename so that
    /// a crash before the state is saved loses no ownership. nil: nothing to journal.
    package var ownership: Ownership?

    package init(
        temporaryName: String, in folder: DirectoryHandle? = nil, destination: DestinationPath, mode: FileMode,
        hasMode: Bool = false, ownership: Ownership? = nil
    ) {
        self.temporaryName = temporaryName
        self.folder = folder
        self.ownership = ownership
        self.destination = destination
        self.mode = mode
        self.hasMode = hasMode
    }

    /// The tree staged in `tree.folderName` in place of the folder `destination`.
    package init(tree: StagedTree, destination: DestinationPath) {
        self.init(temporaryName: tree.folderName, destination: destination, mode: FileMode(0o755), hasMode: true)
        self.tree = tree
    }
}

/// A request whose file (or tree) was renamed into place: the destination holds the new content now.
package struct Committed: Sendable, Equatable {
    /// The destination's identity right after the rename (what the state cache records); nil in the unlikely
    /// case that it cannot be read back, and for a tree (whose caller walks it for its members' identities).
    package var identity: FileIdentity?
    /// Why the rename may not survive a crash: its folder could not be synced after it. The file is in place all
    /// the same (a reader sees the new content), so this is not a failure to commit, but the run must say so.
    package var notDurable: StoreError?

    package init(identity: FileIdentity?, notDurable: StoreError? = nil) {
        self.identity = identity
        self.notDurable = notDurable
    }
}

/// How far a committed file is promised to survive. At every level a destination is replaced by rename(2) of a
/// verified file, so a killed haul never leaves it half written; the levels differ only across a power loss.
package enum Durability: String, Sendable {
    /// Every file's data is on disk before its rename, and the rename is on disk before the file is reported done:
    /// after a power loss a destination holds its old content or its new verified content. One syncfs before a
    /// batch's renames and one fsync per touched directory after: per-file fsync costs 0.25 ms on a quiet disk and
    /// 25 ms on a busy one, and this costs about the same as one of them per batch. Writeback of large files is
    /// started while their bytes arrive (`WritebackHint`), so that the syncfs finds little left to write.
    case full
    /// No flushing: the kernel writes back when it likes. Still atomic against a killed process (the rename is of
    /// a complete, verified file), but after a power loss a destination may be empty, old, or missing. For
    /// machines whose disk does not outlive a crash anyway (ephemeral CI runners, containers).
    case none
}

/// The only code that changes destinations. Each destination is replaced by rename(2), so at every moment it
/// holds either its old content or the new verified content, with its final mode. A folder that an archive's tree
/// replaces whole is exchanged with it in one step (`StagedTree` says how, and why a kill cannot mix the two).
///
/// Every batch reaches each destination's folder afresh from root's descriptor (`ContainedWalk`), at commit
/// time: a folder checked earlier in the run and swapped for a symlink since is never trusted.
package final class Committer: Sendable {
    package let root: String
    /// Where verified files wait to be committed, held open: renames come from it by name.
    package let staging: DirectoryHandle
    package let durability: Durability
    /// Where the ownership of each batch is recorded before its renames; nil: not recorded (tests, `haul add`).
    package let journal: OwnershipJournal?
    /// One batch at a time: the walk's folders are shared by a batch's preparation and its renames.
    private let serial = Mutex(())
    /// Folders a batch's walk keeps open between destinations: the committer's share of the run's descriptors.
    private let heldFolders: Int
    /// As many as are worth holding: a batch seldom spans more folders.
    package static let defaultHeldFolders = ContainedWalk.defaultRecentLimit

    package init(
        root: String, staging: DirectoryHandle, journal: OwnershipJournal? = nil, durability: Durability = .full,
        heldFolders: Int = Committer.defaultHeldFolders
    ) {
        self.root = FileSystem.normalizedRoot(root)
        self.staging = staging
        self.journal = journal
        self.durability = durability
        self.heldFolders = heldFolders
    }

    /// A failing request does not stop the others; its temporary file (or staged tree, which may hold links to
    /// carried files by then) is left for the caller to discard and its destination is untouched. Results are in
    /// request order: a `.failure` is a destination left as it was; a `.success` is a file in place, with its identity right after the rename (taken here, off the transfer loop,
    /// while it is the only thing that has touched the file), and `notDurable` when its folder's fsync failed.
    package func commit(_ batch: [CommitRequest]) -> [Result<Committed, StoreError>] {
        guard !batch.isEmpty else { return [] }
        return serial.withLock { _ in commitSerially(batch) }
    }

    private func commitSerially(_ batch: [CommitRequest]) -> [Result<Committed, StoreError>] {
        var results = [Result<Committed, StoreError>](repeating: .success(Committed(identity: nil)), count: batch.count)
        if let code = FileSystem.makeDirectories(root, mode: 0o755) {
            return results.map { _ in .failure(StoreError(operation: .createDirectory, path: root, errno: code)) }
        }
        var walk: ContainedWalk
        switch ContainedWalk.start(root: root, keeping: heldFolders) {
        case .success(let started): walk = started
        case .failure(let failure): return results.map { _ in .failure(failure) }
        }
        var replacing = Set<Int>()
        let ready = prepare(batch, walk: &walk, results: &results, replacing: &replacing)
        if let journal, !ready.isEmpty {
            var owned: [(destination: DestinationPath, ownership: Ownership)] = []
            for index in ready {
                if let tree = batch[index].tree {
                    owned += tree.members
                } else if let ownership = batch[index].ownership {
                    owned.append((batch[index].destination, ownership))
                }
            }
            let appended = Self.append(owned, to: journal, walk: &walk)
            // A journal that cannot be written (a full disk, an I/O error, a read-only `.haul`) fails the batch: a
            // file renamed in without its line is one haul wrote and, if the state cannot be saved either, would
            // never prune. Its destinations stay as they were; the next run fetches them again.
            if let failure = appended {
                let error = StoreError(
                    operation: .recordOwnership, path: failure.path, errno: failure.errno, problem: failure.problem)
                for index in ready { results[index] = .failure(error) }
                return results
            }
        }

        // A staged tree is on root's file system too (in the staging folder): syncfs writes back every dirty inode
        // of that file system, directories included, so this one call puts each member's data and each of the
        // tree's folders (their entries, carried links among them) on disk, with no walk fsyncing them one by one.
        if durability == .full, !ready.isEmpty, let failure = syncFilesystem() {
            for index in ready { results[index] = .failure(failure) }
            return results
        }

        // Folder by folder: each folder is reached again just before its renames, and synced once they are done,
        // so only one is held at a time however many a batch touches. Files finish in any order: grouped by their
        // folder's bytes first (a folder spelled in another Unicode normalization is another folder), each folder
        // is reached and synced once a batch.
        for group in Self.byFolder(ready, of: batch) {
            let folder: DirectoryHandle
            switch walk.folder(batch[group[0]].destination.parent, create: false) {
            case .folder(let reached): folder = reached
            case let other:
                for index in group {
                    results[index] = .failure(
                        Self.failure(
                            other, destination: batch[index].destination, changed: .folderChangedSincePrepared))
                }
                continue
            }
            var renamed: [Int] = []
            var oldTrees: [String] = []
            for index in group {
                if let tree = batch[index].tree {
                    let switched = switchTree(
                        tree, to: batch[index].destination, replacing: replacing.contains(index), in: folder)
                    results[index] = switched.result
                    if let old = switched.old { oldTrees.append(old) }
                } else {
                    results[index] = renameIntoPlace(batch[index], in: folder)
                }
                if case .success = results[index] { renamed.append(index) }
            }
            syncDirectory(folder, of: renamed, batch: batch, results: &results)
            // Once the folder is synced, or could not be (the switch happened either way): what a removal leaves
            // (a folder that cannot be emptied) is a leftover the next run's sweep tries again. The removal holds
            // the folders the walk would keep, which lets go of its own first.
            if !oldTrees.isEmpty { walk.forget() }
            for old in oldTrees { staging.removeTree(old, holdingAtMost: heldFolders) }
        }
        return results
    }

    /// Appends a batch's ownership to the journal. Out of descriptors, it frees the folders the walk holds for the
    /// renames (worth less than the journal) and tries again, then waits for a descriptor as a transfer does, up to
    /// two seconds, rather than failing the batch for a moment's shortage.
    private static func append(
        _ owned: [(destination: DestinationPath, ownership: Ownership)], to journal: OwnershipJournal,
        walk: inout ContainedWalk
    ) -> StoreError? {
        var failure = journal.append(owned)
        var waited = 0.0
        while let current = failure, current.errno == EMFILE || current.errno == ENFILE, waited < 2 {
            if waited > 0 { sleepThread(seconds: 0.02) }
            waited += 0.02
            walk.forget()
            failure = journal.append(owned)
        }
        return failure
    }

    private func renameIntoPlace(_ request: CommitRequest, in folder: DirectoryHandle) -> Result<Committed, StoreError>
    {
        let destination = request.destination
        guard let failed = stagedIn(request).rename(request.temporaryName, to: destination.fileName, in: folder) else {
            guard case .success(let info) = folder.status(of: destination.fileName) else {
                return .success(Committed(identity: nil))
            }
            return .success(Committed(identity: FileIdentity(info)))
        }
        return .failure(renameFailure(failed.errno, destination))
    }

    /// The folder a request's file was staged in.
    private func stagedIn(_ request: CommitRequest) -> DirectoryHandle { request.folder ?? staging }

    /// `problem`, or what a few errnos mean beyond strerror's words.
    private func renameFailure(
        _ code: Int32, _ destination: DestinationPath, problem: FileProblem? = nil
    ) -> StoreError {
        let known: FileProblem? =
            switch code {
            case EISDIR: .inTheWay(.directory)
            // strerror's "Invalid cross-device link" does not tell the user that a folder under root is another
            // mount (a bind mount, a volume) and that haul's staging area cannot reach it with rename(2).
            case EXDEV: .stagingOnAnotherMount(staging: staging.path)
            default: nil
            }
        return StoreError(
            operation: .renameInto, path: destination.description, errno: code, problem: problem ?? known)
    }

    /// Puts a staged tree in place of the folder its destination names (`replacing`: there was one when it was
    /// prepared), in one step (`StagedTree`). The result, and the name in the staging folder of the old tree
    /// (to remove once the folder is synced) when there is one.
    private func switchTree(
        _ tree: StagedTree, to destination: DestinationPath, replacing: Bool,
        in parent: DirectoryHandle
    ) -> (result: Result<Committed, StoreError>, old: String?) {
        let name = destination.fileName
        if replacing {
            switch staging.exchange(tree.folderName, with: name, in: parent)?.errno {
            case nil:
                if let failure = keepOnlyAFolder(
                    tree.folderName, exchangedWith: name, in: parent, destination: destination)
                {
                    return (.failure(failure), nil)
                }
                return (.success(Committed(identity: nil)), tree.folderName)
            case ENOENT?:
                break  // gone since it was prepared, and the user's files with it: the new tree goes where it was
            case EINVAL?:
                return replaceByTwoRenames(tree, to: destination, in: parent)
            case let code?:
                return (.failure(renameFailure(code, destination)), nil)
            }
        }
        guard let failed = staging.renameWithoutReplacing(tree.folderName, to: name, in: parent) else {
            return (.success(Committed(identity: nil)), nil)
        }
        switch failed.errno {
        case EINVAL:
            // No RENAME_NOREPLACE on this file system: a plain rename, which fails on anything but an empty folder.
            guard let plain = staging.rename(tree.folderName, to: name, in: parent) else {
                return (.success(Committed(identity: nil)), nil)
            }
            return (.failure(renameFailure(plain.errno, destination)), nil)
        case EEXIST:
            return (
                .failure(
                    renameFailure(EEXIST, destination, problem: .appearedDuringCommit)), nil
            )
        default:
            return (.failure(renameFailure(failed.errno, destination)), nil)
        }
    }

    /// After an exchange: what came out of the destination must be a folder (it was when the request was prepared).
    /// Anything else (put there since) goes back at once, untouched, and the request fails. nil: a folder came out.
    private func keepOnlyAFolder(
        _ staged: String, exchangedWith name: String, in parent: DirectoryHandle,
        destination: DestinationPath
    ) -> StoreError? {
        guard case .success(let info) = staging.status(of: staged), info.st_mode & S_IFMT != S_IFDIR else { return nil }
        let back = staging.exchange(staged, with: name, in: parent)
        return renameFailure(
            ENOTDIR, destination, problem: Self.inTheWay(info, back: back, aside: staging.displayPath(of: staged)))
    }

    /// The switch where the file system has no `RENAME_EXCHANGE`: the old tree into the staging area, then the new
    /// one into its place (the destination is missing in between; `StagedTree` says what that costs).
    private func replaceByTwoRenames(
        _ tree: StagedTree, to destination: DestinationPath,
        in parent: DirectoryHandle
    ) -> (result: Result<Committed, StoreError>, old: String?) {
        let name = destination.fileName
        let aside = StagedTree.asideName(of: tree.folderName)
        if let failed = parent.rename(name, to: aside, in: staging) {
            return (.failure(renameFailure(failed.errno, destination)), nil)
        }
        if case .success(let info) = staging.status(of: aside), info.st_mode & S_IFMT != S_IFDIR {
            let back = staging.rename(aside, to: name, in: parent)
            let problem = Self.inTheWay(info, back: back, aside: staging.displayPath(of: aside))
            return (.failure(renameFailure(ENOTDIR, destination, problem: problem)), nil)
        }
        guard let failed = staging.rename(tree.folderName, to: name, in: parent) else {
            return (.success(Committed(identity: nil)), aside)
        }
        if let back = staging.rename(aside, to: name, in: parent) {
            let problem = FileProblem.oldTreeNotPutBack(
                failed: failed.errno, back: back.errno, aside: staging.displayPath(of: aside))
            return (.failure(renameFailure(failed.errno, destination, problem: problem)), nil)
        }
        return (.failure(renameFailure(failed.errno, destination)), nil)
    }

    /// `indices` grouped by the folder their destination goes in (by its bytes), groups in order of first appearance.
    private static func byFolder(_ indices: [Int], of batch: [CommitRequest]) -> [[Int]] {
        byFolder(indices) { batch[$0].destination }
    }

    private static func byFolder(_ indices: [Int], destination: (Int) -> DestinationPath) -> [[Int]] {
        var groupOf: [DestinationKey: Int] = [:]
        var groups: [[Int]] = []
        for index in indices {
            let folder = DestinationKey(String(destination(index).parent))
            if let group = groupOf[folder] {
                groups[group].append(index)
            } else {
                groupOf[folder] = groups.count
                groups.append([index])
            }
        }
        return groups
    }

    /// Everything that can fail without touching a destination: parents (created as needed, inside root only),
    /// the final mode, and for a tree what `prepareTree` checks and carries (`replacing` gets the trees that replace
    /// a folder). The indices of the requests that passed.
    private func prepare(
        _ batch: [CommitRequest], walk: inout ContainedWalk,
        results: inout [Result<Committed, StoreError>], replacing: inout Set<Int>
    ) -> [Int] {
        var ready: [Int] = []
        ready.reserveCapacity(batch.count)
        let trees = Set(batch.lazy.filter { $0.tree != nil }.map(\.destination))
        for (index, request) in batch.enumerated() {
            let destination = request.destination
            if destination.firstComponent == PrivateArea.name {
                results[index] = .failure(
                    StoreError(operation: .write, path: destination.description, errno: 0, problem: .privateArea))
                continue
            }
            // The folder a tree replaces is gone from its place once it is switched: nothing of the same batch may
            // be put inside it (the manifest's destinations never overlap; this keeps the commit from trusting that).
            if !trees.isEmpty, let tree = Self.enclosingTree(of: destination, among: trees) {
                results[index] = .failure(
                    StoreError(
                        operation: .write, path: destination.description, errno: 0,
                        problem: .insideReplacedTree(tree.description)))
                continue
            }
            let parent: DirectoryHandle
            switch walk.folder(destination.parent, create: true) {
            case .folder(let reached):
                parent = reached
            case let other:
                results[index] = .failure(
                    Self.failure(other, destination: destination, changed: .parentNotCreated))
                continue
            }
            if let tree = request.tree {
                // Carrying holds a few folders of both trees at once: the walk's kept folders make room for them.
                walk.forget()
                switch prepareTree(tree, at: destination, in: parent) {
                case .success(let replaces):
                    if replaces { replacing.insert(index) }
                    ready.append(index)
                case .failure(let failure):
                    results[index] = .failure(failure)
                }
                continue
            }
            // The mode is set on the temporary file so that the destination never appears with wider permissions,
            // and exactly (not narrowed by the umask). The engine usually created the file with it already.
            if !request.hasMode,
                let failure = stagedIn(request).setMode(mode_t(request.mode.bits & 0o7777), of: request.temporaryName)
            {
                results[index] = .failure(
                    StoreError(
                        operation: .setMode(request.mode.bits), path: failure.path,
                        errno: failure.errno))
                continue
            }
            ready.append(index)
        }
        return ready
    }

    /// The destination among `trees` that `destination` lies strictly inside, if any.
    private static func enclosingTree(
        of destination: DestinationPath, among trees: Set<DestinationPath>
    ) -> DestinationPath? {
        destination.ancestors.first(where: trees.contains)
    }

    /// A tree's checks before anything is visible: its members lie under its destination, its staged folder is
    /// there, the destination is a folder (`true`: it is replaced; the user's files in it are carried into the
    /// staged tree now) or missing (`false`). Anything else at the destination fails the request.
    private func prepareTree(
        _ tree: StagedTree, at destination: DestinationPath, in parent: DirectoryHandle
    ) -> Result<Bool, StoreError> {
        let prefix = destination.description + "/"
        if let stray = tree.members.first(where: { !$0.destination.description.utf8.starts(with: prefix.utf8) }) {
            return .failure(
                StoreError(
                    operation: .recordOwnership, path: destination.description, errno: EINVAL,
                    problem: .memberOutsideTree(stray.destination.description)))
        }
        let staged: DirectoryHandle
        switch staging.subdirectory(tree.folderName) {
        case .success(let opened): staged = opened
        case .failure(let failure):
            return .failure(StoreError(operation: .open, path: failure.path, errno: failure.errno))
        }
        // The staging folder was made private while it filled; the tree's own folder is an ordinary folder.
        if let failure = staged.setOwnMode(0o755) {
            return .failure(
                StoreError(operation: .setMode(0o755), path: destination.description, errno: failure.errno))
        }
        let name = destination.fileName
        switch parent.status(of: name) {
        case .failure(let failure) where failure.errno == ENOENT:
            return .success(false)
        case .failure(let failure):
            return .failure(StoreError(operation: .inspect, path: destination.description, errno: failure.errno))
        case .success(let info) where info.st_mode & S_IFMT != S_IFDIR:
            return .failure(renameFailure(ENOTDIR, destination, problem: .inTheWay(FileKind(info))))
        case .success:
            break
        }
        let old: DirectoryHandle
        switch parent.subdirectory(name) {
        case .success(let opened): old = opened
        case .failure(let failure):
            return .failure(StoreError(operation: .open, path: destination.description, errno: failure.errno))
        }
        for path in tree.carried {
            if let failure = CarriedFile.carry(path, from: old, into: staged, shown: prefix + path) {
                return .failure(failure)
            }
        }
        return .success(true)
    }

    /// Why a destination's folder could not be used, as the entry's failure.
    private static func failure(
        _ reach: ContainedWalk.Reach, destination: DestinationPath, changed: FileProblem
    ) -> StoreError {
        switch reach {
        case .escapes(let problem):
            return StoreError(operation: .write, path: destination.description, errno: 0, problem: problem)
        case .blocked(let code, let problem):
            return StoreError(operation: .write, path: destination.description, errno: code, problem: problem)
        case .failed(let failure):
            return failure
        case .missing, .folder:
            return StoreError(operation: .write, path: destination.description, errno: ENOENT, problem: changed)
        }
    }

    /// Something not a folder came out where a tree was switched in: the failure says what, and, when it could not
    /// be put back, where it is.
    private static func inTheWay(_ info: stat, back: SystemError?, aside: String) -> FileProblem {
        guard let back else { return .inTheWay(FileKind(info)) }
        return .inTheWayNotPutBack(FileKind(info), aside: aside, back)
    }

    /// syncfs rather than fsync per file: one call writes back every temporary file of the batch (and the
    /// directories just created), at the cost of also flushing unrelated dirty data on that filesystem.
    private func syncFilesystem() -> StoreError? {
        // The staging folder is on the destinations' file system (rename(2) needs that): its descriptor names it.
        guard syncfs(staging.descriptor) == 0 else {
            return StoreError(operation: .syncFilesystem, path: root, errno: errno)
        }
        return nil
    }

    /// Syncs files an earlier run put in place but could not make durable (their folder's fsync failed): each
    /// file, then its folder, each folder once. Per destination, in order: nil when it is durable now, else why
    /// not (it stays in place either way). Folders are reached from root as for a commit, never through a symlink.
    package static func makeDurable(_ destinations: [DestinationPath], root: String) -> [StoreError?] {
        var results = [StoreError?](repeating: nil, count: destinations.count)
        var walk: ContainedWalk
        switch ContainedWalk.start(root: FileSystem.normalizedRoot(root)) {
        case .success(let started): walk = started
        case .failure(let failure): return results.map { _ in failure }
        }
        for group in byFolder(Array(destinations.indices), destination: { destinations[$0] }) {
            guard case .folder(let folder) = walk.folder(destinations[group[0]].parent, create: false) else {
                for index in group {
                    results[index] = StoreError(
                        operation: .sync, path: destinations[index].description, errno: ENOENT,
                        problem: .folderUnreachable)
                }
                continue
            }
            for index in group {
                let destination = destinations[index]
                switch folder.openRegularFileForReading(destination.fileName) {
                case .success(let descriptor):
                    if fsync(descriptor) != 0 {
                        results[index] = StoreError(operation: .sync, path: destination.description, errno: errno)
                    }
                    close(descriptor)
                case .failure(let failure):
                    results[index] = StoreError(operation: .sync, path: destination.description, errno: failure.errno)
                }
            }
            if let failure = folder.synchronize() {
                for index in group where results[index] == nil {
                    results[index] = StoreError(
                        operation: .syncDirectoryOf, path: destinations[index].description,
                        errno: failure.errno)
                }
            }
        }
        return results
    }

    /// A destination whose directory could not be synced is in place but might not survive a crash. It is not a
    /// failure (that would promise the old content, which is gone): it is committed, marked not durable, so the
    /// caller records what is on disk and still reports the error.
    private func syncDirectory(
        _ folder: DirectoryHandle, of renamed: [Int], batch: [CommitRequest],
        results: inout [Result<Committed, StoreError>]
    ) {
        guard durability == .full, !renamed.isEmpty, let failure = folder.synchronize() else { return }
        for index in renamed {
            guard case .success(var committed) = results[index] else { continue }
            committed.notDurable = StoreError(
                operation: .syncDirectoryOf, path: batch[index].destination.description,
                errno: failure.errno)
            results[index] = .success(committed)
        }
    }
}
