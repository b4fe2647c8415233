import CLinuxShims
import Glibc
import HaulThreads
import HaulDigest
import HaulFileSystem
import HaulManifest

/// What is at a destination now, as the planner needs it to decide whether to fetch.
package enum ObservedFile: Sendable, Equatable {
    case missing
    /// `digest` is nil when hashing could not change the decision (no algorithm asked, or the size already
    /// differs from the expected one).
    case regularFile(size: Int64, digest: Digest?)
    /// Something that is not a file is in the way; haul does not remove directories.
    case directory
    /// A symlink at the destination itself. Never followed: the committer replaces the link, not its target.
    case symlink
    /// FIFO, socket or device.
    case otherKind
    /// A regular file whose content could not be read (EIO, EACCES).
    case unreadableContent(StoreError)
    /// A parent directory is a symlink leading outside root; the message names it.
    case escapesRoot(String)
    case unreadable(StoreError)
}

package struct ObservationRequest: Sendable {
    package var destination: DestinationPath
    /// nil: only the kind and size are wanted (an unpinned entry).
    package var algorithm: DigestAlgorithm?
    /// When known, a file of another size is not hashed: it cannot match.
    package var expectedSize: Int64?
    /// What the state cache remembers of this destination: its digest is used, without hashing, only when
    /// the file's identity is exactly the recorded one and was older than `knownAsOf` (see
    /// `FileIdentity.isOlder(than:)`).
    package var known: StateRecord?
    /// When `known` was recorded (the state file's mtime).
    package var knownAsOf: FileTime?

    package init(destination: DestinationPath, algorithm: DigestAlgorithm? = nil, expectedSize: Int64? = nil,
                known: StateRecord? = nil, knownAsOf: FileTime? = nil) {
        self.destination = destination
        self.algorithm = algorithm
        self.expectedSize = expectedSize
        self.known = known
        self.knownAsOf = knownAsOf
    }

    /// What a manifest entry asks to know about its destination, given what `cache` recorded of it.
    package init(entry: FileEntry, cache: StateCache?) {
        self.init(destination: entry.destination, algorithm: entry.checksum?.algorithm, expectedSize: entry.size,
                  known: cache?.records[DestinationKey(entry.destination)], knownAsOf: cache?.writtenAt)
    }

    /// Whether the known record proves a file whose identity is now `identity` unchanged, without reading it.
    package func knownRecordIsProof(for identity: FileIdentity) -> Bool {
        guard let known, known.identity == identity, let knownAsOf else { return false }
        return identity.isOlder(than: knownAsOf)
    }
}

/// Looks at destinations without changing anything, and never reads a file outside root: parents are checked
/// by the same rule the committer enforces, the final component is lstat'ed and opened with O_NOFOLLOW.
package struct LocalObserver: Sendable {
    package let root: String

    /// `root` may not exist yet; every destination is then `.missing`.
    package init(root: String) {
        self.root = FileSystem.normalizedRoot(root)
    }

    /// What every destination is when root alone decides it (missing, not a directory, or holding nothing but
    /// haul's own folder); nil when each must be looked at.
    package func sameForEveryDestination() -> ObservedFile? {
        if case .everything(let file) = ParentWalker.start(root: root) { return file }
        return nil
    }

    package func observe(_ request: ObservationRequest) -> ObservedFile {
        observeAll([request], concurrency: 1).first ?? .missing
    }

    /// Results are in request order. Parent directories are resolved once each, serially (a manifest has far
    /// fewer folders than files); the per-file lstat, open and read run on `concurrency` threads.
    package func observeAll(_ requests: [ObservationRequest], concurrency: Int) -> [ObservedFile] {
        observeAllRecording(requests, concurrency: concurrency).map(\.file)
    }

    /// Like `observeAll`, with, for each file whose digest is known, the record the state cache should keep.
    package func observeAllRecording(_ requests: [ObservationRequest], concurrency: Int)
        -> [(file: ObservedFile, record: StateRecord?)] {
        guard !requests.isEmpty else { return [] }
        var walker: ParentWalker
        switch ParentWalker.start(root: root) {
        case .walking(let started): walker = started
        case .everything(let file): return Array(repeating: (file, nil), count: requests.count)
        }
        var parents: [ParentState] = []
        parents.reserveCapacity(requests.count)
        for request in requests { parents.append(walker.parent(of: request.destination)) }

        let parentStates = parents
        return concurrentMap(count: requests.count, threads: concurrency, chunk: 64, makeContext: {
            (buffer: UnsafeMutableRawBufferPointer.allocate(byteCount: FileDigester.chunkSize, alignment: 64), folder: HeldDirectory())
        }, close: { context in
            context.buffer.deallocate()
            context.folder.close()
        }, { context, index in
            Self.observeFile(requests[index], parent: parentStates[index], buffer: context.buffer, folder: &context.folder)
        })
    }

    private static func observeFile(_ request: ObservationRequest, parent: ParentState,
                                    buffer: UnsafeMutableRawBufferPointer,
                                    folder: inout HeldDirectory) -> (file: ObservedFile, record: StateRecord?) {
        var record: StateRecord?
        // Never nil: with a buffer, whatever needs hashing is hashed.
        let file = observeFile(request, parent: parent, buffer: buffer, folder: &folder, record: &record) ?? .missing
        return (file, record)
    }

    /// nil only without a `buffer`, when the answer would take hashing the file.
    fileprivate static func observeFile(_ request: ObservationRequest, parent: ParentState,
                                        buffer: UnsafeMutableRawBufferPointer?, folder: inout HeldDirectory,
                                        record: inout StateRecord?) -> ObservedFile? {
        let directory: String
        switch parent {
        case .directory(let path): directory = path
        case .missing: return .missing
        case .escapes(let message): return .escapesRoot(message)
        case .blocked(let code, let reason):
            return .unreadable(StoreError(operation: "inspect", path: request.destination.description, errno: code,
                                          detail: reason))
        case .failed(let failure): return .unreadable(failure)
        }

        let info: stat
        switch folder.linkStatus(request.destination.fileName, in: directory) {
        case .success(let found): info = found
        case .failure(ENOENT), .failure(ENOTDIR): return .missing
        case .failure(let code):
            return .unreadable(StoreError(operation: "inspect", path: request.destination.description, errno: code))
        }

        switch FileKind(mode: info.st_mode) {
        case .directory: return .directory
        case .symlink: return .symlink
        case .other: return .otherKind
        case .regular: break
        }
        let size = Int64(info.st_size)
        let identity = FileIdentity(info)
        let path = FileSystem.join(directory, request.destination.fileName)
        guard let algorithm = request.algorithm, request.expectedSize == nil || request.expectedSize == size else {
            // Nothing to hash against; an unchanged file keeps its record (an unpinned file's validators). One
            // whose identity does not prove it (too recent, touched, or only journaled by a run that crashed) is
            // hashed against the record's digest first.
            if request.algorithm == nil, let known = request.known, known.identity.size < 0 || known.identity.size == size {
                if request.knownRecordIsProof(for: identity) {
                    record = known
                } else {
                    guard let buffer else { return nil }
                    let hashed = try? FileDigester.digest(path: path, algorithm: known.digest.algorithm, buffer: buffer,
                                                          displayPath: request.destination.description)
                    if hashed?.size == size, hashed?.digest == known.digest { record = known }
                }
            }
            return .regularFile(size: size, digest: nil)
        }
        if let known = request.known, request.knownRecordIsProof(for: identity), known.digest.algorithm == algorithm {
            record = known
            return .regularFile(size: size, digest: known.digest)
        }
        guard let buffer else { return nil }
        do {
            let (hashed, digest) = try FileDigester.digest(path: path, algorithm: algorithm, buffer: buffer,
                                                           displayPath: request.destination.description)
            // The identity from before the read: if the file changed meanwhile, its ctime moved on and the record
            // will not match next time.
            if hashed == size { record = StateRecord(identity: identity, digest: digest) }
            return .regularFile(size: hashed, digest: digest)
        } catch {
            // The file changed between lstat and open: report what is there now rather than an error.
            switch error.errno {
            case ENOENT: return .missing
            case ELOOP: return .symlink
            case EISDIR: return .directory
            default: return .unreadableContent(error)
            }
        }
    }
}

/// The observer's parent checks for a stream of destinations: root resolved once, each folder once.
private struct ParentWalker {
    private var resolver: ParentResolver
    private var previous: (components: ArraySlice<String>, state: ParentState)?

    private init(resolver: ParentResolver) { self.resolver = resolver }

    enum Start {
        case walking(ParentWalker)
        /// Root itself cannot hold files: every destination under it is this.
        case everything(ObservedFile)
    }

    static func start(root: String) -> Start {
        switch FileSystem.realPath(root) {
        case .success(let resolved):
            // A file where root should be would otherwise make top-level destinations look merely missing.
            if case .success(let info) = FileSystem.status(resolved), FileKind(mode: info.st_mode) != .directory {
                let failure = StoreError(operation: "use", path: root, errno: ENOTDIR, detail: "root is not a directory")
                return .everything(.unreadable(failure))
            }
            // Nothing there yet (a first sync): no destination exists, whatever its path.
            if FileSystem.holdsNothing(in: resolved, apartFrom: DestinationPath.privateFolder) { return .everything(.missing) }
            switch DirectoryHandle.open(root) {
            case .success(let handle):
                let walk = ContainedWalk(root: handle, realRoot: resolved)
                return .walking(ParentWalker(resolver: ParentResolver(root: root, walk: walk)))
            case .failure(let failure):
                return .everything(.unreadable(StoreError(operation: "open", path: root, errno: failure.errno)))
            }
        case .failure(ENOENT), .failure(ENOTDIR):
            return .everything(.missing)
        case .failure(let code):
            return .everything(.unreadable(StoreError(operation: "resolve root", path: root, errno: code)))
        }
    }

    mutating func parent(of destination: DestinationPath) -> ParentState {
        let components = destination.parentComponents
        // Manifests list files folder by folder, so the previous parent is usually this one: skip the join.
        if let previous, previous.components == components { return previous.state }
        let state = resolver.resolve(components)
        previous = (components, state)
        return state
    }
}

/// Looks at destinations one at a time as they become known, never hashing: what the state prefetch does while
/// the manifest is still being read. Parents are checked by the same rules as `observeAll`.
struct GlanceObserver {
    private var walker: ParentWalker?
    private var everything: ObservedFile?
    private var folder = HeldDirectory()

    init(root: String) {
        switch ParentWalker.start(root: FileSystem.normalizedRoot(root)) {
        case .walking(let started): walker = started
        case .everything(let file): everything = file
        }
    }

    /// What `LocalObserver.observeAllRecording` would return for `request`, or nil when that would take hashing.
    mutating func observe(_ request: ObservationRequest) -> (file: ObservedFile, record: StateRecord?)? {
        guard let parent = walker?.parent(of: request.destination) else { return everything.map { ($0, nil) } }
        var record: StateRecord?
        guard let file = LocalObserver.observeFile(request, parent: parent, buffer: nil, folder: &folder, record: &record)
        else { return nil }
        return (file, record)
    }

    mutating func close() { folder.close() }
}
