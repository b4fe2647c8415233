import HaulEngine
import XCTest

/// What a server's headers grant a private client (RFC 9111 4.2), read as `Freshness` reads them.
final class FreshnessTests: XCTestCase {
    private func lifetime(_ cacheControl: String? = nil, expires: String? = nil, date: String? = nil, age: String? = nil) -> Double? {
        Freshness.lifetime(cacheControl: cacheControl, expires: expires, date: date, age: age)
    }

    func testMaxAgeWinsOverExpiresAndAgeIsTakenOff() {
        XCTAssertEqual(lifetime("public, max-age=600"), 600)
        XCTAssertEqual(lifetime("max-age=\"600\""), 600)
        XCTAssertEqual(lifetime("max-age=600", expires: "Sun, 06 Nov 1994 08:49:37 GMT", date: "Sun, 06 Nov 1994 08:00:00 GMT"), 600)
        XCTAssertEqual(lifetime("max-age=600", age: "100"), 500)
        XCTAssertNil(lifetime("max-age=600", age: "600"), "used up in caches on the way")
        XCTAssertNil(lifetime("s-maxage=600"), "for shared caches, not for haul")
    }

    func testNoCacheNoStoreAndMalformedValuesGrantNothing() {
        XCTAssertNil(lifetime("max-age=600, no-cache"))
        XCTAssertNil(lifetime("No-Store, max-age=600"))
        XCTAssertNil(lifetime("max-age=ten"))
        XCTAssertNil(lifetime("max-age=0"))
        XCTAssertNil(lifetime())
    }

    func testExpiresCountsFromTheResponsesOwnDate() {
        XCTAssertEqual(lifetime(expires: "Sun, 06 Nov 1994 09:49:37 GMT", date: "Sun, 06 Nov 1994 08:49:37 GMT"), 3600)
        XCTAssertNil(lifetime(expires: "Sun, 06 Nov 1994 09:49:37 GMT"), "no Date: the two clocks cannot be compared")
        XCTAssertNil(lifetime(expires: "0", date: "Sun, 06 Nov 1994 08:49:37 GMT"), "an invalid date is already expired")
        XCTAssertNil(lifetime(expires: "Sun, 06 Nov 1994 07:49:37 GMT", date: "Sun, 06 Nov 1994 08:49:37 GMT"))
    }
}
