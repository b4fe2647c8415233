@testable import Haul
import HaulDigest
import HaulEngine
import HaulManifest
import HaulPlanner
import HaulStore
import XCTest

/// The sync's rules that are values in, values out, tested as such: what the engine is asked for an entry
/// (`SyncOptions.request`: which source gets which headers and secrets, which one is asked conditionally, what the
/// command line overrides; the sync proper and the head start build requests through it alone), who shares a
/// download (`Sync.shareGroups`), and which fetches the content cache serves (`Sync.cacheHits`).
final class SyncRulesTests: XCTestCase {
    private let token = TemplatedString(
        template: "Bearer ${TOKEN}", expanded: "Bearer s3cret", environmentValues: ["s3cret"])

    private func entry(headers: [HeaderField] = [], mirrorHeaders: [[HeaderField]] = []) -> FileEntry {
        var entry = FileEntry(
            index: 4, url: TemplatedString(literal: "https://origin.example/a.bin"),
            mirrors: [
                TemplatedString(literal: "https://m1.example/a.bin"),
                TemplatedString(literal: "https://m2.example/a.bin"),
            ],
            destination: DestinationPath("a.bin")!, checksum: nil, size: 12, mode: FileMode(0o640),
            retries: 2, timeout: Seconds(30), headers: headers, location: SourceLocation(line: 1, column: 1))
        entry.mirrorHeaders = mirrorHeaders
        return entry
    }

    func testTheEntrysHeadersGoToItsURLAloneAndAMirrorGetsOnlyItsOwn() {
        let own = HeaderField(name: "X-Mirror", value: TemplatedString(literal: "two"))
        let request = SyncOptions().request(
            for: entry(
                headers: [HeaderField(name: "Authorization", value: token)],
                mirrorHeaders: [[], [own]]),
            id: 4, conditionalOn: nil)
        XCTAssertEqual(request.id, 4)
        XCTAssertEqual(
            request.sources.map(\.url),
            ["https://origin.example/a.bin", "https://m1.example/a.bin", "https://m2.example/a.bin"])
        XCTAssertEqual(request.sources[0].headers, [HTTPHeader(name: "Authorization", value: "Bearer s3cret")])
        XCTAssertTrue(request.sources[0].secrets.contains("s3cret"), "a value from the environment is never shown")
        XCTAssertEqual(request.sources[1].headers, [])
        XCTAssertFalse(request.sources[1].secrets.contains("s3cret"))
        XCTAssertEqual(request.sources[2].headers, [HTTPHeader(name: "X-Mirror", value: "two")])
        XCTAssertEqual(request.expectedSize, 12)
        XCTAssertEqual(request.fileMode, 0o640)
        XCTAssertEqual(request.retries, 2)
        XCTAssertEqual(request.stallTimeout, 30)
    }

    func testTheCommandLineWinsOverTheManifestForTheURLOnly() {
        var options = SyncOptions()
        options.commandLineHeaders = [HeaderField(name: "authorization", value: TemplatedString(literal: "Bearer cli"))]
        options.retries = 0
        options.stallTimeout = 5
        options.transientStatuses = [404]
        var pinned = entry(headers: [HeaderField(name: "Authorization", value: token)])
        pinned.retryOn = [409]
        let request = options.request(for: pinned, id: 0, conditionalOn: nil)
        XCTAssertEqual(request.sources[0].headers.map(\.value), ["Bearer cli"], "one Authorization, the command line's")
        XCTAssertTrue(request.sources[0].secrets.contains("Bearer cli"))
        XCTAssertEqual(request.sources[1].headers, [])
        XCTAssertEqual(request.retries, 0)
        XCTAssertEqual(request.stallTimeout, 5)
        XCTAssertEqual(request.transientStatuses, [404, 409])
    }

    func testOnlyTheSourceThatDeliveredTheCopyIsAskedConditionally() {
        let origin = Origin(
            manifestKey: "haul.yaml", sourceKey: TransferSource.key("https://m1.example/a.bin"), etag: "\"v1\"")
        let request = SyncOptions().request(for: entry(), id: 0, conditionalOn: origin)
        XCTAssertEqual(request.sources.map { $0.conditional?.etag }, [nil, "\"v1\"", nil])
        XCTAssertEqual(
            SyncOptions().request(for: entry(), id: 0, conditionalOn: nil).sources.compactMap(\.conditional), [])
    }

    /// Who shares a download (`Sync.shareGroups`): entries whose first request would be the same (URL, headers, hash
    /// algorithm) share their first entry's; a revalidation and an archive never share; the order is the plan's.
    func testEntriesShareARequestOnlyWhenItWouldBeTheSameOne() {
        let header = [HeaderField(name: "X-A", value: TemplatedString(literal: "1"))]
        func pinned(_ index: Int, _ url: String, headers: [HeaderField] = [], extract: Bool = false) -> FileEntry {
            var file = FileEntry(
                index: index, url: TemplatedString(literal: url), mirrors: [],
                destination: DestinationPath("f\(index)")!,
                checksum: Checksum(
                    digest: StreamingHasher.digest(Array(url.utf8), algorithm: .sha256), notation: .hexKey),
                size: nil, mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: headers,
                location: SourceLocation(line: index + 1, column: 1))
            if extract { file.extract = ExtractRule() }
            return file
        }
        let files = [
            pinned(0, "https://h/a"), pinned(1, "https://h/a"), pinned(2, "https://h/a", headers: header),
            pinned(3, "https://h/a"), pinned(4, "https://h/a", extract: true), pinned(5, "https://h/b"),
            pinned(6, "https://h/a", headers: header), pinned(7, "https://h/a"),
        ]
        var actions = [Action](repeating: .fetch(.missing), count: files.count)
        actions[3] = .revalidate
        let plan = Plan(files: files, actions: actions)
        let groups = Sync.shareGroups(plan, fetches: Array(files.indices))
        XCTAssertEqual(groups.leaders, [0, 2, 3, 4, 5])
        XCTAssertEqual(groups.sharers, [0: [1, 7], 2: [6]])
        XCTAssertEqual(Sync.shareGroups(plan, fetches: [1, 5, 7]).sharers, [1: [7]], "only among the fetches given")
    }

    /// Asked once for every candidate, in plan order: fetches pinned by an algorithm the cache holds. A kept file,
    /// a revalidation, an unpinned entry and a weak digest are never asked about.
    func testTheCacheIsAskedOnlyAboutFetchesItCouldServe() {
        func file(_ index: Int, _ checksum: Checksum?) -> FileEntry {
            FileEntry(
                index: index, url: TemplatedString(literal: "https://h/\(index)"), mirrors: [],
                destination: DestinationPath("f\(index)")!, checksum: checksum, size: nil, mode: FileMode(0o644),
                retries: 0, timeout: Seconds(30), headers: [], location: SourceLocation(line: index + 1, column: 1))
        }
        let digests = (0..<6).map { StreamingHasher.digest([UInt8(truncatingIfNeeded: $0)], algorithm: .sha256) }
        let weak = Digest(algorithm: .md5, bytes: [UInt8](repeating: 1, count: 16))
        let files = [
            file(0, Checksum(digest: digests[0], notation: .hexKey)),
            file(1, Checksum(digest: digests[1], notation: .hexKey)),
            file(2, nil), file(3, Checksum(digest: digests[3], notation: .hexKey)),
            file(4, Checksum(digest: weak, notation: .prefixedHex)),
            file(5, Checksum(digest: digests[5], notation: .hexKey)),
        ]
        let plan = Plan(
            files: files,
            actions: [
                .fetch(.missing), .keep, .fetch(.missing), .revalidate, .fetch(.missing),
                .fetch(.sizeMismatch(local: 1, expected: 2)),
            ])
        var asked: [[Digest]] = []
        let hits = Sync.cacheHits(plan) { asking in
            asked.append(asking)
            return asking.map { $0 != asking.first }
        }
        XCTAssertEqual(asked, [[digests[0], digests[5]]])
        XCTAssertEqual(hits, [5])
    }
}
