import Glibc
import HaulDigest
import HaulFileSystem
import HaulManifest

/// `<root>/.haul/journal`: which destinations haul is about to write, made durable with the commit itself.
///
/// The state is saved once, at the end of a run; a run killed before that (SIGKILL, OOM, power) would forget
/// that it wrote the files it committed, and a later prune would keep them forever as files haul never wrote.
/// So before each batch is renamed into place, its files are appended here (digest and origin: who wrote them),
/// in the same flush as their data; the next run folds the journal into the state it reads, and a file whose
/// content is what the journal says is haul's again. Saving the state makes the journal redundant: it is
/// removed once the new state is durable.
///
/// Lines are the state's own format (`StateCache`), with an identity that matches no file: a journaled file is
/// always hashed before its record is trusted.
package struct OwnershipJournal: Sendable {
    let area: PrivateArea
    /// The run's lock, whose state lock keeps an append from falling between a shard's reading of the journal
    /// and its removal (see `RunLock.withStateLock`); nil: nobody else writes here (tests).
    let lock: RunLock?

    static let fileName = PrivateArea.Member.journal.rawValue

    package init(area: PrivateArea, lock: RunLock? = nil) {
        self.area = area
        self.lock = lock
    }

    /// An identity no file has (size -1): the record it is in is never trusted without hashing.
    static let unknownIdentity = FileIdentity(device: 0, inode: 0, size: -1, modified: FileTime(seconds: 0, nanoseconds: 0),
                                              changed: FileTime(seconds: 0, nanoseconds: 0))

    /// Appends `owned` in one write, in the order given (the journal is read back whole). The caller flushes (the
    /// commit's syncfs covers it).
    func append(_ owned: [(destination: DestinationPath, ownership: Ownership)]) -> StoreError? {
        guard !owned.isEmpty else { return nil }
        guard let lock else { return appendLines(owned) }
        return lock.withStateLock(exclusive: false) { appendLines(owned) }
    }

    private func appendLines(_ owned: [(destination: DestinationPath, ownership: Ownership)]) -> StoreError? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(owned.count * 160)
        for (destination, ownership) in owned {
            StateFile.appendLine(destination.description, StateRecord(identity: Self.unknownIdentity, digest: ownership.digest,
                                                                        origin: ownership.origin), to: &bytes)
        }
        switch area.folder.openFile(Self.fileName, flags: O_WRONLY | O_CREAT | O_APPEND, mode: 0o600) {
        case .failure(let failure):
            return StoreError(operation: "write", path: failure.path, errno: failure.errno)
        case .success(let descriptor):
            defer { close(descriptor) }
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    return StoreError(operation: "write", path: area.folder.displayPath(of: Self.fileName),
                                      errno: written == 0 ? EIO : errno)
                }
                offset += written
            }
            return nil
        }
    }

    /// The records journaled by runs whose state was not saved; empty when there is no journal.
    static func read(in area: PrivateArea) -> [DestinationKey: StateRecord] {
        guard case .success(let descriptor) = area.folder.openRegularFileForReading(fileName) else { return [:] }
        defer { close(descriptor) }
        var bytes = Array((StateFile.header + "\n").utf8)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = Glibc.read(descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        // A line cut by a crash mid-write is simply not read: its batch was not renamed either.
        return StateFile.parse(lines: bytes)?.records ?? [:]
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

    package init(digest: Digest, origin: Origin) {
        self.digest = digest
        self.origin = origin
    }
}
