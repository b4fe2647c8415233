import HaulDigest
import HaulEngine
import HaulManifest
import HaulTestSupport
import XCTest
@testable import Haul

/// `haul add`'s step as values: what the manifest's text becomes, which entries are new, the same or changed, and
/// what each is pinned to, against real manifests in a temporary folder and a loopback server where a download is
/// part of it.
final class PinningTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private let hello = Array("hello\n".utf8)
    /// `sha256sum` of "hello\n", as the shell prints it.
    private let helloHex = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    private let oldHex = String(repeating: "ab", count: 32)
    private let newHex = String(repeating: "cd", count: 32)
    /// Never contacted: the URLs of entries a test only edits.
    private let unused = "http://127.0.0.1:9"

    private var reading: ManifestReading { ManifestReading(fileName: directory.path + "/haul.yaml", environment: [:]) }

    private func pinning(
        _ source: PinningRequest.Source, given: (digest: Digest, size: Int64?)? = nil,
        repinsChangedListEntries: Bool = false
    ) -> Pinning {
        Pinning(
            PinningRequest(source: source, given: given, repinsChangedListEntries: repinsChangedListEntries),
            reading: reading)
    }

    private func draft(_ url: String, dest: String? = nil) throws -> EntryDraft {
        try EntryDraft(url: url, destination: dest, environment: [:])
    }

    private func digest(_ hex: String) throws -> Digest { try XCTUnwrap(Digest(algorithm: .sha256, hex: hex)) }

    private func text(_ bytes: [UInt8]?) -> String {
        bytes.map { String(decoding: $0, as: UTF8.self) } ?? "(unchanged)"
    }

    private func failure(_ body: () throws -> Void) -> PinningFailure? {
        do {
            try body()
            return nil
        } catch {
            return error as? PinningFailure
        }
    }

    // MARK: URLs

    func testAURLIsDownloadedOnceAndAppendedAfterTheLastEntryInTheManifestsOwnLayout() throws {
        let server = try LoopbackHTTPServer(files: ["/tool.txt": hello])
        defer { server.stop() }
        let original = Array(
            """
            version: 1
            root: out
            files:
              - url: \(unused)/a.txt
                dest: a.txt   # first
                sha256: \(oldHex)

            """.utf8)
        let pinning = pinning(.urls([try draft(server.url("/tool.txt"))]))

        let preparation = try pinning.prepare(original)
        XCTAssertTrue(preparation.notices.isEmpty)
        XCTAssertFalse(preparation.wantsNetrc)
        XCTAssertTrue(server.requests.isEmpty, "the trial edit fetches nothing")

        let entries = try pinning.measure(options: SyncOptions(), keepingIn: nil, cancellation: nil, notices: { _ in })
        XCTAssertEqual(server.requests.map(\.path), ["/tool.txt"])
        let outcome = try pinning.adding(pinning.sort(entries, against: original), to: original)

        XCTAssertEqual(
            outcome.files,
            [
                PinnedFile(
                    index: 1, destination: "tool.txt", url: server.url("/tool.txt"),
                    digest: try digest(helloHex), size: 6, measuredSize: 6, tree: nil,
                    result: .added, line: 7, previous: nil)
            ])
        XCTAssertEqual(
            text(outcome.manifest.bytes),
            text(original) + """
                  - url: \(server.url("/tool.txt"))
                    dest: tool.txt
                    sha256: \(helloHex)
                    size: 6

                """)
        XCTAssertEqual(outcome.manifest.manifest?.files.count, 2)
        XCTAssertEqual(outcome.placing, ["tool.txt"])
        XCTAssertFalse(outcome.created)
    }

    func testAMissingManifestIsCreatedAroundTheEntryPinnedByTheDigestGivenWithoutARequest() throws {
        let server = try LoopbackHTTPServer(files: ["/tool.txt": hello])
        defer { server.stop() }
        let pinning = pinning(
            .urls([try draft(server.url("/tool.txt"), dest: "bin/tool")]), given: (try digest(helloHex), 6))

        _ = try pinning.prepare(nil)
        let entries = try pinning.measure(options: SyncOptions(), keepingIn: nil, cancellation: nil, notices: { _ in })
        XCTAssertTrue(server.requests.isEmpty, "a digest and a size given: nothing to ask the server")
        let outcome = try pinning.adding(pinning.sort(entries, against: nil), to: nil)

        XCTAssertTrue(outcome.created)
        XCTAssertEqual(outcome.files.map(\.result), [.added])
        XCTAssertEqual(outcome.files.first?.index, 0)
        let written = try XCTUnwrap(outcome.manifest.manifest)
        XCTAssertEqual(written.files.first?.destination.description, "bin/tool")
        XCTAssertEqual(written.files.first?.checksum?.digest, try digest(helloHex))
        XCTAssertEqual(written.files.first?.size, 6)
        XCTAssertTrue(
            text(outcome.manifest.bytes).contains("sha256: \(helloHex)\n    size: 6\n"), text(outcome.manifest.bytes))
    }

    func testTheTrialWarnsOfAURLAlreadyFetchedAndRefusesATakenOrRepeatedDestinationBeforeAnyDownload() throws {
        let original = Array(
            """
            version: 1
            root: out
            files:
              - url: \(unused)/a.txt
                dest: a.txt
                sha256: \(oldHex)

            """.utf8)

        let copy = try pinning(.urls([try draft("\(unused)/a.txt", dest: "copy.txt")])).prepare(original)
        guard case .urlAlreadyListed(let url, let listed)? = copy.notices.first, copy.notices.count == 1 else {
            return XCTFail("expected one notice of the URL already listed: \(copy.notices)")
        }
        XCTAssertEqual(url, "\(unused)/a.txt")
        XCTAssertEqual(listed.index, 0)
        XCTAssertEqual(listed.destination, "a.txt")
        XCTAssertEqual(listed.location.line, 4)

        let taken = failure { _ = try pinning(.urls([try draft("\(unused)/b.txt", dest: "a.txt")])).prepare(original) }
        guard case .destinationTaken(_, let destination)? = taken else {
            return XCTFail("expected the destination taken: \(String(describing: taken))")
        }
        XCTAssertEqual(destination, "a.txt")
        XCTAssertEqual(taken?.exitStatus, .invalidManifest)

        let twice = failure {
            _ = try pinning(.urls([try draft("\(unused)/x/b.txt"), try draft("\(unused)/y/b.txt")])).prepare(original)
        }
        guard case .destinationRepeated(0, 1, let urls, "b.txt")? = twice else {
            return XCTFail("expected the destination repeated: \(String(describing: twice))")
        }
        XCTAssertEqual(urls.0, "\(unused)/x/b.txt")
        XCTAssertEqual(urls.1, "\(unused)/y/b.txt")
    }

    // MARK: Checksum lists

    /// a.txt pinned as the list says, b.txt to an older digest, c.txt not at all.
    private func releaseManifest(bSize: String = "") -> [UInt8] {
        Array(
            """
            version: 1
            root: out
            files:
              - url: \(unused)/v1/a.txt
                dest: a.txt
                sha256: \(helloHex)
              - url: \(unused)/v1/b.txt
                dest: b.txt
                sha256: \(oldHex)   # pinned by hand\(bSize)

            """.utf8)
    }

    private var list: String { "\(helloHex)  a.txt\n\(newHex)  b.txt\n\(newHex)  c.txt\n" }

    func testAListIsFetchedAndItsEntriesSelectedByGlobAndPlacedInTheFolderAsked() throws {
        let server = try LoopbackHTTPServer(files: ["/v1/SHA256SUMS": Array(list.utf8)])
        defer { server.stop() }
        let sums = try draft(server.url("/v1/SHA256SUMS"), dest: "list")

        let every = pinning(.checksumList(sums, matching: [], folder: nil))
        let bytes = try every.fetchList(options: SyncOptions(), cancellation: nil, notices: { _ in })
        XCTAssertEqual(bytes, Array(list.utf8))
        XCTAssertEqual(try every.listedEntries(bytes).map(\.destination), ["a.txt", "b.txt", "c.txt"])
        XCTAssertEqual(
            try every.listedEntries(bytes).map(\.url), ["/v1/a.txt", "/v1/b.txt", "/v1/c.txt"].map(server.url))
        XCTAssertEqual(try every.listedEntries(bytes).map(\.size), [nil, nil, nil])

        let matched = pinning(.checksumList(sums, matching: ["[ab].txt"], folder: "vendor/"))
        XCTAssertEqual(try matched.listedEntries(bytes).map(\.destination), ["vendor/a.txt", "vendor/b.txt"])

        let none = failure {
            _ = try self.pinning(.checksumList(sums, matching: ["*.zip"], folder: nil)).listedEntries(bytes)
        }
        guard case .nothingMatches(_, ["*.zip"])? = none else {
            return XCTFail("expected nothing to match: \(String(describing: none))")
        }
        XCTAssertEqual(none?.exitStatus, .usage)

        let outside = failure {
            _ = try self.pinning(.checksumList(sums, matching: [], folder: "../")).listedEntries(bytes)
        }
        guard case .notADestination("../", "../a.txt")? = outside else {
            return XCTFail("expected no destination outside the root: \(String(describing: outside))")
        }

        let malformed = failure { _ = try every.listedEntries(Array("not a checksum\n".utf8)) }
        guard case .checksumList(let error)? = malformed else {
            return XCTFail("expected the list refused: \(String(describing: malformed))")
        }
        XCTAssertEqual(error.line, 1)
    }

    func testAListAddedAgainLeavesTheSameAloneAndRefusesAChangedDigestUnlessAsked() throws {
        let original = releaseManifest()
        let sums = try draft("\(unused)/v1/SHA256SUMS", dest: "list")
        let entries = try pinning(.checksumList(sums, matching: [], folder: nil)).listedEntries(Array(list.utf8))

        let refused = failure {
            _ = try self.pinning(.checksumList(sums, matching: [], folder: nil)).sort(entries, against: original)
        }
        guard case .listedDigestsChanged(let changed)? = refused, let only = changed.first, changed.count == 1 else {
            return XCTFail("expected b.txt's changed digest refused: \(String(describing: refused))")
        }
        XCTAssertEqual(only.entry.index, 1)
        XCTAssertEqual(only.entry.destination, "b.txt")
        XCTAssertEqual(only.entry.location.line, 7)
        XCTAssertEqual(only.was, try digest(oldHex))
        XCTAssertEqual(only.now, try digest(newHex))

        let repinning = pinning(.checksumList(sums, matching: [], folder: nil), repinsChangedListEntries: true)
        let sorting = try repinning.sort(entries, against: original)
        XCTAssertEqual(sorting.unchanged.map(\.destination), ["a.txt"])
        XCTAssertEqual(sorting.changed.map(\.entry.index), [1])
        XCTAssertEqual(sorting.new.map(\.destination), ["c.txt"])

        let outcome = try repinning.adding(sorting, to: original)
        XCTAssertEqual(outcome.files.map(\.result), [.unchanged, .updated, .added])
        XCTAssertEqual(outcome.files.map(\.index), [0, 1, 2])
        XCTAssertEqual(outcome.files[1].previous, PinnedFile.PreviousPin(digest: try digest(oldHex), tree: nil))
        XCTAssertEqual(outcome.files[1].line, 7)
        XCTAssertEqual(outcome.placing, ["c.txt"], "only a new entry is put in place")
        XCTAssertEqual(
            text(outcome.manifest.bytes),
            text(original).replacing(oldHex, with: newHex) + """
                  - url: \(unused)/v1/c.txt
                    dest: c.txt
                    sha256: \(newHex)

                """)
    }

    func testAListAddedAgainWithNothingNewChangesNothingAndAChangedEntryWithASizeIsRefused() throws {
        let sums = try draft("\(unused)/v1/SHA256SUMS", dest: "list")
        let onlyA = pinning(.checksumList(sums, matching: ["a.txt"], folder: nil))
        let original = releaseManifest()
        let outcome = try onlyA.adding(
            onlyA.sort(try onlyA.listedEntries(Array(list.utf8)), against: original), to: original)
        XCTAssertNil(outcome.manifest.bytes)
        XCTAssertEqual(outcome.files.map(\.destination), ["a.txt"])
        XCTAssertEqual(outcome.files.map(\.result), [.unchanged])

        let sized = releaseManifest(bSize: "\n    size: 3")
        let repinning = pinning(.checksumList(sums, matching: [], folder: nil), repinsChangedListEntries: true)
        let refused = failure {
            _ = try repinning.sort(try repinning.listedEntries(Array(self.list.utf8)), against: sized)
        }
        guard case .listedEntriesPinSizes(let entries)? = refused else {
            return XCTFail("expected b.txt's size refused: \(String(describing: refused))")
        }
        XCTAssertEqual(entries.map(\.destination), ["b.txt"])
    }

    // MARK: Updates

    /// a.bin pinned with a size, b.bin without one, c.bin unpinned; the server serves `hello` for a and b.
    private func pinnedManifest(_ server: LoopbackHTTPServer) -> [UInt8] {
        Array(
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/a.bin"))
                dest: a.bin
                sha256: \(oldHex)   # keep this comment
                size: 3
              - url: \(server.url("/b.bin"))
                dest: b.bin
                sha256: \(helloHex)
              - url: \(server.url("/c.bin"))
                dest: c.bin

            """.utf8)
    }

    func testUpdateAllDownloadsEveryPinnedEntryAndRewritesOnlyTheChangedPinWhereItStands() throws {
        let server = try LoopbackHTTPServer(files: ["/a.bin": hello, "/b.bin": hello, "/c.bin": hello])
        defer { server.stop() }
        let original = pinnedManifest(server)
        let pinning = pinning(.entries(nil))

        let targets = try pinning.targets(original)
        XCTAssertEqual(targets.indices, [0, 1], "c.bin has no checksum to update")
        let repins = try pinning.repin(
            targets, options: SyncOptions(), keepingIn: nil, cancellation: nil, notices: { _ in })
        XCTAssertEqual(Set(server.requests.map(\.path)), ["/a.bin", "/b.bin"])
        XCTAssertEqual(
            repins,
            [
                Pinning.Repin(index: 0, digest: try digest(helloHex), size: 6, tree: nil),
                Pinning.Repin(index: 1, digest: try digest(helloHex), size: 6, tree: nil),
            ])

        let outcome = try pinning.updating(with: repins, of: targets)
        XCTAssertEqual(outcome.files.map(\.destination), ["b.bin", "a.bin"])
        XCTAssertEqual(
            outcome.files.map(\.result), [.unchanged, .updated], "--update-all adds no size to an entry without one")
        XCTAssertEqual(outcome.files[1].previous, PinnedFile.PreviousPin(digest: try digest(oldHex), tree: nil))
        XCTAssertEqual(outcome.files[1].line, 4)
        XCTAssertEqual(outcome.placing, ["a.bin", "b.bin"])
        XCTAssertEqual(
            text(outcome.manifest.bytes),
            text(original)
                .replacing(
                    "sha256: \(oldHex)   # keep this comment\n    size: 3\n",
                    with: "sha256: \(helloHex)   # keep this comment\n    size: 6\n"))
    }

    /// An entry that takes its digest from a signed list (`from:`) has no pin of its own: naming it for update is
    /// refused before anything is downloaded (a checksum written beside `from:` would not load), and `--update-all`
    /// passes it by.
    func testAnUpdateRefusesAnEntryWhoseDigestASignedListGives() throws {
        let original = Array(
            """
            version: 1
            lists:
              nightly: {url: "\(unused)/SHA256SUMS", keys: [keys/release.pub]}
            files:
              - url: \(unused)/a.bin
                dest: a.bin
                sha256: \(oldHex)
              - url: \(unused)/tool.tgz
                dest: tool.tgz
                from: nightly

            """.utf8)
        let refused = failure { _ = try self.pinning(.entries(["a.bin", "tool.tgz"])).targets(original) }
        guard case .pinnedByList(let listed)? = refused else {
            return XCTFail("expected tool.tgz refused: \(String(describing: refused))")
        }
        XCTAssertEqual(listed.map(\.entry.destination), ["tool.tgz"])
        XCTAssertEqual(listed.map(\.entry.index), [1])
        XCTAssertEqual(listed.map(\.entry.location.line), [8])
        XCTAssertEqual(listed.map(\.list), ["nightly"])
        XCTAssertEqual(refused?.exitStatus, .usage)
        XCTAssertEqual(
            try pinning(.entries(nil)).targets(original).indices, [0], "--update-all: the pinned entry alone")
    }

    func testANamedUpdateAddsTheSizeItLacksAndUnknownNamesOrAFailedDownloadStopBeforeAnyEdit() throws {
        let server = try LoopbackHTTPServer(files: ["/b.bin": hello])
        defer { server.stop() }
        let original = pinnedManifest(server)

        let named = pinning(.entries(["./b.bin", "b.bin"]))
        let targets = try named.targets(original)
        XCTAssertEqual(targets.indices, [1], "one entry, however it is named")
        let repins = [Pinning.Repin(index: 1, digest: try digest(helloHex), size: 6, tree: nil)]
        XCTAssertEqual(named.unchanged(repins, of: targets), [])
        let outcome = try named.updating(with: repins, of: targets)
        XCTAssertEqual(outcome.files.map(\.result), [.updated])
        XCTAssertEqual(outcome.manifest.manifest?.files[1].size, 6)

        let unknown = failure { _ = try self.pinning(.entries(["b.bin", "nope.bin"])).targets(original) }
        guard case .noSuchEntries(["nope.bin"])? = unknown else {
            return XCTFail("expected nope.bin unknown: \(String(describing: unknown))")
        }
        XCTAssertEqual(unknown?.exitStatus, .usage)

        guard case .noManifest? = failure({ _ = try named.targets(nil) }) else {
            return XCTFail("expected no manifest to update")
        }

        let onlyA = pinning(.entries(["a.bin"]))
        let unserved = try onlyA.targets(original)
        do throws(RepinFailure) {
            _ = try onlyA.repin(unserved, options: SyncOptions(), keepingIn: nil, cancellation: nil, notices: { _ in })
            XCTFail("a.bin is not served")
        } catch {
            XCTAssertEqual(error.entry.index, 0)
            XCTAssertEqual(error.entry.destination, "a.bin")
            guard case .transfer = error.failure else {
                return XCTFail("expected the transfer to fail: \(error.failure)")
            }
        }
    }
}
