import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest

/// `<root>/.haul/journal`: which destinations haul is about to write, made durable with the commit itself.
///
/// The state is saved once, at the end of a run; a run killed before that (SIGKILL, OOM, power) would forget
/// that it wrote the files it committed, and a later prune would keep them forever as files haul never wrote.
/// So before each batch is renamed into place, its files are appended here (digest, origin and owner tag: who
/// wrote them, and the proof), in the same flush as their data; the next run folds the journal into the state it
/// reads, and a file whose content is what the journal says is haul's again. Saving the state makes the journal
/// redundant: it is removed once the new state is durable. An append that fails (a full disk, an I/O error) fails
/// its batch: a file renamed in without its line would be one haul wrote and could never prune.
///
/// Lines are the state's own format (`StateCache`), with an identity that matches no file: a journaled file is
/// always hashed before its record is trusted.
package struct OwnershipJournal: Sendable {
    let area: PrivateArea
    /// The run's lock, whose state lock keeps an append from falling between a shard's reading of the journal
    /// and its removal (see `RunLock.withStateLock`), and appends of shards running at once from tearing into each
    /// other's lines; nil: nobody else writes here (tests).
    let lock: RunLock?

    static let fileName = PrivateArea.Member.journal.rawValue

    package init(area: PrivateArea, lock: RunLock? = nil) {
        self.area = area
        self.lock = lock
    }

    /// An identity no file has (size -1): the record it is in is never trusted without hashing.
    static let unknownIdentity = FileIdentity(
        device: 0, inode: 0, size: -1, modified: FileTime(seconds: 0, nanoseconds: 0),
        changed: FileTime(seconds: 0, nanoseconds: 0))

    /// Appends `owned` in one write, in the order given, or nothing: an append that fails is cut back off, so the
    /// journal never ends in half a line. The caller flushes (the commit's syncfs covers it). Under the state's
    /// lock held exclusively: cutting back a failed append must not cut another shard's.
    func append(_ owned: [(destination: DestinationPath, ownership: Ownership)]) -> StoreError? {
        guard !owned.isEmpty else { return nil }
        guard let lock else { return appendLines(owned) }
        return lock.withStateLock(exclusive: true) { appendLines(owned) }
    }

    private func appendLines(_ owned: [(destination: DestinationPath, ownership: Ownership)]) -> StoreError? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(owned.count * 200)
        for (destination, ownership) in owned {
            StateFile.appendLine(
                destination.description,
                StateRecord(
                    identity: Self.unknownIdentity, digest: ownership.digest,
                    origin: ownership.origin, ownerTag: ownership.tag), to: &bytes)
        }
        let path = area.folder.displayPath(of: Self.fileName)
        let descriptor: Int32
        switch area.folder.openFile(Self.fileName, flags: O_RDWR | O_CREAT | O_APPEND, mode: 0o600) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return StoreError(operation: .write, path: failure.path, errno: failure.errno)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return StoreError(operation: .inspect, path: path, errno: errno) }
        // What a crash cut short (a power loss mid-append) is dropped first: these lines would be glued to it.
        let start = Self.endOfLastLine(descriptor, size: Int64(info.st_size))
        if start < info.st_size, ftruncate(descriptor, off_t(start)) != 0 {
            return StoreError(operation: .write, path: path, errno: errno)
        }
        guard let code = PrivateFile.write(bytes, to: descriptor) else { return nil }
        // Whatever part was written goes again; if even that fails, the next append drops it (see above).
        _ = ftruncate(descriptor, off_t(start))
        return StoreError(operation: .write, path: path, errno: code)
    }

    /// Where the journal's last complete line ends: `size` when it ends in a newline (or is empty), else just
    /// after the last newline before a torn tail (0 when there is none).
    private static func endOfLastLine(_ descriptor: Int32, size: Int64) -> Int64 {
        var last: UInt8 = 0
        guard size > 0, pread(descriptor, &last, 1, off_t(size - 1)) == 1, last != UInt8(ascii: "\n") else {
            return size
        }
        var end = size
        var chunk = [UInt8](repeating: 0, count: 4096)
        while end > 0 {
            let start = max(0, end - Int64(chunk.count))
            let count = Int(end - start)
            guard chunk.withUnsafeMutableBytes({ pread(descriptor, $0.baseAddress, count, off_t(start)) }) == count
            else { return size }
            if let newline = chunk[..<count].lastIndex(of: UInt8(ascii: "\n")) { return start + Int64(newline) + 1 }
            end = start
        }
        return 0
    }

    /// What the journal holds: the records journaled by runs whose state was not saved (nil when there is none, or
    /// it cannot be read: those files are then not pruned, never wrongly), whether it exists, and why it could not
    /// be used. A line a crash cut short (no newline after it) is not read: its batch was not renamed either.
    static func read(
        in area: PrivateArea
    ) -> (records: [DestinationKey: StateRecord]?, exists: Bool, problem: StateProblem?) {
        let path = area.folder.displayPath(of: fileName)
        switch PrivateFile.read(fileName, in: area.folder, limit: StateCache.maximumBytes) {
        case .missing:
            return (nil, false, nil)
        case .unreadable(let failure):
            return (nil, true, .journalUnreadable(failure))
        case .tooLarge(let size):
            return (nil, true, .journalTooLarge(path: path, size: size, limit: StateCache.maximumBytes))
        case .bytes(let bytes, _):
            let complete = bytes[..<((bytes.lastIndex(of: UInt8(ascii: "\n")) ?? -1) + 1)]
            let records = StateFile.parse(lines: Array((StateFile.header + "\n").utf8) + complete)?.records
            return (records, true, nil)
        }
    }

    /// Gone once the state that includes it is durable.
    static func remove(in area: PrivateArea) {
        area.folder.remove(fileName)
    }

    static func exists(in area: PrivateArea) -> Bool {
        if case .success = area.folder.status(of: fileName) { return true }
        return false
    }
}

/// What haul claims of a file it is about to put in place: its content and who wrote it.
package struct Ownership: Sendable {
    package var digest: Digest
    package var origin: Origin
    /// The proof, under the root's key, that haul wrote `digest` there for `origin`'s manifest; nil when the root
    /// has no key (the file is then kept by pruning until adopted).
    package var tag: OwnerTag?

    package init(digest: Digest, origin: Origin, tag: OwnerTag? = nil) {
        self.digest = digest
        self.origin = origin
        self.tag = tag
    }
}
