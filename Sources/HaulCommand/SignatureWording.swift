import HaulDigest
import HaulFileSystem
import HaulManifest
import HaulSignature

/// The words for a signature that was not accepted: what was wrong with it, or with the key.
package enum SignatureWording {
    package static func sentence(_ refusal: ListRefusal) -> String {
        switch refusal {
        case .unknownFormat: "it is not a minisign, signify, SSH or OpenPGP signature"
        case .noKeyOfFormat(let format): "it is \(ListWording.format(format)), and no trusted key is of that kind"
        case .rejected(let failure): sentence(failure)
        case .retired(let key, let after):
            "the key \(key) that signed it is retired since \(Int(after)) (seconds since 1970): not trusted any more"
        case .openPGP(.verifierMissing): "no OpenPGP verifier: install sqv or gpgv (Debian packages sqv, gpgv)"
        case .openPGP(.rejected(let path, let status)): "\(path) refused it (exit status \(status))"
        case .openPGP(.killed(let path, let signal)): "\(path) was killed by signal \(signal)"
        case .openPGP(.couldNotRun(let path, let code)): "cannot run \(path): \(Errno(code))"
        }
    }

    package static func sentence(_ failure: SignatureFailure) -> String {
        switch failure {
        case .unreadableKey(let malformation): "the key is not readable (\(sentence(malformation)))"
        case .unreadableSignature(let malformation): "the signature is not readable (\(sentence(malformation)))"
        case .unsupportedAlgorithm(let name): "\(name) keys and signatures are not checked by haul"
        case .signedByAnotherKey(let trusted, let signer):
            "signed by another key (\(hex(signer))), not the trusted one (\(hex(trusted)))"
        case .wrongNamespace(let expected, let signed):
            "an SSH signature for \"\(signed)\", not for \"\(expected)\""
        case .messageMismatch: "the list does not match its signature (changed after signing)"
        case .trustedCommentMismatch: "its trusted comment was altered after signing"
        }
    }

    static func sentence(_ malformation: Malformation) -> String {
        switch malformation {
        case .missingLine(let line): "line \(line) is missing"
        case .unexpectedLine(let line): "line \(line) is one too many"
        case .notBase64(let line): "line \(line) is not base64"
        case .wrongLength(let expected, let found): "\(found) bytes where \(expected) belong"
        case .unknownAlgorithm(let tag): "unknown algorithm \(Quoted.text(String(decoding: tag, as: UTF8.self)))"
        case .notOfFormat: "not of its format"
        case .unsupportedVersion(let version): "version \(version)"
        case .invalidPoint: "a key off its curve"
        case .badEncoding: "a field runs past its end"
        }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
