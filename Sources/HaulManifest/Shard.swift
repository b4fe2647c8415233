import HaulDigest

/// `--shard K/N`: the part of a manifest one of N cooperating runs manages (1-based, as `split -n K/N`).
///
/// A destination belongs to the shard by its path alone, so editing a manifest never moves an entry it left
/// alone to another shard: `h` is the first 8 bytes of SHA-256 of the destination as normalized (`a/b/c`, UTF-8),
/// read big-endian, and the destination is in shard ⌊h·N / 2⁶⁴⌋ + 1. Anyone can compute it
/// (`printf %s a/b/c | sha256sum`). Each shard is an interval of the 64-bit space, not a residue class: that is
/// what lets shards of different N lock exactly the destinations they manage (see `lockRange`), so that 1/2 and
/// 3/4 may run at once while 1/2 and 2/4 exclude each other.
package struct Shard: Sendable, Hashable, CustomStringConvertible {
    /// 1-based.
    package let index: Int
    package let count: Int

    /// More shards than this would give lock ranges too small to stay disjoint; no fleet needs them.
    package static let maximumCount = 1 << 20

    package init?(index: Int, count: Int) {
        guard count >= 1, count <= Self.maximumCount, index >= 1, index <= count else { return nil }
        self.index = index
        self.count = count
    }

    /// `K/N` as on the command line or in `HAUL_SHARD`.
    package init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
            let index = Int(parts[0]), let count = Int(parts[1])
        else { return nil }
        self.init(index: index, count: count)
    }

    package var description: String { "\(index)/\(count)" }

    /// Why `text` is not a shard, for the usage error.
    package static func problem(with text: String) -> String {
        "'\(text)' is not a shard: write K/N with 1 ≤ K ≤ N ≤ \(maximumCount) (e.g. 2/4)"
    }

    package func contains(_ destination: DestinationPath) -> Bool {
        Self.shardIndex(Self.position(of: destination.description), count: count) == index
    }

    /// The destination's place in the 64-bit space: the first 8 bytes of its SHA-256, big-endian.
    package static func position(of destination: String) -> UInt64 {
        let digest = StreamingHasher.digest(Array(destination.utf8), algorithm: .sha256)
        return digest.bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// 1-based shard of `position` among `count`: ⌊position·count / 2⁶⁴⌋ + 1.
    static func shardIndex(_ position: UInt64, count: Int) -> Int {
        Int(position.multipliedFullWidth(by: UInt64(count)).high) + 1
    }

    /// The bytes of the root's lock file this shard locks: the shard's interval of the 64-bit space scaled down
    /// to [0, `lockSpace`). Two shards' ranges overlap exactly when their intervals do, whatever their N, because
    /// both ends are the same function of the rational K/N. An unsharded run locks all of [0, `lockSpace`).
    package var lockRange: Range<Int64> {
        Self.lockOffset(index - 1, of: count)..<Self.lockOffset(index, of: count)
    }

    /// Bytes of the lock file that stand for the destinations (2⁶² keeps every offset a positive `off_t`).
    package static let lockSpace: Int64 = 1 << 62

    private static func lockOffset(_ numerator: Int, of denominator: Int) -> Int64 {
        // ⌊numerator · 2⁶² / denominator⌋, exact: numerator ≤ denominator ≤ 2²⁰.
        let (high, low) = UInt64(numerator).multipliedFullWidth(by: UInt64(lockSpace))
        return Int64(UInt64(denominator).dividingFullWidth((high, low)).quotient)
    }
}

/// A manifest cut down to one shard, and how many entries the whole of it lists (for what `plan` says).
package struct ShardScope: Sendable {
    package let shard: Shard
    package let manifestEntries: Int

    package init(shard: Shard, manifestEntries: Int) {
        self.shard = shard
        self.manifestEntries = manifestEntries
    }
}

extension Manifest {
    /// Only the entries of `shard`, in manifest order (each keeps its `index`, so messages still name
    /// `files[i]` as the file does). The manifest was validated whole: a duplicate destination is refused in
    /// every shard alike. Every list of `lists:` is kept (the sync reads only those its entries name).
    package func restricted(to shard: Shard) -> Manifest {
        var restricted = self
        restricted.files = files.filter { shard.contains($0.destination) }
        restricted.shardScope = ShardScope(shard: shard, manifestEntries: files.count)
        return restricted
    }
}
