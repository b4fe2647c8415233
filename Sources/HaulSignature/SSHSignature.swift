import HaulDigest

/// An OpenSSH public key, from an authorized_keys-style line (`ssh-ed25519 AAAA… comment`): Ed25519, or ECDSA on
/// NIST P-256, P-384 or P-521. RSA and security-key (`sk-`) types are refused as unsupported.
package struct SSHPublicKey: Sendable, Hashable {
    package enum Algorithm: Sendable, Hashable {
        case ed25519
        case ecdsa(EllipticCurve)
    }

    package let algorithm: Algorithm
    /// The key in SSH's wire form, as it is written in base64 on the line and inside a signature.
    package let blob: [UInt8]
    /// The key itself: Ed25519's 32 bytes, or ECDSA's uncompressed point.
    let publicKey: [UInt8]

    package init(_ line: some StringProtocol) throws(SignatureFailure) {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
        guard fields.count >= 2 else { throw .unreadableKey(.missingLine(1)) }
        guard let blob = Base64.decode(fields[1]) else { throw .unreadableKey(.notBase64(line: 1)) }
        self = try Self.parse(blob: blob, named: String(fields[0])).get()
    }

    /// The key a blob holds (`named`: the type the line says, which the blob must repeat).
    static func parse(blob: [UInt8], named: String) -> Result<SSHPublicKey, SignatureFailure> {
        var reader = SSHWireReader(blob[...])
        guard let type = reader.string().map({ String(decoding: $0, as: UTF8.self) }) else {
            return .failure(.unreadableKey(.badEncoding))
        }
        guard named == type else { return .failure(.unreadableKey(.notOfFormat)) }
        let algorithm: Algorithm
        let publicKey: [UInt8]
        switch type {
        case "ssh-ed25519":
            guard let key = reader.string(), key.count == 32 else { return .failure(.unreadableKey(.badEncoding)) }
            (algorithm, publicKey) = (.ed25519, Array(key))
        case "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521":
            let curve: EllipticCurve = type.hasSuffix("256") ? .p256 : type.hasSuffix("384") ? .p384 : .p521
            guard let name = reader.string(), Array(name) == Array(type.utf8.dropFirst("ecdsa-sha2-".count)) else {
                return .failure(.unreadableKey(.notOfFormat))
            }
            guard let point = reader.string() else { return .failure(.unreadableKey(.badEncoding)) }
            (algorithm, publicKey) = (.ecdsa(curve), Array(point))
        default:
            return .failure(.unsupportedAlgorithm(type))
        }
        guard reader.isAtEnd else { return .failure(.unreadableKey(.badEncoding)) }
        return .success(SSHPublicKey(algorithm: algorithm, blob: blob, publicKey: publicKey))
    }

    private init(algorithm: Algorithm, blob: [UInt8], publicKey: [UInt8]) {
        (self.algorithm, self.blob, self.publicKey) = (algorithm, blob, publicKey)
    }

    /// SHA-256 of the blob: the fingerprint `ssh-keygen -l` prints (in base64).
    package var fingerprint: [UInt8] { Self.fingerprint(blob) }

    static func fingerprint(_ blob: [UInt8]) -> [UInt8] { StreamingHasher.digest(blob, algorithm: .sha256).bytes }

    var typeName: String {
        switch algorithm {
        case .ed25519: "ssh-ed25519"
        case .ecdsa(.p256): "ecdsa-sha2-nistp256"
        case .ecdsa(.p384): "ecdsa-sha2-nistp384"
        case .ecdsa(.p521): "ecdsa-sha2-nistp521"
        }
    }
}

/// `ssh-keygen -Y sign` signatures (OpenSSH's PROTOCOL.sshsig). What is signed is not the message but a statement
/// naming a namespace and the message's hash, so a signature made for one purpose (a Git commit, `git`) cannot be
/// passed off as one for another (a file, `file`): the namespace is the caller's, and a signature of another is
/// refused on its own.
package enum SSHSignature {
    private static let magic = Array("SSHSIG".utf8)
    private static let begin = Array("-----BEGIN SSH SIGNATURE-----".utf8)
    private static let end = Array("-----END SSH SIGNATURE-----".utf8)

    /// `armored`: the `.sig` file's bytes; `key`: the trusted key, which must be the one inside the signature.
    package static func verify(
        _ armored: [UInt8], of message: [UInt8], by key: SSHPublicKey, namespace: String
    )
        -> Result<VerifiedSignature, SignatureFailure>
    {
        let lines = TextLines.split(armored).drop { $0.isEmpty }
        guard let first = lines.first, first.elementsEqual(begin) else {
            return .failure(.unreadableSignature(.notOfFormat))
        }
        guard let last = lines.last, last.elementsEqual(end), lines.count >= 3 else {
            return .failure(.unreadableSignature(.notOfFormat))
        }
        let firstNumber = lines.startIndex + 2
        guard let blob = Base64.decode(utf8: Array(lines.dropFirst().dropLast().joined())) else {
            return .failure(.unreadableSignature(.notBase64(line: firstNumber)))
        }

        var reader = SSHWireReader(blob[...])
        guard reader.bytes(magic.count).map(Array.init) == magic else {
            return .failure(.unreadableSignature(.notOfFormat))
        }
        guard let version = reader.uint32() else { return .failure(.unreadableSignature(.badEncoding)) }
        guard version == 1 else { return .failure(.unreadableSignature(.unsupportedVersion(version))) }
        guard let signerBlob = reader.string(), let signedNamespace = reader.string(), let reserved = reader.string(),
            let hashName = reader.string(), let signatureBlob = reader.string(), reader.isAtEnd
        else { return .failure(.unreadableSignature(.badEncoding)) }

        guard signerBlob.elementsEqual(key.blob) else {
            return .failure(
                .signedByAnotherKey(trusted: key.fingerprint, signer: SSHPublicKey.fingerprint(Array(signerBlob))))
        }
        guard signedNamespace.elementsEqual(namespace.utf8) else {
            return .failure(
                .wrongNamespace(expected: namespace, signed: String(decoding: signedNamespace, as: UTF8.self)))
        }
        let hash: DigestAlgorithm
        switch String(decoding: hashName, as: UTF8.self) {
        case "sha256": hash = .sha256
        case "sha512": hash = .sha512
        case let other: return .failure(.unsupportedAlgorithm(other))
        }
        // The statement names the namespace asked for, not the one read: were the check above lost, a signature of
        // another would still not verify.
        var statement = magic
        for field in [Array(namespace.utf8), Array(reserved), Array(hashName)] {
            SSHWireReader.append(field, to: &statement)
        }
        SSHWireReader.append(StreamingHasher.digest(message, algorithm: hash).bytes, to: &statement)

        var signatureReader = SSHWireReader(signatureBlob)
        guard let type = signatureReader.string(), let signature = signatureReader.string(), signatureReader.isAtEnd
        else { return .failure(.unreadableSignature(.badEncoding)) }
        guard type.elementsEqual(key.typeName.utf8) else { return .failure(.unreadableSignature(.notOfFormat)) }

        let check: SignatureCheck
        switch key.algorithm {
        case .ed25519:
            check = SignatureCheck.ed25519(signature: Array(signature), message: statement, publicKey: key.publicKey)
        case .ecdsa(let curve):
            var numbers = SSHWireReader(signature)
            guard let r = numbers.string(), let s = numbers.string(), numbers.isAtEnd else {
                return .failure(.unreadableSignature(.badEncoding))
            }
            check = SignatureCheck.ecdsa(
                r: Array(r), s: Array(s), message: statement, hash: curve.sshHash, curve: curve, point: key.publicKey)
        }
        switch check {
        case .valid: return .success(VerifiedSignature(keyID: key.fingerprint, trustedComment: nil))
        case .invalid: return .failure(.messageMismatch)
        case .keyRejected: return .failure(.unreadableKey(.invalidPoint))
        }
    }
}

extension EllipticCurve {
    /// The hash RFC 5656 pairs with each curve.
    fileprivate var sshHash: DigestAlgorithm {
        switch self {
        case .p256: .sha256
        case .p384: .sha384
        case .p521: .sha512
        }
    }
}

/// SSH's wire encoding (RFC 4251): big-endian 32-bit numbers, and strings as such a length and then the bytes. Every
/// read checks the length against what is left; nil when it runs past the end.
struct SSHWireReader {
    private var rest: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { rest = bytes }

    var isAtEnd: Bool { rest.isEmpty }

    mutating func bytes(_ count: Int) -> ArraySlice<UInt8>? {
        guard count <= rest.count else { return nil }
        defer { rest = rest.dropFirst(count) }
        return rest.prefix(count)
    }

    mutating func uint32() -> UInt32? {
        bytes(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }

    mutating func string() -> ArraySlice<UInt8>? {
        guard let count = uint32() else { return nil }
        return bytes(Int(count))
    }

    static func append(_ field: [UInt8], to out: inout [UInt8]) {
        let count = UInt32(field.count)
        out += [UInt8(truncatingIfNeeded: count >> 24), UInt8(truncatingIfNeeded: count >> 16)]
        out += [UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)] + field
    }
}
