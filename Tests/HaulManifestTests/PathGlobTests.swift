import Foundation
import HaulManifest
import HaulTestSupport
import XCTest

/// `PathGlob`: what each form matches, where a pattern applies, every refusal with its text and position, a
/// hostile pattern that a backtracking matcher would take ages over, and agreement with a regular expression
/// translation on thousands of generated patterns and paths.
final class PathGlobTests: XCTestCase {
    private func glob(_ pattern: String, file: StaticString = #filePath, line: UInt = #line) -> PathGlob? {
        do {
            return try PathGlob(pattern)
        } catch {
            XCTFail("\(shown(pattern)) refused: \(error)", file: file, line: line)
            return nil
        }
    }

    /// The paths (files) among `paths` that `pattern` matches.
    private func matched(
        _ pattern: String, _ paths: [String], file: StaticString = #filePath, line: UInt = #line
    ) -> [String] {
        guard let glob = glob(pattern, file: file, line: line) else { return [] }
        return paths.filter { glob.matches($0) }
    }

    private func refusal(_ pattern: String, file: StaticString = #filePath, line: UInt = #line) -> String? {
        do {
            _ = try PathGlob(pattern)
            XCTFail("\(shown(pattern)) accepted", file: file, line: line)
            return nil
        } catch {
            return error.description
        }
    }

    private let tree = [
        "README", "bin/tool", "bin/tools", "sdk/bin/tool", "lib/libz.so", "lib/deep/libx.so",
        "lib/libz.so.1", "libtop.so", "docs/api/index.html", "a/docs", ".hidden", "src/.git/config",
    ]

    // MARK: Where a pattern applies

    func testAPatternWithASlashIsAnchoredAtTheTopAndCoversWhatIsInsideAFolderItMatches() {
        XCTAssertEqual(matched("bin/tool", tree), ["bin/tool"])
        XCTAssertEqual(
            matched("bin/tool", ["bin/tool/x", "bin/tool/x/y", "bin/toolx"]), ["bin/tool/x", "bin/tool/x/y"])
        XCTAssertEqual(matched("bin/*", tree), ["bin/tool", "bin/tools"])
        XCTAssertEqual(matched("*/bin/*", tree), ["sdk/bin/tool"])
        XCTAssertEqual(matched("docs/api", tree), ["docs/api/index.html"])
    }

    func testAPatternWithoutASlashMatchesANameAtAnyDepth() {
        XCTAssertEqual(matched("*.so", tree), ["lib/libz.so", "lib/deep/libx.so", "libtop.so"])
        XCTAssertEqual(matched("tool", tree), ["bin/tool", "sdk/bin/tool"])
        XCTAssertEqual(
            matched("docs", tree), ["docs/api/index.html", "a/docs"], "a folder's contents, and a file so named")
        XCTAssertEqual(matched(".git", tree), ["src/.git/config"])
        XCTAssertEqual(matched("README", tree), ["README"])
    }

    func testALeadingSlashAnchorsASingleName() {
        XCTAssertEqual(matched("/README", ["README", "doc/README", "README/x"]), ["README", "README/x"])
        XCTAssertEqual(matched("/*.so", tree), ["libtop.so"])
    }

    func testATrailingSlashMatchesFoldersOnly() throws {
        let build = try XCTUnwrap(glob("build/"))
        XCTAssertTrue(build.matches("build/x"))
        XCTAssertTrue(build.matches("a/build/x/y"), "no other slash: at any depth")
        XCTAssertTrue(build.matches("build", isFolder: true))
        XCTAssertTrue(build.matches("a/build", isFolder: true))
        XCTAssertFalse(build.matches("build"), "a file named build")
        XCTAssertFalse(build.matches("a/build"))
        XCTAssertFalse(build.matches("builds/x"))
        let anchored = try XCTUnwrap(glob("out/build/"))
        XCTAssertTrue(anchored.matches("out/build/x"))
        XCTAssertTrue(anchored.matches("out/build", isFolder: true))
        XCTAssertFalse(anchored.matches("a/out/build/x"))
        XCTAssertFalse(anchored.matches("out/build"))
    }

    func testAFolderMemberIsMatchedByAPatternWithoutATrailingSlashToo() throws {
        let docs = try XCTUnwrap(glob("docs"))
        XCTAssertTrue(docs.matches("docs", isFolder: true))
        XCTAssertTrue(docs.matches("docs", isFolder: false))
    }

    // MARK: Forms

    func testDoubleStarIsAnyNumberOfComponentsNoneIncluded() {
        XCTAssertEqual(matched("**/*.so", tree), ["lib/libz.so", "lib/deep/libx.so", "libtop.so"])
        XCTAssertEqual(
            matched("lib/**", ["lib", "lib/a", "lib/a/b", "libs/a", "x/lib/a"]), ["lib", "lib/a", "lib/a/b"])
        XCTAssertEqual(
            matched("a/**/b", ["a/b", "a/x/b", "a/x/y/b", "a/b/c", "a/xb", "b", "x/a/b"]),
            ["a/b", "a/x/b", "a/x/y/b", "a/b/c"])
        XCTAssertEqual(matched("**", ["a", "a/b", ".x"]), ["a", "a/b", ".x"])
        XCTAssertEqual(matched("**/**/x", ["x", "a/x", "a/b/x", "a/b/y"]), ["x", "a/x", "a/b/x"])
    }

    func testStarStaysWithinOneComponentAndMatchesALeadingDot() {
        XCTAssertEqual(matched("lib/*.so", tree), ["lib/libz.so"])
        XCTAssertEqual(matched("*", [".hidden", "a", "a/b"]), [".hidden", "a", "a/b"])
        XCTAssertEqual(matched("/lib*", ["lib", "libs/x", "x/lib"]), ["lib", "libs/x"])
        XCTAssertEqual(matched("a*b*c", ["abc", "aXbYc", "ac", "acb", "abcx"]), ["abc", "aXbYc"])
    }

    func testQuestionMarkIsOneCharacter() {
        XCTAssertEqual(matched("a?c", ["abc", "ac", "abbc", "a/c", "x/a-c"]), ["abc", "x/a-c"])
        XCTAssertEqual(matched("a/?", ["a/b", "a/bc", "a/"]), ["a/b"])
        // One Unicode scalar: a precomposed é is one, a decomposed one two.
        XCTAssertEqual(matched("caf?", ["caf\u{e9}", "cafe\u{301}"]), ["caf\u{e9}"])
        XCTAssertEqual(matched("caf??", ["caf\u{e9}", "cafe\u{301}"]), ["cafe\u{301}"])
    }

    func testSets() {
        XCTAssertEqual(matched("[abc].txt", ["a.txt", "b.txt", "d.txt", "ab.txt"]), ["a.txt", "b.txt"])
        XCTAssertEqual(matched("v[0-9]", ["v0", "v5", "v9", "va", "v10"]), ["v0", "v5", "v9"])
        XCTAssertEqual(matched("[!a]*", ["abc", "bcd", "_x"]), ["bcd", "_x"])
        XCTAssertEqual(matched("[^a]*", ["abc", "bcd", "_x"]), ["bcd", "_x"])
        XCTAssertEqual(matched("[]]", ["]", "a"]), ["]"], "a ] first stands for itself")
        XCTAssertEqual(matched("[!]]", ["]", "a"]), ["a"])
        XCTAssertEqual(matched("[a-]", ["a", "-", "b"]), ["a", "-"], "a - last stands for itself")
        XCTAssertEqual(matched("[-a]", ["a", "-", "b"]), ["a", "-"], "a - first stands for itself")
        XCTAssertEqual(matched("[a-cx-z]", ["b", "y", "d"]), ["b", "y"])
        XCTAssertEqual(matched("[\\]]", ["]", "\\"]), ["]"])
        XCTAssertEqual(matched("[\u{e0}-\u{ff}]", ["\u{e9}", "e"]), ["\u{e9}"])
        XCTAssertEqual(matched("a[!x]b", ["a/b"]), [], "a set never matches /")
    }

    func testBackslashEscapesTheNextCharacter() {
        XCTAssertEqual(matched("\\*", ["*", "x"]), ["*"])
        XCTAssertEqual(matched("\\[a]", ["[a]", "a"]), ["[a]"])
        XCTAssertEqual(matched("a\\?", ["a?", "ab"]), ["a?"])
        XCTAssertEqual(matched("a\\\\b", ["a\\b", "ab"]), ["a\\b"])
        XCTAssertEqual(matched("\\**", ["*", "*x", "x*"]), ["*", "*x"], "an escaped star, then a star")
    }

    func testMatchingIsCaseSensitive() {
        XCTAssertEqual(matched("*.SO", ["a.so", "a.SO"]), ["a.SO"])
    }

    func testThePatternIsKeptAsWritten() throws {
        let glob = try XCTUnwrap(glob("**/*.so"))
        XCTAssertEqual(glob.pattern, "**/*.so")
        XCTAssertEqual(glob.description, "**/*.so")
        XCTAssertEqual(glob, try PathGlob("**/*.so"))
        XCTAssertNotEqual(glob, try PathGlob("*.so"))
    }

    // MARK: Refusals

    func testEveryRefusalSaysWhatAndWhere() {
        XCTAssertEqual(refusal(""), "it is empty")
        XCTAssertEqual(refusal("/"), "it names no file or folder")
        XCTAssertEqual(refusal("//"), "it names no file or folder")
        XCTAssertEqual(refusal("a//b"), "it has an empty component (\"//\") (at character 3)")
        XCTAssertEqual(refusal("///x"), "it has an empty component (\"//\") (at character 2)")
        let doubleStar =
            "\"**\" stands for any folders only as a whole component (as in \"**/x\", \"a/**\", \"a/**/b\"); "
            + "within a name, use \"*\""
        XCTAssertEqual(refusal("a**b"), doubleStar + " (at character 2)")
        XCTAssertEqual(refusal("***"), doubleStar + " (at character 1)")
        XCTAssertEqual(refusal("lib/**.so"), doubleStar + " (at character 5)")
        XCTAssertEqual(refusal("x/a**"), doubleStar + " (at character 4)")
        let unclosed = "\"[\" is not closed by \"]\" (write \"\\[\" for the character itself)"
        XCTAssertEqual(refusal("[abc"), unclosed + " (at character 1)")
        XCTAssertEqual(refusal("x/[a/b]"), unclosed + " (at character 3)")
        XCTAssertEqual(refusal("[]"), unclosed + " (at character 1)")
        XCTAssertEqual(refusal("[a-"), unclosed + " (at character 1)")
        XCTAssertEqual(refusal("v[9-0]"), "the range \"9-0\" is reversed (write \"0-9\") (at character 4)")
        XCTAssertEqual(refusal("a\\"), "it ends with \"\\\", which escapes nothing (at character 2)")
        XCTAssertEqual(refusal("[a\\"), "it ends with \"\\\", which escapes nothing (at character 3)")
        XCTAssertEqual(refusal("a\\/b"), "\"/\" cannot be escaped: it always separates folders (at character 2)")
        XCTAssertEqual(refusal("a\\/"), "\"/\" cannot be escaped: it always separates folders (at character 2)")
        let dot = "\".\" as a component matches nothing: a member's path has none"
        XCTAssertEqual(refusal("."), dot + " (at character 1)")
        XCTAssertEqual(refusal("\\."), dot + " (at character 1)")
        XCTAssertEqual(refusal("./bin"), dot + " (at character 1)")
        XCTAssertEqual(
            refusal("a/../b"), "\"..\" as a component matches nothing: a member's path has none (at character 3)")
        XCTAssertEqual(refusal("a\u{0}b"), "it contains a NUL character (at character 2)")
        XCTAssertEqual(
            refusal(String(repeating: "a", count: 4097)), "it is 4097 bytes long; a pattern has at most 4096")
        XCTAssertNotNil(try? PathGlob(String(repeating: "a", count: 4096)))
    }

    func testNamesThatOnlyLookLikeRefusedOnesAreAccepted() {
        XCTAssertEqual(matched("..a", ["..a", "a"]), ["..a"])
        XCTAssertEqual(matched(".*", [".a", "a", "."]), [".a", "."])
        XCTAssertEqual(matched("a\\\\/", ["a\\/x"]), ["a\\/x"], "an escaped backslash before a trailing slash")
    }

    // MARK: Cost

    /// A backtracking matcher tries every way of splitting the input among the stars: for 30 stars over 3,000
    /// characters that is beyond any test run. Here it is at most pattern × path steps.
    func testAHostilePatternIsAnsweredWithoutBacktracking() throws {
        let stars = try XCTUnwrap(glob(String(repeating: "*a", count: 30) + "*b"))
        let name = String(repeating: "a", count: 3000)
        XCTAssertFalse(stars.matches(name))
        XCTAssertTrue(stars.matches(name + "b"))
        let components = try XCTUnwrap(glob(String(repeating: "**/a/", count: 30) + "b"))
        let deep = Array(repeating: "a", count: 1500).joined(separator: "/")
        XCTAssertFalse(components.matches(deep))
        XCTAssertTrue(components.matches(deep + "/b"))
        // Both levels at once: stars in names under double stars.
        let mixed = try XCTUnwrap(glob(String(repeating: "**/*a*a*a/", count: 10) + "*b"))
        let wide = Array(repeating: String(repeating: "a", count: 100), count: 40).joined(separator: "/")
        XCTAssertFalse(mixed.matches(wide))
        XCTAssertTrue(mixed.matches(wide + "/ab"))
    }

    // MARK: Agreement

    /// Patterns and paths drawn from a small alphabet, compared with the same rules written as an ICU regular
    /// expression: `*` is `[^/]*`, `?` is `[^/]`, a `**` component any number of components, a pattern without
    /// an inner `/` preceded by any folders, and any path inside a match matched too. (A backtracking engine is
    /// fine for these short inputs.)
    func testAgreementWithARegularExpressionTranslation() throws {
        var generator = SplitMix(seed: 29)
        let pieces = ["a", "b", "*", "?", "[ab]", "[!a]"]
        var compared = 0, matches = 0
        for _ in 0..<3000 {
            var components: [String] = []
            for _ in 0..<Int(generator.next() % 3 + 1) {
                if generator.next() % 5 == 0 {
                    components.append("**")
                } else {
                    var name = ""
                    for _ in 0..<Int(generator.next() % 3 + 1) {
                        let piece = pieces[Int(generator.next() % 6)]
                        // Two stars side by side would be "**", which a name may not hold.
                        if !(piece == "*" && name.hasSuffix("*")) { name += piece }
                    }
                    components.append(name)
                }
            }
            let leading = generator.next() % 6 == 0 ? "/" : ""
            let pattern = leading + components.joined(separator: "/")
            let glob = try PathGlob(pattern)
            let regex = try NSRegularExpression(
                pattern: Self.regex(components, anchored: !leading.isEmpty || components.count > 1))
            for _ in 0..<8 {
                let path = (0..<Int(generator.next() % 4 + 1)).map { _ in
                    String((0..<Int(generator.next() % 3 + 1)).map { _ in "abc".randomElement(using: &generator)! })
                }.joined(separator: "/")
                let slashed = "/" + path
                let expected = regex.firstMatch(in: slashed, range: NSRange(slashed.startIndex..., in: slashed)) != nil
                XCTAssertEqual(glob.matches(path), expected, "\(pattern) against \(path)")
                compared += 1
                if expected { matches += 1 }
            }
        }
        XCTAssertEqual(compared, 24_000)
        XCTAssertTrue((2000...22_000).contains(matches), "both answers are well represented: \(matches) matches")
    }

    /// Over the path with a `/` before each component: a `**` is `(?:/[^/]+)*`, any other component `/` and its
    /// characters.
    private static func regex(_ components: [String], anchored: Bool) -> String {
        var out = "^" + (anchored ? "" : "(?:/[^/]+)*")
        for component in components {
            out +=
                component == "**"
                ? "(?:/[^/]+)*"
                : "/"
                    + component.replacingOccurrences(of: "[!a]", with: "[^a/]")
                    .replacingOccurrences(of: "*", with: "[^/]*").replacingOccurrences(of: "?", with: "[^/]")
        }
        return out + "(?:/.*)?$"
    }

    // MARK: Selection

    func testSelectionKeepsWhatIncludeMatchesLessWhatExcludeMatches() throws {
        let everything = try MemberSelection(ExtractRule())
        XCTAssertTrue(everything.keepsEverything)
        XCTAssertEqual(tree.filter { everything.keeps($0) }, tree)

        let selection = try MemberSelection(ExtractRule(include: ["lib/**", "bin/*"], exclude: ["*.so.*", "deep/"]))
        XCTAssertFalse(selection.keepsEverything)
        XCTAssertEqual(tree.filter { selection.keeps($0) }, ["bin/tool", "bin/tools", "lib/libz.so"])
        XCTAssertFalse(selection.keeps("lib/deep", isFolder: true))
        XCTAssertTrue(selection.keeps("lib/deep"), "a file named deep is not the folder deep/")

        let excludeOnly = try MemberSelection(ExtractRule(exclude: ["docs", ".*"]))
        XCTAssertEqual(
            tree.filter { excludeOnly.keeps($0) },
            [
                "README", "bin/tool", "bin/tools", "sdk/bin/tool", "lib/libz.so",
                "lib/deep/libx.so", "lib/libz.so.1", "libtop.so",
            ])
    }

    func testARuleMadeInCodeWithABadPatternIsRefused() {
        XCTAssertThrowsError(try MemberSelection(ExtractRule(exclude: ["ok", "a**"]))) { error in
            XCTAssertEqual((error as? PathGlobError)?.position, 2)
        }
    }
}

/// A pattern quoted for a failure message.
private func shown(_ text: String) -> String { "\"\(text)\"" }
