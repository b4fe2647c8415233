import Glibc
@testable import Haul
import HaulDigest
import HaulFailures
import HaulManifest
import HaulPlanner
import HaulStore
import HaulTestSupport
import XCTest

/// The observe step on real files: what the state may vouch for and what must be read, and the run lock held
/// from before anything is read.
final class ObservationTests: XCTestCase {
    private func digest(_ text: String) -> Digest { StreamingHasher.digest(Array(text.utf8), algorithm: .sha256) }

    private func manifest(_ destinations: [String], root: String, unpinned: Set<String> = []) throws -> Manifest {
        let files = try destinations.enumerated().map { index, destination in
            FileEntry(
                index: index, url: TemplatedString(literal: "http://127.0.0.1:1/\(destination)"), mirrors: [],
                destination: try XCTUnwrap(DestinationPath(destination)),
                checksum: unpinned.contains(destination)
                    ? nil : Checksum(digest: digest("content of \(destination)"), notation: .hexKey),
                size: nil, mode: FileMode(0o644), retries: 0, timeout: Seconds(30), headers: [],
                location: SourceLocation(line: index + 4, column: 5))
        }
        return Manifest(
            sourcePath: root + "/haul.yaml", version: 1, root: root, prune: false, files: files, warnings: [])
    }

    /// A state whose record of each of `paths` has the file's identity now and, on purpose, a digest of other
    /// bytes: a file reported with that digest was taken from the state, not read.
    private func recordFalsely(_ paths: [String], in directory: TemporaryDirectory) throws {
        var records: [DestinationKey: StateRecord] = [:]
        for path in paths {
            let identity = try XCTUnwrap(FileIdentity.of(path: directory.path(path)), path)
            records[DestinationKey(path)] = StateRecord(identity: identity, digest: digest("recorded \(path)"))
        }
        // The state must be written later than the files' times for its records to count (racy-clean rule).
        FileClock.waitForATick()
        try StateCache(records: records).save(in: PrivateArea.create(root: directory.path))
    }

    func testTheStateVouchesOnlyForFilesExactlyAsRecordedAndTheRestIsRead() throws {
        let directory = try TemporaryDirectory()
        let names = ["same.bin", "touched.bin", "gone.bin", "now-a-dir.bin", "unpinned.bin", "new.bin"]
        for name in names { try directory.write(name, "content of \(name)") }
        try recordFalsely(["same.bin", "touched.bin", "gone.bin", "now-a-dir.bin", "unpinned.bin"], in: directory)
        try directory.write("touched.bin", "content of touched.bin")
        XCTAssertEqual(unlink(directory.path("gone.bin")), 0)
        XCTAssertEqual(unlink(directory.path("now-a-dir.bin")), 0)
        XCTAssertEqual(mkdir(directory.path("now-a-dir.bin"), 0o755), 0)
        let manifest = try manifest(names, root: directory.path, unpinned: ["unpinned.bin"])

        let observed = try Observation(of: manifest, access: .lookingOnly)
        let size = Int64("content of same.bin".utf8.count)
        XCTAssertEqual(
            observed.states,
            [
                .file(size: size, digest: digest("recorded same.bin")),
                .file(size: Int64("content of touched.bin".utf8.count), digest: digest("content of touched.bin")),
                .missing,
                .obstructed(.inTheWay(.directory)),
                .file(size: Int64("content of unpinned.bin".utf8.count), digest: nil),
                .file(size: Int64("content of new.bin".utf8.count), digest: digest("content of new.bin")),
            ])
        XCTAssertEqual(observed.vouched, [true, false, false, false, true, false])
        XCTAssertEqual(observed.found.keys.sorted(), [1, 5], "what was read is recorded")
        XCTAssertEqual(observed.found[1]?.digest, digest("content of touched.bin"))

        let rehashed = try Observation(of: manifest, access: .lookingOnly, rehash: true)
        XCTAssertEqual(
            rehashed.states[0], .file(size: size, digest: digest("content of same.bin")),
            "--rehash reads a file the state vouches for")
        XCTAssertEqual(rehashed.vouched[4], true, "an unpinned file keeps its record")
    }

    func testASyncHoldsTheRunLockFromBeforeItLooksUntilItsObservationGoes() throws {
        let directory = try TemporaryDirectory()
        try directory.write("a.bin", "content of a.bin")
        let manifest = try manifest(["a.bin"], root: directory.path)
        var observed: Observation? = try Observation(
            of: manifest, access: .exclusive(wait: .no, holder: "pid 1, first"))
        XCTAssertThrowsError(try Observation(of: manifest, access: .exclusive(wait: .no, holder: "second"))) { error in
            guard case ObservationFailure.lock(.busy(_, let holder, nil, nil)) = error else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(holder, "pid 1, first")
        }
        XCTAssertNotNil(try Observation(of: manifest, access: .lookingOnly), "looking needs no lock")
        XCTAssertEqual(observed?.states, [.file(size: 16, digest: digest("content of a.bin"))])
        observed = nil
        XCTAssertNoThrow(try Observation(of: manifest, access: .exclusive(wait: .no, holder: "third")))
    }

    func testLookingMakesNothingAndAnUnsafePrivateFolderIsRefused() throws {
        let directory = try TemporaryDirectory()
        let manifest = try manifest(["a.bin"], root: directory.path("root"))
        let looked = try Observation(of: manifest, access: .lookingOnly)
        XCTAssertEqual(looked.states, [.missing])
        XCTAssertEqual(access(directory.path("root"), F_OK), -1, "looking made no root")

        let elsewhere = try TemporaryDirectory()
        XCTAssertEqual(mkdir(directory.path("root"), 0o755), 0)
        XCTAssertEqual(symlink(elsewhere.path, directory.path("root/.haul")), 0)
        for access: Observation.Access in [.lookingOnly, .exclusive(wait: .no, holder: "test")] {
            XCTAssertThrowsError(try Observation(of: manifest, access: access)) { error in
                guard case ObservationFailure.privateArea(.unsafe) = error else { return XCTFail("\(error)") }
            }
        }
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: elsewhere.path), [], "nothing written through")
    }
}
