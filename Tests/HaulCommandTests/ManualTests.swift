import Foundation
@testable import HaulManifest
import HaulTestSupport
import XCTest

/// The manual page (scripts/manpage.py over `--experimental-dump-help`) says what `--help` says: every command and
/// option, every exit status the code defines, every environment variable the code reads; and the manifest's keys as
/// the schema gives them, the config file's keys and every JSON event the code writes.
final class ManualTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The manual as text: roff's font changes dropped, its escapes undone.
    private func manual() throws -> String {
        let script = Self.repository.appendingPathComponent("scripts/manpage.py").path
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c", "\"$0\" --experimental-dump-help | python3 \"$1\" 9.9.9",
                HaulProcess.executablePath, script,
            ], inheritEnvironment: true)
        XCTAssertEqual(result.exitCode, 0, result.stderr)
        return result.stdout.replacingOccurrences(of: "\\\\f[BIR]", with: "", options: .regularExpression)
            .replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\e", with: "\\")
    }

    /// The part of the manual from the heading line `start` to the next heading of the same level.
    private func section(_ manual: String, _ start: String) -> String? {
        let lines = manual.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let first = lines.firstIndex(of: start) else { return nil }
        let level = String(start.prefix(3))
        let end = lines[(first + 1)...].firstIndex { $0.hasPrefix(level) || $0.hasPrefix(".SH") } ?? lines.endIndex
        return lines[first..<end].joined(separator: "\n")
    }

    func testTheManualListsEveryCommandAndEveryOptionItsHelpLists() throws {
        let manual = try manual()
        XCTAssertTrue(manual.hasPrefix(".TH HAUL 1 \"\" \"haul 9.9.9\""), String(manual.prefix(200)))
        let common = try XCTUnwrap(section(manual, ".SH OPTIONS"), "no OPTIONS section")
        var checked = 0
        for command in ["sync", "plan", "verify", "schema", "add", "cache", "cache info", "cache gc"] {
            let help = try HaulProcess.run(command.split(separator: " ").map(String.init) + ["--help"])
            XCTAssertEqual(help.exitCode, 0, command)
            let own = try XCTUnwrap(section(manual, ".SS \"haul \(command)\""), "no section for haul \(command)")
            XCTAssertTrue(manual.contains(".SH SYNOPSIS"), command)
            // Option lines of --help: two spaces, then the option's spellings ("-j, --jobs <jobs>").
            let spellings = help.stdout.split(separator: "\n").filter { $0.hasPrefix("  -") }.flatMap { line in
                line.split(separator: " ").prefix { !$0.isEmpty }.map {
                    $0.trimmingCharacters(in: .punctuationCharacters.subtracting(["-"]))
                }
                .filter { $0.hasPrefix("-") }
            }
            XCTAssertFalse(spellings.isEmpty, "haul \(command) --help lists no option:\n\(help.stdout)")
            for spelling in spellings {
                let place = ["--help", "-h", "--version"].contains(spelling) ? common : own
                XCTAssertTrue(
                    place.range(of: "(?m)(^|[ ,])\(spelling)([ ,]|$)", options: .regularExpression) != nil,
                    "the manual does not list \(spelling) of haul \(command)")
                checked += 1
            }
            // Positional arguments: "<manifest>" in the usage line; "<subcommand>": each listed under SUBCOMMANDS.
            for argument in help.stdout.matches(of: /USAGE: [^\n]*/).flatMap({ $0.output.matches(of: /<([a-z-]+)>/) }) {
                guard argument.output.1 == "subcommand" else {
                    XCTAssertTrue(
                        own.contains(String(argument.output.1)),
                        "the manual does not name <\(argument.output.1)> of haul \(command)")
                    continue
                }
                let listed =
                    help.stdout.split(separator: "SUBCOMMANDS:").last.map {
                        $0.split(separator: "\n").compactMap {
                            $0.wholeMatch(of: /\s\s([a-z-]+)\s.*/).map { String($0.output.1) }
                        }
                    } ?? []
                XCTAssertFalse(listed.isEmpty, help.stdout)
                for subcommand in listed {
                    XCTAssertNotNil(
                        section(manual, ".SS \"haul \(command) \(subcommand)\""),
                        "no section for haul \(command) \(subcommand)")
                }
            }
        }
        XCTAssertGreaterThan(checked, 40)
    }

    func testTheManualStatesEveryExitStatusTheCodeDefines() throws {
        let manual = try manual()
        let section = try XCTUnwrap(section(manual, ".SH EXIT STATUS"), "no EXIT STATUS section")
        let outcome = try String(
            contentsOf: Self.repository.appendingPathComponent("Sources/Haul/Outcome.swift"), encoding: .utf8)
        let enumBody = try XCTUnwrap(
            outcome.firstRange(of: /enum ExitStatus[^{]*\{[^}]*\}/).map { String(outcome[$0]) })
        let codes = enumBody.matches(of: /case \w+ = (\d+)/).map { String($0.output.1) } + ["130", "143"]
        XCTAssertGreaterThanOrEqual(codes.count, 9, enumBody)
        for code in codes {
            XCTAssertTrue(
                section.range(of: "(^|\\n|, )\(code)(,|\\n)", options: .regularExpression) != nil,
                "EXIT STATUS does not state \(code):\n\(section)")
        }
    }

    func testTheManualNamesEveryEnvironmentVariableTheCodeReads() throws {
        let manual = try manual()
        let section = try XCTUnwrap(section(manual, ".SH ENVIRONMENT"), "no ENVIRONMENT section")
        let sources = Self.repository.appendingPathComponent("Sources")
        var read: Set<String> = []
        let files = try XCTUnwrap(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
        for file in files where file.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            let patterns = [
                /(?:environment|current)\["([A-Za-z_][A-Za-z0-9_]*)"\]/, /isSet\("([A-Za-z_][A-Za-z0-9_]*)"/,
                /getenv\("([A-Za-z_][A-Za-z0-9_]*)"\)/, /case \w+ = "(XDG_[A-Z_]+)"/,
            ]
            for pattern in patterns { read.formUnion(text.matches(of: pattern).map { String($0.output.1) }) }
            // Lists of variables tried in order (`CABundle.variables`).
            for list in text.matches(of: /static let variables = \[([^\]]*)\]/) {
                read.formUnion(list.output.1.matches(of: /"([A-Za-z_][A-Za-z0-9_]*)"/).map { String($0.output.1) })
            }
        }
        XCTAssertTrue(
            read.isSuperset(of: ["HAUL_CA_FILE", "SSL_CERT_FILE", "HAUL_SHARD", "TMPDIR", "XDG_CACHE_HOME"]),
            "\(read.sorted())")
        for name in read.sorted() {
            XCTAssertTrue(
                section.contains("\n\(name)\n") || section.contains("\n\(name),"),
                "ENVIRONMENT does not name \(name):\n\(section)")
        }
        XCTAssertTrue(section.contains("http_proxy"), "ENVIRONMENT does not say that proxies come from the environment")
    }

    /// Every key a manifest may hold, under the heading of the mapping that holds it, with its type and the
    /// schema's own description of it.
    func testTheManualDescribesEveryManifestKeyAsTheSchemaDoes() throws {
        let manual = try manual()
        let schemaText = try Data(
            contentsOf: Self.repository.appendingPathComponent("schema/haul-manifest.schema.json"))
        let schema = try XCTUnwrap(try JSONSerialization.jsonObject(with: schemaText) as? [String: Any])
        let definitions = try XCTUnwrap(schema["$defs"] as? [String: Any])
        let mappings: [(heading: String, keys: Set<String>, node: Any?)] = [
            ("Top level", ManifestSchema.topLevelKeys, schema),
            ("defaults:", ManifestSchema.defaultsKeys, definitions["defaults"]),
            ("files: (each entry)", ManifestSchema.fileKeys, definitions["file"]),
            ("extract: (an entry's archive)", ManifestSchema.extractKeys, definitions["extract"]),
        ]
        let whole = try XCTUnwrap(section(manual, ".SH MANIFEST"), "no MANIFEST section")
        for (heading, keys, node) in mappings {
            let own = try XCTUnwrap(section(whole, ".SS \"\(heading)\""), "MANIFEST has no \(heading) part")
            let properties = try XCTUnwrap((node as? [String: Any])?["properties"] as? [String: [String: Any]])
            let lines = own.split(separator: "\n").map(String.init)
            for key in keys {
                let term = try XCTUnwrap(
                    lines.firstIndex { $0.hasPrefix(key + " ") }, "MANIFEST does not list \(heading) \(key)")
                let reference = (properties[key]?["$ref"] as? String).flatMap {
                    definitions[String($0.split(separator: "/").last ?? "")]
                }
                let description =
                    properties[key]?["description"] as? String ?? (reference as? [String: Any])?["description"]
                    as? String
                XCTAssertEqual(lines[term + 1], description, "\(heading) \(key): the schema's description")
            }
        }
        XCTAssertTrue(whole.contains("\nversion 1 (required)\n"), whole)
        XCTAssertTrue(whole.contains("\nretries integer\n"), whole)
        XCTAssertTrue(
            whole.contains("\nextract boolean or mapping (format, strip, include, exclude, tree, max_unpacked)\n"),
            whole)
        XCTAssertTrue(whole.contains("\nmirrors list of string or mapping (url, headers, cert, key)\n"), whole)
    }

    /// The config file's keys, and every event `--json` writes, each as an item of its own.
    func testTheManualDescribesTheConfigFileAndEveryJSONEvent() throws {
        let manual = try manual()
        let config = try XCTUnwrap(section(manual, ".SH CONFIG FILE"), "no CONFIG FILE section")
        for key in RewriteConfig.topLevelKeys + RewriteConfig.ruleKeys {
            XCTAssertNotNil(
                config.range(of: "(?m)^[ -]*\(key):", options: .regularExpression), "CONFIG FILE does not show \(key):")
        }
        XCTAssertTrue(config.contains("--config FILE"), config)
        let events = try XCTUnwrap(section(manual, ".SH JSON EVENTS"), "no JSON EVENTS section")
        let code = try String(
            contentsOf: Self.repository.appendingPathComponent("Sources/HaulCommand/JSONEvents.swift"), encoding: .utf8)
        let written = Set(code.matches(of: /\("event", \.string\("([a-z]+)"\)\)/).map { String($0.output.1) })
        XCTAssertGreaterThanOrEqual(written.count, 10, "\(written.sorted())")
        for event in written.sorted() {
            XCTAssertTrue(events.contains(".TP\n\(event)\nwhen: "), "JSON EVENTS does not describe \(event)")
        }
    }
}
