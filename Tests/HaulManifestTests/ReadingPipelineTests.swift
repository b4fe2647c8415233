@testable import HaulManifest
import XCTest

/// Large manifests read with libyaml on a second thread (`ReadingPipeline`) against the same bytes read on one:
/// items cross over in batches, so these manifests span several batches and put their findings on both sides of
/// batch boundaries. (Every small manifest of the other tests is read both ways too, by `Fixture.load`.)
final class ReadingPipelineTests: XCTestCase {
    private static let entryCount = 4 * YAMLReader.batchSize + 37

    /// `entryCount` valid entries, entry `i` given by `line(i)` when it returns one.
    private static func manifest(
        head: String = "version: 1\nfiles:\n", tail: String = "",
        line: (Int) -> String? = { _ in nil }
    ) -> [UInt8] {
        var text = head
        for index in 0..<entryCount {
            text +=
                line(index) ?? """
                      - url: "https://example.com/assets/\(index).bin"
                        dest: "assets/\(index / 100)/\(index).bin"
                        sha256: \(String(format: "%064x", index))
                        size: \(index)

                    """
        }
        return Array((text + tail).utf8)
    }

    private func assertSameEitherWay(
        _ bytes: [UInt8], file: StaticString = #filePath,
        line: UInt = #line
    ) -> Fixture.Reading {
        let single = Fixture.Reading(bytes, pipelined: false)
        let pipelined = Fixture.Reading(bytes, pipelined: true)
        XCTAssertEqual(single.account, pipelined.account, file: file, line: line)
        return pipelined
    }

    func testAValidManifestReadsTheSameAndInOrder() throws {
        let bytes = Self.manifest()
        let reading = assertSameEitherWay(bytes)
        let manifest = try reading.result.get()
        // Large enough that the public entry point pipelines it too.
        XCTAssertGreaterThanOrEqual(bytes.count, ReadingPipeline.minimumBytes)
        let byDefault = try ManifestLoader.parse(
            bytes: bytes, fileName: Fixture.fileName,
            manifestDirectory: Fixture.directory, environment: [:])
        XCTAssertEqual(String(reflecting: byDefault), String(reflecting: manifest))
        XCTAssertEqual(manifest.files.count, Self.entryCount)
        XCTAssertEqual(manifest.files.last?.size, Int64(Self.entryCount - 1))
        XCTAssertEqual(
            manifest.files.map(\.destination.description), (0..<Self.entryCount).map { "assets/\($0 / 100)/\($0).bin" })
    }

    /// What a sync's head start is told while the manifest is read (`EarlyEntries`): each entry valid on its own,
    /// once, in order, a batch at a time, before the manifest as a whole is judged (an invalid one included: the
    /// caller must put nothing in place until it is); and nothing more once the handler declines.
    func testEarlyEntriesComeInOrderBeforeTheManifestIsJudged() throws {
        let broken = 5
        let bytes = Self.manifest { $0 == broken ? "  - {url: \"https://example.com/x\", dest: ../x}\n" : nil }
        for pipelined in [false, true] {
            var batches: [[FileEntry]] = []
            XCTAssertThrowsError(
                try ManifestLoader.parse(
                    bytes: bytes, fileName: Fixture.fileName, manifestDirectory: Fixture.directory,
                    environment: [:], pipelined: pipelined
                ) {
                    batches.append($0)
                    return true
                })
            XCTAssertGreaterThan(batches.count, 1, "\(pipelined)")
            XCTAssertEqual(batches.joined().map(\.index), (0..<Self.entryCount).filter { $0 != broken })
            XCTAssertEqual(
                batches.joined().map(\.destination.description),
                (0..<Self.entryCount).filter { $0 != broken }.map { "assets/\($0 / 100)/\($0).bin" })

            var offers = 0
            _ = try? ManifestLoader.parse(
                bytes: bytes, fileName: Fixture.fileName, manifestDirectory: Fixture.directory,
                environment: [:], pipelined: pipelined
            ) { _ in
                offers += 1
                return false
            }
            XCTAssertEqual(offers, 1, "\(pipelined)")
        }
    }

    func testTopLevelKeysAfterTheEntriesStillCount() throws {
        let bytes = Self.manifest(head: "files:\n", tail: "root: out\nversion: 1\ndefaults: {retries: 7}\n")
        let manifest = try assertSameEitherWay(bytes).result.get()
        XCTAssertEqual(manifest.root, Fixture.directory + "/out")
        XCTAssertEqual(manifest.files.map(\.retries), Array(repeating: 7, count: Self.entryCount))
    }

    func testFindingsAcrossBatchesAreAllReportedInFileOrder() {
        let edges = [0, YAMLReader.batchSize - 1, YAMLReader.batchSize, Self.entryCount - 1]
        let bytes = Self.manifest(tail: "extra: &anchor 1\n") { index in
            guard edges.contains(index) else { return nil }
            return index % 2 == 0
                ? "  - {url: \"ftp://x/\(index)\", dest: \"d\(index)\"}\n"
                : "  - {url: *alias, dest: \"../d\(index)\"}\n"
        }
        let reading = assertSameEitherWay(bytes)
        guard case .failure(let error) = reading.result else { return XCTFail("loaded an invalid manifest") }
        let messages = error.diagnostics.map(\.description)
        // Per edge entry: a bad scheme, or an alias and an escaping destination; then the extra key and its anchor.
        XCTAssertEqual(messages.count, 7, messages.joined(separator: "\n"))
        let lines = error.diagnostics.compactMap { $0.location?.line }
        XCTAssertEqual(lines, lines.sorted(), "file order")
        XCTAssertTrue(messages.first?.contains("files[0].url") == true, messages.joined(separator: "\n"))
        XCTAssertTrue(messages.contains { $0.contains("files[\(YAMLReader.batchSize - 1)].dest") })
        XCTAssertTrue(messages.contains { $0.contains("files[\(YAMLReader.batchSize)].url") })
        XCTAssertTrue(messages.contains { $0.contains("files[\(Self.entryCount - 1)].url") })
        XCTAssertTrue(messages.contains { $0.contains("alias \"*alias\"") })
        XCTAssertTrue(messages.last?.contains("anchor \"&anchor\"") == true, messages.joined(separator: "\n"))
    }

    func testASyntaxErrorLateInTheFileIsTheOnlyFinding() {
        let bytes = Self.manifest(tail: "  - {url: [\n") { index in
            index == 3 ? "  - {url: \"ftp://x\", dest: d}\n" : nil
        }
        let reading = assertSameEitherWay(bytes)
        guard case .failure(let error) = reading.result else { return XCTFail("loaded an invalid manifest") }
        XCTAssertEqual(error.diagnostics.count, 1)
        XCTAssertTrue(
            error.diagnostics[0].message.contains("did not find expected node content"),
            error.diagnostics[0].description)
    }
}
