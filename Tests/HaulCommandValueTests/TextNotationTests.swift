@testable import HaulCommand
import XCTest

/// The one place names become text: escapes for a terminal (`TerminalText`) and for JSON (`JSONValue`), from values.
final class TextNotationTests: XCTestCase {
    func testEscapingNotation() {
        XCTAssertEqual(TerminalText.escaping("plain/name.txt"), "plain/name.txt")
        XCTAssertEqual(TerminalText.escaping("café/データ.csv"), "café/データ.csv", "printable non-ASCII stays as it is")
        XCTAssertEqual(TerminalText.escaping("a\u{1B}[31mb\nc\r\td\u{7F}e\u{0}"), #"a\u{1b}[31mb\nc\r\td\u{7f}e\u{0}"#)
        XCTAssertEqual(
            TerminalText.escaping("\u{85}\u{9B}\u{202A}\u{202E}\u{2066}\u{2069}\u{200F}\u{61C}"),
            #"\u{85}\u{9b}\u{202a}\u{202e}\u{2066}\u{2069}\u{200f}\u{61c}"#)
        XCTAssertEqual(TerminalText.escaping(#"back\slash"#), #"back\slash"#, "a backslash is shown as itself")
        XCTAssertEqual(ProgressFormatting.displayName("a\u{1B}[2Jb"), #"a\u{1b}[2Jb"#)
        XCTAssertEqual(
            ProgressFormatting.heartbeatLine(name: "bidi-\u{202E}txt.exe", done: 1, total: nil, rate: nil),
            #"still fetching bidi-\u{202e}txt.exe: 1 B, 0 B/s"#)
        XCTAssertEqual(TerminalText("x\ny").rendered, #"x\ny"#)
        XCTAssertEqual(("error: \("a\rb")" as TerminalText).rendered, #"error: a\rb"#)
        // JSON: the same scalars as JSON escapes, everything else (a backslash escaped as JSON wants) as it is.
        XCTAssertEqual(JSONValue.string("a\u{1B}\u{7F}\u{85}\u{202E}é\\").encoded(), #""a\u001b\u007f\u0085\u202eé\\""#)
        // Each escape alone, without a control beside it to send the string down the scalar-by-scalar path.
        XCTAssertEqual(JSONValue.string(#"say "hi""#).encoded(), #""say \"hi\"""#)
        XCTAssertEqual(JSONValue.string(#"C:\dir"#).encoded(), #""C:\\dir""#)
        XCTAssertEqual(JSONValue.string("data/é/文件.bin?a=1&b=#2").encoded(), #""data/é/文件.bin?a=1&b=#2""#)
        XCTAssertEqual(JSONValue.string("x\u{2028}y\u{61C}z").encoded(), #""x\u2028y\u061cz""#)
        XCTAssertEqual(JSONValue.string("").encoded(), #""""#)
    }

    /// An object with a large array, encoded in pieces as its items come: the pieces joined are exactly the
    /// object's whole encoding, and none holds much more than the size asked for (one item over it at most).
    func testAnObjectEncodedInPiecesIsTheSameTextAsWhole() {
        let items = (0..<500).map {
            JSONValue.object([("dest", .string("d\($0)/\u{1B}é\"q")), ("size", .int(Int64($0)))])
        }
        let members: [(String, JSONValue)] = [
            ("event", .string("plan")), ("changes", .array(items)), ("bytes", .int(7)),
        ]
        for (pieceBytes, array) in [(256, items), (1 << 20, items), (256, [])] {
            var pieces: [String] = []
            JSONValue.encodeObject(
                members.map { $0.0 == "changes" ? ($0.0, .array([])) : $0 }, streamingArray: "changes",
                items: array, pieceBytes: pieceBytes
            ) { pieces.append($0) }
            let whole = JSONValue.object(members.map { $0.0 == "changes" ? ($0.0, .array(array)) : $0 }).encoded()
            XCTAssertEqual(pieces.joined(), whole, "pieces of \(pieceBytes) bytes")
            XCTAssertTrue(pieces.allSatisfy { $0.utf8.count < pieceBytes + 100 }, "\(pieces.map(\.utf8.count))")
            if pieceBytes == 256, !array.isEmpty { XCTAssertGreaterThan(pieces.count, 10) }
        }
    }
}
