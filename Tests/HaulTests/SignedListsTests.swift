import Foundation
import Glibc
@testable import Haul
import HaulDigest
import HaulManifest
import HaulSignature
import HaulStore
import HaulTestSupport
import Synchronization
import XCTest

/// The signed-list step against a real loopback server and lists signed here by minisign: digests pin the entries
/// only once the signature checks out; the copy kept in `.haul/lists` saves requests (304, freshness) and is the
/// mark an older list is told by.
final class SignedListsTests: XCTestCase {
    private final class Clock: Sendable {
        let now = Mutex<Double>(1_800_000_000)
    }

    private let clock = Clock()
    private var folder: TemporaryDirectory!
    private var root: TemporaryDirectory!
    private var files: StaticFiles!
    private var server: LoopbackHTTPServer!
    private var minisign = ""

    private let tool = Array("tool v1\n".utf8)
    private let toolV2 = Array("tool v2\n".utf8)

    override func setUpWithError() throws {
        minisign = try Capability.tool("minisign")
        folder = try TemporaryDirectory(prefix: "haul-lists")
        root = try TemporaryDirectory(prefix: "haul-lists-root")
        try run(["-G", "-W", "-p", "release.pub", "-s", "release.key"])
        try run(["-G", "-W", "-p", "other.pub", "-s", "other.key"])
        files = StaticFiles()
        server = try LoopbackHTTPServer(files: files)
        try publish([("tool.tar.gz", tool)], signedBy: "release.key")
    }

    override func tearDown() {
        server?.stop()
        server = nil
    }

    private func run(_ arguments: [String]) throws {
        let result = try ProcessRunner.run(minisign, arguments, currentDirectory: folder.path, timeout: 60)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
    }

    /// Writes the list of `entries`, signs it (`-t`: the trusted comment, minisign's own `timestamp:` otherwise) and
    /// serves both.
    private func publish(
        _ entries: [(String, [UInt8])], signedBy key: String, comment: String? = nil
    ) throws {
        let text = entries.map { "\(StreamingHasher.digest($0.1, algorithm: .sha256).hex)  \($0.0)\n" }.joined()
        try folder.write("SHA256SUMS", text)
        try run(["-S", "-s", key, "-m", "SHA256SUMS"] + (comment.map { ["-t", $0] } ?? []))
        files.set("/SHA256SUMS", try XCTUnwrap(folder.read("SHA256SUMS")))
        files.set("/SHA256SUMS.minisig", try XCTUnwrap(folder.read("SHA256SUMS.minisig")))
    }

    private func manifest(names: [String] = ["tool.tar.gz"], refresh: Double? = nil) throws -> Manifest {
        let entries = try names.enumerated().map { index, name in
            var entry = FileEntry(
                index: index, url: TemplatedString(literal: server.url("/\(name)")), mirrors: [],
                destination: try XCTUnwrap(DestinationPath(name)), checksum: nil, size: nil,
                mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: [],
                location: SourceLocation(line: 10 + index, column: 5))
            entry.listPin = ListPin(list: "release", name: name)
            return entry
        }
        var manifest = Manifest(
            sourcePath: root.path + "/haul.yaml", version: 1, root: root.path, prune: false, files: entries,
            warnings: [])
        manifest.lists = [
            SignedListSource(
                name: "release", url: TemplatedString(literal: server.url("/SHA256SUMS")), signature: .auto,
                keys: [ListKey(key: folder.path("release.pub"), isFile: true)], refresh: refresh.map(Seconds.init),
                location: SourceLocation(line: 3, column: 3))
        ]
        return manifest
    }

    /// One step as a sync takes it: the private folder made, the copies kept afterwards.
    private func pin(_ manifest: Manifest) throws -> SignedLists.Pins {
        var options = SyncOptions()
        options.wallClock = { [clock] in clock.now.withLock { $0 } }
        let area = try PrivateArea.create(root: root.path)
        let pins = SignedLists.pin(manifest, options: options, area: area)
        pins.save(in: area)
        return pins
    }

    private var listRequests: Int { server.requests.filter { $0.path == "/SHA256SUMS" }.count }

    func testAVerifiedListPinsItsEntries() throws {
        let pins = try pin(manifest())
        XCTAssertEqual(
            pins.manifest.files[0].checksum?.digest, StreamingHasher.digest(tool, algorithm: .sha256))
        guard case .success(let verified) = pins.outcomes.first?.result else {
            return XCTFail("\(String(describing: pins.outcomes.first?.result))")
        }
        XCTAssertEqual(verified.list.format, .minisign)
        XCTAssertEqual(verified.signatureURL, server.url("/SHA256SUMS.minisig"))
        XCTAssertTrue(pins.unverified.isEmpty)
    }

    /// The list changed after it was signed: nothing is pinned, and the failure says why.
    func testATamperedListPinsNothing() throws {
        files.set("/SHA256SUMS", Array("\(StreamingHasher.digest(toolV2, algorithm: .sha256).hex)  tool.tar.gz\n".utf8))
        let pins = try pin(manifest())
        XCTAssertNil(pins.manifest.files[0].checksum, "no digest from a list whose signature fails")
        XCTAssertEqual(pins.unverified, ["release"])
        guard case .failure(.refused(.rejected(.messageMismatch), _)) = pins.outcomes.first?.result else {
            return XCTFail("\(String(describing: pins.outcomes.first?.result))")
        }
    }

    /// Signed by a key the manifest does not trust.
    func testAListSignedByAnotherKeyPinsNothing() throws {
        try publish([("tool.tar.gz", toolV2)], signedBy: "other.key")
        let pins = try pin(manifest())
        XCTAssertNil(pins.manifest.files[0].checksum)
        guard case .failure(.refused(.rejected(.signedByAnotherKey), _)) = pins.outcomes.first?.result else {
            return XCTFail("\(String(describing: pins.outcomes.first?.result))")
        }
    }

    /// `signature: auto` goes past a missing `.minisig` to `.sig`; with none of the four, it names them.
    func testAutoFindsTheSignatureBesideTheListOrNamesTheOnesTried() throws {
        let signature = try XCTUnwrap(files.contents("/SHA256SUMS.minisig"))
        files.remove("/SHA256SUMS.minisig")
        files.set("/SHA256SUMS.sig", signature)
        guard case .success(let verified) = try pin(manifest()).outcomes.first?.result else {
            return XCTFail("the .sig beside the list should be found")
        }
        XCTAssertEqual(verified.signatureURL, server.url("/SHA256SUMS.sig"))
        files.remove("/SHA256SUMS.sig")
        clock.now.withLock { $0 += 3600 }
        files.set("/SHA256SUMS", Array("changed\n".utf8))
        guard case .failure(.noSignature(let tried)) = try pin(manifest()).outcomes.first?.result else {
            return XCTFail("no signature at all must fail")
        }
        XCTAssertEqual(tried, [".minisig", ".sig", ".asc", ".gpg"].map { server.url("/SHA256SUMS" + $0) })
    }

    /// The kept copy makes the next request conditional (a 304 costs no new signature check against the server),
    /// and within `refresh:` there is no request at all.
    func testTheKeptCopySavesRequests() throws {
        _ = try pin(manifest(refresh: 600))
        XCTAssertEqual(listRequests, 1)
        clock.now.withLock { $0 += 599 }
        let fresh = try pin(manifest(refresh: 600))
        XCTAssertEqual(listRequests, 1, "no request while the copy is fresh")
        XCTAssertNotNil(fresh.manifest.files[0].checksum, "pinned from the kept copy")
        clock.now.withLock { $0 += 2 }
        let confirmed = try pin(manifest(refresh: 600))
        XCTAssertEqual(listRequests, 2)
        XCTAssertNotNil(server.requests.last { $0.path == "/SHA256SUMS" }?.header("If-None-Match"))
        guard case .success(let verified) = confirmed.outcomes.first?.result else { return XCTFail("304") }
        XCTAssertTrue(verified.requested)
        XCTAssertFalse(verified.changed)
        XCTAssertEqual(
            server.requests.filter { $0.path == "/SHA256SUMS.minisig" }.count, 1, "a 304 fetches no signature")
    }

    /// A new list is taken, and says which entries it changed.
    func testANewListPinsTheNewDigestAndSaysWhichEntriesChanged() throws {
        try publish([("tool.tar.gz", tool), ("docs.tar.gz", tool)], signedBy: "release.key")
        _ = try pin(manifest(names: ["tool.tar.gz", "docs.tar.gz"]))
        try publish([("tool.tar.gz", toolV2), ("docs.tar.gz", tool)], signedBy: "release.key")
        let pins = try pin(manifest(names: ["tool.tar.gz", "docs.tar.gz"]))
        XCTAssertEqual(pins.manifest.files[0].checksum?.digest, StreamingHasher.digest(toolV2, algorithm: .sha256))
        XCTAssertEqual(pins.changed, [try XCTUnwrap(DestinationPath("tool.tar.gz"))])
    }

    /// An older list, validly signed, served again after a newer one was verified: refused by its signing time.
    func testAnOlderListServedAgainIsRefused() throws {
        try publish([("tool.tar.gz", tool)], signedBy: "release.key", comment: "timestamp:1700000000 file:SHA256SUMS")
        let old = (try XCTUnwrap(files.contents("/SHA256SUMS")), try XCTUnwrap(files.contents("/SHA256SUMS.minisig")))
        try publish([("tool.tar.gz", toolV2)], signedBy: "release.key", comment: "timestamp:1700000100 file:SHA256SUMS")
        XCTAssertNotNil(try pin(manifest()).manifest.files[0].checksum)
        files.set("/SHA256SUMS", old.0)
        files.set("/SHA256SUMS.minisig", old.1)
        let replayed = try pin(manifest())
        XCTAssertNil(replayed.manifest.files[0].checksum, "the replayed list pins nothing")
        guard case .failure(.older(1_700_000_000, 1_700_000_100)) = replayed.outcomes.first?.result else {
            return XCTFail("\(String(describing: replayed.outcomes.first?.result))")
        }
    }

    /// OpenPGP through the system's verifier, the list written where it can read it: a detached `.asc` found by
    /// `auto` after the others are missing, and a clear-signed list, of which only the signed text is read (a line
    /// added outside it pins nothing).
    func testOpenPGPListsDetachedAndClearSigned() throws {
        let gpg = try Capability.tool("gpg")
        _ = try Capability.tool("gpgv")
        let home = folder.path("gnupg")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        chmod(home, 0o700)
        defer { _ = try? ProcessRunner.run("gpgconf", ["--kill", "gpg-agent"], environment: ["GNUPGHOME": home]) }
        func run(_ arguments: [String]) throws {
            let result = try ProcessRunner.run(
                gpg, ["--batch", "--quiet", "--yes", "--passphrase", ""] + arguments, environment: ["GNUPGHOME": home],
                currentDirectory: folder.path, timeout: 60)
            XCTAssertEqual(result.exitCode, 0, result.stderr)
        }
        try run(["--quick-gen-key", "release <release@haul.invalid>", "ed25519", "sign", "never"])
        try run(["--output", "release.gpg", "--export", "release@haul.invalid"])
        try run(["--armor", "--detach-sign", "--output", "SHA256SUMS.asc", "SHA256SUMS"])
        files.remove("/SHA256SUMS.minisig")
        files.set("/SHA256SUMS.asc", try XCTUnwrap(folder.read("SHA256SUMS.asc")))
        var manifest = try manifest()
        manifest.lists[0].keys = [ListKey(key: folder.path("release.gpg"), isFile: true)]
        let detached = try pin(manifest)
        guard case .success(let verified) = detached.outcomes.first?.result else {
            return XCTFail("\(String(describing: detached.outcomes.first?.result))")
        }
        XCTAssertEqual(verified.list.format, .openPGP)
        XCTAssertEqual(verified.signatureURL, server.url("/SHA256SUMS.asc"))
        XCTAssertEqual(detached.manifest.files[0].checksum?.digest, StreamingHasher.digest(tool, algorithm: .sha256))

        try run(["--clearsign", "--output", "SHA256SUMS.clear", "SHA256SUMS"])
        let forged = "\(StreamingHasher.digest(toolV2, algorithm: .sha256).hex)  tool.tar.gz\n"
        files.set("/SHA256SUMS", Array(forged.utf8) + (try XCTUnwrap(folder.read("SHA256SUMS.clear"))))
        clock.now.withLock { $0 += 3600 }
        let clear = try pin(manifest)
        guard case .success(let clearSigned) = clear.outcomes.first?.result else {
            return XCTFail("\(String(describing: clear.outcomes.first?.result))")
        }
        XCTAssertNil(clearSigned.signatureURL, "a clear-signed list has no signature file")
        XCTAssertEqual(
            clear.manifest.files[0].checksum?.digest, StreamingHasher.digest(tool, algorithm: .sha256),
            "the line outside the signed text is not read")
    }

    /// The project's other list, signed by the same key, swapped in at this URL: it names none of these files, so
    /// nothing is pinned from it (the planner refuses the entries as not in the list).
    func testAListSwappedForAnotherOfTheSameKeyPinsNothingItDoesNotName() throws {
        try publish([("other-product.tar.gz", toolV2)], signedBy: "release.key")
        let pins = try pin(manifest())
        XCTAssertTrue(pins.unverified.isEmpty, "the signature is good")
        XCTAssertNil(pins.manifest.files[0].checksum, "but it does not name tool.tar.gz")
    }
}
