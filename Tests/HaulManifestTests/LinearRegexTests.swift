@testable import HaulManifest
import XCTest

/// The rewrite rules' regular expressions: what they match and capture (as a backtracking engine would), what they
/// refuse, and that no pattern makes a match slow.
final class LinearRegexTests: XCTestCase {
    private func groups(_ pattern: String, _ input: String) throws -> [String?]? {
        try LinearRegex(pattern).wholeMatch(input).map { $0.map { $0.map(String.init) } }
    }

    private func refusal(_ pattern: String) -> String? {
        do {
            _ = try LinearRegex(pattern)
            return nil
        } catch {
            return error.description
        }
    }

    func testGroupsCaptureWhatABacktrackingEngineWouldCapture() throws {
        XCTAssertEqual(
            try groups(#"^https://github\.com/([^/]+)/(.*)$"#, "https://github.com/apple/swift/x.tar"),
            ["https://github.com/apple/swift/x.tar", "apple", "swift/x.tar"])
        XCTAssertEqual(try groups("(a*)(a*)", "aaa"), ["aaa", "aaa", ""], "greedy first")
        XCTAssertEqual(try groups("(a*?)(a*)", "aaa"), ["aaa", "", "aaa"], "lazy first")
        XCTAssertEqual(try groups("(a|ab)(c|bcd)(d*)", "abcd"), ["abcd", "a", "bcd", ""], "leftmost alternative first")
        XCTAssertEqual(try groups("(x)?y", "y"), ["y", nil], "a group that took no part")
        XCTAssertEqual(try groups("(?:a|b)+(?<tail>c)", "abbac"), ["abbac", "c"])
        XCTAssertEqual(try groups("(a){2,3}", "aaa"), ["aaa", "a"])
        XCTAssertEqual(try groups("é(.)", "éß"), ["éß", "ß"], "characters are Unicode scalars")
        XCTAssertNil(try groups("abc", "abcd"), "the whole input or nothing")
        XCTAssertNil(try groups("a{2}", "aaa"))
    }

    func testClassesEscapesAnchorsAndCase() throws {
        XCTAssertNotNil(try groups(#"\d+\.\d+-[a-z_]+\s?"#, "10.25-abc_ "))
        XCTAssertNil(try groups(#"[^/]+"#, "a/b"))
        XCTAssertNotNil(try groups(#"[]a-]+"#, "]-a"), "a leading ] and a trailing - are literal")
        XCTAssertNotNil(try groups(#"[\d\]]+"#, "1]2"))
        XCTAssertNotNil(try groups("(?i)HTTPS://Example[.]COM/", "https://example.com/"))
        XCTAssertNil(try groups("HTTPS://example.com/", "https://example.com/"), "case matters without (?i)")
        XCTAssertNotNil(try groups("a{,2}", "a{,2}"), "a brace that is not a count is itself")
        XCTAssertNotNil(try groups("^a$", "a"))
        XCTAssertNil(try groups("a^b", "ab"))
        XCTAssertEqual(try LinearRegex(#"^(a)(?:b)(?<name>c)\(f\)[(]([x)])$"#).groupCount, 3)
    }

    func testWhatCannotBeMatchedInLinearTimeIsRefusedSayingWhy() {
        XCTAssertEqual(
            refusal(#"(a)\1"#),
            #"backreferences (\1) are not supported: rules are matched in linear time, as RE2 does at character 4"#)
        XCTAssertEqual(
            refusal("a(?=b)"),
            "lookarounds ((?=, (?!, (?<=, (?<!) are not supported: rules are matched in linear time, as RE2 does at character 2"
        )
        XCTAssertEqual(refusal("^https://(x"), "expected \")\" to close the group opened at character 10")
        XCTAssertEqual(refusal("a)"), "unbalanced \")\" at character 2")
        XCTAssertEqual(refusal("[a-"), "expected \"]\" to close the class opened at character 1")
        XCTAssertEqual(refusal("*a"), "\"*\" repeats nothing: write \"\\*\" for the character itself at character 1")
        XCTAssertEqual(refusal("a{1001}"), "a repetition count is at most 1000 at character 2")
        XCTAssertEqual(refusal("[z-a]"), "the range z-a is backwards at character 4")
        XCTAssertEqual(refusal(#"\q"#), #"unknown escape "\q" at character 1"#)
        XCTAssertNotNil(refusal("(a{1000}){1000}"), "too large once written out")
    }

    /// Patterns that take a backtracking engine exponential time are matched at once: each input position is
    /// visited by each instruction at most once.
    func testPatternsThatMakeABacktrackerExplodeMatchAtOnce() throws {
        let input = String(repeating: "a", count: 5_000) + "!"
        for pattern in ["(a+)+$", "(a|a)*$", "(a*)*b", "(a|aa)+$", "([a-z]+)*[0-9]"] {
            XCTAssertNil(try groups(pattern, input), pattern)
        }
        XCTAssertEqual(try groups("(a+)+!", input)?.count, 2)
    }
}
