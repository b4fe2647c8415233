import Foundation
import XCTest

/// The module map is a rule, not a habit: each C library has one door (only `HaulEngine` knows libcurl, only
/// `HaulManifest` knows libyaml, only `HaulDigest` knows libcrypto (`HaulSignature` checks signatures through
/// it), only `HaulArchive` knows libarchive), the planner stays pure (no I/O module, no Glibc: the failures it
/// carries are `HaulFailures`' plain values), no module imports Foundation (the installed binary carries none of it
/// but what the argument parser uses), threads and waiting go through `HaulThreads` (the only module that sees
/// Dispatch), and data flows one way (no module imports one that comes after it in manifest → observe → plan →
/// transfer → commit → report). A new `import` that breaks this fails here, naming the file and the line.
final class LayeringTests: XCTestCase {
    /// Every module's allowed imports. A module missing from this table is an error too: a new module states
    /// where it sits.
    static let allowed: [String: Set<String>] = [
        "CCurl": [], "CLibArchive": [], "CLibCrypto": [], "CLibYAML": [], "CLinuxShims": [],
        "HaulDigest": ["CLibCrypto"],
        // Glibc for the `posix_spawn` of an OpenPGP verifier alone; the other verifiers are pure Swift over HaulDigest.
        "HaulSignature": ["HaulDigest", "Glibc"],
        "HaulThreads": ["Glibc", "Dispatch", "Synchronization"],
        "HaulFailures": [],
        "HaulFileSystem": ["CLinuxShims", "HaulFailures", "Glibc"],
        // HaulSignature to check a list's inline keys (`lists:`) when the manifest is read.
        "HaulManifest": [
            "CLibYAML", "HaulDigest", "HaulFileSystem", "HaulSignature", "HaulThreads", "Glibc", "Darwin",
            "Synchronization",
        ],
        "HaulPlanner": ["HaulManifest", "HaulDigest", "HaulFailures"],
        "HaulEngine": [
            "CCurl", "HaulDigest", "HaulFailures", "HaulFileSystem", "HaulThreads", "Glibc", "Synchronization",
        ],
        "HaulArchive": ["CLibArchive", "HaulDigest", "HaulFailures", "HaulFileSystem", "HaulManifest", "Glibc"],
        "HaulStore": [
            "CLinuxShims", "HaulDigest", "HaulFailures", "HaulFileSystem", "HaulManifest", "HaulThreads", "Glibc",
            "Synchronization",
        ],
        "Haul": [
            "HaulArchive", "HaulDigest", "HaulEngine", "HaulFailures", "HaulFileSystem", "HaulManifest", "HaulPlanner",
            "HaulSignature", "HaulStore", "HaulThreads", "Glibc", "Synchronization",
        ],
        "HaulCommand": [
            "ArgumentParser", "Haul", "HaulArchive", "HaulDigest", "HaulEngine", "HaulFailures", "HaulFileSystem",
            "HaulManifest", "HaulSignature",
            "HaulPlanner", "HaulStore", "HaulThreads", "Glibc", "Synchronization",
        ],
    ]

    func testEveryModuleImportsOnlyWhatItsLayerAllows() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { !$0.hasPrefix(".") }
        XCTAssertTrue(modules.contains("HaulEngine"), "Sources/ not found at \(sources.path)")
        var violations: [String] = []
        for module in modules.sorted() {
            guard let allowed = Self.allowed[module] else {
                violations.append("Sources/\(module): a module the layering table does not place")
                continue
            }
            for file in try swiftFiles(in: sources.appendingPathComponent(module)) {
                let text = try String(contentsOf: file, encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    guard let imported = Self.importedModule(String(line)), !allowed.contains(imported) else {
                        continue
                    }
                    let relative = file.path.dropFirst(sources.deletingLastPathComponent().path.count + 1)
                    violations.append("\(relative):\(number + 1): \(module) may not import \(imported)")
                }
            }
        }
        XCTAssertEqual(violations, [], violations.joined(separator: "\n"))
    }

    func testTheImportScannerReadsEveryFormOfImport() {
        XCTAssertEqual(Self.importedModule("import CCurl"), "CCurl")
        XCTAssertEqual(Self.importedModule("@preconcurrency import Foundation"), "Foundation")
        XCTAssertEqual(Self.importedModule("package import HaulStore"), "HaulStore")
        XCTAssertEqual(Self.importedModule("  @_implementationOnly import CLibYAML // why"), "CLibYAML")
        XCTAssertEqual(Self.importedModule("import struct Glibc.stat"), "Glibc")
        XCTAssertEqual(Self.importedModule("import Foundation.NSString"), "Foundation")
        XCTAssertNil(Self.importedModule("// import CCurl"))
        XCTAssertNil(Self.importedModule("let important = 1"))
    }

    /// The module an `import` line names, or nil for any other line.
    static func importedModule(_ line: String) -> String? {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
        while let first = words.first,
            first.hasPrefix("@") || ["public", "package", "internal", "private", "fileprivate"].contains(first)
        {
            words = words.dropFirst()
        }
        guard words.first == "import" else { return nil }
        words = words.dropFirst()
        if let kind = words.first,
            ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"].contains(kind)
        {
            words = words.dropFirst()
        }
        return words.first.map { String($0.prefix { $0 != "." }) }
    }

    private func swiftFiles(in folder: URL) throws -> [URL] {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
            return []
        }
        return walker.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
    }
}
