import Foundation
import HaulDigest
import HaulSignature
import HaulTestSupport
import XCTest

/// `ssh-keygen -Y sign` signatures made here by ssh-keygen: Ed25519 and ECDSA keys, the `file` namespace haul
/// uses, and each way one is refused.
final class SSHSignatureTests: XCTestCase {
    private var tools: SigningTools!
    private let message = Array("sha512  cf83e1357eefb8bdf1542850d66d8007  haul.tar.gz\n".utf8)

    override func setUpWithError() throws {
        _ = try Capability.tool("ssh-keygen")
        tools = try SigningTools()
        try tools.write("list", message)
    }

    override func tearDown() { tools = nil }

    /// A new key of `type` (and `bits`) named `name`; its public line.
    private func makeKey(_ name: String, _ type: String, bits: Int? = nil) throws -> String {
        let size = bits.map { ["-b", String($0)] } ?? []
        try tools.run("ssh-keygen", ["-q", "-t", type] + size + ["-N", "", "-C", "\(name)@haul.invalid", "-f", name])
        return try tools.text("\(name).pub")
    }

    /// The signature of `list` by key `name`, in namespace `namespace`.
    private func sign(_ name: String, namespace: String = "file", options: [String] = []) throws -> [UInt8] {
        let copy = "list-\(name)-\(namespace)-\(options.count)"
        try tools.write(copy, message)
        try tools.run("ssh-keygen", ["-Y", "sign", "-f", name, "-n", namespace] + options + [copy])
        return try tools.read("\(copy).sig")
    }

    func testEd25519SignatureVerifiesAndNamesTheKeyByItsFingerprint() throws {
        let key = try SSHPublicKey(makeKey("a", "ed25519"))
        let verified = try SSHSignature.verify(sign("a"), of: message, by: key, namespace: "file").get()
        let printed = try tools.run("ssh-keygen", ["-l", "-f", "a.pub"]).stdout
        XCTAssertTrue(
            printed.contains("SHA256:" + Base64.encode(verified.keyID).replacingOccurrences(of: "=", with: "")))
        XCTAssertEqual(key.algorithm, .ed25519)
    }

    func testECDSASignaturesVerifyOnEveryCurve() throws {
        for (bits, curve) in [(256, EllipticCurve.p256), (384, .p384), (521, .p521)] {
            let key = try SSHPublicKey(makeKey("ec\(bits)", "ecdsa", bits: bits))
            XCTAssertEqual(key.algorithm, .ecdsa(curve))
            XCTAssertNoThrow(try SSHSignature.verify(sign("ec\(bits)"), of: message, by: key, namespace: "file").get())
            XCTAssertEqual(
                SSHSignature.verify(try sign("ec\(bits)"), of: message + [0x0a], by: key, namespace: "file").failure,
                .messageMismatch, "P-\(bits)")
        }
    }

    func testSHA256HashedSignatureVerifies() throws {
        let key = try SSHPublicKey(makeKey("a", "ed25519"))
        let signature = try sign("a", options: ["-O", "hashalg=sha256"])
        XCTAssertNoThrow(try SSHSignature.verify(signature, of: message, by: key, namespace: "file").get())
    }

    func testChangedMessageIsRefused() throws {
        let key = try SSHPublicKey(makeKey("a", "ed25519"))
        var changed = message
        changed[0] = UInt8(ascii: "S")
        XCTAssertEqual(
            SSHSignature.verify(try sign("a"), of: changed, by: key, namespace: "file").failure, .messageMismatch)
    }

    func testSignatureByAnotherKeyIsRefusedAsSuch() throws {
        let trusted = try SSHPublicKey(makeKey("a", "ed25519"))
        let other = try SSHPublicKey(makeKey("b", "ed25519"))
        XCTAssertEqual(
            SSHSignature.verify(try sign("b"), of: message, by: trusted, namespace: "file").failure,
            .signedByAnotherKey(trusted: trusted.fingerprint, signer: other.fingerprint))
    }

    /// A signature made for Git (or any other use) is not one for a file, though the key and the message are right.
    func testSignatureOfAnotherNamespaceIsRefusedAsSuch() throws {
        let key = try SSHPublicKey(makeKey("a", "ed25519"))
        XCTAssertEqual(
            SSHSignature.verify(try sign("a", namespace: "git"), of: message, by: key, namespace: "file").failure,
            .wrongNamespace(expected: "file", signed: "git"))
    }

    func testTruncatedSignatureIsRefused() throws {
        let key = try SSHPublicKey(makeKey("a", "ed25519"))
        let armor = lines(String(decoding: try sign("a"), as: UTF8.self))
        let cut = [armor[0], armor[1], armor[2], armor[armor.count - 1]].joined(separator: "\n")
        let result = SSHSignature.verify(Array(cut.utf8), of: message, by: key, namespace: "file")
        XCTAssertEqual(result.failure, .unreadableSignature(.badEncoding))
        let noEnd = armor.dropLast().joined(separator: "\n")
        XCTAssertEqual(
            SSHSignature.verify(Array(noEnd.utf8), of: message, by: key, namespace: "file").failure,
            .unreadableSignature(.notOfFormat))
    }

    func testGarbledSignatureIsRefused() throws {
        let key = try SSHPublicKey(makeKey("a", "ed25519"))
        var armor = lines(String(decoding: try sign("a"), as: UTF8.self))
        armor[2] = String(armor[2].prefix(10)) + "." + armor[2].dropFirst(11)
        XCTAssertEqual(
            SSHSignature.verify(Array(armor.joined(separator: "\n").utf8), of: message, by: key, namespace: "file")
                .failure,
            .unreadableSignature(.notBase64(line: 2)))
    }

    /// A point that is not on the key's curve is the key's fault, not the signature's: libcrypto refuses it. The
    /// signature is made to name the same altered key, so that only the point is wrong.
    func testECDSAKeyOffItsCurveIsRefused() throws {
        let fields = try makeKey("ec", "ecdsa", bits: 256).split(separator: " ")
        var blob = try XCTUnwrap(Base64.decode(fields[1]))
        blob[blob.count - 1] ^= 1
        let key = try SSHPublicKey("\(fields[0]) \(Base64.encode(blob))")
        let armor = lines(String(decoding: try sign("ec"), as: UTF8.self))
        var signature = try XCTUnwrap(Base64.decode(armor.dropFirst().dropLast().joined()))
        signature[6 + 4 + 4 + blob.count - 1] ^= 1  // magic, version, the key's length, then the key
        let altered = [armor[0], Base64.encode(signature), armor[armor.count - 1]].joined(separator: "\n")
        XCTAssertEqual(
            SSHSignature.verify(Array(altered.utf8), of: message, by: key, namespace: "file").failure,
            .unreadableKey(.invalidPoint))
    }

    func testKeyLinesOfOtherTypesOrGarbledAreRefused() throws {
        let line = try makeKey("a", "ed25519")
        XCTAssertThrowsError(try SSHPublicKey(line.replacingOccurrences(of: "ssh-ed25519", with: "ssh-rsa"))) {
            XCTAssertEqual($0 as? SignatureFailure, .unreadableKey(.notOfFormat))
        }
        XCTAssertThrowsError(try SSHPublicKey(replacing("AAAAC3", with: "AAAA#3", in: line))) {
            XCTAssertEqual($0 as? SignatureFailure, .unreadableKey(.notBase64(line: 1)))
        }
    }
}
