import HaulManifest
import XCTest

/// Sizes as people write them: a manifest's whole numbers, and the command line's decimals as curl reads them.
final class ByteSizeTextTests: XCTestCase {
    func testADecimalIsThatManyUnitsRoundedDownToWholeBytes() throws {
        let cases: [(String, Int64)] = [
            ("2.5M", 2_621_440), ("0.5K", 512), ("1.5", 1), ("0.1K", 102), ("1.25GiB", 1_342_177_280),
            ("3M", 3 << 20), ("2.0k", 2048),
        ]
        for (text, bytes) in cases {
            XCTAssertEqual(try ByteSizeText.parse(text, fractions: true), bytes, text)
        }
    }

    func testAManifestSizeStaysWholeAndAFractionThatIsNotOneIsRefused() {
        XCTAssertThrowsError(try ByteSizeText.parse("2.5M")) { error in
            XCTAssertEqual(
                "\(error)",
                "expected a whole number of bytes, optionally followed by K, M, G or T (K = 1024), such as 500K or 2G")
        }
        for text in ["2.M", ".5M", "2.5.1M", "2,5M", "1.+5K", "1.5e3"] {
            XCTAssertThrowsError(try ByteSizeText.parse(text, fractions: true), text) { error in
                XCTAssertEqual(
                    "\(error)",
                    "expected a number of bytes, optionally followed by K, M, G or T (K = 1024), such as 500K, 2.5M or 2G",
                    text)
            }
        }
        for text in ["0.4", "-0.5M", "0.0K"] {
            XCTAssertThrowsError(try ByteSizeText.parse(text, fractions: true), text) { error in
                XCTAssertEqual("\(error)", "must be greater than zero", text)
            }
        }
    }
}
