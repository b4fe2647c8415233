import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A caller may start haul with standard streams closed (`haul sync >&-`, some service managers): its output must
/// go nowhere rather than into the first file it opens.
final class ClosedStreamsTests: XCTestCase {
    func testClosedStandardStreamsNeverReceiveWhatHaulOpensNext() throws {
        let directory = try TemporaryDirectory()
        let bytes = Array("content\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/f": bytes])
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - { url: \(server.url("/f")), dest: f.bin, sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }
            """)
        for redirection in [">&-", "2>&-", ">&- 2>&-", "<&- >&- 2>&-"] {
            try? FileManager.default.removeItem(atPath: directory.path("out"))
            let result = try ProcessRunner.run(
                "/bin/sh", ["-c", "exec \"$0\" sync haul.yaml --verbose \(redirection)", HaulProcess.executablePath],
                currentDirectory: directory.path, timeout: 30)
            XCTAssertEqual(result.exitCode, 0, "\(redirection): \(result.stderr)")
            XCTAssertEqual(directory.read("out/f.bin"), bytes, redirection)
            let lock = String(decoding: try XCTUnwrap(directory.read("out/.haul/lock")), as: UTF8.self)
            XCTAssertTrue(
                lock.contains(" pid ") && lock.hasSuffix(", haul sync haul.yaml\n")
                    && lock.split(separator: "\n").count == 1,
                "\(redirection): the lock holds only its holder line: \(lock.debugDescription)")
            let state = String(decoding: try XCTUnwrap(directory.read("out/.haul/state")), as: UTF8.self)
            XCTAssertFalse(state.contains("fetched") || state.contains("Plan:"), "\(redirection): \(state)")
        }
    }
}
