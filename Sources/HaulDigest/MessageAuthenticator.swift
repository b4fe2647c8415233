import CLibCrypto

/// HMAC-SHA-256 (RFC 2104) under a secret key: a code that only a holder of the key can compute, so a record that
/// carries a valid one was written by a holder of the key. Built on the streaming hasher (two SHA-256 passes
/// over the key's pads and the message) rather than OpenSSL's MAC API: under a microsecond per message, and no
/// context to share between threads.
package struct MessageAuthenticator: Sendable {
    /// The key XORed with 0x36 and with 0x5c, padded to SHA-256's block of 64 bytes.
    private let innerPad: [UInt8]
    private let outerPad: [UInt8]

    package static let blockSize = 64

    /// `key`: at most a block (64 bytes); haul's keys are 32 random bytes.
    package init(key: [UInt8]) {
        precondition(key.count <= Self.blockSize, "an HMAC key longer than a block would be hashed first")
        let padded = key + [UInt8](repeating: 0, count: Self.blockSize - key.count)
        innerPad = padded.map { $0 ^ 0x36 }
        outerPad = padded.map { $0 ^ 0x5c }
    }

    /// The code of `message`, whole (32 bytes).
    package func code(_ message: [UInt8]) -> Digest {
        let inner = StreamingHasher.digest(innerPad + message, algorithm: .sha256)
        return inner.withUnsafeBytes { StreamingHasher.digest(outerPad + $0, algorithm: .sha256) }
    }

    /// `count` bytes from the operating system's random source, through libcrypto; nil if it has none to give.
    package static func randomKey(count: Int = 32) -> [UInt8]? {
        var key = [UInt8](repeating: 0, count: count)
        return RAND_bytes(&key, Int32(count)) == 1 ? key : nil
    }
}
