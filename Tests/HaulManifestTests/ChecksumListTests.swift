import HaulDigest
import HaulManifest
import XCTest

/// The checksum-list reader's forms, beyond what the `haul add --from-sums` tests fetch.
final class ChecksumListTests: XCTestCase {
    func testEscapedGNUNamesCarriageReturnsAndBothForms() throws {
        let hex = String(repeating: "ab", count: 32)
        let list = try ChecksumList.parse(
            Array("\\\(hex)  back\\\\slash.bin\r\nSHA384 (x (1).bin) = \(String(repeating: "cd", count: 48))\n".utf8),
            file: "SUMS")
        XCTAssertEqual(list.items.map(\.name), ["back\\slash.bin", "x (1).bin"])
        XCTAssertEqual(list.items.map(\.digest.algorithm), [.sha256, .sha384])
        XCTAssertEqual(list.items.map(\.line), [1, 2])
        XCTAssertThrowsError(try ChecksumList.parse(Array("\n\n".utf8), file: "SUMS")) { error in
            XCTAssertEqual("\(error)", "SUMS: error: the checksum list names no file")
        }
        XCTAssertThrowsError(try ChecksumList.parse(Array("\(hex.dropLast())  short.bin\n".utf8), file: "SUMS")) {
            error in
            XCTAssertTrue("\(error)".hasPrefix("SUMS:1: error: expected \"HEX  NAME\""), "\(error)")
        }
    }

    func testANameForADestinationAnEarlierLineNamedIsRefusedWithBothLines() throws {
        let hex = String(repeating: "ab", count: 32)
        let entries = { (text: String) throws(ChecksumListError) in
            try ChecksumList.parse(Array(text.utf8), file: "SUMS").entries(
                listURL: TemplatedString(literal: "https://e.com/v1/SUMS"), file: "SUMS")
        }
        XCTAssertThrowsError(try entries("\(hex)  a.bin\n\(hex)  b.bin\n\n\(hex) *a.bin\n")) { error in
            XCTAssertEqual("\(error)", "SUMS:4: error: \"a.bin\" is named twice, at lines 1 and 4")
        }
        XCTAssertThrowsError(try entries("SHA256 (docs/x) = \(hex)\n\(hex)  docs/./x\n")) { error in
            XCTAssertEqual("\(error)", "SUMS:2: error: \"docs/./x\" is the same destination as \"docs/x\" at line 1")
        }
        XCTAssertEqual(try entries("\(hex)  a.bin\n\(hex)  A.bin\n").map(\.destination), ["a.bin", "A.bin"])
    }
}
