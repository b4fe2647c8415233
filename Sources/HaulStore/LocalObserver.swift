import CLinuxShims
import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulThreads

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
    case otherKind(FileKind)
    /// A regular file whose content could not be read (EIO, EACCES).
    case unreadableContent(StoreError)
    /// A parent directory is a symlink leading outside root (`FileProblem.parentEscapesRoot`).
    case escapesRoot(StoreError)
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

    package init(
        destination: DestinationPath, algorithm: DigestAlgorithm? = nil, expectedSize: Int64? = nil,
        known: StateRecord? = nil, knownAsOf: FileTime? = nil
    ) {
        self.destination = destination
        self.algorithm = algorithm
        self.expectedSize = expectedSize
        self.known = known
        self.knownAsOf = knownAsOf
    }

    /// What a manifest entry asks to know about its destination, given what `cache` recorded of it.
    package init(entry: FileEntry, cache: StateCache?) {
        self.init(
            destination: entry.destination, algorithm: entry.checksum?.algorithm, expectedSize: entry.size,
            known: cache?.records[DestinationKey(entry.destination)], knownAsOf: cache?.writtenAt)
    }

    /// Whether the known record proves a file whose identity is now `identity` unchanged, without reading it.
    package func knownRecordIsProof(for identity: FileIdentity) -> Bool {
        guard let known, known.identity == identity, let knownAsOf else { return false }
        return identity.isOlder(than: knownAsOf)
    }
}

extension ObservationRequest {
    /// What `look` shows, and the record the state should keep of it, when that can be said without reading the
    /// file; nil when only hashing can tell.
    package func settle(_ look: FileLook) -> (file: ObservedFile, record: StateRecord?)? {
        switch look {
        case .settled(let file): (file, nil)
        case .regularFile(let identity): settle(identity)
        }
    }

    /// What a regular file whose identity is `identity` is, and the record the state should keep of it, when that
    /// can be said without reading it; nil when only hashing can tell.
    fileprivate func settle(_ identity: FileIdentity) -> (file: ObservedFile, record: StateRecord?)? {
        let size = identity.size
        guard let algorithm, expectedSize == nil || expectedSize == size else {
            // Nothing to hash against; an unchanged file keeps its record (an unpinned file's validators). One
            // whose identity does not prove it (too recent, touched, or only journaled by a run that crashed) is
            // hashed against the record's digest first.
            if algorithm == nil, let known, known.identity.size < 0 || known.identity.size == size {
                return knownRecordIsProof(for: identity) ? (.regularFile(size: size, digest: nil), known) : nil
            }
            return (.regularFile(size: size, digest: nil), nil)
        }
        if let known, knownRecordIsProof(for: identity), known.digest.algorithm == algorithm {
            return (.regularFile(size: size, digest: known.digest), known)
        }
        return nil
    }

    /// The same, by reading the file at `path` (which `settle` could not answer for).
    fileprivate func hash(
        _ identity: FileIdentity, path: String, buffer: UnsafeMutableRawBufferPointer
    )
        -> (file: ObservedFile, record: StateRecord?)
    {
        let size = identity.size
        guard let algorithm else {
            // Unpinned, with a record to confirm: the record stays only if the bytes are still the ones it names.
            guard let known else { return (.regularFile(size: size, digest: nil), nil) }
            let hashed = try? FileDigester.digest(
                path: path, algorithm: known.digest.algorithm, buffer: buffer,
                displayPath: destination.description)
            return (
                .regularFile(size: size, digest: nil),
                hashed?.size == size && hashed?.digest == known.digest ? known : nil
            )
        }
        do {
            let (hashed, digest) = try FileDigester.digest(
                path: path, algorithm: algorithm, buffer: buffer,
                displayPath: destination.description)
            // The identity from before the read: if the file changed meanwhile, its ctime moved on and the record
            // will not match next time.
            return (
                .regularFile(size: hashed, digest: digest),
                hashed == size ? StateRecord(identity: identity, digest: digest) : nil
            )
        } catch {
            // The file changed between lstat and open: report what is there now rather than an error.
            switch error.errno {
            case ENOENT: return (.missing, nil)
            case ELOOP: return (.symlink, nil)
            case EISDIR: return (.directory, nil)
            default: return (.unreadableContent(error), nil)
            }
        }
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

    /// Results are in request order.
    package func observeAll(_ requests: [ObservationRequest], concurrency: Int) -> [ObservedFile] {
        observeAllRecording(requests, concurrency: concurrency).map(\.file)
    }

    /// Like `observeAll`, with, for each file whose digest is known, the record the state cache should keep.
    package func observeAllRecording(
        _ requests: [ObservationRequest], concurrency: Int
    )
        -> [(file: ObservedFile, record: StateRecord?)]
    {
        let root = self.root
        return concurrentMap(
            count: requests.count, threads: concurrency, chunk: 64, makeContext: { Worker(root: root) },
            close: { $0.close() }
        ) { worker, index in worker.observe(requests[index]) }
    }

    /// What lstat shows at each destination, in order, parents checked: no file is opened. Looking can go on while
    /// something else (reading the state) gets what `ObservationRequest.settle` needs to judge each file from
    /// what was seen.
    package func look(at destinations: [DestinationPath], concurrency: Int) -> [FileLook] {
        // A first sync into an empty root: 100,000 lookups would each say just this.
        if let same = sameForEveryDestination() { return Array(repeating: .settled(same), count: destinations.count) }
        let root = self.root
        return concurrentMap(
            count: destinations.count, threads: concurrency, chunk: 64, makeContext: { Worker(root: root) },
            close: { $0.close() }
        ) { worker, index in worker.look(at: destinations[index]).look }
    }
}

/// What `lstat` shows at a destination, its parents checked, before any content is read.
package enum FileLook: Sendable {
    /// All there is to know without reading: nothing there, not a regular file, or out of reach.
    case settled(ObservedFile)
    case regularFile(FileIdentity)
}

/// One observing thread's own resources: its parent walk (each folder resolved once per thread), the folder it is
/// in held open, and a read buffer for hashing.
private struct Worker {
    private var walker: ParentWalker?
    private var everything: ObservedFile?
    private var folder = HeldDirectory()
    private var buffer: UnsafeMutableRawBufferPointer?

    init(root: String) {
        switch ParentWalker.start(root: root) {
        case .walking(let started): walker = started
        case .everything(let file): everything = file
        }
    }

    mutating func close() {
        folder.close()
        ReadBuffer.free(buffer)
    }

    /// What is at the request's destination, hashed if need be.
    mutating func observe(_ request: ObservationRequest) -> (file: ObservedFile, record: StateRecord?) {
        let (found, directory) = look(at: request.destination)
        switch found {
        case .settled(let file):
            return (file, nil)
        case .regularFile(let identity):
            if let settled = request.settle(identity) { return settled }
            guard let directory else { return (.missing, nil) }
            guard let buffer = self.buffer ?? ReadBuffer.allocate(FileDigester.chunkSize) else {
                return (
                    .unreadable(StoreError(operation: .read, path: request.destination.description, errno: ENOMEM)),
                    nil
                )
            }
            self.buffer = buffer
            return request.hash(
                identity, path: FileSystem.join(directory, request.destination.fileName), buffer: buffer)
        }
    }

    /// The lstat of one destination, and the folder it is in when it is a regular file.
    mutating func look(at destination: DestinationPath) -> (look: FileLook, folder: String?) {
        guard let parent = walker?.parent(of: destination) else { return (.settled(everything ?? .missing), nil) }
        let directory: String
        switch parent {
        case .directory(let path): directory = path
        case .missing: return (.settled(.missing), nil)
        case .escapes(let problem):
            let failure = StoreError(operation: .inspect, path: destination.description, errno: 0, problem: problem)
            return (.settled(.escapesRoot(failure)), nil)
        case .blocked(let code, let problem):
            let failure = StoreError(operation: .inspect, path: destination.description, errno: code, problem: problem)
            return (.settled(.unreadable(failure)), nil)
        case .failed(let failure): return (.settled(.unreadable(failure)), nil)
        }
        let info: stat
        switch folder.linkStatus(destination.fileName, in: directory) {
        case .success(let found): info = found
        case .failure(Errno(ENOENT)), .failure(Errno(ENOTDIR)): return (.settled(.missing), nil)
        case .failure(let failure):
            return (
                .settled(
                    .unreadable(StoreError(operation: .inspect, path: destination.description, errno: failure.code))),
                nil
            )
        }
        switch FileKind(info) {
        case .directory: return (.settled(.directory), nil)
        case .symlink: return (.settled(.symlink), nil)
        case .regular: return (.regularFile(FileIdentity(info)), directory)
        case let other: return (.settled(.otherKind(other)), nil)
        }
    }
}

/// The observer's parent checks for a stream of destinations: root resolved once, each folder once.
private struct ParentWalker {
    private var resolver: ParentResolver
    private var previous: (parent: Substring, state: ParentState)?

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
                let failure = StoreError(operation: .use, path: root, errno: ENOTDIR, problem: .rootNotADirectory)
                return .everything(.unreadable(failure))
            }
            // Nothing there yet (a first sync): no destination exists, whatever its path.
            if FileSystem.holdsNothing(in: resolved, apartFrom: DestinationPath.privateFolder) {
                return .everything(.missing)
            }
            switch DirectoryHandle.open(root) {
            case .success(let handle):
                // No folder kept between walks: the resolver remembers each folder's answer already.
                let walk = ContainedWalk(root: handle, realRoot: resolved, keeping: 0)
                return .walking(ParentWalker(resolver: ParentResolver(root: root, walk: walk)))
            case .failure(let failure):
                return .everything(.unreadable(StoreError(operation: .open, path: root, errno: failure.errno)))
            }
        case .failure(Errno(ENOENT)), .failure(Errno(ENOTDIR)):
            return .everything(.missing)
        case .failure(let failure):
            return .everything(.unreadable(StoreError(operation: .resolveRoot, path: root, errno: failure.code)))
        }
    }

    mutating func parent(of destination: DestinationPath) -> ParentState {
        let parent = destination.parent
        // Manifests list files folder by folder, so the previous parent is usually this one: skip the lookup.
        if let previous, previous.parent.hasSameBytes(as: parent) { return previous.state }
        let state = resolver.resolve(parent)
        previous = (parent, state)
        return state
    }
}
