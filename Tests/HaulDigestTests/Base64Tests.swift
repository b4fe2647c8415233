import HaulDigest
import XCTest

/// The strict base64 decoding keys and signatures are read with: RFC 4648's vectors, and every form it refuses.
final class Base64Tests: XCTestCase {
    func testRFC4648Vectors() {
        for (text, decoded) in [
            ("", ""), ("Zg==", "f"), ("Zm8=", "fo"), ("Zm9v", "foo"), ("Zm9vYg==", "foob"), ("Zm9vYmE=", "fooba"),
            ("Zm9vYmFy", "foobar"),
        ] {
            XCTAssertEqual(Base64.decode(text), Array(decoded.utf8), text)
        }
        let bytes = (0...255).map { UInt8($0) }
        XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes)
    }

    func testMalformedTextIsRefused() {
        for text in ["Zg=", "Zg", "Z===", "Zm9v\n", " Zm9v", "Zm=v", "Zm9v====", "Zm*v"] {
            XCTAssertNil(Base64.decode(text), text)
        }
    }
}
