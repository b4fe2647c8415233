/// A failure of a local file operation: what was attempted, on which path, and why. A value, so that the store and
/// the planner carry it and tests compare it; the words (`cannot rename into "data/a.csv": Permission denied`) are
/// the command's (`StoreWording`).
///
/// `errno` is kept so that callers can classify (out of space, permission, …) without reading words. When haul's
/// own rule refused the operation, or the system's errno alone would mislead (a directory in the way, a symlink
/// leaving root), `problem` says why, and `errno` is 0 or the code the refusal stands for.
package struct StoreError: Error, Sendable, Equatable {
    package let operation: StoreOperation
    /// Relative to root for destinations and the directories above them; absolute for haul's temporary files.
    package let path: String
    package let errno: Int32
    /// nil for a plain system-call failure, said by `errno`.
    package let problem: FileProblem?

    package init(operation: StoreOperation, path: String, errno: Int32, problem: FileProblem? = nil) {
        self.operation = operation
        self.path = path
        self.errno = errno
        self.problem = problem
    }
}

/// What the store was doing when it failed, said after "cannot".
package enum StoreOperation: Sendable, Equatable {
    case carryIntoNewTree
    case create
    case createDirectory
    case createTemporaryDirectory
    case createTemporaryFileBeside
    case delete
    case edit
    case flush
    case hash
    case inspect
    case inspectCacheEntry
    case listCache
    case lock
    case make
    case makePrivate
    case move
    case open
    case openCache
    case openCacheEntry
    case read
    case readCacheEntry
    case readFolder
    case readSymlink
    case recordOwnership
    case rename
    case renameInto
    case replace
    case resolveRoot
    case resolveSymlink
    case setMode(UInt32)
    case setModeOf
    case sync
    case syncDirectory
    case syncDirectoryOf
    case syncFilesystem
    case use
    case useAsCache
    case write
}

/// Why a file operation failed when the system's errno does not say it: haul's own rules and what it found.
package indirect enum FileProblem: Sendable, Equatable {
    /// Something other than a regular file where one is read.
    case notARegularFile
    /// Something of this kind is where a file or folder is to go, and is not replaced.
    case inTheWay(FileKind)
    /// The same, found only after it was moved aside, and it could not be put back: it is at `aside`.
    case inTheWayNotPutBack(FileKind, aside: String, SystemError)
    /// The manifest `haul add` edits is not a regular file.
    case notEditable(FileKind)
    /// A tree's member that is not a file, folder or symlink.
    case notInATree(FileKind)
    /// A member of haul's private folder is not of its kind.
    case privateMemberNotReal(PrivateRole)
    case rootNotADirectory
    /// The root's key needs random bytes; getrandom gave none.
    case noRandomBytes
    /// Over the bound a manifest is read up to.
    case manifestTooLarge
    case nameNotUTF8
    case targetNotUTF8
    /// A parent of a destination is a symlink whose target is outside root.
    case parentEscapesRoot(parent: String, target: String)
    case parentLinkDangles(parent: String, target: String)
    case parentNotADirectory(String)
    case parentLinkLoop(String)
    /// The parent folder of a destination was not as the observation saw it.
    case parentChanged
    case parentNotCreated
    case folderChangedSincePrepared
    case folderUnreachable
    /// What a prune would delete is not what was observed: kept.
    case changedSinceObserved
    case changedWhileRead
    case replacedWhileTreeRead
    case replacedWhileRemoved
    /// A mount point met while a tree is removed: it is left as it is.
    case anotherMount
    /// rename(2) cannot reach the destination's folder from the staging area (another mount).
    case stagingOnAnotherMount(staging: String)
    /// Something appeared at the destination after the commit began; it is left as it is.
    case appearedDuringCommit
    /// A tree's switch failed, and the old tree could not be put back either: it is at `aside`.
    case oldTreeNotPutBack(failed: Int32, back: Int32, aside: String)
    /// `.haul` under root is never a destination.
    case privateArea
    case insideReplacedTree(String)
    case memberOutsideTree(String)
    case notInsideTree
    /// While carrying the user's files into a new tree: the old tree's folder is no longer one, or the new tree
    /// holds something of that name. The old tree is left as it was.
    case oldTreeFolderReplaced(String)
    case newTreeHasFile(String)
    case newTreeHasMember
    /// A folder used as a content cache holds a name (`stranger`) that a cache does not, and has no marker.
    case notACache(stranger: String)
}

/// Which of haul's private files or folders is not of its kind.
package enum PrivateRole: Sendable, Equatable {
    case folder, state, lock, journal, key
}

/// What kind of file is at a path, for decisions and for messages ("a symlink", "a FIFO"). `HaulFileSystem` reads
/// it from a `stat`.
package enum FileKind: Sendable, Equatable {
    case regular, directory, symlink, fifo, socket, characterDevice, blockDevice, unknown
}

/// A failed system call on a path: the errno and the path (as shown to the user), and, when haul rather than
/// the system refused, why.
package struct SystemError: Error, Sendable, Equatable {
    package let errno: Int32
    package let path: String
    package let problem: FileProblem?

    package init(errno: Int32, path: String, problem: FileProblem? = nil) {
        self.errno = errno
        self.path = path
        self.problem = problem
    }
}
