import HaulDigest

/// A manifest's `sha256:` value for `bytes`.
func sha256(_ bytes: [UInt8]) -> String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

/// The shard of `count` that `--shard` gives `destination`, by the documented function written out again:
/// ⌊h·N / 2⁶⁴⌋ + 1 of the first 8 bytes (big-endian) of SHA-256 of the destination path.
func shard(of destination: String, count: Int) -> Int {
    let digest = StreamingHasher.digest(Array(destination.utf8), algorithm: .sha256).bytes
    let position = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    return Int(position.multipliedFullWidth(by: UInt64(count)).high) + 1
}
