import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// A root on a read-only mount (a baked image, a read-only volume in a container): with nothing to change, a
/// sync succeeds; it fails only if it has something to write.
final class ReadOnlyRootTests: XCTestCase {
    func testANoOpSyncOfAReadOnlyRootSucceedsAndAChangeFailsNamingTheCause() throws {
        let directory = try TemporaryDirectory()
        let files = (0..<3).map { ("f\($0).bin", Array("content \($0)\n".utf8)) }
        let server = try LoopbackHTTPServer(files: Dictionary(uniqueKeysWithValues: files.map { ("/" + $0.0, $0.1) }))
        defer { server.stop() }
        var yaml = "version: 1\nroot: out\nfiles:\n"
        for (dest, bytes) in files {
            yaml +=
                "  - { url: \(server.url("/" + dest)), dest: \(dest), sha256: \(StreamingHasher.digest(bytes, algorithm: .sha256).hex) }\n"
        }
        try directory.write("haul.yaml", yaml)
        XCTAssertEqual(try HaulProcess.run(["sync"], currentDirectory: directory.path).exitCode, 0)
        // Let the state settle (a file recorded in the same clock tick as the state is hashed once more).
        XCTAssertEqual(try HaulProcess.run(["sync"], currentDirectory: directory.path).exitCode, 0)

        let mount = try Capability.required { try TestMount.readOnlyBind(at: directory.path("out")) }
        defer { mount.unmount() }
        server.resetLog()
        for command in [["sync"], ["plan"], ["verify"], ["sync", "--rehash"]] {
            let result = try HaulProcess.run(command, currentDirectory: directory.path)
            XCTAssertEqual(result.exitCode, 0, "\(command): \(result.stdout)\(result.stderr)")
            XCTAssertFalse(result.stderr.contains("warning"), "\(command): \(result.stderr)")
        }
        XCTAssertEqual(server.requests.count, 0)

        try directory.write("haul.yaml", yaml + "  - { url: \(server.url("/f0.bin")), dest: new.bin }\n")
        let change = try HaulProcess.run(["sync"], currentDirectory: directory.path)
        XCTAssertEqual(change.exitCode, 1)
        XCTAssertTrue(
            change.stderr.contains("error: new.bin: ") && change.stderr.contains("Read-only file system"), change.stderr
        )
    }
}
