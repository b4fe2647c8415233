import HaulManifest
import XCTest

/// The .netrc reader: what curl and ftp accept is read the same way, and anything else is an error with its line
/// and column that never quotes a value.
final class NetrcTests: XCTestCase {
    private func parse(_ text: String) throws -> Netrc { try Netrc.parse(Array(text.utf8), file: "test.netrc") }

    private func failure(_ text: String) -> NetrcError? {
        do {
            _ = try Netrc.parse(Array(text.utf8), file: "test.netrc")
            return nil
        } catch {
            return error
        }
    }

    func testEntriesOnOneLineOrManyWithQuotedValuesCommentsAndMacros() throws {
        let netrc = try parse(
            """
            # comment line
            machine Files.Example.COM login alice password "two words \\"quoted\\"\\tand a tab"
            macdef init
            cd /pub
            binary

            machine other.example
                login bob   # trailing comment
                account ignored
                password b0b
            default login anonymous password guest
            """)
        XCTAssertEqual(
            netrc.credentials(forHost: "files.example.com"),
            Netrc.Credentials(login: "alice", password: "two words \"quoted\"\tand a tab"))
        XCTAssertEqual(netrc.credentials(forHost: "OTHER.example"), Netrc.Credentials(login: "bob", password: "b0b"))
        XCTAssertEqual(
            netrc.credentials(forHost: "anything.else"), Netrc.Credentials(login: "anonymous", password: "guest"))
    }

    func testTheFirstEntryOfAHostWinsAndAnEntryWithoutALoginGivesNone() throws {
        let netrc = try parse(
            """
            machine a.example login first password 1
            machine a.example login second password 2
            machine b.example password only
            """)
        XCTAssertEqual(netrc.credentials(forHost: "a.example")?.login, "first")
        XCTAssertNil(netrc.credentials(forHost: "b.example"))
        XCTAssertNil(netrc.credentials(forHost: "c.example"), "no default: nothing for other hosts")
        XCTAssertEqual(
            try parse("machine a.example login nopassword").credentials(forHost: "a.example"),
            Netrc.Credentials(login: "nopassword", password: ""))
    }

    func testMistakesAreErrorsWithTheirLineAndColumnAndNoValueInThem() {
        let unquoted = failure("machine h login alice\npassword s3cret pass\n")
        XCTAssertEqual(unquoted?.diagnostic.location, SourceLocation(line: 2, column: 17))
        XCTAssertTrue(
            unquoted?.description.hasPrefix("test.netrc:2:17: error: ") ?? false, "\(String(describing: unquoted))")
        XCTAssertFalse(unquoted?.description.contains("pass ") ?? true, "\(String(describing: unquoted))")

        XCTAssertEqual(
            failure("machine h login alice password")?.description,
            "test.netrc:1:23: error: \"password\" has no value")
        XCTAssertEqual(
            failure("login alice")?.description,
            "test.netrc:1:1: error: \"login\" before any \"machine\" or \"default\"")
        XCTAssertEqual(
            failure("machine h password \"unclosed\nlogin x")?.description,
            "test.netrc:1:20: error: a quoted value is not closed on its line")
    }

    func testNetrcNamedByTheEnvironmentMustExistTheDefaultOneNeedNot() throws {
        XCTAssertThrowsError(try Netrc.load(environment: ["NETRC": "/nonexistent/haul-test.netrc"])) { error in
            XCTAssertEqual(
                "\(error)",
                "/nonexistent/haul-test.netrc: error: cannot read the .netrc file (NETRC): No such file or directory")
        }
        let none = try Netrc.load(environment: ["HOME": "/nonexistent/haul-home"])
        XCTAssertNil(none.credentials(forHost: "example.com"))
        XCTAssertEqual(none.file, "/nonexistent/haul-home/.netrc")
    }
}
