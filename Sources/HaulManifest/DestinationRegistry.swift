/// Detects destinations that cannot coexist on disk: the same path twice, or a file where another entry needs a
/// folder (`a` and `a/b`). Found at the later entry, naming the earlier one, as a compiler reports a redefinition.
///
/// Paths are compared twice. By their bytes, as the kernel names files: "caf\u{e9}" (NFC) and "cafe\u{301}" (NFD)
/// are two files here. And by Unicode canonical equivalence, as file systems that ignore normalization (macOS's,
/// and so any tree shared with a Mac) compare names: there they are one file, so the manifest may not list both.
struct DestinationRegistry {
    struct Owner {
        var index: Int
        var line: Int
        var path: String
    }

    private var owners: [Owner] = []
    private var byBytes: ClaimTable<PathBytes>
    /// Equivalence as `String` (and `Substring`) compare: canonical. Nil until the first non-ASCII destination,
    /// since ASCII text has no other spelling; from then on it holds every claim, earlier ones included.
    private var byEquivalence: ClaimTable<PathEquivalence>?

    init(expectedCount: Int = 0) {
        owners.reserveCapacity(expectedCount)
        byBytes = ClaimTable(minimumCapacity: expectedCount)
    }

    /// Records the normalized destination `path` for entry `index`, or says why it collides with an earlier entry.
    mutating func claim(_ path: String, index: Int, line: Int) -> String? {
        let owner = owners.count
        let whole = path[...]
        let newFolders: Int
        switch byBytes.check(whole) {
        case .conflict(let conflict):
            return message(for: conflict, path: path, equivalentOnly: false)
        case .free(let count):
            newFolders = count
        }
        if byEquivalence == nil, !path.isASCII { startComparingEquivalents() }
        if let check = byEquivalence?.check(whole) {
            switch check {
            case .conflict(let conflict):
                // Same bytes were caught above: this is another spelling of the same name.
                return message(for: conflict, path: path, equivalentOnly: true)
            case .free(let count):
                byEquivalence?.record(whole, newFolders: count, owner: owner)
            }
        }
        byBytes.record(whole, newFolders: newFolders, owner: owner)
        owners.append(Owner(index: index, line: line, path: path))
        return nil
    }

    /// Fills the equivalence table with every claim so far (all ASCII, so none can conflict there).
    private mutating func startComparingEquivalents() {
        var table = ClaimTable<PathEquivalence>(minimumCapacity: owners.capacity)
        for (owner, claimed) in owners.enumerated() {
            let whole = claimed.path[...]
            if case .free(let count) = table.check(whole) { table.record(whole, newFolders: count, owner: owner) }
        }
        byEquivalence = table
    }

    private func message(for conflict: ClaimConflict, path: String, equivalentOnly: Bool) -> String {
        let owner = owners[conflict.owner]
        let entry = "files[\(owner.index)] (line \(owner.line))"
        let quotedOwner = Quoted.text(owner.path)
        let normalization = "on file systems that ignore Unicode normalization, such as macOS's"
        switch conflict.kind {
        case .duplicate:
            guard equivalentOnly else { return "\(Quoted.text(path)) is already the destination of \(entry)" }
            return "\(Quoted.text(path)) differs from \(quotedOwner), the destination of \(entry), only in Unicode "
                + "normalization (\(Quoted.scalars(path)) here, \(Quoted.scalars(owner.path)) there): one file "
                + normalization
        case .neededAsFolder(let folderLength):
            let base = "\(Quoted.text(path)) is needed as a folder for \(quotedOwner), the destination of \(entry)"
            guard equivalentOnly else { return base }
            let ownerFolder = Substring(owner.path.utf8.prefix(folderLength))
            return base + ", \(normalization) (\(Quoted.scalars(path)) here, \(Quoted.scalars(ownerFolder)) there)"
        case .insideFile(let folderLength):
            let folder = Substring(path.utf8.prefix(folderLength))
            let base = "\(Quoted.text(path)) would be inside \(Quoted.text(folder)), which is the destination of \(entry)"
            guard equivalentOnly else { return base }
            return base + ", \(normalization) (\(Quoted.scalars(folder)) here, \(Quoted.scalars(owner.path)) there)"
        }
    }
}

/// Why a path cannot be claimed: which owner's claim it meets, and how.
private struct ClaimConflict {
    enum Kind {
        /// The path is that owner's destination.
        case duplicate
        /// The path is a folder of that owner's destination, this many bytes of it.
        case neededAsFolder(folderLength: Int)
        /// This many bytes of the path, a folder of it, are that owner's destination.
        case insideFile(folderLength: Int)
    }

    var owner: Int
    var kind: Kind
}

/// Destinations and the folders they need, under one notion of identity (`Key`'s `==` and hashing), with the
/// first owner of each.
private struct ClaimTable<Key: PathIdentity> {
    private enum Claim {
        case file(owner: Int)
        /// `length`: the folder's bytes in the owner's path, which can differ from the key's when `Key` is equivalence.
        case folder(owner: Int, length: Int)
    }

    enum Check {
        case conflict(ClaimConflict)
        /// Claimable; this many of its folders, innermost first, are not claimed yet.
        case free(newFolders: Int)
    }

    private var claims: [Key: Claim]

    init(minimumCapacity: Int) {
        claims = Dictionary(minimumCapacity: minimumCapacity)
    }

    func check(_ path: Substring) -> Check {
        switch claims[Key(path)] {
        case .file(let owner): return .conflict(ClaimConflict(owner: owner, kind: .duplicate))
        case .folder(let owner, let length): return .conflict(ClaimConflict(owner: owner, kind: .neededAsFolder(folderLength: length)))
        case nil: break
        }
        // Folders from the innermost out, up to the first one claimed: a claimed folder was checked with all of its
        // own when it was claimed, and no file can be claimed at a folder since.
        var newFolders = 0
        var folder = path
        while let parent = Self.parent(of: folder) {
            folder = parent
            switch claims[Key(folder)] {
            case .file(let owner):
                return .conflict(ClaimConflict(owner: owner, kind: .insideFile(folderLength: folder.utf8.count)))
            case .folder:
                return .free(newFolders: newFolders)
            case nil:
                newFolders += 1
            }
        }
        return .free(newFolders: newFolders)
    }

    /// Claims `path` for `owner`, with the `newFolders` innermost folders `check` found free.
    mutating func record(_ path: Substring, newFolders: Int, owner: Int) {
        claims[Key(path)] = .file(owner: owner)
        var folder = path
        for _ in 0..<newFolders {
            guard let parent = Self.parent(of: folder) else { break }
            folder = parent
            claims[Key(folder)] = .folder(owner: owner, length: folder.utf8.count)
        }
    }

    /// `a/b/c` → `a/b`: cut at the last byte `/`, as the kernel cuts (a combining mark after a slash does not hide
    /// it).
    private static func parent(of path: Substring) -> Substring? {
        guard let slash = path.withUTF8Buffer({ $0.lastIndex(of: UInt8(ascii: "/")) }) else { return nil }
        let utf8 = path.utf8
        return Substring(utf8[..<utf8.index(utf8.startIndex, offsetBy: slash)])
    }
}

/// How a claim table compares paths.
private protocol PathIdentity: Hashable {
    init(_ path: Substring)
}

/// A path compared as `String` compares: by Unicode canonical equivalence.
private struct PathEquivalence: PathIdentity {
    let path: Substring

    init(_ path: Substring) { self.path = path }
}

/// A path compared and hashed by its UTF-8 bytes, as the kernel compares names.
private struct PathBytes: PathIdentity {
    let path: Substring

    init(_ path: Substring) { self.path = path }

    static func == (a: PathBytes, b: PathBytes) -> Bool { a.path.hasSameBytes(as: b.path) }
    func hash(into hasher: inout Hasher) { path.hashBytes(into: &hasher) }
}
