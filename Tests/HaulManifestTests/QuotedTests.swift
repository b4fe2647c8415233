import HaulManifest
import XCTest

/// Text from outside shown inside messages: quoted and escaped, and long lists cut to a few names.
final class QuotedTests: XCTestCase {
    func testTextIsQuotedWithControlCharactersEscaped() {
        XCTAssertEqual(Quoted.text("a\"b\nc"), #""a\"b\nc""#)
        // The scalars every escaper escapes (`UnsafeScalar`): C1 controls and bidi controls too, not only C0 and DEL.
        XCTAssertEqual(
            Quoted.text("x\u{1B}\u{7F}\u{85}\u{202E}\u{2066}\u{2028}é"),
            #""x\u{1b}\u{7f}\u{85}\u{202e}\u{2066}\u{2028}é""#)
        XCTAssertEqual("x\u{9B}y\u{61C}".unicodeScalars.filter(UnsafeScalar.contains).map(\.value), [0x9B, 0x61C])
        XCTAssertEqual(Array("a\u{85}\u{61C}\u{202E}é".utf8).filter(UnsafeScalar.mayStart), [0xC2, 0xD8, 0xE2])
    }

    func testFirstFewNamesThreeAndCountsTheRest() {
        XCTAssertEqual(Quoted.firstFew([String]()) { Quoted.text($0) }, "")
        XCTAssertEqual(Quoted.firstFew(["a"]) { Quoted.text($0) }, #""a""#)
        XCTAssertEqual(Quoted.firstFew(["a", "b", "c"]) { Quoted.text($0) }, #""a", "b", "c""#)
        XCTAssertEqual(Quoted.firstFew(["a", "b", "c", "d", "e"]) { Quoted.text($0) }, #""a", "b", "c" and 2 more"#)
    }
}
