import Foundation
import HaulTestSupport
import XCTest

/// The real signing tools, run in a test's own folder. A test needing one that is not installed skips (or fails
/// where `HAUL_REQUIRE_ALL_TESTS=1`): scripts/setup-debian.sh installs them all.
struct SigningTools {
    let folder: TemporaryDirectory

    init() throws { folder = try TemporaryDirectory(prefix: "haul-signature") }

    /// Runs `tool` in the folder; fails the test unless it exits 0.
    @discardableResult
    func run(_ tool: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        let result = try ProcessRunner.run(
            try Capability.tool(tool), arguments, environment: environment, currentDirectory: folder.path, timeout: 60)
        guard result.exitCode == 0 else {
            XCTFail("\(tool) \(arguments.joined(separator: " ")) exited \(result.exitCode): \(result.stderr)")
            throw CancellationError()
        }
        return result
    }

    func write(_ name: String, _ text: String) throws { try folder.write(name, text) }
    func write(_ name: String, _ bytes: [UInt8]) throws { try folder.write(name, bytes) }

    func read(_ name: String) throws -> [UInt8] { try XCTUnwrap(folder.read(name), "\(name) was not written") }
    func text(_ name: String) throws -> String { String(decoding: try read(name), as: UTF8.self) }
    func path(_ name: String) -> String { folder.path(name) }
}

/// Texts with one part replaced, for the tampering tests; fails the test if the part is not there.
func replacing(
    _ target: String, with replacement: String, in text: String, file: StaticString = #filePath, line: UInt = #line
)
    -> String
{
    XCTAssertTrue(text.contains(target), "\(target) not in \(text)", file: file, line: line)
    return text.replacingOccurrences(of: target, with: replacement)
}

extension Result {
    /// The failure, or nil on success (for XCTAssertEqual against a failure case).
    var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

/// Lines of a text file, without its final newline.
func lines(_ text: String) -> [String] {
    text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).reversed()
        .drop { $0.isEmpty }.reversed()
}
