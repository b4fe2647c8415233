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
        XCTAssertEqual(ProxySettings.redactingUserinfo("http://alice:secret@proxy.corp:3128"), "http://***@proxy.corp:3128")
        XCTAssertEqual(ProxySettings.redactingUserinfo("http://proxy.corp:3128/"), "http://proxy.corp:3128/")
        XCTAssertEqual(ProxySettings.redactingUserinfo("alice:s@e@proxy:1"), "***@proxy:1")
        XCTAssertEqual(ProxySettings.credentialsExample(for: "http://***@proxy.corp:3128/"), "http://user:pass@proxy.corp:3128")
        XCTAssertEqual(ProxySettings.credentialsExample(for: "proxy.corp:3128"), "http://user:pass@proxy.corp:3128")
        XCTAssertEqual(ProxySettings.credentialsExample(for: "https://proxy.corp"), "https://user:pass@proxy.corp")
    }
}
