import HaulEngine
import XCTest

/// What a server's headers grant a private client (RFC 9111 4.2), read as `Freshness` reads them.
final class FreshnessTests: XCTestCase {
    private func lifetime(
        _ cacheControl: String? = nil, expires: String? = nil, date: String? = nil, age: String? = nil
    ) -> Double? {
        Freshness.lifetime(cacheControl: cacheControl, expires: expires, date: date, age: age)
    }

    func testMaxAgeWinsOverExpiresAndAgeIsTakenOff() {
        XCTAssertEqual(lifetime("public, max-age=600"), 600)
        XCTAssertEqual(lifetime("max-age=\"600\""), 600)
        XCTAssertEqual(
            lifetime("max-age=600", expires: "Sun, 06 Nov 1994 08:49:37 GMT", date: "Sun, 06 Nov 1994 08:00:00 GMT"),
            600)
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
        XCTAssertNil(
            lifetime(expires: "0", date: "Sun, 06 Nov 1994 08:49:37 GMT"), "an invalid date is already expired")
        XCTAssertNil(lifetime(expires: "Sun, 06 Nov 1994 07:49:37 GMT", date: "Sun, 06 Nov 1994 08:49:37 GMT"))
    }

    /// delta-seconds as RFC 9111 reads them: leading zeros are digits like any other, and a value too large is 2³¹.
    /// Whatever a server grants, a year is the most haul honours.
    func testDeltaSecondsKeepLeadingZerosAndAServerCannotGrantMoreThanAYear() {
        XCTAssertEqual(lifetime("max-age=000000000003600"), 3600)
        XCTAssertEqual(lifetime("max-age=0003600", age: "0000000100"), 3500)
        XCTAssertEqual(lifetime("max-age=99999999999999999999999"), Freshness.longestLifetime)
        XCTAssertEqual(lifetime("max-age=2147483648", age: "2147483647"), 1, "2³¹ less 2³¹ - 1")
        XCTAssertEqual(
            lifetime(expires: "Fri, 31 Dec 9999 23:59:59 GMT", date: "Sun, 06 Nov 1994 08:49:37 GMT"),
            Freshness.longestLifetime)
        XCTAssertNil(lifetime("max-age=+60"))
        XCTAssertNil(lifetime("max-age=1e9"))
        XCTAssertEqual(lifetime("max-age=600", age: "1e9"), 600, "an Age that is not delta-seconds is ignored")
    }
}
