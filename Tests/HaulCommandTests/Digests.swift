import HaulDigest

/// A manifest's `sha256:` value for `bytes`.
func sha256(_ bytes: [UInt8]) -> String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }
