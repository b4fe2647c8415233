import Foundation
import Glibc
import HaulDigest
import HaulFailures
import HaulManifest
import HaulStore
import XCTest

final class ObserverTests: XCTestCase {
    func testRootThatDoesNotExistMakesEverythingMissing() throws {
        let scratch = try Scratch()
        let observer = LocalObserver(root: scratch.at("not-yet"))
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: try dest("a/b.txt"), algorithm: .sha256)), .missing)
    }

    func testRootThatIsAFileIsReported() throws {
        let scratch = try Scratch()
        try scratch.write("root", "not a folder")
        let observed = LocalObserver(root: scratch.at("root")).observe(
            ObservationRequest(destination: try dest("a.txt")))
        guard case .unreadable(let failure) = observed else { return XCTFail("\(observed)") }
        XCTAssertEqual(failure.errno, ENOTDIR)
    }

    /// A root holding nothing but haul's folder answers for every destination at once; anything else in it, even
    /// a single top-level file, and each destination is looked at.
    func testAnEmptyRootMakesEverythingMissingAtOnce() throws {
        let scratch = try Scratch()
        try scratch.mkdir("root/.haul/tmp")
        try scratch.write("root/.haul/state", "haul-state\t2\n")
        let observer = LocalObserver(root: scratch.at("root"))
        XCTAssertEqual(observer.sameForEveryDestination(), .missing)
        XCTAssertEqual(LocalObserver(root: scratch.at("absent")).sameForEveryDestination(), .missing)
        try scratch.write("root/a.txt", "hello")
        XCTAssertNil(observer.sameForEveryDestination())
        XCTAssertEqual(
            observer.observeAll(
                [
                    ObservationRequest(destination: try dest("a.txt")),
                    ObservationRequest(destination: try dest("b.txt")),
                ], concurrency: 1),
            [.regularFile(size: 5, digest: nil), .missing])
        XCTAssertEqual(unlink(scratch.at("root/a.txt")), 0)
        try scratch.mkdir("root/empty-folder")
        XCTAssertNil(observer.sameForEveryDestination(), "a folder counts: destinations may be under it")
    }

    func testMissingFileAndMissingParent() throws {
        let scratch = try Scratch()
        try scratch.mkdir("data")
        let observer = LocalObserver(root: scratch.path)
        XCTAssertEqual(observer.observe(ObservationRequest(destination: try dest("data/none.csv"))), .missing)
        XCTAssertEqual(observer.observe(ObservationRequest(destination: try dest("nope/deeper/none.csv"))), .missing)
    }

    func testRegularFileIsHashedOnlyWhenItsSizeCanMatch() throws {
        let scratch = try Scratch()
        try scratch.write("a.txt", "hello haul\n")
        let expected = StreamingHasher.digest(Array("hello haul\n".utf8), algorithm: .sha256)
        let observer = LocalObserver(root: scratch.path)
        let destination = try dest("a.txt")

        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: destination)), .regularFile(size: 11, digest: nil))
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: destination, algorithm: .sha256, expectedSize: 12)),
            .regularFile(size: 11, digest: nil))
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: destination, algorithm: .sha256, expectedSize: 11)),
            .regularFile(size: 11, digest: expected))
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: destination, algorithm: .sha256)),
            .regularFile(size: 11, digest: expected))
    }

    func testDirectorySymlinkAndFifoAreReportedNotRead() throws {
        let scratch = try Scratch()
        let outside = try Scratch()
        try outside.write("secret.txt", "secret")
        try scratch.mkdir("root/dir")
        try scratch.symlink("root/link", to: outside.at("secret.txt"))
        XCTAssertEqual(mkfifo(scratch.at("root/fifo"), 0o600), 0)
        let observer = LocalObserver(root: scratch.at("root"))

        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: try dest("dir"), algorithm: .sha256)), .directory)
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: try dest("link"), algorithm: .sha256)), .symlink)
        // Opening a FIFO would block; the observer must classify it from lstat alone.
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: try dest("fifo"), algorithm: .sha256)), .otherKind(.fifo))
    }

    func testDigesterMatchesStreamingHasherAcrossChunks() throws {
        let scratch = try Scratch()
        // Not a repeating pattern, so that a chunk boundary handled twice or skipped changes the digest.
        let bytes = (0..<((1 << 20) * 2 + 12345)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }
        try scratch.write("big.bin", bytes)
        try scratch.write("empty.bin", [UInt8]())
        for algorithm in DigestAlgorithm.allCases {
            let result = try FileDigester.digest(path: scratch.at("big.bin"), algorithm: algorithm)
            XCTAssertEqual(result.size, Int64(bytes.count))
            XCTAssertEqual(result.digest, StreamingHasher.digest(bytes, algorithm: algorithm), "\(algorithm)")
        }
        let empty = try FileDigester.digest(path: scratch.at("empty.bin"), algorithm: .sha256)
        XCTAssertEqual(empty.size, 0)
        XCTAssertEqual(empty.digest.hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testDigesterRefusesSymlinkAndNamesMissingPath() throws {
        let scratch = try Scratch()
        try scratch.write("real.txt", "x")
        try scratch.symlink("link.txt", to: scratch.at("real.txt"))
        XCTAssertThrowsError(try FileDigester.digest(path: scratch.at("link.txt"), algorithm: .sha256)) { error in
            XCTAssertEqual((error as? StoreError)?.errno, ELOOP)
        }
        XCTAssertThrowsError(try FileDigester.digest(path: scratch.at("gone.txt"), algorithm: .sha256)) { error in
            let failure = error as? StoreError
            XCTAssertEqual(failure?.errno, ENOENT)
            XCTAssertEqual(failure?.description, "cannot open \"\(scratch.at("gone.txt"))\": No such file or directory")
        }
    }

    func testObserveAllKeepsRequestOrderWithConcurrency() throws {
        let scratch = try Scratch()
        var requests: [ObservationRequest] = []
        var expected: [ObservedFile] = []
        for index in 0..<1500 {
            let name = "d\(index % 7)/f\(index).txt"
            switch index % 5 {
            case 0:
                expected.append(.missing)
            case 1:
                try scratch.mkdir(name)
                expected.append(.directory)
            default:
                let content = Array(repeating: UInt8(truncatingIfNeeded: index), count: index % 300)
                try scratch.write(name, content)
                expected.append(
                    .regularFile(
                        size: Int64(content.count),
                        digest: StreamingHasher.digest(content, algorithm: .sha256)))
            }
            requests.append(ObservationRequest(destination: try dest(name), algorithm: .sha256))
        }
        let observer = LocalObserver(root: scratch.path)
        for concurrency in [1, 3, 8] {
            XCTAssertEqual(
                observer.observeAll(requests, concurrency: concurrency), expected, "concurrency \(concurrency)")
        }
        XCTAssertEqual(observer.observeAll([], concurrency: 4), [])
    }

    func testSymlinkedParentInsideRootIsFollowed() throws {
        let scratch = try Scratch()
        try scratch.write("root/real/a.txt", "inside")
        try scratch.symlink("root/alias", to: "real")
        try scratch.symlink("root/absolute-alias", to: scratch.at("root/real"))
        let observer = LocalObserver(root: scratch.at("root"))
        let digest = StreamingHasher.digest(Array("inside".utf8), algorithm: .sha256)
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: try dest("alias/a.txt"), algorithm: .sha256)),
            .regularFile(size: 6, digest: digest))
        XCTAssertEqual(
            observer.observe(ObservationRequest(destination: try dest("absolute-alias/a.txt"), algorithm: .sha256)),
            .regularFile(size: 6, digest: digest))
    }

    func testSymlinkedParentOutsideRootEscapes() throws {
        let scratch = try Scratch()
        try scratch.write("outside/a.txt", "not yours")
        try scratch.mkdir("root/in")
        try scratch.symlink("root/in/out", to: scratch.at("outside"))
        try scratch.symlink("root/up", to: "..")
        let observer = LocalObserver(root: scratch.at("root"))
        let outsideReal = try XCTUnwrap(
            realpath(scratch.at("outside"), nil).map { pointer in
                defer { free(pointer) }
                return String(cString: pointer)
            })

        let results = observer.observeAll(
            [
                ObservationRequest(destination: try dest("in/out/a.txt"), algorithm: .sha256),
                ObservationRequest(destination: try dest("up/outside/a.txt"), algorithm: .sha256),
                ObservationRequest(destination: try dest("in/out/deeper/b.txt"), algorithm: .sha256),
            ], concurrency: 2)
        XCTAssertEqual(
            results[0],
            .escapesRoot(
                StoreError(
                    operation: .inspect, path: "in/out/a.txt", errno: 0,
                    problem: .parentEscapesRoot(parent: "in/out", target: outsideReal))))
        guard case .escapesRoot(let failure) = results[1], case .parentEscapesRoot("up", _) = failure.problem else {
            return XCTFail("\(results[1])")
        }
        guard case .escapesRoot(let deeper) = results[2] else { return XCTFail("\(results[2])") }
        XCTAssertEqual(deeper.problem, .parentEscapesRoot(parent: "in/out", target: outsideReal), "the same parent")
    }

    func testParentThatIsAFileIsUnreadable() throws {
        let scratch = try Scratch()
        try scratch.write("plain", "file")
        let observed = LocalObserver(root: scratch.path).observe(
            ObservationRequest(destination: try dest("plain/a.txt")))
        guard case .unreadable(let failure) = observed else { return XCTFail("\(observed)") }
        XCTAssertEqual(failure.errno, ENOTDIR)
        XCTAssertEqual(failure.description, "cannot inspect \"plain/a.txt\": parent \"plain\" is not a directory")
    }

    func testDanglingSymlinkParentIsReported() throws {
        let scratch = try Scratch()
        try scratch.symlink("gone", to: "nowhere")
        let observed = LocalObserver(root: scratch.path).observe(
            ObservationRequest(destination: try dest("gone/a.txt")))
        guard case .unreadable(let failure) = observed else { return XCTFail("\(observed)") }
        XCTAssertEqual(failure.errno, ENOENT)
        XCTAssertTrue(
            failure.description.contains("parent \"gone\" is a symlink to nowhere, which does not exist"),
            failure.description)
    }
}
