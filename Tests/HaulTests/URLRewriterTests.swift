import Haul
import HaulDigest
import HaulManifest
import XCTest

/// What an entry's sources become under the config's rewrites: order, fallbacks, which source gets the manifest's
/// headers, and how rewritten URLs are shown.
final class URLRewriterTests: XCTestCase {
    private func rewriter(_ yaml: String) throws -> URLRewriter {
        URLRewriter(try RewriteConfig.parse(bytes: Array(yaml.utf8), fileName: "config.yaml"))
    }

    private func entry(_ url: TemplatedString, mirrors: [TemplatedString] = []) -> FileEntry {
        FileEntry(
            index: 0, url: url, mirrors: mirrors, destination: DestinationPath("a.bin")!, checksum: nil, size: nil,
            mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: [],
            location: SourceLocation(line: 1, column: 1))
    }

    func testEachURLIsRewrittenInPlaceAndOriginalsFollowAll() throws {
        let rewrites = try rewriter(
            """
            rewrites:
              - prefix: https://up.example/
                to: https://cache.internal/up/
                fallback: original
              - prefix: https://mirror.example/
                to: https://cache.internal/mirror/
            """)
        let sources = rewrites.sources(
            of: entry(
                TemplatedString(literal: "https://up.example/a.bin"),
                mirrors: [
                    TemplatedString(literal: "https://mirror.example/a.bin"),
                    TemplatedString(literal: "https://other.example/a.bin"),
                ]))
        XCTAssertEqual(
            sources.map(\.url),
            [
                "https://cache.internal/up/a.bin", "https://cache.internal/mirror/a.bin",
                "https://other.example/a.bin", "https://up.example/a.bin",
            ])
        XCTAssertEqual(sources.map(\.original), [0, 1, 2, 0])
        XCTAssertEqual(
            sources.map(\.rewrittenFrom), ["https://up.example/a.bin", "https://mirror.example/a.bin", nil, nil])
        XCTAssertEqual(
            sources.map(\.sendsHeaders), [false, false, false, true],
            "headers stay with the upstream origin: the original as a fallback gets them, its rewrite does not")
    }

    func testHeadersGoToTheRewriteWhenForwardedOrWhenTheOriginStays() throws {
        let rewrites = try rewriter(
            """
            rewrites:
              - prefix: https://up.example/a/
                to: https://cache.internal/
                headers: forward
              - prefix: https://up.example/b/
                to: https://UP.example:443/c/
            """)
        XCTAssertEqual(
            rewrites.sources(of: entry(TemplatedString(literal: "https://up.example/a/x"))).map(\.sendsHeaders), [true])
        XCTAssertEqual(
            rewrites.sources(of: entry(TemplatedString(literal: "https://up.example/b/x"))).map(\.sendsHeaders), [true],
            "the same scheme, host and port is the same origin")
        XCTAssertEqual(
            rewrites.sources(
                of: entry(
                    TemplatedString(literal: "https://up.example/a/x"),
                    mirrors: [TemplatedString(literal: "https://up.example/a/y")])
            ).map(\.sendsHeaders),
            [true, false], "a mirror never gets the manifest's headers, forwarded or not")
    }

    func testNoRulesOrNoMatchLeavesTheSourcesAsWritten() throws {
        let plain = entry(
            TemplatedString(literal: "https://up.example/a.bin"), mirrors: [TemplatedString(literal: "https://m/a")])
        func shown(_ sources: [URLRewriter.Source]) -> [String] {
            sources.map {
                "\($0.url) \($0.displayURL) \($0.original) \($0.rewrittenFrom ?? "-") \($0.sendsHeaders) \($0.secrets)"
            }
        }
        let expected = [
            "https://up.example/a.bin https://up.example/a.bin 0 - true []", "https://m/a https://m/a 1 - false []",
        ]
        XCTAssertEqual(shown(URLRewriter.none.sources(of: plain)), expected)
        XCTAssertEqual(
            shown(try rewriter("rewrites:\n  - {prefix: 'https://x/', to: 'https://y/'}\n").sources(of: plain)),
            expected)
    }

    func testValuesFromTheEnvironmentAreNeverShown() throws {
        let url = TemplatedString(
            template: "https://up.example/${TOKEN}/a.bin", expanded: "https://up.example/s3cr3t/a.bin",
            environmentValues: ["s3cr3t"])
        let prefix = try rewriter("rewrites:\n  - {prefix: 'https://up.example/', to: 'https://cache.internal/'}\n")
        let byPrefix = prefix.sources(of: entry(url))
        XCTAssertEqual(byPrefix.map(\.url), ["https://cache.internal/s3cr3t/a.bin"])
        XCTAssertEqual(byPrefix.map(\.displayURL), ["https://cache.internal/${TOKEN}/a.bin"])
        XCTAssertEqual(byPrefix.map(\.secrets), [["s3cr3t"]])

        let regex = try rewriter(
            "rewrites:\n  - {regex: '^https://up\\.example/(.*)$', to: 'https://cache.internal/x/$1'}\n")
        let byRegex = regex.sources(of: entry(url))
        XCTAssertEqual(byRegex.map(\.url), ["https://cache.internal/x/s3cr3t/a.bin"])
        XCTAssertEqual(byRegex.map(\.displayURL), ["https://cache.internal/x/***/a.bin"])

        let userinfo = try rewriter(
            "rewrites:\n  - {prefix: 'https://up.example/', to: 'https://robot:pw@cache.internal/'}\n")
        let withUserinfo = userinfo.sources(of: entry(TemplatedString(literal: "https://up.example/a")))
        XCTAssertEqual(withUserinfo.map(\.displayURL), ["https://***@cache.internal/a"])
        XCTAssertEqual(withUserinfo.map(\.secrets), [["robot:pw"]])
    }

    func testTheDeliveringSourceIsFoundByItsIndexInTheRewrittenList() throws {
        let rewrites = try rewriter(
            """
            rewrites:
              - {prefix: 'https://up.example/', to: 'https://cache.internal/', fallback: original}
            """)
        let rewritten = entry(TemplatedString(literal: "https://up.example/a"))
        XCTAssertEqual(rewrites.url(of: rewritten, source: 0), "https://cache.internal/a")
        XCTAssertEqual(rewrites.url(of: rewritten, source: 1), "https://up.example/a")
        XCTAssertNil(rewrites.url(of: rewritten, source: 2))
    }
}
