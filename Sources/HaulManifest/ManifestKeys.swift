/// Keys a manifest mapping may hold. The loader dispatches on these enums and `ManifestSchema` publishes their
/// raw values, so the accepted keys and the published ones cannot drift apart.
protocol ManifestKey: RawRepresentable<String>, CaseIterable, Hashable, Sendable {
    static var table: KeyTable<Self> { get }
}

extension ManifestKey {
    static var names: [String] { allCases.map(\.rawValue) }

    /// The key spelled `name`, if any.
    static func named(_ name: String) -> Self? { table.key(named: name) }
}

/// Name → key for half a million lookups in a large manifest. Candidates are grouped by length, so a lookup
/// compares against one or two names; a `Dictionary` spent most of its time hashing, and the synthesized
/// `init(rawValue:)` compares against every case in turn.
struct KeyTable<Key: Sendable>: Sendable {
    private let byLength: [[(name: String, key: Key)]]

    init(_ keys: [(name: String, key: Key)]) {
        var byLength = Array(
            repeating: [(name: String, key: Key)](), count: (keys.map(\.name.utf8.count).max() ?? 0) + 1)
        for entry in keys { byLength[entry.name.utf8.count].append(entry) }
        self.byLength = byLength
    }

    func key(named name: String) -> Key? {
        let length = name.utf8.count
        guard length < byLength.count else { return nil }
        for candidate in byLength[length] where candidate.name == name { return candidate.key }
        return nil
    }
}

enum TopLevelKey: String, ManifestKey {
    case version, root, defaults, prune, netrc, files, lists
    /// The schema an editor validates the manifest against (as `yaml-language-server` and JSON tools read it):
    /// accepted so that a manifest can name its schema, and otherwise ignored.
    case schema = "$schema"
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}

enum DefaultsKey: String, ManifestKey {
    case retries, timeout, mode, headers
    case retryOn = "retry_on"
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}

enum FileKey: String, ManifestKey {
    case url, dest, sha256, sha384, sha512, checksum, integrity, size, mirrors, mode, retries, timeout, refresh, headers
    case extract, cert, key, from
    case retryOn = "retry_on"
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}

/// The keys of one list under `lists:`.
enum ListKeyName: String, ManifestKey {
    case url, signature, keys, refresh
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}

/// The keys of a list's key written as a mapping, `{key: …, retired: YYYY-MM-DD}`.
enum ListKeyEntryKey: String, ManifestKey {
    case key, retired
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}

/// The keys of an entry's `from:` written as a mapping, `{list: …, name: …}`.
enum ListPinKey: String, ManifestKey {
    case list, name
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}

/// The keys of an entry's `extract:` mapping.
enum ExtractKey: String, ManifestKey {
    case format, strip, include, exclude, tree
    case maxUnpacked = "max_unpacked"
    static let table = KeyTable(allCases.map { ($0.rawValue, $0) })
}
