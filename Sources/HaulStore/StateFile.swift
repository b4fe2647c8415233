import HaulDigest
import HaulManifest
import HaulThreads

/// The text of `<root>/.haul/state` (and of its journal): one line per file, tab-separated, in byte order of the
/// names, read and written straight from and to bytes.
///
/// Written by hand rather than with the standard library's number and string conversions, because a 100,000-file
/// state is read on every no-op sync and written at the end of every sync that fetched: measured
/// (`HAUL_STORE_BENCH=1 swift test -c release -Xswiftc -enable-testing --filter StoreBenchmarks.testState`),
/// numbers parsed from bytes load it in 0.17–0.27 s against 0.34–0.41 s through `Int64(String)` (a tenth of a
/// no-op), and a sort on each name's first 16 bytes as integers plus lines formatted into one buffer save it in
/// 0.10 s against 0.54–0.80 s for `records.sorted { $0.key < $1.key }` and `String(value)` fields.
enum StateFile {
    static let header = "haul-state\t5"
    /// The formats before: `4` had no lines for unpacked trees, `3` wrote no owner codes (its records of files
    /// haul wrote are read without one), `2` kept times in whole nanoseconds. All are still read, so an upgrade
    /// costs no re-hash.
    static let previousHeaders = ["haul-state\t4", "haul-state\t3"]
    static let nanosecondsHeader = "haul-state\t2"

    /// One line per file: `dest dev ino size mtime ctime digest` (times as `seconds.nanoseconds`), then, for files haul wrote,
    /// `manifest-key source-key etag last-modified checked-at fresh-until owner-code sync`, tab-separated, empty
    /// fields when unknown: the times (seconds since the epoch) say when an unpinned file's server last confirmed
    /// it and until when it stays fresh; the owner code (`OwnerTag`, 32 hex digits) proves that haul wrote it; `sync`
    /// is `unsynced` when its folder could not be synced after its rename (the next sync does it). A member of a
    /// tree haul unpacked adds `archive rules tree folder`: the archive's digest, the extract rule's fingerprint, the
    /// tree's digest (empty when not computed) and the folder the tree is (so that pruning knows the whole tree). Lines of the formats before end after `last-modified` or after
    /// `fresh-until`, without a code.
    ///
    /// Read straight from the bytes (a 100,000-file state is read on every no-op sync). Paths get a cheap check
    /// here (relative, no `..`, not haul's own folder); a record is only ever looked up by a destination the
    /// manifest validated, and pruning validates fully the paths it takes from the cache.
    /// The cache, and how many lines were unreadable and left out (each costs one re-hash, never a wrong answer);
    /// nil when the header is not this version's.
    static func parse(lines bytes: [UInt8]) -> (records: [DestinationKey: StateRecord], unreadable: Int)? {
        bytes.withUnsafeBufferPointer(parse(buffer:))
    }

    /// The records if every line could be read.
    static func parse(_ bytes: [UInt8]) -> [DestinationKey: StateRecord]? {
        guard let (records, unreadable) = parse(lines: bytes), unreadable == 0 else { return nil }
        return records
    }

    /// Over the raw buffer, fields as byte ranges: slices of an array would retain it for every field of every line.
    private static func parse(
        buffer: UnsafeBufferPointer<UInt8>
    ) -> (records: [DestinationKey: StateRecord], unreadable: Int)? {
        let newline = UInt8(ascii: "\n"), tab = UInt8(ascii: "\t")
        let headerEnd = buffer.firstIndex(of: newline) ?? buffer.endIndex
        let timesInNanoseconds = buffer[..<headerEnd].elementsEqual(nanosecondsHeader.utf8)
        guard
            timesInNanoseconds || buffer[..<headerEnd].elementsEqual(header.utf8)
                || previousHeaders.contains(where: { buffer[..<headerEnd].elementsEqual($0.utf8) })
        else { return nil }
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
            guard
                let (destination, record) = parseRecord(
                    fields, in: buffer, timesInNanoseconds: timesInNanoseconds,
                    sharing: &shared)
            else {
                unreadable += 1
                continue
            }
            records[DestinationKey(destination)] = record
        }
        return (records, unreadable)
    }

    /// One line's record, from its fields; nil if any field is not what this version writes.
    private static func parseRecord(
        _ fields: [Range<Int>], in buffer: UnsafeBufferPointer<UInt8>, timesInNanoseconds: Bool,
        sharing shared: inout Origin
    ) -> (String, StateRecord)? {
        let field = { (number: Int) in UnsafeBufferPointer(rebasing: buffer[fields[number]]) }
        let time = { (number: Int) -> FileTime? in
            timesInNanoseconds
                ? Int64(decimal: field(number)).map(FileTime.init(nanosecondsSinceEpoch:))
                : FileTime(field: field(number))
        }
        guard fields.count == 7 || fields.count == 11 || fields.count == 13 || fields.count == 15 || fields.count == 19,
            let destination = unescape(field(0)), Self.staysInsideRoot(destination),
            let device = UInt64(decimal: field(1)),
            let inode = UInt64(decimal: field(2)),
            let size = Int64(decimal: field(3)),
            let modified = time(4),
            let changed = time(5),
            let digest = parseDigest(field(6))
        else { return nil }
        var origin: Origin?
        var ownerTag: OwnerTag?
        var unsynced = false
        if fields.count >= 11 {
            // Every pinned file one manifest wrote has the same origin: one instance serves them all.
            guard !fields[7].isEmpty else { return nil }
            if !shared.manifestKey.hasSameBytes(as: field(7)) {
                guard let key = unescape(field(7)) else { return nil }
                shared = Origin(manifestKey: key)
            }
            if fields.count == 19 {
                // A member of an unpacked tree: the members of one tree share one origin, as pinned files do.
                guard let archive = parseDigest(field(15)), let rules = unescape(field(16)), !rules.isEmpty else {
                    return nil
                }
                var tree: Digest?
                if !fields[17].isEmpty { guard let digest = parseDigest(field(17)) else { return nil }; tree = digest }
                guard let folder = unescape(field(18)), !folder.isEmpty, Self.staysInsideRoot(folder),
                    destination.utf8.starts(with: (folder + "/").utf8)
                else { return nil }
                let unpacked = UnpackedFrom(archive: archive, rules: rules, tree: tree, folder: folder)
                if shared.unpacked != unpacked || !fields[8].isEmpty || !fields[9].isEmpty || !fields[10].isEmpty
                    || !fields[11].isEmpty || !fields[12].isEmpty
                {
                    guard let sourceKey = unescape(field(8)), let etag = unescape(field(9)),
                        let lastModified = unescape(field(10))
                    else { return nil }
                    var checkedAt: Int64?, freshUntil: Int64?
                    if !fields[11].isEmpty {
                        guard let value = Int64(decimal: field(11)) else { return nil }; checkedAt = value
                    }
                    if !fields[12].isEmpty {
                        guard let value = Int64(decimal: field(12)) else { return nil }; freshUntil = value
                    }
                    shared = Origin(
                        manifestKey: shared.manifestKey, sourceKey: sourceKey.isEmpty ? nil : sourceKey,
                        etag: etag.isEmpty ? nil : etag, lastModified: lastModified.isEmpty ? nil : lastModified,
                        checkedAt: checkedAt, freshUntil: freshUntil, unpacked: unpacked)
                }
                origin = shared
            } else if fields[8].isEmpty && fields[9].isEmpty && fields[10].isEmpty
                && (fields.count == 11 || (fields[11].isEmpty && fields[12].isEmpty))
            {
                if shared.unpacked != nil || shared.sourceKey != nil || shared.checkedAt != nil {
                    shared = Origin(manifestKey: shared.manifestKey)
                }
                origin = shared
            } else {
                guard let sourceKey = unescape(field(8)), let etag = unescape(field(9)),
                    let lastModified = unescape(field(10))
                else { return nil }
                var checkedAt: Int64?, freshUntil: Int64?
                if fields.count >= 13 {
                    if !fields[11].isEmpty {
                        guard let value = Int64(decimal: field(11)) else { return nil }; checkedAt = value
                    }
                    if !fields[12].isEmpty {
                        guard let value = Int64(decimal: field(12)) else { return nil }; freshUntil = value
                    }
                }
                origin = Origin(
                    manifestKey: shared.manifestKey, sourceKey: sourceKey.isEmpty ? nil : sourceKey,
                    etag: etag.isEmpty ? nil : etag, lastModified: lastModified.isEmpty ? nil : lastModified,
                    checkedAt: checkedAt, freshUntil: freshUntil)
            }
            if fields.count >= 15 {
                if !fields[13].isEmpty {
                    guard let tag = OwnerTag(hexUTF8: field(13)) else { return nil }; ownerTag = tag
                }
                switch field(14) {
                case let mark where mark.isEmpty: break
                case let mark where mark.elementsEqual(Self.unsyncedMark.utf8): unsynced = true
                default: return nil
                }
            }
        }
        let identity = FileIdentity(device: device, inode: inode, size: size, modified: modified, changed: changed)
        return (
            destination,
            StateRecord(identity: identity, digest: digest, origin: origin, ownerTag: ownerTag, unsynced: unsynced)
        )
    }

    /// The last field of a record whose folder could not be synced after its rename.
    static let unsyncedMark = "unsynced"

    /// The file's bytes.
    static func serialized(_ records: [DestinationKey: StateRecord]) -> [UInt8] {
        Array(serializedParts(records, threads: 1).joined())
    }

    /// The file's bytes in consecutive parts, formatted on up to `threads` threads: after a sync that fetched
    /// 100,000 files, formatting their lines is most of the save, and it comes at the end, when the other core
    /// is idle.
    static func serializedParts(_ records: [DestinationKey: StateRecord], threads: Int) -> [[UInt8]] {
        // Sorted so that the file is the same for the same records (diffable, and written only when changed).
        let order = Self.sortedByName(records)
        let parts = max(1, min(threads, order.count / Self.linesPerThread))
        let header = Array((Self.header + "\n").utf8)
        guard parts > 1 else { return [header + Self.lines(order[...], of: records)] }
        return [header]
            + concurrentMap(count: parts, threads: parts, chunk: 1, makeContext: {}) { _, part in
                Self.lines(order[order.count * part / parts..<order.count * (part + 1) / parts], of: records)
            }
    }

    /// Fewer lines than this per thread are formatted faster than a thread starts.
    private static let linesPerThread = 8192

    private static func lines(
        _ order: ArraySlice<Dictionary<DestinationKey, StateRecord>.Index>,
        of records: [DestinationKey: StateRecord]
    ) -> [UInt8] {
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
        Self.appendDigest(record.digest, to: &out)
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
            // One by one, not through an array: 100,000 pinned files would be 100,000 arrays.
            if let checkedAt = origin.checkedAt {
                Self.appendDecimal(checkedAt, to: &out)
            } else {
                out.append(UInt8(ascii: "\t"))
            }
            if let freshUntil = origin.freshUntil {
                Self.appendDecimal(freshUntil, to: &out)
            } else {
                out.append(UInt8(ascii: "\t"))
            }
            out.append(UInt8(ascii: "\t"))
            record.ownerTag?.appendHex(to: &out)
            out.append(UInt8(ascii: "\t"))
            if record.unsynced { out.append(contentsOf: Self.unsyncedMark.utf8) }
            if let unpacked = origin.unpacked {
                Self.appendDigest(unpacked.archive, to: &out)
                out.append(UInt8(ascii: "\t"))
                Self.appendEscaped(unpacked.rules, to: &out)
                if let tree = unpacked.tree {
                    Self.appendDigest(tree, to: &out)
                } else {
                    out.append(UInt8(ascii: "\t"))
                }
                out.append(UInt8(ascii: "\t"))
                Self.appendEscaped(unpacked.folder, to: &out)
            }
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// Positions of `records` in byte order of their names. What the sort moves and compares is mostly two
    /// integers per record (a name's first 16 bytes, big-endian), not strings: 100,000 names are sorted at the
    /// end of every sync that fetched them.
    private static func sortedByName(
        _ records: [DestinationKey: StateRecord]
    ) -> [Dictionary<DestinationKey, StateRecord>.Index] {
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

    /// A tab, then `algorithm:hex`.
    private static func appendDigest(_ digest: Digest, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\t"))
        out.append(contentsOf: digest.algorithm.rawValue.utf8)
        out.append(UInt8(ascii: ":"))
        Hex.append(digest, to: &out)
    }

    /// A tab, then `seconds.nanoseconds` with nine digits after the point.
    static func appendTime(_ time: FileTime, to out: inout [UInt8]) {
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
    static func appendDecimal<T: BinaryInteger>(_ value: T, to out: inout [UInt8]) {
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

    /// Relative, outside haul's own folder, and without a `..` component. (A loop over the bytes: splitting each
    /// name into components was a tenth of reading a 100,000-file state.)
    static func staysInsideRoot(_ path: String) -> Bool {
        guard !path.isEmpty, path.utf8.first != UInt8(ascii: "/"), path != ".haul", !path.hasPrefix(".haul/") else {
            return false
        }
        var dots = 0  // dots since the last slash; -1 once the component has anything else
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "/"):
                if dots == 2 { return false }
                dots = 0
            case UInt8(ascii: "."):
                if dots >= 0 { dots += 1 }
            default:
                dots = -1
            }
        }
        return dots != 2
    }

    private static func parseDigest(_ field: UnsafeBufferPointer<UInt8>) -> Digest? {
        guard let colon = field.firstIndex(of: UInt8(ascii: ":")),
            let algorithm = DigestAlgorithm(rawValue: String(decoding: field[..<colon], as: UTF8.self))
        else { return nil }
        return Digest(algorithm: algorithm, hexUTF8: UnsafeBufferPointer(rebasing: field[(colon + 1)...]))
    }

    /// Tabs, newlines and `%` in a name would break the line format: percent-encoded.
    static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        // The usual case, every name of a 100,000-file state: checked and copied whole, over the contiguous bytes
        // (iterating `String.UTF8View` generically cost several times as much).
        var text = text
        let copiedWhole = text.withUTF8 { bytes -> Bool in
            guard
                bytes.allSatisfy({
                    $0 != UInt8(ascii: "%") && $0 != UInt8(ascii: "\t") && $0 != UInt8(ascii: "\n")
                        && $0 != UInt8(ascii: "\r")
                })
            else { return false }
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

    static func unescape(_ field: UnsafeBufferPointer<UInt8>) -> String? {
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
            let (next, overflow2) =
                negative
                ? shifted.subtractingReportingOverflow(Self(digit))
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
