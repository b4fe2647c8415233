@testable import HaulManifest
import XCTest

/// The config file's `rewrites:`: how rules are read, what they match and make, and every mistake named at its
/// line and column.
final class RewriteConfigTests: XCTestCase {
    private func parse(_ text: String) throws -> RewriteConfig {
        try RewriteConfig.parse(bytes: Array(text.utf8), fileName: "config.yaml")
    }

    /// The problems of an invalid config, as printed.
    private func problems(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            let config = try parse(text)
            XCTFail("expected an error, got \(config.rules.count) rules", file: file, line: line)
            return []
        } catch let error as DiagnosticsError {
            return error.lines
        } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
            return []
        }
    }

    private func rewrite(_ url: String, _ config: RewriteConfig) -> String? {
        for rule in config.rules {
            if let rewritten = rule.rewrite(url) { return rewritten }
        }
        return nil
    }

    func testAPrefixRuleReplacesThePrefixAndKeepsTheRest() throws {
        let config = try parse(
            """
            rewrites:
              - prefix: https://upstream.example/
                to: https://cache.internal/upstream.example/
                fallback: original
                headers: forward
            """)
        XCTAssertEqual(config.rules.count, 1)
        XCTAssertEqual(
            rewrite("https://upstream.example/a/b.bin?x=1", config),
            "https://cache.internal/upstream.example/a/b.bin?x=1")
        XCTAssertNil(rewrite("https://upstream.example.evil/a", config), "the prefix is the prefix, slash included")
        XCTAssertNil(rewrite("http://upstream.example/a", config))
        XCTAssertNil(rewrite("HTTPS://upstream.example/a", config), "a prefix is compared as bytes")
        XCTAssertTrue(config.rules[0].fallsBackToOriginal)
        XCTAssertTrue(config.rules[0].forwardsHeaders)
        XCTAssertEqual(config.rules[0].location, SourceLocation(line: 2, column: 5))
    }

    func testOptionsDefaultToNoFallbackAndNoHeaders() throws {
        let config = try parse(
            """
            rewrites:
              - {prefix: "https://a/", to: "https://b/"}
              - {prefix: "https://c/", to: "https://d/", fallback: none, headers: none}
            """)
        XCTAssertEqual(config.rules.map(\.fallsBackToOriginal), [false, false])
        XCTAssertEqual(config.rules.map(\.forwardsHeaders), [false, false])
    }

    func testARegexRuleMatchesTheWholeURLAndFillsInItsGroups() throws {
        let config = try parse(
            #"""
            rewrites:
              - regex: '^https://github\.com/([^/]+)/(.*)$'
                to: 'https://mirror.internal/gh/$1/$2'
              - regex: 'https://example\.org/(.*)'
                to: 'https://m.internal/$1'
            """#)
        XCTAssertEqual(
            rewrite("https://github.com/apple/swift/archive/main.tar.gz", config),
            "https://mirror.internal/gh/apple/swift/archive/main.tar.gz")
        XCTAssertEqual(rewrite("https://example.org/x", config), "https://m.internal/x")
        XCTAssertNil(rewrite("https://mirror.example.org/x", config), "a regex must match the whole URL, not a part")
        XCTAssertNil(rewrite("https://gitlab.com/a/b", config))
    }

    func testTheFirstMatchingRuleWins() throws {
        let config = try parse(
            """
            rewrites:
              - prefix: https://up.example/special/
                to: https://special.internal/
              - prefix: https://up.example/
                to: https://general.internal/
              - regex: '^https://up\\.example/(.*)$'
                to: https://never.internal/$1
            """)
        XCTAssertEqual(rewrite("https://up.example/special/a", config), "https://special.internal/a")
        XCTAssertEqual(rewrite("https://up.example/other/a", config), "https://general.internal/other/a")
    }

    func testNoRuleMatchingLeavesTheURLAlone() throws {
        let config = try parse(
            """
            rewrites:
              - prefix: https://up.example/
                to: https://cache.internal/
            """)
        XCTAssertNil(rewrite("https://elsewhere.example/a", config))
    }

    func testDoubledDollarIsALiteralDollarAndAbsentGroupsAreEmpty() throws {
        let config = try parse(
            """
            rewrites:
              - regex: '^https://up\\.example/(a)?(.*)$'
                to: 'https://cache.internal/$$$1-$2?cost=$$5'
              - prefix: https://p.example/
                to: https://cache.internal/$1/
            """)
        XCTAssertEqual(rewrite("https://up.example/ab", config), "https://cache.internal/$a-b?cost=$5")
        XCTAssertEqual(rewrite("https://up.example/xb", config), "https://cache.internal/$-xb?cost=$5")
        XCTAssertEqual(
            rewrite("https://p.example/z", config), "https://cache.internal/$1/z", "a prefix rule's to is literal")
    }

    func testAnEmptyConfigHasNoRules() throws {
        XCTAssertTrue(try parse("").rules.isEmpty)
        XCTAssertTrue(try parse("# nothing yet\n").rules.isEmpty)
        XCTAssertTrue(try parse("rewrites:\n").rules.isEmpty)
        XCTAssertTrue(try parse("rewrites: []\n").rules.isEmpty)
    }

    func testEveryMistakeIsNamedWithItsLineAndColumn() {
        let found = problems(
            """
            rewrites:
              - prefix: https://a/
                regex: 'x'
                to: https://b/
              - regex: '^https://(x'
                to: https://c/
              - regex: '^https://(x)/(.*)$'
                to: 'https://c/$3'
              - prefix: https://a/
                to: ftp://b/
                fallbak: original
              - prefix: https://z/
                headers: yes
              - regex: '(a)'
                to: 'https://c/$x'
            """)
        XCTAssertEqual(
            found,
            [
                "config.yaml:3:5: error: rewrites[0]: a rule has prefix or regex, not both",
                "config.yaml:5:12: error: rewrites[1].regex: invalid regular expression \"^https://(x\": expected \")\" to close "
                    + "the group opened at character 10",
                "config.yaml:8:9: error: rewrites[2].to: $3 refers to a group the regex does not have (it has 2)",
                "config.yaml:10:9: error: rewrites[3].to: expected an http:// or https:// URL, found \"ftp://b/\" "
                    + "(a rewrite must produce an http or https URL)",
                "config.yaml:11:5: error: rewrites[3]: unknown key \"fallbak\" (did you mean \"fallback\"?); "
                    + "expected one of prefix, regex, to, fallback, headers",
                "config.yaml:12:5: error: rewrites[4]: a rule needs to (the URL, or start of the URL, requests go to instead)",
                "config.yaml:13:14: error: rewrites[4].headers: expected forward or none, found \"yes\"",
                "config.yaml:15:9: error: rewrites[5].to: \"$\" must be followed by a group number 1-9, or by another \"$\" "
                    + "for a literal \"$\"",
            ])
    }

    func testUnknownTopLevelKeysAndWrongShapesAreRefused() {
        XCTAssertEqual(
            problems("rewrite:\n  - prefix: a\n"),
            [
                "config.yaml:1:1: error: unknown key \"rewrite\" (did you mean \"rewrites\"?); expected one of rewrites"
            ])
        XCTAssertEqual(
            problems("rewrites: {prefix: a}\n"),
            [
                "config.yaml:1:11: error: rewrites: expected a list of rules, found a mapping"
            ])
        XCTAssertEqual(
            problems("- a\n"), ["config.yaml:1:1: error: expected a mapping with \"rewrites\", found a sequence"])
        XCTAssertEqual(
            problems("rewrites:\n  - to: https://b/\n"),
            [
                "config.yaml:2:5: error: rewrites[0]: a rule needs prefix (text a URL starts with) or regex (matching the whole URL)"
            ])
        XCTAssertEqual(problems("rewrites: [\n"), problems("rewrites: [\n"))
        XCTAssertTrue(problems("rewrites: [\n").first?.hasPrefix("config.yaml:") ?? false)
    }

    func testUserinfoInATargetIsASecret() throws {
        let config = try parse(
            """
            rewrites:
              - prefix: https://up/
                to: https://robot:hunter2@cache.internal/
            """)
        XCTAssertEqual(config.rules[0].secrets, ["robot:hunter2"])
        XCTAssertFalse(
            problems("rewrites:\n  - prefix: https://up/\n    to: ftp://robot:hunter2@x/\n").joined().contains(
                "hunter2"),
            "a refused target is shown with its userinfo redacted")
    }

    /// A target with a space or a line break would be refused for every URL rewritten to it: refused where it is
    /// written instead.
    func testATargetWithASpaceOrALineBreakIsRefusedWhereItIsWritten() {
        XCTAssertEqual(
            problems("rewrites:\n  - prefix: https://a/\n    to: \"https://b/x y/\"\n"),
            [
                "config.yaml:3:9: error: rewrites[0].to: URL \"https://b/x y/\" contains a space or control character (every URL "
                    + "rewritten to it would be refused)"
            ])
        XCTAssertEqual(
            problems("rewrites:\n  - regex: '(.*)'\n    to: \"https://b/\\r\\n$1\"\n"),
            [
                "config.yaml:3:9: error: rewrites[0].to: URL \"https://b/\\r\\n$1\" contains a space or control character (every "
                    + "URL rewritten to it would be refused)"
            ])
    }

    func testWhereTheConfigIs() {
        XCTAssertEqual(
            ConfigLocation.resolve(option: "c.yaml", environment: ["HAUL_CONFIG": "h.yaml"]),
            ConfigLocation(path: "c.yaml", required: true))
        XCTAssertEqual(
            ConfigLocation.resolve(option: nil, environment: ["HAUL_CONFIG": "h.yaml", "HOME": "/home/u"]),
            ConfigLocation(path: "h.yaml", required: true))
        XCTAssertEqual(
            ConfigLocation.resolve(
                option: nil, environment: ["HAUL_CONFIG": "", "XDG_CONFIG_HOME": "/x", "HOME": "/h"]),
            ConfigLocation(path: "/x/haul/config.yaml", required: false))
        XCTAssertEqual(
            ConfigLocation.resolve(option: nil, environment: ["XDG_CONFIG_HOME": "relative", "HOME": "/h"]),
            ConfigLocation(path: "/h/.config/haul/config.yaml", required: false))
        XCTAssertNil(ConfigLocation.resolve(option: nil, environment: [:]))
    }

    func testAMissingDefaultFileIsNoConfigButANamedOneIsAnError() throws {
        let missing = "/nonexistent-haul-test/config.yaml"
        XCTAssertTrue(try RewriteConfig.load(ConfigLocation(path: missing, required: false)).rules.isEmpty)
        XCTAssertThrowsError(try RewriteConfig.load(ConfigLocation(path: missing, required: true))) { error in
            XCTAssertEqual(
                (error as? DiagnosticsError)?.lines,
                ["\(missing): error: cannot read the config file: No such file or directory"])
        }
    }
}
