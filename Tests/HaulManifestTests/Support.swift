import HaulManifest
import XCTest

/// Shared helpers: manifests are written inline as YAML text and loaded as if from `/work/project/haul.yaml`.
enum Fixture {
    static let fileName = "haul.yaml"
    static let directory = "/work/project"

    static func load(_ yaml: String, environment: [String: String] = [:]) throws(ManifestError) -> Manifest {
        try ManifestLoader.parse(bytes: Array(yaml.utf8), fileName: fileName, manifestDirectory: directory,
                                 environment: environment)
    }

    /// Every diagnostic, rendered, for a manifest that must fail; records a failure if it loads.
    static func diagnostics(_ yaml: String, environment: [String: String] = [:],
                            file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try load(yaml, environment: environment)
            XCTFail("manifest loaded but was expected to fail", file: file, line: line)
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    /// The manifest, recording a failure (with every diagnostic) if it does not load.
    static func manifest(_ yaml: String, environment: [String: String] = [:],
                         file: StaticString = #filePath, line: UInt = #line) -> Manifest? {
        do {
            return try load(yaml, environment: environment)
        } catch {
            XCTFail("unexpected diagnostics:\n\(error)", file: file, line: line)
            return nil
        }
    }

    /// A one-entry manifest whose entry body is `entry` (lines indented under `- `); the entry starts on line 3.
    static func entry(_ lines: String...) -> String {
        "version: 1\nfiles:\n" + lines.enumerated().map { ($0.offset == 0 ? "  - " : "    ") + $0.element }
            .joined(separator: "\n") + "\n"
    }

    static let sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
}
