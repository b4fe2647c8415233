import Glibc
import Haul
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore

/// Every sentence about local files: the store's failures, the planner's obstacles, what a prune keeps, the state's
/// and the cache's problems, a busy root. The store and the planner return values; only this type words them, so
/// a message is changed in one place and tested from values (`StoreWordingTests`).
package enum StoreWording {
    /// `cannot rename into "data/a.csv": Permission denied`.
    package static func sentence(_ error: StoreError) -> String {
        "cannot \(operation(error.operation)) \(Quoted.text(error.path)): \(cause(error))"
    }

    /// The message shown under `destination`'s name (`! data/a.csv (…)`, `error: data/a.csv: …`): the path is
    /// left out when it is the destination itself, so a line does not name its file twice.
    package static func sentence(_ error: StoreError, about destination: String) -> String {
        error.path == destination ? "cannot \(operation(error.operation)) it: \(cause(error))" : sentence(error)
    }

    /// `data/a.csv: Permission denied`.
    package static func sentence(_ failure: SystemError) -> String { "\(failure.path): \(reason(failure))" }

    /// Why, after the path: haul's own finding when there is one, else the system's words for the errno.
    package static func cause(_ error: StoreError) -> String {
        error.problem.map(problem) ?? Errno(error.errno).description
    }

    /// The same for a bare system call's failure.
    package static func reason(_ failure: SystemError) -> String {
        failure.problem.map(problem) ?? Errno(failure.errno).description
    }

    /// What was attempted, to follow "cannot".
    package static func operation(_ operation: StoreOperation) -> String {
        switch operation {
        case .carryIntoNewTree: "carry into the new tree"
        case .create: "create"
        case .createDirectory: "create directory"
        case .createTemporaryDirectory: "create a temporary directory in"
        case .createTemporaryFileBeside: "create a temporary file beside"
        case .delete: "delete"
        case .edit: "edit"
        case .flush: "flush"
        case .hash: "hash"
        case .inspect: "inspect"
        case .inspectCacheEntry: "inspect cache entry"
        case .listCache: "list the cache"
        case .lock: "lock"
        case .make: "make"
        case .makePrivate: "make private"
        case .move: "move"
        case .open: "open"
        case .openCache: "open the cache"
        case .openCacheEntry: "open cache entry"
        case .read: "read"
        case .readCacheEntry: "read cache entry"
        case .readFolder: "read the folder"
        case .readSymlink: "read the symlink"
        case .recordOwnership: "record its ownership in"
        case .rename: "rename"
        case .renameInto: "rename into"
        case .replace: "replace"
        case .resolveRoot: "resolve root"
        case .resolveSymlink: "resolve the symlink"
        case .setMode(let bits): "set mode \(FileMode(bits)) on"
        case .setModeOf: "set the mode of"
        case .sync: "sync"
        case .syncDirectory: "sync the directory"
        case .syncDirectoryOf: "sync the directory of"
        case .syncFilesystem: "sync the filesystem of"
        case .use: "use"
        case .useAsCache: "use as a cache"
        case .write: "write"
        }
    }

    package static func problem(_ problem: FileProblem) -> String {
        switch problem {
        case .notARegularFile: "not a regular file"
        case .inTheWay(let kind): "\(self.kind(kind)) is in the way"
        case .inTheWayNotPutBack(let kind, let aside, let back):
            "\(self.kind(kind)) is in the way; it could not be put back, and is at \(aside): \(reason(back))"
        case .notEditable(let kind):
            "it is \(self.kind(kind)), not a regular file (haul add edits a regular file or makes a new one)"
        case .notInATree(let kind): "it is \(self.kind(kind)); a tree holds only files, folders and symlinks"
        case .privateMemberNotReal(let role): "not a real directory; \(rule(role))"
        case .rootNotADirectory: "root is not a directory"
        case .noRandomBytes: "the system gave no random bytes"
        case .manifestTooLarge: ManifestLoader.tooLarge
        case .nameNotUTF8: "its name is not UTF-8"
        case .targetNotUTF8: "its target is not UTF-8"
        case .parentEscapesRoot(let parent, let target): "parent \"\(parent)\" is a symlink to \(target), outside root"
        case .parentLinkDangles(let parent, let target):
            "parent \"\(parent)\" is a symlink to \(target), which does not exist"
        case .parentNotADirectory(let parent): "parent \"\(parent)\" is not a directory"
        case .parentLinkLoop(let parent): "parent \"\(parent)\" is a symlink loop"
        case .parentChanged: "its parent directory changed since it was observed"
        case .parentNotCreated: "its parent could not be created"
        case .folderChangedSincePrepared: "its folder changed since it was prepared"
        case .folderUnreachable: "its folder cannot be reached"
        case .changedSinceObserved: "it changed since it was observed; kept"
        case .changedWhileRead: "it changed while it was read"
        case .replacedWhileTreeRead: "it was replaced while the tree was read"
        case .replacedWhileRemoved: "it was replaced while it was being removed"
        case .anotherMount: "another file system is mounted there; it is left as it is"
        case .stagingOnAnotherMount(let staging):
            "its folder is on another mount than haul's staging area \(staging) (rename(2) cannot cross mounts)"
        case .appearedDuringCommit: "something was put there since the commit began; it is left as it is"
        case .oldTreeNotPutBack(let failed, let back, let aside):
            "\(Errno(failed)); the old tree could not be put back either (\(Errno(back))): it is at \(aside)"
        case .privateArea: "\".haul\" under root is haul's own area"
        case .insideReplacedTree(let tree): "it is inside \"\(tree)\", which the same commit replaces whole"
        case .memberOutsideTree(let member): "its member \"\(member)\" is not inside it"
        case .notInsideTree: "not a path inside the tree"
        case .oldTreeFolderReplaced(let folder):
            "\"\(folder)\" in the old tree is no longer a folder; the old tree is left as it was"
        case .newTreeHasFile(let folder):
            "the new tree has \"\(folder)\", which is not a folder; the old tree is left as it was"
        case .newTreeHasMember: "the new tree has a member of that name; the old tree is left as it was"
        case .notACache(let stranger):
            "it is not a haul content cache: it has no \(ContentCache.markerName) file and holds "
                + "\"\(stranger)\", which a cache does not"
        }
    }

    /// "a regular file", "a FIFO", …
    package static func kind(_ kind: FileKind) -> String {
        switch kind {
        case .regular: "a regular file"
        case .directory: "a directory"
        case .symlink: "a symlink"
        case .fifo: "a FIFO"
        case .socket: "a socket"
        case .characterDevice: "a character device"
        case .blockDevice: "a block device"
        case .unknown: "a file of unknown type"
        }
    }

    /// What a member of haul's private folder must be.
    static func rule(_ role: PrivateRole) -> String {
        switch role {
        case .folder: "haul's folder must be a real directory inside root"
        case .state: "haul's state must be a regular file"
        case .lock: "haul's lock must be a regular file"
        case .journal: "haul's journal must be a regular file"
        case .key: "haul's key must be a regular file"
        }
    }

    // MARK: - The planner's words

    /// Why an entry is refused (or a pruned path kept), under its destination's name.
    package static func obstacle(_ obstacle: Obstacle, about destination: DestinationPath) -> String {
        switch obstacle {
        case .inTheWay(.directory): "a directory is in the way"
        case .inTheWay: "something that is not a regular file is in the way"
        case .inTheWayOfTree(let kind):
            "\(self.kind(kind)) is in the way of the folder the archive is unpacked into"
        case .holdsUsersFiles(let files):
            "it holds \(files.count == 1 ? "1 file" : "\(files.count) files") the archive did not put there "
                + "(\(Quoted.firstFew(files) { Quoted.text($0) })), kept with the folder"
        case .failed(let error): sentence(error, about: destination.description)
        case .listUnverified(let list):
            "its checksum list \(Quoted.text(list)) could not be verified this run; left as it is"
        case .notInList(let list, let name):
            "the checksum list \(Quoted.text(list)) names no \(Quoted.text(name)); left as it is"
        }
    }

    /// Why a prune keeps a file, after "not pruned: ".
    package static func kept(_ reason: KeepReason, about destination: DestinationPath) -> String {
        switch reason {
        case .modified: "modified since haul wrote it"
        case .pointsElsewhere: "it points elsewhere since haul unpacked it"
        case .replacedBySymlink: "replaced by a symlink since haul wrote it"
        case .unidentified: "could not be identified"
        case .obstacle(let obstacle): self.obstacle(obstacle, about: destination)
        }
    }

    // MARK: - Haul's own files

    /// Why haul will not use a root's private folder.
    package static func sentence(_ failure: PrivateAreaError) -> String {
        switch failure {
        case .unsafe(let path, .kind(let kind), let role): "\(path) is \(self.kind(kind)); \(rule(role))"
        case .unsafe(let path, .symlink(let target), let role): "\(path) is a symlink to \(target); \(rule(role))"
        case .unsafe(let path, .noLongerADirectory, let role): "\(path) is no longer a directory; \(rule(role))"
        case .system(let error): sentence(error)
        }
    }

    /// Why root could not be observed: its private folder, or its lock.
    package static func sentence(_ failure: ObservationFailure) -> String {
        switch failure {
        case .privateArea(let error): sentence(error)
        case .lock(let error): sentence(error)
        }
    }

    /// Why the state or its journal was not used, and what that costs.
    package static func sentence(_ problem: StateProblem) -> String {
        switch problem {
        case .unreadable(let failure): "cannot read \(sentence(failure)); hashing every file"
        case .tooLarge(let path, let size, let limit):
            "\(path) is \(size) bytes, more than the \(gibibytes(limit)) haul reads of a state; "
                + "hashing every file to rebuild it"
        case .corrupt(let path): "\(path) is corrupt or from another haul version; hashing every file to rebuild it"
        case .linesDropped(let path, 1): "\(path): 1 line could not be read and was dropped; that file is hashed again"
        case .linesDropped(let path, let count):
            "\(path): \(count) lines could not be read and were dropped; those files are hashed again"
        case .journalUnreadable(let failure): "cannot read \(sentence(failure)); the files it names are not pruned"
        case .journalTooLarge(let path, let size, let limit):
            "\(path) is \(size) bytes, more than the \(gibibytes(limit)) haul reads of its journal; "
                + "the files it names are not pruned"
        }
    }

    /// Another run holds the root: who, and what to do about it.
    package static func sentence(_ failure: RunLock.Failure) -> String {
        switch failure {
        case .busy(let root, let holder, let shard, let waited):
            let overlapping = shard.map { " or a shard of it overlapping shard \($0)" } ?? ""
            let advice =
                waited.map { "; waited \(seconds($0)) (--wait-timeout)" } ?? "; wait for it, or run with --wait"
            return "another haul is syncing \"\(root)\"\(overlapping) (\(self.holder(holder)))\(advice)"
        case .system(let error):
            return sentence(error)
        }
    }

    /// The line another run wrote about itself in the lock file.
    package static func holder(_ line: String?) -> String { line ?? "holder unknown" }

    /// The state's bound is a whole number of GiB: said as one (`2 GiB`).
    private static func gibibytes(_ bytes: Int) -> String { "\(bytes >> 30) GiB" }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\((value * 10).rounded() / 10) s"
    }

    // MARK: - The content cache

    package static func sentence(_ failure: ContentCache.OpenFailure) -> String {
        switch failure {
        case .missing(let path): "cannot open the cache \"\(path)\": \(Errno(ENOENT))"
        case .notACache(let path, let stranger):
            "\"\(path)\" is not a haul content cache: it has no \(ContentCache.markerName) file and holds "
                + "\"\(stranger)\", which a cache does not"
        case .failed(let error): sentence(error)
        }
    }

    /// A cache entry that was not its digest's file: what was found, and whether it is gone.
    package static func sentence(_ entry: CorruptEntry) -> String {
        let found =
            switch entry.found {
            case .notARegularFile(let kind): "\(self.kind(kind)), not a regular file"
            case .size(let size, let pinned): "\(size) bytes, not the \(pinned) the manifest pins"
            case .digest(let digest): "digest \(digest)"
            case .shortRead(let count, let size): "\(count) bytes where it had \(size)"
            }
        let removal = entry.removal.map { "; it could not be removed (\(reason($0)))" } ?? ": removed"
        return "the cache entry \(entry.path) is not the file of its digest (\(found))\(removal)"
    }
}
