@testable import HaulManifest
import XCTest

/// Shared helpers: manifests are written inline as YAML text and loaded as if from `/work/project/haul.yaml`.
enum Fixture {
    static let fileName = "haul.yaml"
    static let directory = "/work/project"

    /// Loaded on one thread and again with libyaml on a second one (`ReadingPipeline`): every manifest test also
    /// checks that both ways give the same manifest or the same diagnostics.
    static func load(
        _ yaml: String, environment: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) throws(DiagnosticsError) -> Manifest {
        let bytes = Array(yaml.utf8)
        let single = Reading(bytes, environment: environment, pipelined: false)
        let pipelined = Reading(bytes, environment: environment, pipelined: true)
        XCTAssertEqual(
            single.account, pipelined.account, "one thread and two read the manifest differently",
            file: file, line: line)
        return try single.result.get()
    }

    /// One load's manifest or diagnostics.
    struct Reading {
        var result: Result<Manifest, DiagnosticsError>

        init(
            _ bytes: [UInt8], fileName: String = Fixture.fileName, environment: [String: String] = [:],
            pipelined: Bool
        ) {
            do {
                result = .success(
                    try ManifestLoader.parse(
                        bytes: bytes, fileName: fileName, manifestDirectory: Fixture.directory,
                        environment: environment,
                        pipelined: pipelined))
            } catch {
                result = .failure(error)
            }
        }

        /// All of it as text, to compare two readings.
        var account: String {
            switch result {
            case .success(let manifest): String(reflecting: manifest)
            case .failure(let error): error.lines.joined(separator: "\n")
            }
        }
    }

    /// Every diagnostic, rendered, for a manifest that must fail; records a failure if it loads.
    static func diagnostics(
        _ yaml: String, environment: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) -> [String] {
        do {
            _ = try load(yaml, environment: environment, file: file, line: line)
            XCTFail("manifest loaded but was expected to fail", file: file, line: line)
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    /// The error of a manifest that must fail; records a failure if it loads.
    static func failure(
        _ yaml: String, environment: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) -> DiagnosticsError? {
        do {
            _ = try load(yaml, environment: environment, file: file, line: line)
            XCTFail("manifest loaded but was expected to fail", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    /// The manifest, recording a failure (with every diagnostic) if it does not load.
    static func manifest(
        _ yaml: String, environment: [String: String] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) -> Manifest? {
        do {
            return try load(yaml, environment: environment, file: file, line: line)
        } catch {
            XCTFail("unexpected diagnostics:\n\(error)", file: file, line: line)
            return nil
        }
    }

    /// A one-entry manifest whose entry body is `entry` (lines indented under `- `); the entry starts on line 3.
    static func entry(_ lines: String...) -> String {
        "version: 1\nfiles:\n"
            + lines.enumerated().map { ($0.offset == 0 ? "  - " : "    ") + $0.element }
            .joined(separator: "\n") + "\n"
    }

    static let sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
}
