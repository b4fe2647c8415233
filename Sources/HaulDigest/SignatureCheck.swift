import CLibCrypto

/// The curves of the ECDSA keys a signature may be checked with (those of OpenSSH's `ecdsa-sha2-nistp*` keys).
package enum EllipticCurve: Sendable, Hashable, CaseIterable {
    case p256, p384, p521

    /// An uncompressed point's length: 0x04, then X and Y.
    package var pointByteCount: Int {
        switch self {
        case .p256: 65
        case .p384: 97
        case .p521: 133
        }
    }

    /// DER of a SubjectPublicKeyInfo up to its point (algorithm id-ecPublicKey with the curve's name, then the
    /// BIT STRING's header), so that libcrypto reads the key as it reads any public key, with no curve API.
    fileprivate var publicKeyInfoPrefix: [UInt8] {
        switch self {
        case .p256:
            [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
                + [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00]
        case .p384:
            [0x30, 0x76, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
                + [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22, 0x03, 0x62, 0x00]
        case .p521:
            [0x30, 0x81, 0x9b, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]
                + [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23, 0x03, 0x81, 0x86, 0x00]
        }
    }
}

/// What checking one signature found. A key libcrypto refuses (a point off its curve) is told apart from a
/// signature that does not match: the first is the key's fault, whatever was signed.
package enum SignatureCheck: Sendable, Hashable {
    case valid, invalid, keyRejected

    /// Ed25519 (RFC 8032, pure: the message itself is signed) of `message` by the 32-byte `publicKey`.
    package static func ed25519(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> SignatureCheck {
        guard publicKey.count == 32 else { return .keyRejected }
        guard signature.count == 64 else { return .invalid }
        guard let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count) else {
            return .keyRejected
        }
        defer { EVP_PKEY_free(key) }
        return verify(signature: signature, message: message, key: key, digest: nil)
    }

    /// ECDSA of `message`, hashed by `hash`, by the key at `point` (uncompressed, SEC1) on `curve`; `r` and `s` are
    /// the signature's two numbers, big-endian and unsigned (leading zero bytes allowed).
    package static func ecdsa(
        r: [UInt8], s: [UInt8], message: [UInt8], hash: DigestAlgorithm, curve: EllipticCurve, point: [UInt8]
    ) -> SignatureCheck {
        guard point.count == curve.pointByteCount, point.first == 0x04 else { return .keyRejected }
        let info = curve.publicKeyInfoPrefix + point
        let parsed = info.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key = parsed else { return .keyRejected }
        defer { EVP_PKEY_free(key) }
        let signature = DER.sequence(DER.integer(r) + DER.integer(s))
        return verify(signature: signature, message: message, key: key, digest: StreamingHasher.evpType(hash))
    }

    /// BLAKE2b-512 of `message` (what minisign's prehashed signatures sign).
    package static func blake2b512(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        guard EVP_Digest(message, message.count, &out, &length, EVP_blake2b512(), nil) == 1, length == 64 else {
            fatalError("EVP_Digest(BLAKE2b-512) failed: out of memory")
        }
        return out
    }

    private static func verify(
        signature: [UInt8], message: [UInt8], key: OpaquePointer, digest: OpaquePointer?
    )
        -> SignatureCheck
    {
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, digest, nil, key) == 1 else { return .keyRejected }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1 ? .valid : .invalid
    }
}

/// The little DER an ECDSA signature needs: a SEQUENCE of two INTEGERs.
private enum DER {
    static func sequence(_ content: [UInt8]) -> [UInt8] { [0x30] + length(content.count) + content }

    /// A non-negative INTEGER: leading zeros dropped, one put back where the high bit would make it negative.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty || bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return [0x02] + length(bytes.count) + bytes
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        if count < 0x100 { return [0x81, UInt8(count)] }
        return [0x82, UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)]
    }
}
