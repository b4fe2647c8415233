import HaulDigest

/// The names the engine gives the files it makes in its staging folders, and nothing else: whoever cleans up
/// after an interrupted run removes only these, so a file someone else put there stays.
///
/// - temporary files: `<run prefix in hex>-<counter in hex>.part`
/// - partials of pinned files: `<algorithm>-<hex digest>.part`, with `.meta` (and `.meta.new` while it is
///   being replaced) beside them.
///
/// With several transfer loops, each writes in a folder of its own, `loop-K` (`isLoopFolderName`).
///
/// An archive's tree is unpacked beside its download in a folder named after it, `<stem>.tree` for `<stem>.part`
/// (`StagedTree.folderName`): the sweep knows those by this same grammar.
extension TransferEngine {
    package static func isStagingName(_ name: String) -> Bool {
        var rest = Substring(name)
        for suffix in [".meta.new", ".meta"] where rest.hasSuffix(suffix) {
            rest = rest.dropLast(suffix.count)
            break
        }
        guard rest.hasSuffix(".part") else { return false }
        rest = rest.dropLast(".part".count)
        guard let dash = rest.firstIndex(of: "-") else { return false }
        let head = rest[..<dash], tail = rest[rest.index(after: dash)...]
        guard !tail.isEmpty, tail.utf8.allSatisfy(isLowercaseHexDigit) else { return false }
        return head.utf8.allSatisfy(isLowercaseHexDigit) && !head.isEmpty
            || DigestAlgorithm(rawValue: String(head)) != nil
    }

    /// `loop-K`: the folder a transfer loop of a run with several loops writes its temporary files in (each loop
    /// its own: see `stagingFolders`). The engine leaves them to its owner, who commits the files in them; the
    /// sweep clears what is in them by the names above.
    package static func loopFolderName(_ index: Int) -> String { "loop-\(index)" }

    package static func isLoopFolderName(_ name: String) -> Bool {
        guard name.hasPrefix("loop-") else { return false }
        let number = name.utf8.dropFirst("loop-".count)
        return !number.isEmpty && number.count <= 4 && number.first != UInt8(ascii: "0")
            && number.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    private static func isLowercaseHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
}
