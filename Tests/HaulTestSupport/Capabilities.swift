import Foundation
import XCTest

/// What a test does when this machine cannot produce the fault it needs (root, a mount, `chattr +i`, gcc for the
/// kill switch, tmux for a terminal): skipped, saying why, on a developer's machine; a failure where
/// `HAUL_REQUIRE_ALL_TESTS=1` (CI, which installs everything these tests need), so a missing package or
/// permission can never quietly turn the crash and fault tests off.
public enum Capability {
    public static var everyTestIsRequired: Bool {
        ProcessInfo.processInfo.environment["HAUL_REQUIRE_ALL_TESTS"] == "1"
    }

    /// The error to throw from a test that cannot run here.
    public static func unavailable(_ reason: String) -> Error {
        everyTestIsRequired ? Missing(reason: reason) : XCTSkip(reason)
    }

    /// Makes a fault (a mount, a kill switch, an attribute) for a test; where this machine cannot, the test is
    /// `unavailable`, saying why.
    public static func required<T>(_ what: String? = nil, _ make: () throws -> T) throws -> T {
        do { return try make() } catch let error as FaultUnavailable {
            throw unavailable(what.map { "\($0): \(error)" } ?? error.description)
        }
    }

    /// An installed tool's path, found on `PATH` (a signing tool, a verifier); `unavailable` when it is not there.
    public static func tool(_ name: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)")
        {
            return "\(folder)/\(name)"
        }
        throw unavailable("\(name) is not installed")
    }

    public struct Missing: Error, CustomStringConvertible {
        public let reason: String
        public var description: String { "this test must run here (HAUL_REQUIRE_ALL_TESTS=1) but cannot: \(reason)" }
    }
}
