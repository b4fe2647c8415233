import Glibc
import Haul
import HaulCommand
import HaulSignature
import XCTest

/// A refused signature is a value (`ListRefusal` and what it carries); these are the sentences people read for it,
/// each telling apart what a user would fix differently.
final class SignatureWordingTests: XCTestCase {
    func testARefusalSaysWhichOfTheDifferentThingsWentWrong() {
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.rejected(.messageMismatch)),
            "the list does not match its signature: the list (or the signature) changed after signing")
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.unknownFormat),
            "it is not a signature haul reads (minisign, signify, SSH or OpenPGP)")
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.noKeyOfFormat(.ssh)),
            "it is an SSH signature, and no key given is an SSH key")
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.noKeyOfFormat(.minisign)),
            "it is a minisign signature, and no key given is a minisign key")
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.rejected(.trustedCommentMismatch)),
            "its trusted comment was changed after signing")
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.rejected(.wrongNamespace(expected: "file", signed: "git"))),
            "it was made for \"git\", not \"file\" (ssh-keygen -Y sign -n file)")
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.rejected(.unsupportedAlgorithm("ssh-rsa"))),
            "it uses ssh-rsa, which haul does not check")
    }

    func testAnotherKeysSignatureNamesBothKeysAsTheirToolsPrintThem() {
        // minisign's key number, read little-endian as minisign prints it in its public key's comment.
        let trusted: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]
        let signer: [UInt8] = [0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01]
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.rejected(.signedByAnotherKey(trusted: trusted, signer: signer))),
            "it is signed by another key (123456789ABCDEF), not by the key trusted (807060504030201)",
            "without leading zeros, as minisign prints the number")
        // An SSH key's SHA-256 fingerprint, byte by byte.
        let fingerprint = [UInt8](repeating: 0xab, count: 31) + [0x01]
        XCTAssertEqual(SignatureWording.hex(fingerprint), String(repeating: "AB", count: 31) + "01")
    }

    func testATruncatedOrGarbledSignatureSaysWhereItBreaks() {
        XCTAssertEqual(
            SignatureWording.sentence(SignatureFailure.unreadableSignature(.missingLine(4))),
            "the signature is truncated or garbled: line 4 is missing, or does not start as the format requires")
        XCTAssertEqual(
            SignatureWording.sentence(SignatureFailure.unreadableKey(.wrongLength(expected: 42, found: 12))),
            "the key is not one of its format: it decodes to 12 bytes, not 42")
        XCTAssertEqual(SignatureWording.sentence(Malformation.notBase64(line: 2)), "line 2 is not base64")
        XCTAssertEqual(
            SignatureWording.sentence(Malformation.unknownAlgorithm(Array("Xx".utf8))),
            "its algorithm \"Xx\" is not one of the format's")
        XCTAssertEqual(
            SignatureWording.sentence(Malformation.unsupportedVersion(2)),
            "it is of version 2, which haul does not read")
    }

    func testARetiredKeyIsNamedWithTheDayItRetired() {
        // 2026-03-01T00:00:00Z: the end of `retired: 2026-02-28`.
        XCTAssertEqual(
            SignatureWording.sentence(ListRefusal.retired(key: "old.pub", after: 1_772_323_200)),
            "it is signed by old.pub, a key retired after 2026-02-28")
    }

    func testTheVerifierSaysWhichPackageToInstallOrWhatItDid() {
        let missing = SignatureWording.sentence(ListRefusal.openPGP(.verifierMissing))
        XCTAssertTrue(missing.contains("the Debian package sqv or gpgv"), missing)
        XCTAssertEqual(
            SignatureWording.sentence(OpenPGPFailure.rejected(path: "/usr/bin/sqv", exitStatus: 1)),
            "/usr/bin/sqv refused it (exit status 1): it is not signed by a key of the keyring, the list changed "
                + "after signing, or the signature is truncated or garbled")
        XCTAssertEqual(
            SignatureWording.sentence(OpenPGPFailure.killed(path: "/usr/bin/gpgv", signal: 9)),
            "/usr/bin/gpgv was killed by signal 9")
        XCTAssertEqual(
            SignatureWording.sentence(OpenPGPFailure.couldNotRun(path: "/tmp/haul-verify.abcdef/list", errno: ENOSPC)),
            "the OpenPGP verifier could not be run: /tmp/haul-verify.abcdef/list: No space left on device")
    }

    func testAKeyThatCannotBeReadIsNamed() {
        XCTAssertEqual(
            SignatureWording.sentence(KeyFailure.missing(path: "keys/release.pub")),
            "\"keys/release.pub\": no such key file (an inline key starts with RW, ssh- or ecdsa-)")
        XCTAssertEqual(
            SignatureWording.sentence(KeyFailure.unreadable(path: "k.pub", errno: EACCES)),
            "\"k.pub\": Permission denied")
        XCTAssertEqual(
            SignatureWording.sentence(KeyFailure.notARegularFile(path: "keys")), "\"keys\": not a regular file")
        XCTAssertEqual(
            SignatureWording.sentence(
                KeyFailure.malformed(key: "RWQ", .unreadableKey(.wrongLength(expected: 42, found: 1)))),
            "\"RWQ\": the key is not one of its format: it decodes to 1 bytes, not 42")
    }
}
