import Glibc
import HaulFileSystem
import HaulDigest
import HaulManifest
import HaulThreads

/// What haul knows about one file it wrote or hashed: its identity then, and its digest.
package struct StateRecord: Sendable, Hashable {
    package var identity: FileIdentity
    package var digest: Digest
    /// Set when haul wrote the file, nil when it only found the right content in place: pruning deletes only
    /// what haul wrote, and revalidation asks only the source that delivered it.
    package var origin: Origin?

    package init(identity: FileIdentity, digest: Digest, origin: Origin? = nil) {
        self.identity = identity
        self.digest = digest
        self.origin = origin
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

    package init(manifestKey: String, sourceKey: String? = nil, etag: String? = nil, lastModified: String? = nil) {
        self.manifestKey = manifestKey
        self.sourceKey = sourceKey
        self.etag = etag
        self.lastModified = lastModified
    }

    package static func == (a: Origin, b: Origin) -> Bool {
        a === b || (a.manifestKey == b.manifestKey && a.sourceKey == b.sourceKey && a.etag == b.etag
                    && a.lastModified == b.lastModified)
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

    static let header = "haul-state\t3"
    /// The format before times were kept as seconds and nanoseconds: still read (times in whole nanoseconds), so
    /// an upgrade costs no re-hash.
    static let previousHeader = "haul-state\t2"

    static let fileName = PrivateArea.Member.state.rawValue

    /// The cache and, when the file existed but could not be used (or only in part), a warning saying why.
    /// No private folder (a root never synced): an empty cache.
    package static func load(area: PrivateArea?) -> (cache: StateCache, warning: String?) {
        let loaded = readFile(area: area)
        return (loaded.cache, loaded.warning)
    }

    /// The identity of the state file now (nil: there is none), to tell whether it is still the one read.
    static func identity(in area: PrivateArea?) -> FileIdentity? {
        guard case .success(let info)? = area?.folder.status(of: fileName), info.st_mode & S_IFMT == S_IFREG else { return nil }
        return FileIdentity(info)
    }

    /// Also the identity of the file read (nil: there was none), to tell later whether it is still the same.
    static func readFile(area: PrivateArea?) -> (cache: StateCache, warning: String?, file: FileIdentity?) {
        guard let area else { return (StateCache(), nil, nil) }
        let path = area.folder.displayPath(of: fileName)
        let descriptor: Int32
        switch area.folder.openRegularFileForReading(fileName) {
        case .success(let opened): descriptor = opened
        case .failure(let failure):
            var journaled = StateCache()
            journaled.fold(OwnershipJournal.read(in: area))
            return (journaled, failure.errno == ENOENT ? nil : "cannot read \(path): \(failure.reason); hashing every file", nil)
        }
        defer { close(descriptor) }
        var info = stat()
        let file = fstat(descriptor, &info) == 0 ? FileIdentity(info) : nil
        var bytes: [UInt8] = []
        // Room for the whole file at once: grown by doubling, an 18 MB state would be reallocated and copied
        // a dozen times.
        if file != nil, info.st_size > 0 { bytes.reserveCapacity(Int(info.st_size)) }
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 {
                return (StateCache(), "cannot read \(path): \(StoreError.systemMessage(errno)); hashing every file", file)
            }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        guard let (cache, unreadable) = parse(lines: bytes) else {
            return (StateCache(), "\(path) is corrupt or from another haul version; hashing every file to rebuild it", file)
        }
        var read = cache
        read.writtenAt = file?.modified
        read.fold(OwnershipJournal.read(in: area))
        guard unreadable == 0 else {
            let lines = unreadable == 1 ? "1 line" : "\(unreadable) lines"
            return (read, "\(path): \(lines) could not be read and \(unreadable == 1 ? "was" : "were") dropped; "
                    + "\(unreadable == 1 ? "that file is" : "those files are") hashed again", file)
        }
        return (read, nil, file)
    }

    /// One line per file: `dest dev ino size mtime ctime digest` (times as `seconds.nanoseconds`), then, for files haul wrote,
    /// `manifest-key source-key etag last-modified` (empty fields when unknown), tab-separated.
    ///
    /// Read straight from the bytes (a 100,000-file state is read on every no-op sync). Paths get a cheap check
    /// here (relative, no `..`, not haul's own folder); a record is only ever looked up by a destination the
    /// manifest validated, and pruning validates fully the paths it takes from the cache.
    /// The cache, and how many lines were unreadable and left out (each costs one re-hash, never a wrong answer);
    /// nil when the header is not this version's.
    static func parse(lines bytes: [UInt8]) -> (cache: StateCache, unreadable: Int)? {
        bytes.withUnsafeBufferPointer(parse(buffer:))
    }

    /// The cache if every line could be read.
    static func parse(_ bytes: [UInt8]) -> StateCache? {
        guard let (cache, unreadable) = parse(lines: bytes), unreadable == 0 else { return nil }
        return cache
    }

    /// Over the raw buffer, fields as byte ranges: slices of an array would retain it for every field of every line.
    private static func parse(buffer: UnsafeBufferPointer<UInt8>) -> (cache: StateCache, unreadable: Int)? {
        let newline = UInt8(ascii: "\n"), tab = UInt8(ascii: "\t")
        let headerEnd = buffer.firstIndex(of: newline) ?? buffer.endIndex
        let timesInNanoseconds = buffer[..<headerEnd].elementsEqual(previousHeader.utf8)
        guard timesInNanoseconds || buffer[..<headerEnd].elementsEqual(header.utf8) else { return nil }
        var records: [DestinationKey: StateRecord] = [:]
        records.reserveCapacity(buffer.reduce(0) { $1 == newline ? $0 + 1 : $0 })
        var fields: [Range<Int>] = []
        fields.reserveCapacity(12)
        var shared = Origin(manifestKey: "")
        var unreadable = 0
        var lineStart = headerEnd
        while lineStart < buffer.endIndex {
            let lineEnd = buffer[lineStart...].firstIndex(of: newline) ?? buffer.endIndex
            defer { lineStart = lineEnd + 1 }
            guard lineEnd > lineStart else { continue }
            fields.removeAll(keepingCapacity: true)
            var fieldStart = lineStart
            for index in lineStart..<lineEnd where buffer[index] == tab {
                fields.append(fieldStart..<index)
                fieldStart = index + 1
            }
            fields.append(fieldStart..<lineEnd)
            guard let (destination, record) = parseRecord(fields, in: buffer, timesInNanoseconds: timesInNanoseconds,
                                                          sharing: &shared) else {
                unreadable += 1
                continue
            }
            records[DestinationKey(destination)] = record
        }
        return (StateCache(records: records), unreadable)
    }

    /// One line's record, from its fields; nil if any field is not what this version writes.
    private static func parseRecord(_ fields: [Range<Int>], in buffer: UnsafeBufferPointer<UInt8>, timesInNanoseconds: Bool,
                                    sharing shared: inout Origin) -> (String, StateRecord)? {
        let field = { (number: Int) in UnsafeBufferPointer(rebasing: buffer[fields[number]]) }
        let time = { (number: Int) -> FileTime? in
            timesInNanoseconds ? Int64(decimal: field(number)).map(FileTime.init(nanosecondsSinceEpoch:))
                               : FileTime(field: field(number))
        }
        guard fields.count == 7 || fields.count == 11,
              let destination = unescape(field(0)), Self.staysInsideRoot(destination),
              let device = UInt64(decimal: field(1)),
              let inode = UInt64(decimal: field(2)),
              let size = Int64(decimal: field(3)),
              let modified = time(4),
              let changed = time(5),
              let digest = parseDigest(field(6))
        else { return nil }
        var origin: Origin?
        if fields.count == 11 {
            // Every pinned file one manifest wrote has the same origin: one instance serves them all.
            guard !fields[7].isEmpty else { return nil }
            if !shared.manifestKey.hasSameBytes(as: field(7)) {
                guard let key = unescape(field(7)) else { return nil }
                shared = Origin(manifestKey: key)
            }
            if fields[8].isEmpty && fields[9].isEmpty && fields[10].isEmpty {
                origin = shared
            } else {
                guard let sourceKey = unescape(field(8)), let etag = unescape(field(9)),
                      let lastModified = unescape(field(10)) else { return nil }
                origin = Origin(manifestKey: shared.manifestKey, sourceKey: sourceKey.isEmpty ? nil : sourceKey,
                                etag: etag.isEmpty ? nil : etag, lastModified: lastModified.isEmpty ? nil : lastModified)
            }
        }
        let identity = FileIdentity(device: device, inode: inode, size: size, modified: modified, changed: changed)
        return (destination, StateRecord(identity: identity, digest: digest, origin: origin))
    }

    /// Records a run journaled and could not save (see `OwnershipJournal`): each replaces what the state says of
    /// its destination unless the state already records that content as written by the same manifest.
    mutating func fold(_ journaled: [DestinationKey: StateRecord]) {
        for (destination, record) in journaled {
            if let existing = records[destination], existing.digest == record.digest, existing.origin == record.origin { continue }
            records[destination] = record
        }
    }

    /// The file's bytes.
    func serialized() -> [UInt8] {
        Array(serializedParts(threads: 1).joined())
    }

    /// The file's bytes in consecutive parts, formatted on up to `threads` threads: after a sync that fetched
    /// 100,000 files, formatting their lines is most of the save, and it comes at the end, when the other core
    /// is idle.
    func serializedParts(threads: Int) -> [[UInt8]] {
        // Sorted so that the file is the same for the same records (diffable, and written only when changed).
        let order = Self.sortedByName(records)
        let parts = max(1, min(threads, order.count / Self.linesPerThread))
        let header = Array((Self.header + "\n").utf8)
        guard parts > 1 else { return [header + Self.lines(order[...], of: records)] }
        let records = self.records
        return [header] + concurrentMap(count: parts, threads: parts, chunk: 1, makeContext: {}) { _, part in
            Self.lines(order[order.count * part / parts..<order.count * (part + 1) / parts], of: records)
        }
    }

    /// Fewer lines than this per thread are formatted faster than a thread starts.
    private static let linesPerThread = 8192

    private static func lines(_ order: ArraySlice<Dictionary<DestinationKey, StateRecord>.Index>,
                              of records: [DestinationKey: StateRecord]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(order.count * 160)
        for position in order {
            let (destination, record) = records[position]
            appendLine(destination.text, record, to: &out)
        }
        return out
    }

    /// One record's line.
    static func appendLine(_ destination: String, _ record: StateRecord, to out: inout [UInt8]) {
        let identity = record.identity
        Self.appendEscaped(destination, to: &out)
        Self.appendDecimal(identity.device, to: &out)
        Self.appendDecimal(identity.inode, to: &out)
        Self.appendDecimal(identity.size, to: &out)
        Self.appendTime(identity.modified, to: &out)
        Self.appendTime(identity.changed, to: &out)
        out.append(UInt8(ascii: "\t"))
        out.append(contentsOf: record.digest.algorithm.rawValue.utf8)
        out.append(UInt8(ascii: ":"))
        Hex.append(record.digest, to: &out)
        if let origin = record.origin {
            // Field by field, not through an array: 100,000 pinned files would be 100,000 arrays.
            out.append(UInt8(ascii: "\t"))
            Self.appendEscaped(origin.manifestKey, to: &out)
            out.append(UInt8(ascii: "\t"))
            Self.appendEscaped(origin.sourceKey ?? "", to: &out)
            out.append(UInt8(ascii: "\t"))
            Self.appendEscaped(origin.etag ?? "", to: &out)
            out.append(UInt8(ascii: "\t"))
            Self.appendEscaped(origin.lastModified ?? "", to: &out)
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// Positions of `records` in byte order of their names. What the sort moves and compares is mostly two
    /// integers per record (a name's first 16 bytes, big-endian), not strings: 100,000 names are sorted at the
    /// end of every sync that fetched them.
    private static func sortedByName(_ records: [DestinationKey: StateRecord]) -> [Dictionary<DestinationKey, StateRecord>.Index] {
        typealias Key = (head: UInt64, tail: UInt64, position: Dictionary<DestinationKey, StateRecord>.Index)
        var keys: [Key] = []
        keys.reserveCapacity(records.count)
        for position in records.indices {
            var name = records[position].key.text
            let (head, tail) = name.withUTF8 { bytes -> (UInt64, UInt64) in
                var words: (UInt64, UInt64) = (0, 0)
                let first = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.prefix(16)))
                withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: first) }
                return (UInt64(bigEndian: words.0), UInt64(bigEndian: words.1))
            }
            keys.append((head, tail, position))
        }
        keys.sort { a, b in
            if a.head != b.head { return a.head < b.head }
            if a.tail != b.tail { return a.tail < b.tail }
            // Same first 16 bytes (or shorter names padded with zeros): the whole names decide.
            var (left, right) = (records[a.position].key.text, records[b.position].key.text)
            return left.withUTF8 { l in right.withUTF8 { r in l.lexicographicallyPrecedes(r) } }
        }
        return keys.map(\.position)
    }

    /// A tab, then `seconds.nanoseconds` with nine digits after the point.
    private static func appendTime(_ time: FileTime, to out: inout [UInt8]) {
        appendDecimal(time.seconds, to: &out)
        out.append(UInt8(ascii: "."))
        var fraction = UInt32(clamping: time.nanoseconds)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 9) { digits in
            for index in stride(from: 8, through: 0, by: -1) {
                digits[index] = UInt8(ascii: "0") + UInt8(fraction % 10)
                fraction /= 10
            }
            out.append(contentsOf: digits)
        }
    }

    /// A tab, then the number in decimal, without making a String of it.
    private static func appendDecimal<T: BinaryInteger>(_ value: T, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\t"))
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = UInt64(value.magnitude)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var count = 0
            repeat {
                digits[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for index in stride(from: count - 1, through: 0, by: -1) { out.append(digits[index]) }
        }
    }

    /// Names a manifest in the state without writing its path: a hash of its real path. A manifest that
    /// moves no longer prunes what it wrote before, which errs on the side of keeping files.
    package static func manifestKey(path: String) -> String {
        var resolved = path
        if case .success(let real) = FileSystem.realPath(path) { resolved = real }
        return String(StreamingHasher.digest(Array(resolved.utf8), algorithm: .sha256).hex.prefix(32))
    }

    /// Written to a temporary name and renamed, so a crash leaves the old state or the new, never half. Both
    /// names are reached through the private folder's descriptor; the temporary one is made afresh (`O_EXCL`),
    /// so nothing planted under it is written through.
    package func save(in area: PrivateArea) throws(StoreError) {
        let folder = area.folder
        let temporary = Self.fileName + ".new"
        if let failure = folder.remove(temporary), failure.errno != ENOENT {
            throw StoreError(operation: "replace", path: failure.path, errno: failure.errno)
        }
        let descriptor: Int32
        switch folder.openFile(temporary, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): throw StoreError(operation: "write", path: failure.path, errno: failure.errno)
        }
        for bytes in serializedParts(threads: 2) {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    let code = written == 0 ? EIO : errno
                    close(descriptor)
                    folder.remove(temporary)
                    throw StoreError(operation: "write", path: folder.displayPath(of: temporary), errno: code)
                }
                offset += written
            }
        }
        // With a journal to retire, the new state must be durable before the journal goes: it now holds what
        // only the journal held.
        let retiresJournal = OwnershipJournal.exists(in: area)
        if retiresJournal, fsync(descriptor) != 0 {
            let code = errno
            close(descriptor)
            folder.remove(temporary)
            throw StoreError(operation: "sync", path: folder.displayPath(of: temporary), errno: code)
        }
        close(descriptor)
        if let failure = folder.rename(temporary, to: Self.fileName) {
            folder.remove(temporary)
            throw StoreError(operation: "rename into", path: failure.path, errno: failure.errno)
        }
        if retiresJournal {
            if let failure = folder.synchronize() {
                throw StoreError(operation: "sync", path: failure.path, errno: failure.errno)
            }
            OwnershipJournal.remove(in: area)
        }
    }

    static func staysInsideRoot(_ path: String) -> Bool {
        guard !path.isEmpty, !path.hasPrefix("/"), path != ".haul", !path.hasPrefix(".haul/") else { return false }
        return !path.utf8.split(separator: UInt8(ascii: "/")).contains { $0.elementsEqual("..".utf8) }
    }

    private static func parseDigest(_ field: UnsafeBufferPointer<UInt8>) -> Digest? {
        guard let colon = field.firstIndex(of: UInt8(ascii: ":")),
              let algorithm = DigestAlgorithm(rawValue: String(decoding: field[..<colon], as: UTF8.self)) else { return nil }
        return Digest(algorithm: algorithm, hexUTF8: UnsafeBufferPointer(rebasing: field[(colon + 1)...]))
    }

    /// Tabs, newlines and `%` in a name would break the line format: percent-encoded.
    private static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        // The usual case, every name of a 100,000-file state: checked and copied whole, over the contiguous bytes
        // (iterating `String.UTF8View` generically cost several times as much).
        var text = text
        let copiedWhole = text.withUTF8 { bytes -> Bool in
            guard bytes.allSatisfy({ $0 != UInt8(ascii: "%") && $0 != UInt8(ascii: "\t") && $0 != UInt8(ascii: "\n")
                && $0 != UInt8(ascii: "\r") }) else { return false }
            out.append(contentsOf: bytes)
            return true
        }
        if copiedWhole { return }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "%"): out.append(contentsOf: "%25".utf8)
            case UInt8(ascii: "\t"): out.append(contentsOf: "%09".utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: "%0A".utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: "%0D".utf8)
            default: out.append(byte)
            }
        }
    }

    private static func unescape(_ field: UnsafeBufferPointer<UInt8>) -> String? {
        if !field.contains(UInt8(ascii: "%")) { return String(decoding: field, as: UTF8.self) }
        var out: [UInt8] = []
        var index = field.startIndex
        while index < field.endIndex {
            if field[index] == UInt8(ascii: "%") {
                guard index + 2 < field.endIndex,
                      let value = UInt8(String(decoding: field[(index + 1)...(index + 2)], as: UTF8.self), radix: 16)
                else { return nil }
                out.append(value)
                index += 3
            } else {
                out.append(field[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension FixedWidthInteger {
    /// Plain decimal digits with an optional leading `-`, read from bytes; nil on anything else or on overflow.
    init?(decimal bytes: UnsafeBufferPointer<UInt8>) {
        var digits = bytes[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var value: Self = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? shifted.subtractingReportingOverflow(Self(digit))
                                             : shifted.addingReportingOverflow(Self(digit))
            guard !overflow1, !overflow2 else { return nil }
            value = next
        }
        self = value
    }
}

extension FileTime {
    /// `seconds.nanoseconds` as the state file writes it (nine digits after the point); nil for anything else.
    init?(field: UnsafeBufferPointer<UInt8>) {
        guard let point = field.firstIndex(of: UInt8(ascii: ".")), field.endIndex - point == 10,
              let seconds = Int64(decimal: UnsafeBufferPointer(rebasing: field[..<point])),
              let nanoseconds = Int32(decimal: UnsafeBufferPointer(rebasing: field[(point + 1)...])), nanoseconds >= 0
        else { return nil }
        self.init(seconds: seconds, nanoseconds: nanoseconds)
    }
}
