/// Detects destinations that cannot coexist on disk: the same path twice, or a file where another entry needs a
/// folder (`a` and `a/b`). Found at the later entry, naming the earlier one, as a compiler reports a redefinition.
///
/// The tables map path fingerprints to claim numbers instead of holding strings: with 100,000 destinations,
/// string-keyed dictionaries cost more in hashing, comparisons and teardown than the rest of validation together.
/// A hit is always confirmed against the real path; paths whose fingerprint another path already holds go to
/// small string-keyed tables, so correctness never rests on the hash.
struct DestinationRegistry {
    struct Owner {
        var index: Int
        var line: Int
        var path: String
    }

    private var owners: [Owner] = []
    /// Hash of a destination → its claim in `owners`.
    private var files: HashIndex
    /// Hash of a folder → the first claim needing it (its path starts with the folder).
    private var folders = HashIndex()
    private var collidingFiles: [String: Int32] = [:]
    private var collidingFolders: [String: Int32] = [:]

    /// Paths that needed the string-keyed fallback tables (their fingerprint was taken by another path).
    var fallbackCount: Int { collidingFiles.count + collidingFolders.count }

    init(expectedCount: Int = 0) {
        owners.reserveCapacity(expectedCount)
        // The count is an overestimate; growing from half of it is cheap and keeps the table cache-friendlier.
        files = HashIndex(minimumCapacity: expectedCount / 2)
    }

    /// Records the normalized destination `path` for entry `index`, or says why it collides with an earlier entry.
    mutating func claim(_ path: String, index: Int, line: Int) -> String? {
        // Everything below works on the path's bytes: `String.UTF8View` algorithms are several times slower.
        let conflict: Conflict? = path.withUTF8Buffer { bytes in
            let (hash, parent) = Self.hashes(bytes)
            if let folder = folderClaim(hash: hash, bytes) { return .neededAsFolder(by: folder) }
            if let file = fileClaim(hash: hash, bytes) { return .duplicate(of: file) }
            let claim = Int32(truncatingIfNeeded: owners.count)
            if let parent, folderClaim(hash: parent.hash, UnsafeBufferPointer(rebasing: bytes[..<parent.length])) == nil {
                // Only a folder not seen before needs checking: a claimed folder was checked against files when
                // claimed (and so were its ancestors), and no file can be claimed at a folder since.
                if let conflict = claimFolders(of: bytes, claim: claim) { return conflict }
            }
            if !files.insertIfAbsent(hash, claim) {
                collidingFiles[path] = claim
            }
            return nil
        }
        guard let conflict else {
            owners.append(Owner(index: index, line: line, path: path))
            return nil
        }
        switch conflict {
        case .neededAsFolder(let claim):
            let owner = owners[Int(claim)]
            return "\(Quoted.text(path)) is needed as a folder for \(Quoted.text(owner.path)), "
                + "the destination of files[\(owner.index)] (line \(owner.line))"
        case .duplicate(let claim):
            let owner = owners[Int(claim)]
            return "\(Quoted.text(path)) is already the destination of files[\(owner.index)] (line \(owner.line))"
        case .insideFile(let claim, let folderLength):
            let owner = owners[Int(claim)]
            let folder = String(Substring(path.utf8.prefix(folderLength)))
            return "\(Quoted.text(path)) would be inside \(Quoted.text(folder)), which is the destination of "
                + "files[\(owner.index)] (line \(owner.line))"
        }
    }

    private enum Conflict {
        case neededAsFolder(by: Int32)
        case duplicate(of: Int32)
        case insideFile(Int32, folderLength: Int)
    }

    private mutating func claimFolders(of bytes: UnsafeBufferPointer<UInt8>, claim: Int32) -> Conflict? {
        let ancestors = Self.folderHashes(bytes)
        for folder in ancestors {
            if let file = fileClaim(hash: folder.hash, UnsafeBufferPointer(rebasing: bytes[..<folder.length])) {
                return .insideFile(file, folderLength: folder.length)
            }
        }
        for folder in ancestors {
            let folderBytes = UnsafeBufferPointer(rebasing: bytes[..<folder.length])
            guard folderClaim(hash: folder.hash, folderBytes) == nil else { continue }
            if !folders.insertIfAbsent(folder.hash, claim) {
                collidingFolders[String(decoding: folderBytes, as: UTF8.self)] = claim
            }
        }
        return nil
    }

    // MARK: Confirmed lookups

    private func fileClaim(hash: UInt64, _ path: UnsafeBufferPointer<UInt8>) -> Int32? {
        guard let claim = files[hash] else { return nil }
        if owners[Int(claim)].path.withUTF8Buffer({ $0.elementsEqual(path) }) { return claim }
        return collidingFiles.isEmpty ? nil : collidingFiles[String(decoding: path, as: UTF8.self)]
    }

    /// A folder is confirmed by its claimant's path: that path continues with `/` right after the folder.
    private func folderClaim(hash: UInt64, _ folder: UnsafeBufferPointer<UInt8>) -> Int32? {
        guard let claim = folders[hash] else { return nil }
        let confirmed = owners[Int(claim)].path.withUTF8Buffer { owner in
            owner.count > folder.count && owner[folder.count] == UInt8(ascii: "/")
                && UnsafeBufferPointer(rebasing: owner[..<folder.count]).elementsEqual(folder)
        }
        if confirmed { return claim }
        return collidingFolders.isEmpty ? nil : collidingFolders[String(decoding: folder, as: UTF8.self)]
    }

    // MARK: Hashing

    private static let fnvOffset: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let fnvPrime: UInt64 = 0x100_0000_01b3

    /// FNV-1a of the whole path and of its parent folder, in one pass (FNV is incremental, so the hash at a `/`
    /// is the folder's hash).
    private static func hashes(_ bytes: UnsafeBufferPointer<UInt8>) -> (hash: UInt64, parent: (hash: UInt64, length: Int)?) {
        var hash = fnvOffset
        var parent: (hash: UInt64, length: Int)?
        for offset in bytes.indices {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "/") { parent = (hash, offset) }
            hash = (hash ^ UInt64(byte)) &* fnvPrime
        }
        return (hash, parent)
    }

    private static func folderHashes(_ bytes: UnsafeBufferPointer<UInt8>) -> [(hash: UInt64, length: Int)] {
        var hash = fnvOffset
        var folders: [(hash: UInt64, length: Int)] = []
        for offset in bytes.indices {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "/") { folders.append((hash, offset)) }
            hash = (hash ^ UInt64(byte)) &* fnvPrime
        }
        return folders
    }
}
