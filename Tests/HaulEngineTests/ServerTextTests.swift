import XCTest

@testable import HaulEngine

/// Server-chosen text and proxy URLs as they may appear in messages.
final class ServerTextTests: XCTestCase {
    func testServerTextIsPrintableASCIIAndBounded() {
        XCTAssertEqual(ServerText.quoted("bytes 0-9/10"), "bytes 0-9/10")
        XCTAssertEqual(ServerText.quoted("a\u{1B}[2J\r\nb\u{7F}é"), "a?[2J??b???")
        XCTAssertEqual(ServerText.quoted(String(repeating: "x", count: 100), limit: 5), "xxxxx…")
    }

    func testProxyCredentialsAreRedactedAndTheExampleKeepsTheProxy() {
        XCTAssertEqual(
            ProxySettings.redactingUserinfo("http://alice:secret@proxy.corp:3128"), "http://***@proxy.corp:3128")
        XCTAssertEqual(ProxySettings.redactingUserinfo("http://proxy.corp:3128/"), "http://proxy.corp:3128/")
        XCTAssertEqual(ProxySettings.redactingUserinfo("alice:s@e@proxy:1"), "***@proxy:1")
        XCTAssertEqual(
            ProxySettings.credentialsExample(for: "http://***@proxy.corp:3128/"), "http://user:pass@proxy.corp:3128")
        XCTAssertEqual(ProxySettings.credentialsExample(for: "proxy.corp:3128"), "http://user:pass@proxy.corp:3128")
        XCTAssertEqual(ProxySettings.credentialsExample(for: "https://proxy.corp"), "https://user:pass@proxy.corp")
    }

    /// `--proxy`'s credentials are among what libcurl's messages are scrubbed of.
    func testTheProxyOptionsCredentialsAreSecrets() {
        XCTAssertEqual(
            ConnectionSettings(proxy: "http://alice:s3cret@proxy.corp:3128").proxySecrets, ["alice:s3cret", "s3cret"])
        XCTAssertEqual(ConnectionSettings(proxy: "alice@proxy.corp:3128").proxySecrets, ["alice"])
        XCTAssertEqual(ConnectionSettings(proxy: "http://proxy.corp:3128/a@b").proxySecrets, [])
        XCTAssertEqual(ConnectionSettings().proxySecrets, [])
    }

    /// `--noproxy` and `no_proxy` as libcurl reads them: `*`, a host, or a domain covering its subdomains.
    func testANoProxyListCoversItsHostsAndTheirSubdomains() {
        XCTAssertTrue(ProxySettings.bypasses(host: "a.example.com", noProxy: "localhost, .example.com"))
        XCTAssertTrue(ProxySettings.bypasses(host: "example.com", noProxy: "example.com"))
        XCTAssertTrue(ProxySettings.bypasses(host: "anything", noProxy: "*"))
        XCTAssertTrue(ProxySettings.bypasses(host: "[::1]", noProxy: "::1"))
        XCTAssertFalse(ProxySettings.bypasses(host: "badexample.com", noProxy: "example.com"))
        XCTAssertFalse(ProxySettings.bypasses(host: "example.com", noProxy: ""))
    }
}
