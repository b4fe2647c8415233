import Glibc
import Haul
import HaulFileSystem
import HaulManifest
import HaulSignature

/// The words for a checksum list's refused signature (`ListRefusal`, and the `SignatureFailure`, `Malformation` and
/// `OpenPGPFailure` it carries) and for a `--key` that is no key (`KeyFailure`). Each is a clause that follows "the
/// signature is refused: ", so that `haul add` and a sync can say it after naming the list and the signature; a
/// key's follows the option or manifest key that named it.
package enum SignatureWording {
    package static func sentence(_ refusal: ListRefusal) -> String {
        switch refusal {
        case .unknownFormat:
            return "it is not a signature haul reads (minisign, signify, SSH or OpenPGP)"
        case .noKeyOfFormat(let format):
            return "it is \(article(format)) \(name(format)) signature, and no key given is \(article(format)) "
                + "\(name(format)) key"
        case .rejected(let failure):
            return sentence(failure)
        case .retired(let key, let after):
            return "it is signed by \(key), a key retired after \(day(after))"
        case .openPGP(let failure):
            return sentence(failure)
        }
    }

    package static func sentence(_ failure: SignatureFailure) -> String {
        switch failure {
        case .unreadableKey(let malformation):
            return "the key is not one of its format: \(sentence(malformation))"
        case .unreadableSignature(let malformation):
            return "the signature is truncated or garbled: \(sentence(malformation))"
        case .unsupportedAlgorithm(let algorithm):
            return "it uses \(algorithm), which haul does not check"
        case .signedByAnotherKey(let trusted, let signer):
            return "it is signed by another key (\(hex(signer))), not by the key trusted (\(hex(trusted)))"
        case .wrongNamespace(let expected, let signed):
            return "it was made for \(String(reflecting: signed)), not \(String(reflecting: expected)) "
                + "(ssh-keygen -Y sign -n \(expected))"
        case .messageMismatch:
            return "the list does not match its signature: the list (or the signature) changed after signing"
        case .trustedCommentMismatch:
            return "its trusted comment was changed after signing"
        }
    }

    package static func sentence(_ malformation: Malformation) -> String {
        switch malformation {
        case .missingLine(let line): "line \(line) is missing, or does not start as the format requires"
        case .unexpectedLine(let line): "line \(line) is one more than the format has"
        case .notBase64(let line): "line \(line) is not base64"
        case .wrongLength(let expected, let found): "it decodes to \(found) bytes, not \(expected)"
        case .unknownAlgorithm(let tag):
            "its algorithm \(Quoted.text(String(decoding: tag, as: UTF8.self))) is not one of the format's"
        case .notOfFormat: "its armor, magic or key type is not the format's"
        case .unsupportedVersion(let version): "it is of version \(version), which haul does not read"
        case .invalidPoint: "its key is not a point on its curve"
        case .badEncoding: "a field runs past its end, or bytes follow the last one"
        }
    }

    package static func sentence(_ failure: OpenPGPFailure) -> String {
        switch failure {
        case .verifierMissing:
            "no OpenPGP verifier is installed: install the Debian package sqv or gpgv (a clear-signed list needs gpgv)"
        case .rejected(let path, let status):
            "\(path) refused it (exit status \(status)): it is not signed by a key of the keyring, the list changed "
                + "after signing, or the signature is truncated or garbled"
        case .killed(let path, let signal):
            "\(path) was killed by signal \(signal)"
        case .couldNotRun(let path, let code):
            "the OpenPGP verifier could not be run: \(path): \(Errno(code))"
        }
    }

    package static func sentence(_ failure: KeyFailure) -> String {
        switch failure {
        case .missing(let path):
            "\(Quoted.text(path)): no such key file (an inline key starts with RW, ssh- or ecdsa-)"
        case .unreadable(let path, let code): "\(Quoted.text(path)): \(Errno(code))"
        case .notARegularFile(let path): "\(Quoted.text(path)): not a regular file"
        case .malformed(let key, let failure): "\(Quoted.text(key)): \(sentence(failure))"
        }
    }

    /// The format as its tool names it.
    package static func name(_ format: SignatureFormat) -> String {
        switch format {
        case .minisign: "minisign"
        case .signify: "signify"
        case .ssh: "SSH"
        case .openPGP: "OpenPGP"
        }
    }

    private static func article(_ format: SignatureFormat) -> String {
        format == .openPGP || format == .ssh ? "an" : "a"
    }

    /// A key's identity, as hex: minisign's and signify's 8-byte key number as minisign prints it (in its public
    /// key's comment: the number read little-endian, without leading zeros), an SSH key's SHA-256 fingerprint byte
    /// by byte.
    package static func hex(_ keyID: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        guard keyID.count == 8 else {
            return String(decoding: keyID.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xf)]] }, as: UTF8.self)
        }
        // minisign prints the number as `%" PRIX64`: no leading zeros.
        let number = keyID.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return String(number, radix: 16, uppercase: true)
    }

    /// The day (UTC) a key's last moment falls on: `retired: YYYY-MM-DD` as written.
    package static func day(_ after: Double) -> String {
        var seconds = time_t(after.rounded(.down)) - 1
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(after)" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
    }
}
