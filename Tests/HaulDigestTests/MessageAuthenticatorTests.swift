import HaulDigest
import XCTest

/// The root's ownership codes are HMAC-SHA-256: checked against RFC 4231's vectors, so a state another build
/// wrote is read with the same codes.
final class MessageAuthenticatorTests: XCTestCase {
    func testRFC4231Vectors() {
        XCTAssertEqual(
            MessageAuthenticator(key: [UInt8](repeating: 0x0b, count: 20)).code(Array("Hi There".utf8)).hex,
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        XCTAssertEqual(
            MessageAuthenticator(key: Array("Jefe".utf8)).code(Array("what do ya want for nothing?".utf8)).hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    func testRandomKeysDiffer() throws {
        let first = try XCTUnwrap(MessageAuthenticator.randomKey()),
            second = try XCTUnwrap(MessageAuthenticator.randomKey())
        XCTAssertEqual(first.count, 32)
        XCTAssertNotEqual(first, second)
    }
}
