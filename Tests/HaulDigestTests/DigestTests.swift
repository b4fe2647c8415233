import HaulDigest
import XCTest

/// Digests are compared, hashed and parsed 100,000 at a time; whichever way one is built (bytes, hex of either
/// case, a hasher), equal content must make equal values, and anything that is not hex must be refused.
final class DigestTests: XCTestCase {
    func testHexRoundTripsForEveryAlgorithmInEitherCase() throws {
        for algorithm in DigestAlgorithm.allCases {
            let digest = StreamingHasher.digest(Array("haul \(algorithm)".utf8), algorithm: algorithm)
            XCTAssertEqual(digest.bytes.count, algorithm.byteCount)
            XCTAssertEqual(digest.hex.count, 2 * algorithm.byteCount)
            let lower = try XCTUnwrap(Digest(algorithm: algorithm, hex: digest.hex))
            let upper = try XCTUnwrap(Digest(algorithm: algorithm, hex: digest.hex.uppercased()))
            let fromBytes = Digest(algorithm: algorithm, bytes: digest.bytes)
            XCTAssertEqual(lower, digest)
            XCTAssertEqual(upper, digest)
            XCTAssertEqual(fromBytes, digest)
            XCTAssertEqual(Set([lower, upper, fromBytes, digest]).count, 1, "equal digests hash alike")
            XCTAssertEqual(digest.description, "\(algorithm.rawValue):\(digest.hex)")
            XCTAssertEqual(Digest(algorithm: algorithm, base64: digest.base64), digest)
        }
    }

    func testEqualityNeedsTheSameAlgorithmAndEveryByte() {
        let zeros = [UInt8](repeating: 0, count: 64)
        let sha256 = Digest(algorithm: .sha256, bytes: Array(zeros.prefix(32)))
        XCTAssertNotEqual(sha256, Digest(algorithm: .sha1, bytes: Array(zeros.prefix(20))))
        for algorithm in DigestAlgorithm.allCases {
            let base = Digest(algorithm: algorithm, bytes: Array(zeros.prefix(algorithm.byteCount)))
            for position in [0, algorithm.byteCount / 2, algorithm.byteCount - 1] {
                var bytes = Array(zeros.prefix(algorithm.byteCount))
                bytes[position] = 1
                XCTAssertNotEqual(Digest(algorithm: algorithm, bytes: bytes), base, "\(algorithm) byte \(position)")
            }
        }
    }

    func testAnythingButHexOfTheRightLengthIsRefused() {
        let valid = String(repeating: "0f", count: 32)
        XCTAssertNotNil(Digest(algorithm: .sha256, hex: valid))
        XCTAssertNil(Digest(algorithm: .sha256, hex: String(valid.dropLast())))
        XCTAssertNil(Digest(algorithm: .sha256, hex: valid + "00"))
        XCTAssertNil(Digest(algorithm: .sha512, hex: valid))
        // The neighbours of each hex range, a non-ASCII character, at the first, a middle and the last position.
        for bad in ["/", ":", "@", "G", "`", "g", " ", "é"] {
            for position in [0, 31, 63] {
                var characters = Array(valid)
                characters[position] = Character(bad)
                XCTAssertNil(Digest(algorithm: .sha256, hex: String(characters)), "\(bad) at \(position)")
            }
        }
    }
}
