import HaulDigest

/// A minisign public key: the `RW…` line, alone or in its file (`NumberedEd25519Key`, which signify's keys are too).
package typealias MinisignPublicKey = NumberedEd25519Key

/// minisign's signatures (https://jedisct1.github.io/minisign/): an Ed25519 signature of the message (`Ed`, made by
/// `minisign -l`) or of its BLAKE2b-512 (`ED`, the default), and a second one over the first and the trusted
/// comment, so that the comment (a timestamp, a file name) is vouched for too. Both must hold.
package enum Minisign {
    private static let legacy = Array("Ed".utf8)
    private static let prehashed = Array("ED".utf8)
    private static let trustedComment = Array("trusted comment: ".utf8)

    /// `signature`: the `.minisig` file's bytes; `message`: the signed file's.
    package static func verify(
        _ signature: [UInt8], of message: [UInt8], by key: MinisignPublicKey
    )
        -> Result<VerifiedSignature, SignatureFailure>
    {
        let lines = TextLines.split(signature)
        guard lines.first?.starts(with: NumberedEd25519Line.untrustedComment) == true else {
            return .failure(.unreadableSignature(.missingLine(1)))
        }
        let signed: NumberedEd25519Line
        switch NumberedEd25519Line.decode(lines, at: 1, payloadCount: 64, algorithms: [legacy, prehashed]) {
        case .success(let line): signed = line
        case .failure(let malformation): return .failure(.unreadableSignature(malformation))
        }
        guard lines.count > 2, lines[2].starts(with: trustedComment) else {
            return .failure(.unreadableSignature(.missingLine(3)))
        }
        let comment = Array(lines[2].dropFirst(trustedComment.count))
        guard lines.count >= 4 else { return .failure(.unreadableSignature(.missingLine(4))) }
        guard lines.count == 4 else { return .failure(.unreadableSignature(.unexpectedLine(5))) }
        guard let global = Base64.decode(utf8: lines[3]) else {
            return .failure(.unreadableSignature(.notBase64(line: 4)))
        }
        guard global.count == 64 else {
            return .failure(.unreadableSignature(.wrongLength(expected: 64, found: global.count)))
        }

        guard signed.keyNumber == key.keyID else {
            return .failure(.signedByAnotherKey(trusted: key.keyID, signer: signed.keyNumber))
        }
        let content = signed.algorithm == prehashed ? SignatureCheck.blake2b512(message) : message
        switch SignatureCheck.ed25519(signature: signed.payload, message: content, publicKey: key.key) {
        case .valid: break
        case .invalid: return .failure(.messageMismatch)
        case .keyRejected: return .failure(.unreadableKey(.invalidPoint))
        }
        switch SignatureCheck.ed25519(signature: global, message: signed.payload + comment, publicKey: key.key) {
        case .valid: break
        case .invalid: return .failure(.trustedCommentMismatch)
        case .keyRejected: return .failure(.unreadableKey(.invalidPoint))
        }
        return .success(VerifiedSignature(keyID: key.keyID, trustedComment: String(decoding: comment, as: UTF8.self)))
    }
}
