import HaulManifest
import XCTest

/// Text from outside shown inside messages: quoted and escaped, and long lists cut to a few names.
final class QuotedTests: XCTestCase {
    func testTextIsQuotedWithControlCharactersEscaped() {
        XCTAssertEqual(Quoted.text("a\"b\nc"), #""a\"b\nc""#)
    }

    func testFirstFewNamesThreeAndCountsTheRest() {
        XCTAssertEqual(Quoted.firstFew([String]()) { Quoted.text($0) }, "")
        XCTAssertEqual(Quoted.firstFew(["a"]) { Quoted.text($0) }, #""a""#)
        XCTAssertEqual(Quoted.firstFew(["a", "b", "c"]) { Quoted.text($0) }, #""a", "b", "c""#)
        XCTAssertEqual(Quoted.firstFew(["a", "b", "c", "d", "e"]) { Quoted.text($0) }, #""a", "b", "c" and 2 more"#)
    }
}
