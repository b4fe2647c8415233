/// A signature that checked out: who signed, and what the signer vouched for beyond the message.
package struct VerifiedSignature: Sendable, Hashable {
    /// The signing key's identity: minisign's and signify's 8-byte key number, or an SSH key's SHA-256 fingerprint
    /// (the 32 bytes `ssh-keygen -l` prints in base64).
    package let keyID: [UInt8]
    /// minisign's trusted comment, exactly as signed (the text after `trusted comment: `); nil for the formats
    /// that have none.
    package let trustedComment: String?
}

/// Why a signature was refused. Values, not words: the CLI says them. Each case is one thing a user would fix
/// differently, so that "signed by another key" never reads as "the file was changed".
package enum SignatureFailure: Error, Sendable, Hashable {
    /// The trusted key is not a key of the format.
    case unreadableKey(Malformation)
    /// The signature is not one of the format (cut short, garbled, or of another format).
    case unreadableSignature(Malformation)
    /// A well-formed key or signature of an algorithm haul does not check (an SSH `ssh-rsa` key, a `sha1`
    /// signature hash): its name as the input spells it.
    case unsupportedAlgorithm(String)
    /// The signature names a key other than the trusted one: both identities, as in `VerifiedSignature.keyID`.
    case signedByAnotherKey(trusted: [UInt8], signer: [UInt8])
    /// An SSH signature made for another purpose than the one asked for (a Git commit's `git`, not `file`).
    case wrongNamespace(expected: String, signed: String)
    /// The signature is by the trusted key's number but does not match the message: the message or the
    /// signature changed after signing.
    case messageMismatch
    /// minisign: the message's signature holds, but the one over the trusted comment does not (the comment was
    /// altered).
    case trustedCommentMismatch
}

/// What is wrong with the text of a key or a signature.
package enum Malformation: Error, Sendable, Hashable {
    /// A line the format requires is missing or does not start as it must: its number, from 1.
    case missingLine(Int)
    /// A line where the format has no more: its number, from 1.
    case unexpectedLine(Int)
    /// The base64 on this line (from 1) does not decode.
    case notBase64(line: Int)
    /// The decoded bytes are not as long as the format's.
    case wrongLength(expected: Int, found: Int)
    /// The algorithm tag is not one of the format's (minisign's `Ed`/`ED`, signify's `Ed`).
    case unknownAlgorithm([UInt8])
    /// SSH: the armor lines, the `SSHSIG` magic, or a key line's type and blob disagree.
    case notOfFormat
    /// SSH: a signature version other than 1.
    case unsupportedVersion(UInt32)
    /// libcrypto refuses the key (an ECDSA point that is not on its curve).
    case invalidPoint
    /// SSH: a length-prefixed field runs past the end of its blob, or bytes follow the last one.
    case badEncoding
}
