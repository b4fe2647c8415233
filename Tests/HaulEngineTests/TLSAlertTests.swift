@testable import HaulEngine
import XCTest

/// The alert is read from OpenSSL's error code in libcurl's message, never from its words.
final class TLSAlertTests: XCTestCase {
    func testTheAlertIsTheCodesReason() {
        XCTAssertEqual(
            TLSAlert(
                libcurlMessage: "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate "
                    + "required, errno 0"), .certificateRequired)
        XCTAssertEqual(TLSAlert(libcurlMessage: "error:0A000418:SSL routines::tlsv1 alert unknown ca"), .unknownCA)
        XCTAssertEqual(
            TLSAlert(libcurlMessage: "error:0A000412:SSL routines::sslv3 alert bad certificate"), .badCertificate)
        // OpenSSL 1.1 packs the library and function above the reason.
        XCTAssertEqual(
            TLSAlert(libcurlMessage: "error:14094415:SSL routines:ssl3_read_bytes:sslv3 alert certificate expired"),
            .certificateExpired)
    }

    func testTheWordsAloneAreNotAnAlert() {
        XCTAssertNil(TLSAlert(libcurlMessage: "tlsv13 alert certificate required"))
        XCTAssertNil(
            TLSAlert(libcurlMessage: "OpenSSL SSL_connect: error:0A000086:SSL routines::certificate verify failed"),
            "a verification failure of the server's certificate is not an alert about the client's")
        XCTAssertNil(TLSAlert(libcurlMessage: "error:0A00045:short"))
        XCTAssertNil(TLSAlert(libcurlMessage: "error:"))
    }

    func testACodeAfterOneThatIsNotAnAlertIsFound() {
        XCTAssertEqual(
            TLSAlert(libcurlMessage: "error:zzzzzzzz: then error:0A00045C:SSL routines::"), .certificateRequired)
        XCTAssertEqual(TLSAlert(libcurlMessage: "error:0A000086:x error:0A000414:y"), .certificateRevoked)
    }
}
