import Glibc
@testable import HaulCommand
import HaulEngine
import XCTest

/// The engine says what failed as values; these are the sentences a user reads for them.
final class FailureWordingTests: XCTestCase {
    func testRedirectRefusalsSayWhy() {
        XCTAssertEqual(
            FailureWording.reason(.redirectRefused(.downgrade)), "redirect refused: redirect from https to http")
        XCTAssertEqual(
            FailureWording.reason(.redirectRefused(.tooMany(limit: 10))), "redirect refused: more than 10 redirects")
        XCTAssertEqual(
            FailureWording.reason(.redirectRefused(.unsupportedScheme("file"))),
            "redirect refused: redirect to unsupported scheme \"file\"")
        XCTAssertEqual(FailureWording.reason(.redirectRefused(.loop)), "redirect refused: redirect loop")
    }

    func testProtocolViolationsNameWhatWasWrong() {
        XCTAssertEqual(
            FailureWording.reason(.protocolViolation(.conflictingContentLength(5, 3))),
            "protocol error: conflicting Content-Length values: 5 and 3")
        XCTAssertEqual(
            FailureWording.reason(.protocolViolation(.statusOutOfRange(600))),
            "protocol error: status 600 is outside 100-599")
        XCTAssertEqual(
            FailureWording.reason(.protocolViolation(.headersTooLarge(kibibytes: 256))),
            "protocol error: response headers over 256 KiB")
        XCTAssertEqual(
            FailureWording.reason(.protocolViolation(.unreadableAnswer("Invalid Content-Length: value"))),
            "protocol error: Invalid Content-Length: value", "libcurl's own diagnosis, as it said it")
    }

    func testAResumeRefusalSaysWhatWasAskedAndWhatCame() {
        XCTAssertEqual(
            FailureWording.reason(.resumeRejected(askedFrom: 400, contentRange: "bytes 7-9/1000")),
            "resume refused: asked for the bytes from 400, the server answered with Content-Range: bytes 7-9/1000")
        XCTAssertEqual(
            FailureWording.reason(.resumeRejected(askedFrom: 400, contentRange: nil)),
            "resume refused: asked for the bytes from 400, the server answered with no Content-Range")
    }

    func testAFailedProxyIsNamedWithWhereItWasSet() {
        XCTAssertEqual(
            FailureWording.reason(
                .proxyFailed(
                    variable: "https_proxy", proxy: "http://p:3128", how: .refusedTunnel(status: 403), transient: false)
            ),
            "the proxy http://p:3128 (from https_proxy) answered 403 to CONNECT")
        XCTAssertEqual(
            FailureWording.reason(
                .proxyFailed(variable: "--proxy", proxy: "http://p:3128", how: .unresolved, transient: true)),
            "the proxy http://p:3128 (from --proxy) could not be resolved")
    }

    func testALocalFailureSaysTheOperationThePathAndTheSystemsWords() {
        XCTAssertEqual(
            FailureWording.reason(.local(operation: .createTemporaryFile, path: "/r/.haul/tmp/a.part", errno: ENOSPC)),
            "cannot create temporary file /r/.haul/tmp/a.part: No space left on device")
        XCTAssertEqual(
            FailureWording.attempt(AttemptFailure(sourceDisplayURL: "https://h/a", reason: .httpStatus(404))),
            "https://h/a: HTTP 404")
    }
}
