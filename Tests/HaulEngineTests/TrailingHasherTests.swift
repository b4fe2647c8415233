import Dispatch
import Glibc
import HaulDigest
import HaulFileSystem
@testable import HaulEngine
import HaulTestSupport
import Synchronization
import XCTest

/// The hash that trails the writer on its own thread, reading back what it wrote: the bytes already in the file
/// when it starts (a resumed partial's) and those written meanwhile make the file's digest.
final class TrailingHasherTests: XCTestCase {
    private func digest(of hasher: TrailingHasher, at end: Int64) throws -> Digest {
        let result = Mutex<Result<Digest, Errno>?>(nil)
        let done = DispatchSemaphore(value: 0)
        hasher.finish(at: end) { digest in
            result.withLock { $0 = digest }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "the hasher finished")
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

    /// `bytes[start..<end]` written at their offsets in chunks, each handed to `hasher` if given.
    private func write(
        _ bytes: [UInt8], to descriptor: Int32, from start: Int, upTo end: Int? = nil, chunk: Int,
        hasher: TrailingHasher?
    ) {
        var offset = start
        var lastWake = Int64(start)
        let last = end ?? bytes.count
        while offset < last {
            let end = min(offset + chunk, last)
            bytes[offset..<end].withUnsafeBytes { piece in
                XCTAssertEqual(pwrite(descriptor, piece.baseAddress, piece.count, off_t(offset)), piece.count)
                hasher?.written(upTo: Int64(end), lastWake: &lastWake)
            }
            offset = end
        }
    }

    private func staged() throws -> (file: StagedFile, descriptor: Int32, directory: TemporaryDirectory) {
        let directory = try TemporaryDirectory()
        let file = StagedFile(folder: heldOpen(directory.path), name: "body.part")
        guard case .success(let descriptor) = file.open(O_RDWR | O_CREAT) else { throw XCTSkip("cannot create a file") }
        return (file, descriptor, directory)
    }

    func testBytesHandedOverAndBytesAlreadyInTheFileMakeTheFilesDigest() throws {
        var generator = SplitMix(seed: 7)
        var bytes = [UInt8](repeating: 0, count: (21 << 20) + 12_345)
        bytes.withUnsafeMutableBytes { raw in
            for index in stride(from: 0, to: raw.count - 8, by: 8) {
                raw.storeBytes(of: generator.next(), toByteOffset: index, as: UInt64.self)
            }
        }
        let whole = StreamingHasher.digest(bytes, algorithm: .sha256)
        for resumed in [0, 5 << 20 + 3] {
            let (file, descriptor, directory) = try staged()
            defer { close(descriptor) }
            // A resumed partial: its first bytes are in the file before the hasher starts.
            write(bytes, to: descriptor, from: 0, upTo: resumed, chunk: 1 << 20, hasher: nil)
            let hasher = try XCTUnwrap(TrailingHasher(file: file, algorithm: .sha256))
            // 16 KiB chunks, as HTTP/2 frames arrive.
            write(bytes, to: descriptor, from: resumed, chunk: 16 << 10, hasher: hasher)
            XCTAssertEqual(try digest(of: hasher, at: Int64(bytes.count)), whole, "resumed at \(resumed)")
            withExtendedLifetime(directory) {}
        }
    }

    func testAPartialVerifiedAsItLiesIsReadBackWhole() throws {
        let bytes = [UInt8](repeating: 0x5a, count: 3 << 20)
        let (file, descriptor, directory) = try staged()
        defer { close(descriptor) }
        write(bytes, to: descriptor, from: 0, chunk: 1 << 20, hasher: nil)
        let hasher = try XCTUnwrap(TrailingHasher(file: file, algorithm: .sha256))
        XCTAssertEqual(
            try digest(of: hasher, at: Int64(bytes.count)), StreamingHasher.digest(bytes, algorithm: .sha256))
        withExtendedLifetime(directory) {}
    }

    func testAFileShorterThanItsEndIsAReadFailureNotADigest() throws {
        let (file, descriptor, directory) = try staged()
        defer { close(descriptor) }
        write([UInt8](repeating: 1, count: 1000), to: descriptor, from: 0, chunk: 1000, hasher: nil)
        let hasher = try XCTUnwrap(TrailingHasher(file: file, algorithm: .sha256))
        XCTAssertThrowsError(try digest(of: hasher, at: 2000)) { error in
            XCTAssertEqual((error as? Errno)?.code, EIO)
        }
        withExtendedLifetime(directory) {}
    }

    /// An attempt that ends otherwise drops its hasher: its thread must not wait forever for bytes. Threads are told
    /// apart by their ids: one that another test left behind and that ends meanwhile changes no count here.
    func testAnAbandonedHasherEndsItsThread() throws {
        let (file, descriptor, directory) = try staged()
        defer { close(descriptor) }
        func threadIDs() throws -> Set<String> {
            Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task"))
        }
        let before = try threadIDs()
        var hashers: [TrailingHasher] = []
        for _ in 0..<8 { hashers.append(try XCTUnwrap(TrailingHasher(file: file, algorithm: .sha256))) }
        write([UInt8](repeating: 2, count: 100_000), to: descriptor, from: 0, chunk: 10_000, hasher: hashers[0])
        let started = try threadIDs().subtracting(before)
        XCTAssertGreaterThanOrEqual(started.count, 8, "each hasher has a thread")
        hashers = []
        // Any thread started meanwhile by something else may outlive the test: only the hashers' must end.
        let others = started.count - 8
        var left = started
        for _ in 0..<200 {
            left = try threadIDs().intersection(started)
            if left.count <= others { break }
            usleep(10_000)
        }
        XCTAssertLessThanOrEqual(left.count, others, "every hasher's thread ended")
        withExtendedLifetime(directory) {}
    }
}
