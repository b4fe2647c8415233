import CLinuxShims
import Glibc
import HaulFileSystem
import HaulManifest
import Synchronization

public struct CommitRequest: Sendable {
    /// A verified file in the staging folder (the engine's temporary file, by name), closed.
    public var temporaryName: String
    public var destination: DestinationPath
    public var mode: FileMode
    /// The temporary file already has `mode` exactly (it was created with it): no chmod before the rename.
    public var hasMode: Bool

    public init(temporaryName: String, destination: DestinationPath, mode: FileMode, hasMode: Bool = false) {
        self.temporaryName = temporaryName
        self.destination = destination
        self.mode = mode
        self.hasMode = hasMode
    }
}

public enum Durability: Sendable {
    /// One syncfs before the renames (so no rename can expose a file whose data is not on disk), one fsync
    /// per touched directory after (so the renames themselves survive a crash). Per-file fsync costs 0.25 ms on a
    /// quiet disk and 25 ms on a busy one; this costs about the same as one of them per batch.
    case batched
    /// No syncing at all: a crash may leave a destination empty or old. Only for tests on slow disks and for
    /// benchmarks against tools that do not sync either.
    case none
}

/// The only code that changes destinations. Each destination is replaced by rename(2), so at every moment it
/// holds either its old content or the new verified content, with its final mode.
public final class Committer: Sendable {
    public let root: String
    /// Where verified files wait to be committed, held open: renames come from it by name.
    public let staging: DirectoryHandle
    public let durability: Durability
    /// Directories already known to exist and to pass the path-safety rule, kept across batches so that 5000
    /// files in 10 folders lstat each folder once. nil until root exists.
    private let parents = Mutex<ParentResolver?>(nil)

    public init(root: String, staging: DirectoryHandle, durability: Durability = .batched) {
        self.root = FileSystem.normalizedRoot(root)
        self.staging = staging
        self.durability = durability
    }

    /// A failing request does not stop the others; its temporary file is left for the caller to discard and its
    /// destination is untouched. Results are in request order: for a file committed, its identity right after the
    /// rename (what the state cache records; nil in the unlikely case that it cannot be read back), taken here,
    /// off the transfer loop, while it is the only thing that has touched the file.
    public func commit(_ batch: [CommitRequest]) -> [Result<FileIdentity?, StoreError>] {
        guard !batch.isEmpty else { return [] }
        var results = [Result<FileIdentity?, StoreError>](repeating: .success(nil), count: batch.count)
        var ready = prepare(batch, results: &results)

        if durability == .batched, !ready.isEmpty, let failure = syncFilesystem() {
            for item in ready { results[item.index] = .failure(failure) }
            return results
        }

        var renamed: [Ready] = []
        renamed.reserveCapacity(ready.count)
        var lostParent = false
        var folder = HeldDirectory()
        defer { folder.close() }
        for item in ready {
            let to = folder.locate(item.fileName, in: item.directory)
            let rc = item.sourceName.withCString { source in to.name.withCString { renameat(staging.descriptor, source, to.directory, $0) } }
            if rc == 0 {
                renamed.append(item)
                if case .success(let info) = folder.linkStatus(item.fileName, in: item.directory) {
                    results[item.index] = .success(FileIdentity(info))
                }
                continue
            }
            let code = errno
            let destination = batch[item.index].destination.description
            let detail: String? = switch code {
            case EISDIR: "a directory is in the way"
            // strerror's "Invalid cross-device link" does not tell the user that a folder under root is another
            // mount (a bind mount, a volume) and that haul's staging area cannot reach it with rename(2).
            case EXDEV: "its folder is on another mount than haul's staging area \(staging.path) "
                + "(rename(2) cannot cross mounts)"
            default: nil
            }
            results[item.index] = .failure(StoreError(operation: "rename into", path: destination, errno: code, detail: detail))
            if code == ENOENT || code == ENOTDIR { lostParent = true }
        }
        ready.removeAll()
        if lostParent { parents.withLock { $0?.forget() } }

        if durability == .batched { syncDirectories(of: renamed, batch: batch, results: &results) }
        return results
    }

    /// A request that passed every check: its temporary file's name and its destination's folder and name.
    struct Ready {
        var index: Int
        var sourceName: String
        var directory: String
        var fileName: String
    }

    /// Everything that can fail without touching a destination: parents (created as needed) and the final mode.
    private func prepare(_ batch: [CommitRequest], results: inout [Result<FileIdentity?, StoreError>]) -> [Ready] {
        var ready: [Ready] = []
        ready.reserveCapacity(batch.count)
        parents.withLock { resolver in
            if resolver == nil {
                switch startResolver() {
                case .success(let started): resolver = started
                case .failure(let failure):
                    for index in batch.indices { results[index] = .failure(failure) }
                    return
                }
            }
            guard var current = resolver.take() else { return }
            defer { resolver = current }
            for (index, request) in batch.enumerated() {
                let destination = request.destination
                if destination.components.first == ".haul" {
                    results[index] = .failure(StoreError(operation: "write", path: destination.description, errno: 0,
                                                         detail: "\".haul\" under root is haul's own area"))
                    continue
                }
                switch current.resolve(destination.parentComponents, create: true) {
                case .directory(let directory):
                    ready.append(Ready(index: index, sourceName: request.temporaryName, directory: directory,
                                       fileName: destination.fileName))
                case .escapes(let message):
                    results[index] = .failure(StoreError(operation: "write", path: destination.description, errno: 0,
                                                         detail: message))
                case .blocked(let code, let reason):
                    results[index] = .failure(StoreError(operation: "write", path: destination.description, errno: code,
                                                         detail: reason))
                case .failed(let failure):
                    results[index] = .failure(failure)
                case .missing:
                    // Unreachable while creating; kept as a failure rather than a trap.
                    results[index] = .failure(StoreError(operation: "create the parent of", path: destination.description,
                                                         errno: ENOENT))
                }
            }
        }

        // The mode is set on the temporary file so that the destination never appears with wider permissions,
        // and exactly (not narrowed by the umask). The engine usually created the file with it already.
        return ready.filter { item in
            let request = batch[item.index]
            if request.hasMode { return true }
            guard let failure = staging.setMode(mode_t(request.mode.bits & 0o7777), of: item.sourceName) else { return true }
            results[item.index] = .failure(StoreError(operation: "set mode \(request.mode) on", path: failure.path,
                                                      errno: failure.errno))
            return false
        }
    }

    private func startResolver() -> Result<ParentResolver, StoreError> {
        if let code = FileSystem.makeDirectories(root, mode: 0o755) {
            return .failure(StoreError(operation: "create directory", path: root, errno: code))
        }
        switch FileSystem.realPath(root) {
        case .success(let realRoot):
            return .success(ParentResolver(root: root, realRoot: realRoot, remembersFailures: false))
        case .failure(let code):
            return .failure(StoreError(operation: "resolve root", path: root, errno: code))
        }
    }

    /// syncfs rather than fsync per file: one call writes back every temporary file of the batch (and the
    /// directories just created), at the cost of also flushing unrelated dirty data on that filesystem.
    private func syncFilesystem() -> StoreError? {
        // The staging folder is on the destinations' file system (rename(2) needs that): its descriptor names it.
        guard syncfs(staging.descriptor) == 0 else { return StoreError(operation: "sync the filesystem of", path: root, errno: errno) }
        return nil
    }

    /// A destination whose directory could not be synced is in place but might not survive a crash: reported as
    /// failed so that the caller does not record it as done.
    private func syncDirectories(of renamed: [Ready], batch: [CommitRequest],
                                 results: inout [Result<FileIdentity?, StoreError>]) {
        // By bytes: two folders whose names differ only in Unicode normalization are two folders.
        var failures: [DestinationKey: Int32] = [:]
        var synced = Set<DestinationKey>()
        for item in renamed where synced.insert(DestinationKey(item.directory)).inserted {
            if let code = FileSystem.syncDirectory(item.directory) { failures[DestinationKey(item.directory)] = code }
        }
        guard !failures.isEmpty else { return }
        for item in renamed {
            guard let code = failures[DestinationKey(item.directory)] else { continue }
            results[item.index] = .failure(StoreError(operation: "sync the directory of",
                                                      path: batch[item.index].destination.description, errno: code))
        }
    }
}
