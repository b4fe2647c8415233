import HaulDigest

/// An OpenBSD signify public key: the key file (an `untrusted comment:` line, then the key), or its second line
/// alone: the same bytes as a minisign key (`NumberedEd25519Key`). The name says which tool's signatures a key is
/// for.
package typealias SignifyPublicKey = NumberedEd25519Key

/// signify's signatures: an `untrusted comment:` line, then the Ed25519 signature of the message itself with the
/// key's number. Nothing else is signed, so nothing else is returned.
package enum Signify {
    /// `signature`: the `.sig` file's bytes (detached, `signify -S` without `-e`).
    package static func verify(
        _ signature: [UInt8], of message: [UInt8], by key: SignifyPublicKey
    )
        -> Result<VerifiedSignature, SignatureFailure>
    {
        let lines = TextLines.split(signature)
        guard lines.count <= 2 else { return .failure(.unreadableSignature(.unexpectedLine(3))) }
        return verify(lines, of: message, by: key)
    }

    /// A signature with its message embedded (`signify -S -e`, as OpenBSD signs its `SHA256` lists): the two
    /// signature lines, then the message, whose bytes are returned only once they verify.
    package static func verifyEmbedded(
        _ signedFile: [UInt8], by key: SignifyPublicKey
    )
        -> Result<SignifyEmbeddedMessage, SignatureFailure>
    {
        let newlines = signedFile.indices.lazy.filter { signedFile[$0] == UInt8(ascii: "\n") }.prefix(2)
        guard let end = newlines.dropFirst().first else { return .failure(.unreadableSignature(.missingLine(2))) }
        let message = Array(signedFile[(end + 1)...])
        return verify(TextLines.split(Array(signedFile[...end])), of: message, by: key).map {
            SignifyEmbeddedMessage(signature: $0, message: message)
        }
    }

    private static func verify(
        _ lines: [ArraySlice<UInt8>], of message: [UInt8], by key: SignifyPublicKey
    )
        -> Result<VerifiedSignature, SignatureFailure>
    {
        guard lines.first?.starts(with: NumberedEd25519Line.untrustedComment) == true else {
            return .failure(.unreadableSignature(.missingLine(1)))
        }
        let signed: NumberedEd25519Line
        switch NumberedEd25519Line.decode(lines, at: 1, payloadCount: 64, algorithms: [NumberedEd25519Line.ed]) {
        case .success(let line): signed = line
        case .failure(let malformation): return .failure(.unreadableSignature(malformation))
        }
        guard signed.keyNumber == key.keyID else {
            return .failure(.signedByAnotherKey(trusted: key.keyID, signer: signed.keyNumber))
        }
        switch SignatureCheck.ed25519(signature: signed.payload, message: message, publicKey: key.key) {
        case .valid: return .success(VerifiedSignature(keyID: key.keyID, trustedComment: nil))
        case .invalid: return .failure(.messageMismatch)
        case .keyRejected: return .failure(.unreadableKey(.invalidPoint))
        }
    }
}

/// What an embedded signify signature vouches for: the message that followed it.
package struct SignifyEmbeddedMessage: Sendable, Hashable {
    package let signature: VerifiedSignature
    package let message: [UInt8]
}
