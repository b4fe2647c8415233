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
        // The count is an overestimate (the manifest's bytes / 100); growing from half of it is cheap, and a table
        // twice too large would be touched all over by the hashes.
        byBytes = ClaimTable(minimumCapacity: expectedCount / 2)
    }

    /// Records the normalized destination `path` for entry `index`, or says why it collides with an earlier entry.
    mutating func claim(_ path: String, index: Int, line: Int) -> String? {
        let owner = owners.count
        if let conflict = byBytes.claim(path, owner: owner) {
            return message(for: conflict, path: path, equivalentOnly: false)
        }
        if byEquivalence == nil, !path.isASCII { startComparingEquivalents() }
        let equivalent = byEquivalence?.claim(path, owner: owner)
        // Recorded even when refused below: the byte table holds its claim (the manifest is invalid anyway, and
        // later entries are still checked against it, naming this one).
        owners.append(Owner(index: index, line: line, path: path))
        // Same bytes were caught above: this is another spelling of the same name.
        return equivalent.map { message(for: $0, path: path, equivalentOnly: true) }
    }

    /// Fills the equivalence table with every claim so far (all ASCII, so none can conflict there).
    private mutating func startComparingEquivalents() {
        var table = ClaimTable<PathEquivalence>(minimumCapacity: owners.capacity)
        for (owner, claimed) in owners.enumerated() { _ = table.claim(claimed.path, owner: owner) }
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
///
/// Keys hold the `String` (a file's key is its path itself, retained, not copied) and claims two 32-bit numbers:
/// 28 bytes a slot instead of 56 with `Substring` keys and `Int`s, which for 100,000 destinations was most of
/// the memory loading a manifest took beyond its entries.
private struct ClaimTable<Key: PathIdentity> {
    private enum Claim {
        case file(owner: Int32)
        /// `length`: the folder's bytes in the owner's path, which can differ from the key's when `Key` is equivalence.
        case folder(owner: Int32, length: Int32)
    }

    private var claims: [Key: Claim]
    /// The folder the previous claim went into: manifests list files folder by folder, so most claims need no
    /// lookup for it (100,000 destinations in 100 folders look up 100 folders, not 100,000).
    private var lastFolder: Substring?

    init(minimumCapacity: Int) {
        claims = Dictionary(minimumCapacity: minimumCapacity)
    }

    /// Claims `path` for `owner` if it can be, or says why not (the table is then as it was). One hash of the path
    /// in the common case: it is inserted at once, and put back only on the rare conflict.
    mutating func claim(_ path: String, owner: Int) -> ClaimConflict? {
        let key = Key(path)
        if let earlier = claims.updateValue(.file(owner: Int32(truncatingIfNeeded: owner)), forKey: key) {
            claims[key] = earlier
            return Self.conflict(with: earlier, folderLength: nil)
        }
        guard let parent = Self.parent(of: path[...]) else {
            lastFolder = nil
            return nil
        }
        if let lastFolder, lastFolder.hasSameBytes(as: parent) { return nil }
        // Folders from the innermost out, up to the first one claimed: a claimed folder was checked with all of its
        // own when it was claimed, and no file can be claimed at a folder since.
        var newFolders: [Substring] = []
        var folder: Substring? = parent
        while let current = folder {
            switch claims[Key(String(current))] {
            case .some(let claim):
                if case .file = claim {
                    claims[key] = nil
                    return Self.conflict(with: claim, folderLength: current.utf8.count)
                }
                folder = nil
            case nil:
                newFolders.append(current)
                folder = Self.parent(of: current)
            }
        }
        for folder in newFolders {
            claims[Key(String(folder))] = .folder(owner: Int32(truncatingIfNeeded: owner),
                                                   length: Int32(truncatingIfNeeded: folder.utf8.count))
        }
        lastFolder = parent
        return nil
    }

    /// The claim met: at the path itself (`folderLength` nil), or at one of its folders.
    private static func conflict(with claim: Claim, folderLength: Int?) -> ClaimConflict {
        switch (claim, folderLength) {
        case (.file(let owner), nil): ClaimConflict(owner: Int(owner), kind: .duplicate)
        case (.file(let owner), let length?): ClaimConflict(owner: Int(owner), kind: .insideFile(folderLength: length))
        case (.folder(let owner, let length), _):
            ClaimConflict(owner: Int(owner), kind: .neededAsFolder(folderLength: Int(length)))
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
    init(_ path: String)
}

/// A path compared as `String` compares: by Unicode canonical equivalence.
private struct PathEquivalence: PathIdentity {
    let path: String

    init(_ path: String) { self.path = path }
}

/// A path compared and hashed by its UTF-8 bytes, as the kernel compares names.
private struct PathBytes: PathIdentity {
    let path: String

    init(_ path: String) { self.path = path }

    static func == (a: PathBytes, b: PathBytes) -> Bool { a.path.hasSameBytes(as: b.path) }
    func hash(into hasher: inout Hasher) { path.hashBytes(into: &hasher) }
}
