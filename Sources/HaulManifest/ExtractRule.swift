import HaulDigest

/// An archive format haul unpacks (through libarchive). `format:` names one when the URL's file name does not
/// tell it; otherwise the name's suffix does, and failing that the bytes themselves.
package enum ArchiveFormat: String, Sendable, Hashable, CaseIterable {
    case tar
    case tarGzip = "tar.gz"
    case tarBzip2 = "tar.bz2"
    case tarXz = "tar.xz"
    case tarZstd = "tar.zst"
    case zip
    case sevenZip = "7z"

    /// The format the last segment of a URL's path names (its query and fragment left out), nil for none.
    package static func named(byURL url: String) -> ArchiveFormat? {
        let path = url.prefix { $0 != "?" && $0 != "#" }
        return named(by: String(path.split(separator: "/").last ?? ""))
    }

    /// The format a file name's suffix names (`.tgz` and `.tar.gz` alike, in any case), nil for none.
    package static func named(by fileName: String) -> ArchiveFormat? {
        suffix(of: fileName)?.format
    }

    /// The file name without the suffix that names its format (`sdk-1.2.tar.gz` → `sdk-1.2`): the folder an
    /// archive is unpacked into when none is given. nil when no suffix names a format, or nothing is left.
    package static func stem(of fileName: String) -> String? {
        guard let (length, _) = suffix(of: fileName), fileName.utf8.count > length else { return nil }
        return String(decoding: fileName.utf8.dropLast(length), as: UTF8.self)
    }

    private static let suffixes: [(text: String, format: ArchiveFormat)] = [
        (".tar.gz", .tarGzip), (".tgz", .tarGzip), (".tar.bz2", .tarBzip2), (".tbz2", .tarBzip2), (".tbz", .tarBzip2),
        (".tar.xz", .tarXz), (".txz", .tarXz), (".tar.zst", .tarZstd), (".tzst", .tarZstd), (".tar", .tar),
        (".zip", .zip), (".7z", .sevenZip),
    ]

    /// The suffix (its length in bytes) that names a format, compared in ASCII case-insensitively on the bytes, so
    /// that the length cut off is the suffix's whatever the rest of the name holds.
    private static func suffix(of fileName: String) -> (length: Int, format: ArchiveFormat)? {
        let name = fileName.utf8
        for (text, format) in suffixes where name.count >= text.utf8.count {
            let tail = name.suffix(text.utf8.count)
            let matches = tail.elementsEqual(text.utf8) { byte, lower in
                byte == lower || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) && byte | 0x20 == lower
            }
            if matches { return (text.utf8.count, format) }
        }
        return nil
    }
}

/// What an entry's `extract:` asks: the folder `dest` names becomes the archive's contents.
///
/// A class, immutable: almost every entry has none, and a reference keeps `FileEntry` one word larger rather than
/// the size of these fields.
package final class ExtractRule: Sendable, Hashable {
    /// nil: from the URL's file name (`ArchiveFormat.named(by:)`), else from the bytes.
    package let format: ArchiveFormat?
    /// Leading path components dropped from every member (`tar --strip-components`); a member with no more
    /// components than this is skipped.
    package let strip: Int
    /// Members kept (after `strip`): those any `include` pattern matches (all when there is none), less those an
    /// `exclude` pattern matches. Patterns are `PathGlob`s, as written.
    package let include: [String]
    package let exclude: [String]
    /// The unpacked tree's digest (Nix's NAR hash, SHA-256), when pinned: `tree: sha256-<base64>`.
    package let tree: Digest?
    /// The most bytes the members may unpack to (`max_unpacked:`); nil: the default, a multiple of the archive's
    /// size (see `ExtractRule.defaultUnpackedBytes`).
    package let maxUnpackedBytes: Int64?

    package init(
        format: ArchiveFormat? = nil, strip: Int = 0, include: [String] = [], exclude: [String] = [],
        tree: Digest? = nil, maxUnpackedBytes: Int64? = nil
    ) {
        self.format = format
        self.strip = strip
        self.include = include
        self.exclude = exclude
        self.tree = tree
        self.maxUnpackedBytes = maxUnpackedBytes
    }

    /// The same rule with `tree` pinned: what `haul add` writes once it has hashed the tree.
    package func pinning(tree: Digest) -> ExtractRule {
        ExtractRule(
            format: format, strip: strip, include: include, exclude: exclude, tree: tree,
            maxUnpackedBytes: maxUnpackedBytes)
    }

    /// Without `max_unpacked:`, what the members may total: this many times the archive's size, and at least
    /// `minimumDefaultUnpackedBytes` (a small archive of text compresses well).
    package static let unpackedBytesPerArchiveByte: Int64 = 100
    package static let minimumDefaultUnpackedBytes: Int64 = 1 << 30
    /// The most members an archive may hold, whatever its size.
    package static let maximumMembers = 1_000_000

    package static func defaultUnpackedBytes(archiveSize: Int64) -> Int64 {
        let (product, overflow) = archiveSize.multipliedReportingOverflow(by: unpackedBytesPerArchiveByte)
        return overflow ? .max : max(product, minimumDefaultUnpackedBytes)
    }

    /// What of the rule shapes the tree (format, strip, include, exclude), as a short hex text the state keeps with
    /// each member: a tree unpacked with other rules is unpacked again. The tree pin and the size cap do not shape it.
    package var fingerprint: String {
        let shape = [
            format?.rawValue ?? "", String(strip), include.joined(separator: "\u{0}"),
            exclude.joined(separator: "\u{0}"),
        ]
        .joined(separator: "\u{1}")
        return String(StreamingHasher.digest(Array(shape.utf8), algorithm: .sha256).hex.prefix(16))
    }

    package static func == (a: ExtractRule, b: ExtractRule) -> Bool {
        a === b
            || (a.format == b.format && a.strip == b.strip && a.include == b.include && a.exclude == b.exclude
                && a.tree == b.tree && a.maxUnpackedBytes == b.maxUnpackedBytes)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(format)
        hasher.combine(strip)
        hasher.combine(include)
        hasher.combine(exclude)
        hasher.combine(tree)
        hasher.combine(maxUnpackedBytes)
    }
}

/// What a tree on disk was unpacked from, as the state records it: the archive's digest, the extract rule's
/// fingerprint (`ExtractRule.fingerprint`: a tree unpacked with other rules is another tree), the tree's own
/// digest when it was computed, and the folder it was unpacked as (its entry's `dest`: what is left of it once
/// the entry is gone is the user's).
package struct UnpackedFrom: Sendable, Hashable {
    package var archive: Digest
    package var rules: String
    package var tree: Digest?
    package var folder: String

    package init(archive: Digest, rules: String, tree: Digest?, folder: String) {
        self.archive = archive
        self.rules = rules
        self.tree = tree
        self.folder = folder
    }
}
