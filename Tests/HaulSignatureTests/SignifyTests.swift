import Foundation
import HaulSignature
import HaulTestSupport
import XCTest

/// OpenBSD signify signatures made here by signify itself: detached, and embedded (`-e`, OpenBSD's `SHA256.sig`).
final class SignifyTests: XCTestCase {
    private var tools: SigningTools!
    private let message = Array(
        "SHA256 (haul.tar.gz) = 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n".utf8)

    override func setUpWithError() throws {
        _ = try Capability.tool("signify-openbsd")
        tools = try SigningTools()
        try tools.write("SHA256", message)
        for name in ["a", "b"] {
            try tools.run(
                "signify-openbsd", ["-G", "-n", "-p", "\(name).pub", "-s", "\(name).sec", "-c", "key \(name)"])
        }
        try tools.run("signify-openbsd", ["-S", "-s", "a.sec", "-m", "SHA256", "-x", "SHA256.sig"])
        try tools.run("signify-openbsd", ["-S", "-s", "b.sec", "-m", "SHA256", "-x", "SHA256.by-b"])
        try tools.run("signify-openbsd", ["-S", "-e", "-s", "a.sec", "-m", "SHA256", "-x", "SHA256.embedded"])
    }

    override func tearDown() { tools = nil }

    private func key(_ name: String = "a") throws -> SignifyPublicKey {
        try SignifyPublicKey(tools.text("\(name).pub"))
    }

    func testSignatureVerifies() throws {
        let verified = try Signify.verify(tools.read("SHA256.sig"), of: message, by: key()).get()
        XCTAssertEqual(verified.keyID, try key().keyID)
        XCTAssertNil(verified.trustedComment)
    }

    func testChangedMessageIsRefused() throws {
        var changed = message
        changed[changed.count - 2] ^= 1
        XCTAssertEqual(
            Signify.verify(try tools.read("SHA256.sig"), of: changed, by: try key()).failure, .messageMismatch)
    }

    func testSignatureByAnotherKeyIsRefusedAsSuch() throws {
        XCTAssertEqual(
            Signify.verify(try tools.read("SHA256.by-b"), of: message, by: try key()).failure,
            .signedByAnotherKey(trusted: try key().keyID, signer: try key("b").keyID))
    }

    func testTruncatedSignatureIsRefused() throws {
        let parts = lines(try tools.text("SHA256.sig"))
        XCTAssertEqual(
            Signify.verify(Array((parts[0] + "\n" + parts[1].prefix(60) + "\n").utf8), of: message, by: try key())
                .failure,
            .unreadableSignature(.wrongLength(expected: 74, found: 45)))
        XCTAssertEqual(
            Signify.verify(Array((parts[0] + "\n").utf8), of: message, by: try key()).failure,
            .unreadableSignature(.missingLine(2)))
    }

    func testGarbledSignatureIsRefused() throws {
        let parts = lines(try tools.text("SHA256.sig"))
        let garbled = parts[0] + "\n" + parts[1].prefix(50) + "%" + parts[1].dropFirst(51) + "\n"
        XCTAssertEqual(
            Signify.verify(Array(garbled.utf8), of: message, by: try key()).failure,
            .unreadableSignature(.notBase64(line: 2)))
    }

    func testEmbeddedSignatureReturnsTheMessageItSigned() throws {
        let embedded = try Signify.verifyEmbedded(tools.read("SHA256.embedded"), by: key()).get()
        XCTAssertEqual(embedded.message, message)
        let altered = replacing("= 9f86", with: "= 0f86", in: try tools.text("SHA256.embedded"))
        XCTAssertEqual(Signify.verifyEmbedded(Array(altered.utf8), by: try key()).failure, .messageMismatch)
    }
}
