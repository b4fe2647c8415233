import Foundation
import HaulTestSupport
import XCTest

/// The manual page (scripts/manpage.py over `--experimental-dump-help`) says what `--help` says: every command and
/// option, every exit status the code defines, every environment variable the code reads.
final class ManualTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The manual as text: roff's font changes dropped, its escapes undone.
    private func manual() throws -> String {
        let script = Self.repository.appendingPathComponent("scripts/manpage.py").path
        let result = try ProcessRunner.run("/bin/sh", ["-c", "\"$0\" --experimental-dump-help | python3 \"$1\" 9.9.9",
                                                        HaulProcess.executablePath, script], inheritEnvironment: true)
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
                line.split(separator: " ").prefix { !$0.isEmpty }.map { $0.trimmingCharacters(in: .punctuationCharacters.subtracting(["-"])) }
                    .filter { $0.hasPrefix("-") }
            }
            XCTAssertFalse(spellings.isEmpty, "haul \(command) --help lists no option:\n\(help.stdout)")
            for spelling in spellings {
                let place = ["--help", "-h", "--version"].contains(spelling) ? common : own
                XCTAssertTrue(place.range(of: "(?m)(^|[ ,])\(spelling)([ ,]|$)", options: .regularExpression) != nil,
                              "the manual does not list \(spelling) of haul \(command)")
                checked += 1
            }
            // Positional arguments: "<manifest>" in the usage line; "<subcommand>": each listed under SUBCOMMANDS.
            for argument in help.stdout.matches(of: /USAGE: [^\n]*/).flatMap({ $0.output.matches(of: /<([a-z-]+)>/) }) {
                guard argument.output.1 == "subcommand" else {
                    XCTAssertTrue(own.contains(String(argument.output.1)), "the manual does not name <\(argument.output.1)> of haul \(command)")
                    continue
                }
                let listed = help.stdout.split(separator: "SUBCOMMANDS:").last.map {
                    $0.split(separator: "\n").compactMap { $0.wholeMatch(of: /\s\s([a-z-]+)\s.*/).map { String($0.output.1) } }
                } ?? []
                XCTAssertFalse(listed.isEmpty, help.stdout)
                for subcommand in listed {
                    XCTAssertNotNil(section(manual, ".SS \"haul \(command) \(subcommand)\""), "no section for haul \(command) \(subcommand)")
                }
            }
        }
        XCTAssertGreaterThan(checked, 40)
    }

    func testTheManualStatesEveryExitStatusTheCodeDefines() throws {
        let manual = try manual()
        let section = try XCTUnwrap(section(manual, ".SH EXIT STATUS"), "no EXIT STATUS section")
        let outcome = try String(contentsOf: Self.repository.appendingPathComponent("Sources/Haul/Outcome.swift"), encoding: .utf8)
        let enumBody = try XCTUnwrap(outcome.firstRange(of: /enum ExitStatus[^{]*\{[^}]*\}/).map { String(outcome[$0]) })
        let codes = enumBody.matches(of: /case \w+ = (\d+)/).map { String($0.output.1) } + ["130", "143"]
        XCTAssertGreaterThanOrEqual(codes.count, 9, enumBody)
        for code in codes {
            XCTAssertTrue(section.range(of: "(^|\\n|, )\(code)(,|\\n)", options: .regularExpression) != nil,
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
            let patterns = [/(?:environment|current)\["([A-Za-z_][A-Za-z0-9_]*)"\]/, /isSet\("([A-Za-z_][A-Za-z0-9_]*)"/,
                            /getenv\("([A-Za-z_][A-Za-z0-9_]*)"\)/, /case \w+ = "(XDG_[A-Z_]+)"/]
            for pattern in patterns { read.formUnion(text.matches(of: pattern).map { String($0.output.1) }) }
            // Lists of variables tried in order (`CABundle.variables`).
            for list in text.matches(of: /static let variables = \[([^\]]*)\]/) {
                read.formUnion(list.output.1.matches(of: /"([A-Za-z_][A-Za-z0-9_]*)"/).map { String($0.output.1) })
            }
        }
        XCTAssertTrue(read.isSuperset(of: ["HAUL_CA_FILE", "SSL_CERT_FILE", "HAUL_SHARD", "TMPDIR", "XDG_CACHE_HOME"]), "\(read.sorted())")
        for name in read.sorted() {
            XCTAssertTrue(section.contains("\n\(name)\n") || section.contains("\n\(name),"),
                          "ENVIRONMENT does not name \(name):\n\(section)")
        }
        XCTAssertTrue(section.contains("http_proxy"), "ENVIRONMENT does not say that proxies come from the environment")
    }
}
