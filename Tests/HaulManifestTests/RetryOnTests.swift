import HaulManifest
import XCTest

/// `retry_on:` in `defaults:` and in an entry, as `retries:` is: the entry's own wins, and a value that is not HTTP
/// statuses is reported where it stands.
final class RetryOnTests: XCTestCase {
    func testDefaultsApplyToEntriesWithoutTheirOwn() throws {
        let manifest = Fixture.manifest(
            """
            version: 1
            defaults: {retry_on: "403,500-502"}
            files:
              - url: https://example.com/a
                dest: a
              - url: https://example.com/b
                dest: b
                retry_on: 404
              - url: https://example.com/c
                dest: c
                retry_on: 400-401,409

            """)
        XCTAssertEqual(manifest?.files.map(\.retryOn), [[403, 500, 501, 502], [404], [400, 401, 409]])
        XCTAssertEqual(
            Fixture.manifest("version: 1\nfiles:\n  - {url: https://example.com/a, dest: a}\n")?.files.first?.retryOn,
            [])
    }

    func testAValueThatIsNotStatusesIsReportedWhereItStands() {
        XCTAssertEqual(
            Fixture.diagnostics(
                """
                version: 1
                defaults: {retry_on: 4040}
                files:
                  - url: https://example.com/a
                    dest: a
                    retry_on: 503-500
                  - url: https://example.com/b
                    dest: b
                    retry_on: [404]

                """),
            [
                "haul.yaml:2:22: error: defaults.retry_on: expected HTTP statuses from 100 to 599, comma-separated, each alone "
                    + "or as a range such as 500-504, found \"4040\"",
                "haul.yaml:6:15: error: files[0].retry_on: expected HTTP statuses from 100 to 599, comma-separated, each alone "
                    + "or as a range such as 500-504, found \"503-500\"",
                "haul.yaml:9:15: error: files[1].retry_on: expected HTTP statuses such as 429,503 or 500-504, found a sequence",
            ])
    }
}
