import Dispatch
import Foundation
import HaulDigest
import HaulTestSupport
import Synchronization
import XCTest

/// What `haul add` prints: nothing but problems with `--quiet`, JSON events with `--json`; and `--wait`,
/// `--wait-timeout` when another haul holds the root the new files go into.
final class AddOutputTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private let bytes: [UInt8] = Array("pinned with json\n".utf8)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory()
    }

    private func hex(_ bytes: [UInt8]) -> String { StreamingHasher.digest(bytes, algorithm: .sha256).hex }

    func testJSONWritesAPinnedEventPerEntryAndASummaryAndErrorsAsEvents() throws {
        let server = try LoopbackHTTPServer(files: ["/a.bin": bytes])
        defer { server.stop() }
        let add = try directory.haul(["add", server.url("/a.bin"), "--json"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(add.stderr, "")
        XCTAssertEqual(
            add.stdout,
            """
            {"event":"pinned","dest":"a.bin","url":"\(server.url("/a.bin"))","sha256":"\(hex(bytes))",\
            "digest":"sha256:\(hex(bytes))","size":\(bytes.count),"result":"added"}
            {"event":"summary","manifest":"haul.yaml","added":1,"updated":0,"unchanged":0,"placed":1,"exit_status":0}

            """)
        XCTAssertEqual(directory.read("a.bin"), bytes)

        let missing = try directory.haul(["add", server.url("/missing.bin"), "--json"])
        XCTAssertEqual(missing.exitCode, 1, missing.stderr)
        XCTAssertEqual(missing.stderr, "")
        XCTAssertEqual(
            missing.stdout,
            """
            {"event":"error","message":"\(server.url("/missing.bin")): HTTP 404"}
            {"event":"summary","manifest":"haul.yaml","added":0,"updated":0,"unchanged":0,"placed":0,"exit_status":1}

            """)

        let secret = server.url("/a.bin").replacingOccurrences(of: "http://", with: "http://user:s3cret@")
        let withPassword = try directory.haul(["add", secret, "--dest", "b.bin", "--json"])
        XCTAssertEqual(withPassword.exitCode, 0, withPassword.stdout)
        XCTAssertTrue(
            withPassword.stdout.hasPrefix("{\"event\":\"pinned\",\"dest\":\"b.bin\",\"url\":\"http://***@127.0.0.1:"),
            withPassword.stdout)
        XCTAssertFalse(withPassword.stdout.contains("s3cret"), withPassword.stdout)
        let manifest = directory.read("haul.yaml").map { String(decoding: $0, as: UTF8.self) } ?? ""
        try directory.write("haul.yaml", manifest.components(separatedBy: "\n  - url: http://user").first ?? manifest)

        let update = try directory.haul(["add", "--update-all", "--json"])
        XCTAssertEqual(update.exitCode, 0, update.stderr)
        XCTAssertEqual(
            update.stdout,
            """
            {"event":"pinned","dest":"a.bin","url":"\(server.url("/a.bin"))","sha256":"\(hex(bytes))",\
            "digest":"sha256:\(hex(bytes))","size":\(bytes.count),"result":"unchanged"}
            {"event":"summary","manifest":"haul.yaml","added":0,"updated":0,"unchanged":1,"placed":1,"exit_status":0}

            """)
    }

    func testQuietPrintsNothingButProblems() throws {
        let server = try LoopbackHTTPServer(files: ["/a.bin": bytes])
        defer { server.stop() }
        let add = try directory.haul(["add", server.url("/a.bin"), "--quiet"])
        XCTAssertEqual(add.exitCode, 0, add.stderr)
        XCTAssertEqual(add.stdout + add.stderr, "")
        XCTAssertEqual(directory.read("a.bin"), bytes)

        let taken = try directory.haul(["add", server.url("/a.bin"), "-q"])
        XCTAssertEqual(taken.exitCode, 3)
        XCTAssertEqual(taken.stdout, "")
        XCTAssertTrue(taken.stderr.contains("is already the destination of files[0]"), taken.stderr)
    }

    func testWaitTimeoutGivesUpOnARootAnotherHaulHoldsAndWaitWaits() throws {
        let slow = [UInt8](repeating: 7, count: 4_000)
        let server = try LoopbackHTTPServer { request in
            switch request.path {
            // The sync's download stalls, so that it holds the root's lock meanwhile.
            case "/slow.bin": ServerResponse.ok(slow).with(fault: .stallAfter(bytes: 0, seconds: 4))
            case "/a.bin", "/b.bin": .ok(Array(request.path.utf8))
            default: .status(404)
            }
        }
        defer { server.stop() }
        try directory.write(
            "haul.yaml",
            """
            version: 1
            root: out
            files:
              - url: \(server.url("/slow.bin"))
                dest: slow.bin
                sha256: \(hex(slow))

            """)
        let holder = Mutex<ProcessResult?>(nil)
        let done = DispatchSemaphore(value: 0)
        let path = directory.path
        DispatchQueue.global().async {
            let result = try? HaulProcess.run(["sync"], currentDirectory: path)
            holder.withLock { $0 = result }
            done.signal()
        }
        // The lock is taken before the first request: once the server has seen it, the root is busy.
        let deadline = Date().addingTimeInterval(10)
        while server.requests.isEmpty && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(server.requests.map(\.path), ["/slow.bin"])

        let busy = try directory.haul(["add", server.url("/a.bin"), "--wait-timeout", "1s"])
        XCTAssertEqual(busy.exitCode, 4, busy.stderr)
        XCTAssertTrue(busy.stderr.contains("another haul is syncing"), busy.stderr)
        XCTAssertTrue(busy.stderr.contains("; waited 1 s (--wait-timeout)"), busy.stderr)
        XCTAssertNil(directory.read("out/a.bin"))

        let waited = try directory.haul(["add", server.url("/b.bin"), "--wait"])
        XCTAssertEqual(waited.exitCode, 0, waited.stderr)
        XCTAssertEqual(directory.read("out/b.bin"), Array("/b.bin".utf8))
        done.wait()
        XCTAssertEqual(holder.withLock { $0?.exitCode }, 0)
        XCTAssertEqual(directory.read("out/slow.bin"), slow)
    }
}
