import Foundation
import HaulDigest
import HaulSignature
import HaulTestSupport
import XCTest

/// minisign signatures made here by minisign itself, both kinds (`ED`, prehashed, the default; `Ed`, legacy, `-l`),
/// and each way one is refused.
final class MinisignTests: XCTestCase {
    private var tools: SigningTools!
    private let message = Array("sha256  9f86d081884c7d659a2feaa0c55ad015  haul.tar.gz\n".utf8)

    override func setUpWithError() throws {
        _ = try Capability.tool("minisign")
        tools = try SigningTools()
        try tools.write("list", message)
        for name in ["a", "b"] { try tools.run("minisign", ["-G", "-W", "-p", "\(name).pub", "-s", "\(name).key"]) }
        try tools.run("minisign", ["-S", "-s", "a.key", "-m", "list", "-x", "list.minisig", "-t", "haul 1.2 release"])
        try tools.run("minisign", ["-S", "-l", "-s", "a.key", "-m", "list", "-x", "list.legacy"])
        try tools.run("minisign", ["-S", "-s", "b.key", "-m", "list", "-x", "list.by-b"])
    }

    override func tearDown() { tools = nil }

    private func key(_ name: String = "a") throws -> MinisignPublicKey {
        try MinisignPublicKey(tools.text("\(name).pub"))
    }

    /// The algorithm tag a signature file's second line starts with.
    private func algorithm(_ name: String) throws -> String {
        let bytes = try XCTUnwrap(Base64.decode(lines(tools.text(name))[1]))
        return String(decoding: bytes.prefix(2), as: UTF8.self)
    }

    func testPrehashedSignatureVerifiesAndReturnsItsTrustedComment() throws {
        let verified = try Minisign.verify(tools.read("list.minisig"), of: message, by: key()).get()
        XCTAssertEqual(verified.trustedComment, "haul 1.2 release")
        XCTAssertEqual(verified.keyID, try key().keyID)
        XCTAssertEqual(try algorithm("list.minisig"), "ED")
    }

    func testLegacySignatureOfTheMessageItselfVerifies() throws {
        let verified = try Minisign.verify(tools.read("list.legacy"), of: message, by: key()).get()
        XCTAssertTrue(verified.trustedComment?.hasPrefix("timestamp:") == true)
        XCTAssertEqual(try algorithm("list.legacy"), "Ed")
    }

    /// The key as its `RW…` line alone, as a manifest would hold it, and as minisign's `-P` takes it.
    func testTheKeysLineAloneIsTheSameKey() throws {
        let line = lines(try tools.text("a.pub"))[1]
        XCTAssertEqual(try MinisignPublicKey(line), try key())
        XCTAssertNoThrow(
            try Minisign.verify(tools.read("list.minisig"), of: message, by: MinisignPublicKey(line)).get())
    }

    func testChangedMessageIsRefused() throws {
        let changed = Array(
            String(decoding: message, as: UTF8.self).replacingOccurrences(of: "9f86", with: "0f86").utf8)
        for name in ["list.minisig", "list.legacy"] {
            XCTAssertEqual(Minisign.verify(try tools.read(name), of: changed, by: try key()).failure, .messageMismatch)
        }
    }

    func testSignatureByAnotherKeyIsRefusedAsSuch() throws {
        let result = Minisign.verify(try tools.read("list.by-b"), of: message, by: try key())
        XCTAssertEqual(result.failure, .signedByAnotherKey(trusted: try key().keyID, signer: try key("b").keyID))
    }

    func testTamperedTrustedCommentIsRefused() throws {
        let tampered = replacing("haul 1.2 release", with: "haul 1.3 release", in: try tools.text("list.minisig"))
        XCTAssertEqual(
            Minisign.verify(Array(tampered.utf8), of: message, by: try key()).failure, .trustedCommentMismatch)
    }

    func testTruncatedSignatureIsRefused() throws {
        let parts = lines(try tools.text("list.minisig"))
        let cutShort = parts[0] + "\n" + parts[1].prefix(60) + "\n" + parts[2] + "\n" + parts[3] + "\n"
        XCTAssertEqual(
            Minisign.verify(Array(cutShort.utf8), of: message, by: try key()).failure,
            .unreadableSignature(.wrongLength(expected: 74, found: 45)))
        let lastLineLost = parts[0...2].joined(separator: "\n") + "\n"
        XCTAssertEqual(
            Minisign.verify(Array(lastLineLost.utf8), of: message, by: try key()).failure,
            .unreadableSignature(.missingLine(4)))
    }

    func testGarbledSignatureIsRefused() throws {
        var parts = lines(try tools.text("list.minisig"))
        let line = parts[1]
        parts[1] = String(line.prefix(40)) + "*" + String(line.dropFirst(41))
        XCTAssertEqual(
            Minisign.verify(Array(parts.joined(separator: "\n").utf8), of: message, by: try key()).failure,
            .unreadableSignature(.notBase64(line: 2)))
        // A valid base64 character changed in the signature's bytes (past the tag and key number): decodes, and
        // does not verify.
        let flipped = line.prefix(40) + (line.dropFirst(40).first == "A" ? "B" : "A") + line.dropFirst(41)
        parts[1] = String(flipped)
        XCTAssertEqual(
            Minisign.verify(Array(parts.joined(separator: "\n").utf8), of: message, by: try key()).failure,
            .messageMismatch)
    }

    func testGarbledKeyIsRefused() throws {
        let line = lines(try tools.text("a.pub"))[1]
        XCTAssertThrowsError(try MinisignPublicKey("RW" + "!" + line.dropFirst(3))) { error in
            XCTAssertEqual(error as? SignatureFailure, .unreadableKey(.notBase64(line: 1)))
        }
        XCTAssertThrowsError(try MinisignPublicKey(line.dropLast(4))) { error in
            XCTAssertEqual(error as? SignatureFailure, .unreadableKey(.wrongLength(expected: 42, found: 39)))
        }
    }
}
