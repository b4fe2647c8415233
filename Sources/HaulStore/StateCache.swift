import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest

/// What haul knows about one file it wrote or hashed: its identity then, and its digest.
package struct StateRecord: Sendable, Hashable {
    package var identity: FileIdentity
    package var digest: Digest
    /// Set when haul wrote the file, nil when it only found the right content in place: pruning deletes only
    /// what haul wrote, and revalidation asks only the source that delivered it.
    package var origin: Origin?
    /// For a file haul wrote, the proof that it did (`OwnerKey`): only a record whose tag the root's key proves
    /// makes its file prunable. nil in a record an older haul wrote, or one haul did not write: it still spares a
    /// hash, but its file is deleted only once `--adopt` vouches for it.
    package var ownerTag: OwnerTag?
    /// Renamed into place by a run that could not sync its folder afterwards: a crash may still take it back. The
    /// next sync syncs the file and its folder, and clears the mark (or says again that it could not).
    package var unsynced: Bool

    package init(
        identity: FileIdentity, digest: Digest, origin: Origin? = nil, ownerTag: OwnerTag? = nil,
        unsynced: Bool = false
    ) {
        self.identity = identity
        self.digest = digest
        self.origin = origin
        self.ownerTag = ownerTag
        self.unsynced = unsynced
    }
}

/// Where a file haul wrote came from.
///
/// A class, immutable, so that a record holds a reference rather than four strings: every pinned file one
/// manifest wrote shares one instance (100,000 records stay small in memory).
package final class Origin: Sendable, Hashable {
    /// Which manifest wrote it (`StateCache.manifestKey`): a manifest prunes only its own files.
    package let manifestKey: String
    /// For an unpinned file, the source that delivered it (a hash of its URL, which may hold a token) and the
    /// validators it sent, for a conditional request later; nil for a pinned file, which its digest identifies.
    package let sourceKey: String?
    package let etag: String?
    package let lastModified: String?
    /// For an unpinned file: when its source last confirmed this copy (sent it, or answered 304), and until when
    /// it said the copy stays fresh (`Cache-Control: max-age`, `Expires`), in whole seconds since the epoch; nil
    /// when not known or not granted.
    package let checkedAt: Int64?
    package let freshUntil: Int64?
    /// For a member of a tree haul unpacked: what the tree was unpacked from (every member of one tree shares one
    /// origin). nil for a plain file.
    package let unpacked: UnpackedFrom?

    package init(
        manifestKey: String, sourceKey: String? = nil, etag: String? = nil, lastModified: String? = nil,
        checkedAt: Int64? = nil, freshUntil: Int64? = nil, unpacked: UnpackedFrom? = nil
    ) {
        self.manifestKey = manifestKey
        self.sourceKey = sourceKey
        self.etag = etag
        self.lastModified = lastModified
        self.checkedAt = checkedAt
        self.freshUntil = freshUntil
        self.unpacked = unpacked
    }

    /// The same origin, recorded as `manifestKey`'s.
    package func owned(by manifestKey: String) -> Origin {
        Origin(
            manifestKey: manifestKey, sourceKey: sourceKey, etag: etag, lastModified: lastModified,
            checkedAt: checkedAt, freshUntil: freshUntil, unpacked: unpacked)
    }

    /// The same origin, for a member of a tree unpacked from `unpacked`.
    package func unpacking(_ unpacked: UnpackedFrom) -> Origin {
        Origin(
            manifestKey: manifestKey, sourceKey: sourceKey, etag: etag, lastModified: lastModified,
            checkedAt: checkedAt, freshUntil: freshUntil, unpacked: unpacked)
    }

    /// The same origin, confirmed again at `checkedAt` (a 304), fresh until `freshUntil`.
    package func confirmed(at checkedAt: Int64, freshUntil: Int64?) -> Origin {
        Origin(
            manifestKey: manifestKey, sourceKey: sourceKey, etag: etag, lastModified: lastModified,
            checkedAt: checkedAt, freshUntil: freshUntil, unpacked: unpacked)
    }

    package static func == (a: Origin, b: Origin) -> Bool {
        a === b
            || (a.manifestKey == b.manifestKey && a.sourceKey == b.sourceKey && a.etag == b.etag
                && a.lastModified == b.lastModified && a.checkedAt == b.checkedAt && a.freshUntil == b.freshUntil
                && a.unpacked == b.unpacked)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(manifestKey)
        hasher.combine(sourceKey)
        hasher.combine(etag)
        hasher.combine(lastModified)
    }
}

/// `<root>/.haul/state`: a hint that lets a no-op sync skip hashing, never an authority. A missing, corrupt or
/// foreign file costs time (everything is hashed again), never correctness; a record is used only when the
/// file's identity is exactly the recorded one, and older than the moment it was recorded.
package struct StateCache: Sendable, Equatable {
    package var records: [DestinationKey: StateRecord]
    /// When the file these records were read from was written (its mtime): what each record's identity must be
    /// older than to be trusted (see `FileIdentity.isOlder(than:)`). nil for records not read from a file.
    package var writtenAt: FileTime?

    package init(records: [DestinationKey: StateRecord] = [:]) { self.records = records }

    /// Two caches are equal when they record the same files; when the file was written is not part of that.
    package static func == (a: StateCache, b: StateCache) -> Bool { a.records == b.records }

    /// Whether `record`, found for a file whose identity is `identity` now, still describes it: the identity is
    /// the recorded one, and it was already old when it was recorded.
    package func trusts(_ record: StateRecord, for identity: FileIdentity) -> Bool {
        guard record.identity == identity, let writtenAt else { return false }
        return identity.isOlder(than: writtenAt)
    }

    static let fileName = PrivateArea.Member.state.rawValue

    /// The most haul reads of its state (and of its journal). A record is 150–400 bytes (a name, an identity, a
    /// digest, an owner tag, an unpinned file's validators); five million records of 400 bytes, more than a 256 MiB
    /// manifest (the most haul reads) lists in practice, fit. A larger file is not one haul wrote: it costs a warning
    /// and a re-hash, never the memory to hold it.
    package static let maximumBytes = 2 << 30

    /// The journal was there when the state was read: the next save must happen, even with nothing new to record,
    /// so that the journal is retired.
    package var hasJournal = false

    /// The cache and, when the file (or the journal) existed but could not be used, or only in part, why.
    /// No private folder (a root never synced): an empty cache.
    package static func load(area: PrivateArea?) -> (cache: StateCache, problems: [StateProblem]) {
        guard let area else { return (StateCache(), []) }
        let path = area.folder.displayPath(of: fileName)
        let journal = OwnershipJournal.read(in: area)
        var read = StateCache()
        var problems: [StateProblem] = []
        switch PrivateFile.read(fileName, in: area.folder, limit: maximumBytes) {
        case .missing:
            break
        case .unreadable(let failure):
            problems.append(.unreadable(failure))
        case .tooLarge(let size):
            problems.append(.tooLarge(path: path, size: size, limit: maximumBytes))
        case .bytes(let bytes, let identity):
            guard let (records, unreadable) = StateFile.parse(lines: bytes) else {
                problems.append(.corrupt(path: path))
                break
            }
            read = StateCache(records: records)
            read.writtenAt = identity?.modified
            if unreadable > 0 { problems.append(.linesDropped(path: path, count: unreadable)) }
        }
        if let records = journal.records { read.fold(records) }
        read.hasJournal = journal.exists
        if let problem = journal.problem { problems.append(problem) }
        return (read, problems)
    }

    /// Records a run journaled and could not save (see `OwnershipJournal`): each replaces what the state says of
    /// its destination unless the state already records that content as written by the same manifest.
    mutating func fold(_ journaled: [DestinationKey: StateRecord]) {
        for (destination, record) in journaled {
            if let existing = records[destination], existing.digest == record.digest, existing.origin == record.origin {
                continue
            }
            records[destination] = record
        }
    }

    /// Names a manifest in the state by its real path relative to root's (`haul.yaml`, `../ci/assets.yaml`), so
    /// that a root moved with its manifest (a CI cache restored in another workspace) still prunes what it wrote,
    /// and a manifest that is gone can be named (`--adopt`). Symlinks are resolved, so one manifest reached two
    /// ways is one owner. `-` (standard input) is `-`.
    package static func manifestKey(path: String, root: String) -> String {
        guard path != "-" else { return "-" }
        let manifest = Self.realOrNormalized(path)
        let base = Self.realOrNormalized(root)
        let from = base.split(separator: "/"), to = manifest.split(separator: "/")
        let common = zip(from, to).prefix { $0 == $1 }.count
        return (Array(repeating: "..", count: from.count - common) + to[common...].map(String.init)).joined(
            separator: "/")
    }

    /// What manifests were named by before `manifestKey(path:root:)`: a hash of the real path. Records an older
    /// haul wrote still belong to the manifest they name.
    package static func legacyManifestKey(path: String) -> String {
        var resolved = path
        if case .success(let real) = FileSystem.realPath(path) { resolved = real }
        return String(StreamingHasher.digest(Array(resolved.utf8), algorithm: .sha256).hex.prefix(32))
    }

    /// The real path of the deepest folder of `path` that exists, with the rest appended: a root not made yet
    /// gets the same key as once it exists.
    private static func realOrNormalized(_ path: String) -> String {
        if case .success(let real) = FileSystem.realPath(path) { return real }
        let normalized = FileSystem.normalizedRoot(path)
        guard let slash = normalized.lastIndex(of: "/"), slash != normalized.startIndex else { return normalized }
        return realOrNormalized(String(normalized[..<slash])) + normalized[slash...]
    }

    /// How far a saved state is promised to survive.
    package enum Saved: Sendable, Equatable {
        /// In place, and, when it retired the journal, on disk first.
        case durable
        /// In place, but the private folder could not be synced after the rename (`error` says why): a crash may
        /// still bring the old state back, so the journal, which holds what only this state adds, is kept. The
        /// next sync saves again and retires it.
        case notDurable(StoreError)
    }

    /// Written to a temporary name and renamed, so a crash leaves the old state or the new, never half. Both
    /// names are reached through the private folder's descriptor; the temporary one is made afresh (`O_EXCL`),
    /// so nothing planted under it is written through. Throws when the state was not saved (the old one stays).
    @discardableResult
    package func save(in area: PrivateArea) throws(StoreError) -> Saved {
        let folder = area.folder
        let temporary = Self.fileName + ".new"
        if let failure = folder.remove(temporary), failure.errno != ENOENT {
            throw StoreError(operation: .replace, path: failure.path, errno: failure.errno)
        }
        let descriptor: Int32
        // Read and write: `FileSystemClock.stamp` rewrites its last byte.
        switch folder.openFile(temporary, flags: O_RDWR | O_CREAT | O_EXCL, mode: 0o600) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): throw StoreError(operation: .write, path: failure.path, errno: failure.errno)
        }
        for bytes in StateFile.serializedParts(records, threads: 2) {
            if let code = PrivateFile.write(bytes, to: descriptor) {
                close(descriptor)
                folder.remove(temporary)
                throw StoreError(operation: .write, path: folder.displayPath(of: temporary), errno: code)
            }
        }
        // The state's mtime is the moment its records are trusted against: later than every file's times, so the
        // next run trusts what this one just wrote or hashed (unless a file is dated in the future).
        if let newest = records.values.lazy.map(\.identity.newestTime).max() {
            FileSystemClock.stamp(descriptor, laterThan: newest)
        }
        // With a journal to retire, the new state must be durable before the journal goes: it now holds what
        // only the journal held.
        let retiresJournal = OwnershipJournal.exists(in: area)
        if retiresJournal, fsync(descriptor) != 0 {
            let code = errno
            close(descriptor)
            folder.remove(temporary)
            throw StoreError(operation: .sync, path: folder.displayPath(of: temporary), errno: code)
        }
        close(descriptor)
        if let failure = folder.rename(temporary, to: Self.fileName) {
            folder.remove(temporary)
            throw StoreError(operation: .renameInto, path: failure.path, errno: failure.errno)
        }
        guard retiresJournal else { return .durable }
        // The rename is durable only once the folder is: until then the journal still insures what it holds.
        if let failure = folder.synchronize() {
            return .notDurable(StoreError(operation: .syncDirectory, path: failure.path, errno: failure.errno))
        }
        OwnershipJournal.remove(in: area)
        return .durable
    }
}

/// Why the state or its journal could not be used, or only in part: a warning, never a failure. The state costs a
/// re-hash of the files it would have spared; the journal, that the files it names are not pruned this run.
package enum StateProblem: Sendable, Equatable {
    case unreadable(SystemError)
    /// Larger than `limit`, the most haul reads of its state: not a state haul wrote.
    case tooLarge(path: String, size: Int64, limit: Int)
    /// Corrupt, or written by another version of haul.
    case corrupt(path: String)
    /// `count` lines could not be read and were dropped: those files are hashed again.
    case linesDropped(path: String, count: Int)
    case journalUnreadable(SystemError)
    case journalTooLarge(path: String, size: Int64, limit: Int)
}
