import HaulDigest

/// A key haul trusts for a checksum list's signature, as a manifest's `keys:` or `--key` gives it, with the day it
/// retires. Several may be trusted at once (a project rotating its key signs with the new one while the old one is
/// still listed).
package struct TrustedKey: Sendable, Hashable {
    package enum Material: Sendable, Hashable {
        /// minisign's and signify's key (`RW…`): the same bytes for both tools. A signature's own format says which
        /// tool made it.
        case numberedEd25519(keyID: [UInt8], key: [UInt8])
        case ssh(SSHPublicKey)
        /// An OpenPGP keyring (binary, or armored for `sqv`) at this path, which the system's verifier reads.
        case openPGPKeyring(path: String)
    }

    package let material: Material
    /// After this time (seconds since the epoch) the key is retired: a signature it made is refused from then on.
    package let retiredAfter: Double?
    /// The key as the user named it (a path, or the key's start), for messages.
    package let name: String

    package init(material: Material, retiredAfter: Double? = nil, name: String) {
        self.material = material
        self.retiredAfter = retiredAfter
        self.name = name
    }

    /// A key written inline (`RW…`, or an SSH public key line); nil when `text` is neither, and so names a file.
    package static func inline(_ text: String) -> Result<Material, SignatureFailure>? {
        let trimmed = text.drop { $0 == " " }
        if trimmed.hasPrefix("RW") {
            return Result { () throws(SignatureFailure) in
                let key = try MinisignPublicKey(trimmed)
                return .numberedEd25519(keyID: key.keyID, key: key.key)
            }
        }
        if trimmed.hasPrefix("ssh-") || trimmed.hasPrefix("ecdsa-") {
            return Result { () throws(SignatureFailure) in .ssh(try SSHPublicKey(trimmed)) }
        }
        return nil
    }

    /// A key file's contents: a minisign or signify public key file, an SSH public key (`.pub`), or else an OpenPGP
    /// keyring, which is left at `path` for the verifier to read.
    package static func file(_ bytes: [UInt8], path: String) -> Result<Material, SignatureFailure> {
        let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
        if text.hasPrefix("untrusted comment:") {
            return Result { () throws(SignatureFailure) in
                let key = try MinisignPublicKey(String(decoding: bytes, as: UTF8.self))
                return .numberedEd25519(keyID: key.keyID, key: key.key)
            }
        }
        if let inline = inline(String(decoding: bytes, as: UTF8.self)) { return inline }
        return .success(.openPGPKeyring(path: path))
    }
}

/// The format a signature file is in, read from its first bytes.
package enum SignatureFormat: Sendable, Hashable {
    case minisign, signify, ssh, openPGP

    package static func of(_ signature: [UInt8]) -> SignatureFormat? {
        if signature.starts(with: Array("-----BEGIN SSH SIGNATURE-----".utf8)) { return .ssh }
        if signature.starts(with: Array("-----BEGIN PGP SIGNATURE-----".utf8)) { return .openPGP }
        // A binary OpenPGP signature packet: the tag byte has its top bit set; no text format starts so.
        if let first = signature.first, first & 0x80 != 0 { return .openPGP }
        guard signature.starts(with: NumberedEd25519Line.untrustedComment) else { return nil }
        let lines = TextLines.split(signature)
        return lines.count > 2 && lines[2].starts(with: Array("trusted comment:".utf8)) ? .minisign : .signify
    }

    /// A list signed inside itself (`gpg --clearsign`): no separate signature file. The armor may follow other
    /// lines (anyone can add some): the verifier outputs the signed text alone, and only that is read.
    package static func isClearSigned(_ list: [UInt8]) -> Bool {
        TextLines.split(list).contains { $0.elementsEqual("-----BEGIN PGP SIGNED MESSAGE-----".utf8) }
    }
}

/// A checksum list whose signature checked out: the text to read the digests from (for a clear-signed list, only
/// what the signature covers), and who signed it.
package struct VerifiedList: Sendable, Hashable {
    package let text: [UInt8]
    package let format: SignatureFormat
    /// The trusted key that verified it, as the user named it.
    package let key: String
    /// minisign's trusted comment (a timestamp, the file's name), vouched for by the key.
    package let trustedComment: String?
}

/// Why a list's signature was not accepted. The list's digests are then not used at all.
package enum ListRefusal: Error, Sendable, Hashable {
    /// The signature is not of a format haul reads.
    case unknownFormat
    /// No trusted key is of the signature's kind (an SSH signature, and only minisign keys trusted).
    case noKeyOfFormat(SignatureFormat)
    /// Every key of its kind refused it; the failure of the key that came closest (the one the signature names).
    case rejected(SignatureFailure)
    /// The key that made it is retired since `after` (seconds since the epoch).
    case retired(key: String, after: Double)
    /// The system's OpenPGP verifier refused it, or could not be run.
    case openPGP(OpenPGPFailure)
}

/// The one check of a checksum list's signature, whatever its format, against every trusted key. OpenPGP is the
/// caller's to run (`checkOpenPGP`: the verifier needs files, and writing them is the store's): it is given the
/// list, the detached signature (nil: clear-signed) and the keyring's path, and answers the signed text.
package enum ListSignature {
    package typealias OpenPGPCheck = (
        _ list: [UInt8], _ signature: [UInt8]?, _ keyring: String
    ) -> Result<[UInt8], OpenPGPFailure>

    /// `signature`: nil for a clear-signed list. `now` (seconds since the epoch) retires keys past their day.
    package static func verify(
        list: [UInt8], signature: [UInt8]?, keys: [TrustedKey], now: Double, checkOpenPGP: OpenPGPCheck
    ) -> Result<VerifiedList, ListRefusal> {
        let format: SignatureFormat
        if let signature {
            guard let detected = SignatureFormat.of(signature) else { return .failure(.unknownFormat) }
            format = detected
        } else {
            guard SignatureFormat.isClearSigned(list) else { return .failure(.unknownFormat) }
            format = .openPGP
        }
        let candidates = keys.filter { $0.reads(format) }
        guard !candidates.isEmpty else { return .failure(.noKeyOfFormat(format)) }
        var closest: ListRefusal?
        for key in candidates {
            switch check(list: list, signature: signature, format: format, by: key, checkOpenPGP: checkOpenPGP) {
            case .success(let verified):
                if let after = key.retiredAfter, now > after { return .failure(.retired(key: key.name, after: after)) }
                return .success(verified)
            case .failure(let refusal):
                // A key the signature names, refusing it, says more than the others' "signed by another key".
                if closest == nil || !refusal.isAnotherKey { closest = refusal }
            }
        }
        return .failure(closest ?? .noKeyOfFormat(format))
    }

    private static func check(
        list: [UInt8], signature: [UInt8]?, format: SignatureFormat, by key: TrustedKey, checkOpenPGP: OpenPGPCheck
    ) -> Result<VerifiedList, ListRefusal> {
        func verified(_ text: [UInt8], _ comment: String? = nil) -> VerifiedList {
            VerifiedList(text: text, format: format, key: key.name, trustedComment: comment)
        }
        switch (key.material, format, signature) {
        case (.numberedEd25519(let keyID, let bytes), .minisign, let signature?):
            return Minisign.verify(signature, of: list, by: MinisignPublicKey(keyID: keyID, key: bytes))
                .map { verified(list, $0.trustedComment) }.mapError(ListRefusal.rejected)
        case (.numberedEd25519(let keyID, let bytes), .signify, let signature?):
            return Signify.verify(signature, of: list, by: SignifyPublicKey(keyID: keyID, key: bytes))
                .map { _ in verified(list) }.mapError(ListRefusal.rejected)
        case (.ssh(let sshKey), .ssh, let signature?):
            return SSHSignature.verify(signature, of: list, by: sshKey, namespace: "file")
                .map { _ in verified(list) }.mapError(ListRefusal.rejected)
        case (.openPGPKeyring(let path), .openPGP, _):
            return checkOpenPGP(list, signature, path).map { verified($0) }.mapError(ListRefusal.openPGP)
        default:
            return .failure(.noKeyOfFormat(format))
        }
    }
}

extension TrustedKey {
    /// Whether this key can check a signature of `format`.
    fileprivate func reads(_ format: SignatureFormat) -> Bool {
        switch (material, format) {
        case (.numberedEd25519, .minisign), (.numberedEd25519, .signify), (.ssh, .ssh), (.openPGPKeyring, .openPGP):
            true
        default: false
        }
    }
}

extension ListRefusal {
    fileprivate var isAnotherKey: Bool {
        if case .rejected(.signedByAnotherKey) = self { true } else { false }
    }
}
