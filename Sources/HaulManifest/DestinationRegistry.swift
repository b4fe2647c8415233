/// Detects destinations that cannot coexist on disk: the same path twice, a file where another entry needs a
/// folder (`a` and `a/b`), or anything inside a folder an entry unpacks an archive into (that folder becomes the
/// archive's contents, whole). Found at the later entry, naming the earlier one, as a compiler reports a
/// redefinition.
///
/// Paths are compared as `String` compares them, by Unicode canonical equivalence, as file systems that ignore
/// normalization (macOS's, and so any tree shared with a Mac) compare names: "caf\u{e9}" (NFC) and "cafe\u{301}"
/// (NFD), two files to Linux, are one file there, so a manifest may not list both. Equivalence includes byte
/// equality, so one table finds every conflict; the bytes then tell which message fits. (For ASCII text, all
/// most manifests hold, `String`'s comparison and hashing are byte-wise already.)
struct DestinationRegistry {
    struct Owner {
        var index: Int
        var line: Int
        var path: String
    }

    private var owners: [Owner] = []
    private var claims: ClaimTable

    init(expectedCount: Int = 0) {
        owners.reserveCapacity(expectedCount)
        // Two thirds of the hint (which assumes entries of 100 bytes): a hash table's buckets are all touched as it
        // fills, where an array's unused reserve is only address space. Sized for entries of 150 bytes, a table for
        // entries of 185 (`benchmarks/million.sh`'s) has the buckets it would end with, without growing: 59 MB for
        // a million rather than the 118 MB the full hint made it.
        claims = ClaimTable(minimumCapacity: expectedCount * 2 / 3)
    }

    /// Records the normalized destination `path` for entry `index`, or says why it collides with an earlier entry.
    /// `unpacks`: `path` is a folder the entry unpacks an archive into.
    mutating func claim(_ path: String, index: Int, line: Int, unpacks: Bool = false) -> String? {
        if let conflict = claims.claim(path, owner: owners.count, unpacks: unpacks) {
            return message(for: conflict, path: path)
        }
        owners.append(Owner(index: index, line: line, path: path))
        return nil
    }

    private func message(for conflict: ClaimConflict, path: String) -> String {
        let owner = owners[conflict.owner]
        let entry = "files[\(owner.index)] (line \(owner.line))"
        let quotedOwner = Quoted.text(owner.path)
        let normalization = "on file systems that ignore Unicode normalization, such as macOS's"
        /// `message`, and when `here` and `there` are one name only where normalization is ignored, that too.
        func noting(_ message: String, here: some StringProtocol, there: some StringProtocol) -> String {
            guard !here.hasSameBytes(as: there) else { return message }
            return message + ", \(normalization) (\(Quoted.scalars(here)) here, \(Quoted.scalars(there)) there)"
        }
        switch conflict.kind {
        case .duplicate:
            guard !path.hasSameBytes(as: owner.path) else {
                return "\(Quoted.text(path)) is already the destination of \(entry)"
            }
            return "\(Quoted.text(path)) differs from \(quotedOwner), the destination of \(entry), only in Unicode "
                + "normalization (\(Quoted.scalars(path)) here, \(Quoted.scalars(owner.path)) there): one file "
                + normalization
        case .neededAsFolder(let folderLength):
            let ownerFolder = Substring(owner.path.utf8.prefix(folderLength))
            return noting(
                "\(Quoted.text(path)) is needed as a folder for \(quotedOwner), the destination of \(entry)",
                here: path, there: ownerFolder)
        case .insideFile(let folderLength):
            let folder = Substring(path.utf8.prefix(folderLength))
            return noting(
                "\(Quoted.text(path)) would be inside \(Quoted.text(folder)), which is the destination of \(entry)",
                here: folder, there: owner.path)
        case .insideUnpacked(let folderLength):
            let folder = Substring(path.utf8.prefix(folderLength))
            return noting(
                "\(Quoted.text(path)) is inside \(Quoted.text(folder)), which \(entry) extracts an archive into",
                here: folder, there: owner.path)
        case .holdsDestination(let folderLength):
            let ownerFolder = Substring(owner.path.utf8.prefix(folderLength))
            return noting(
                "\(Quoted.text(path)), which this entry extracts an archive into, would hold \(quotedOwner), "
                    + "the destination of \(entry)", here: path, there: ownerFolder)
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
        /// This many bytes of the path, a folder of it, are the folder that owner unpacks an archive into.
        case insideUnpacked(folderLength: Int)
        /// The path, a folder an archive is to be unpacked into, is a folder of that owner's destination, this many
        /// bytes of it.
        case holdsDestination(folderLength: Int)
    }

    var owner: Int
    var kind: Kind
}

/// Destinations and the folders they need, with the first owner of each.
///
/// Keys hold the `String` (a file's key is its path itself, retained, not copied) and claims two 32-bit numbers:
/// 28 bytes a slot instead of 56 with `Substring` keys and `Int`s, which for 100,000 destinations was most of
/// the memory loading a manifest took beyond its entries.
private struct ClaimTable {
    private enum Claim {
        case file(owner: Int32)
        /// A folder an archive is unpacked into: nothing else may be claimed inside it.
        case unpacked(owner: Int32)
        /// `length`: the folder's bytes in the owner's path, which can differ from the key's (another spelling).
        case folder(owner: Int32, length: Int32)
    }

    private var claims: [String: Claim]
    /// The folder the previous claim went into: manifests list files folder by folder, so most claims need no
    /// lookup for it (100,000 destinations in 100 folders look up 100 folders, not 100,000).
    private var lastFolder: Substring?

    init(minimumCapacity: Int) {
        claims = Dictionary(minimumCapacity: minimumCapacity)
    }

    /// Claims `path` for `owner` if it can be, or says why not (the table is then as it was). One hash of the path
    /// in the common case: it is inserted at once, and put back only on the rare conflict.
    /// `unpacks`: `path` is a folder an archive is unpacked into.
    mutating func claim(_ path: String, owner: Int, unpacks: Bool) -> ClaimConflict? {
        let key = path
        let number = Int32(truncatingIfNeeded: owner)
        if let earlier = claims.updateValue(unpacks ? .unpacked(owner: number) : .file(owner: number), forKey: key) {
            claims[key] = earlier
            if unpacks, case .folder(let owner, let length) = earlier {
                return ClaimConflict(owner: Int(owner), kind: .holdsDestination(folderLength: Int(length)))
            }
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
            switch claims[String(current)] {
            case .some(let claim):
                if case .folder = claim {
                    folder = nil
                    continue
                }
                claims[key] = nil
                return Self.conflict(with: claim, folderLength: current.utf8.count)
            case nil:
                newFolders.append(current)
                folder = Self.parent(of: current)
            }
        }
        for folder in newFolders {
            claims[String(folder)] = .folder(
                owner: Int32(truncatingIfNeeded: owner),
                length: Int32(truncatingIfNeeded: folder.utf8.count))
        }
        lastFolder = parent
        return nil
    }

    /// The claim met: at the path itself (`folderLength` nil), or at one of its folders.
    private static func conflict(with claim: Claim, folderLength: Int?) -> ClaimConflict {
        switch (claim, folderLength) {
        case (.file(let owner), nil), (.unpacked(let owner), nil): ClaimConflict(owner: Int(owner), kind: .duplicate)
        case (.file(let owner), let length?): ClaimConflict(owner: Int(owner), kind: .insideFile(folderLength: length))
        case (.unpacked(let owner), let length?):
            ClaimConflict(owner: Int(owner), kind: .insideUnpacked(folderLength: length))
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
