import HaulTestSupport
import XCTest

/// Help teaches by example, fits an 80-column terminal, and completions come from the same definitions.
final class HelpTests: XCTestCase {
    func testEveryCommandsHelpHasExamplesAndFitsEightyColumns() throws {
        for command in ["sync", "plan", "verify", "add", "schema"] {
            let help = try HaulProcess.run([command, "--help"])
            XCTAssertEqual(help.exitCode, 0, command)
            XCTAssertTrue(help.stdout.contains("Example"), "\(command) --help has no example:\n\(help.stdout)")
            XCTAssertTrue(help.stdout.contains("haul \(command)"), command)
            for line in help.stdout.split(separator: "\n") {
                XCTAssertLessThanOrEqual(line.count, 80, "\(command) --help: \(line)")
            }
        }
    }

    func testShellCompletionsAreGenerated() throws {
        for shell in ["bash", "zsh", "fish"] {
            let script = try HaulProcess.run(["--generate-completion-script", shell])
            XCTAssertEqual(script.exitCode, 0, shell)
            XCTAssertTrue(script.stdout.contains("require-checksums"), shell)
        }
    }
}

/// One flag set for `sync`, `plan` and `verify`: a command line that works for one works for the others, and each
/// option's help says which commands it changes.
final class SharedFlagsTests: XCTestCase {
    func testPlanAndVerifyAcceptEverySyncOptionAndSayWhichApply() throws {
        let directory = try TemporaryDirectory()
        try directory.write("haul.yaml", "version: 1\nfiles: []\n")
        let syncOnly = [
            "--jobs", "4", "--per-host", "2", "--durability", "none", "--wait", "--max-time", "1m",
            "-H", "X-Team: blue", "-A", "ci/1", "--retries", "1", "--timeout", "5s", "--netrc", "--dry-run",
            "--progress", "plain", "--max-file-size", "1G", "--rehash",
        ]
        for command in ["plan", "verify"] {
            let result = try directory.haul([command] + syncOnly)
            XCTAssertEqual(result.exitCode, 0, "\(command): \(result.stderr)")
        }
        let syncHelp = try directory.haul(["sync", "--help"]).stdout
        for command in ["plan", "verify"] {
            let help = try directory.haul([command, "--help"]).stdout
            let options = { (text: String) in
                text.split(separator: "\n").filter { $0.hasPrefix("  -") }.map { $0.split(separator: " ")[0] }
            }
            XCTAssertEqual(options(help), options(syncHelp), "\(command) takes exactly sync's options")
            XCTAssertNotNil(help.firstMatch(of: /-j, --jobs <jobs>\s+\(sync\) Transfers/), help)
            XCTAssertNotNil(help.firstMatch(of: /--prune\s+\(sync, plan\) Delete/), help)
        }
    }
}

/// README's option table names every option with the commands it changes, as each command's `--help` does: an
/// option added, dropped or given to another command without its row following fails here.
final class OptionTableTests: XCTestCase {
    private static let readmePath =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path + "/README.md"

    func testReadmeTableListsEveryOptionWithTheCommandsItChanges() throws {
        let table = try Self.readmeTable()
        let help = try Self.commandsChanged()
        for option in Set(table.keys).union(help.keys).sorted() {
            XCTAssertEqual(
                table[option].map { $0.sorted() }, help[option].map { $0.sorted() },
                "--\(option): README's option table (first) and --help (second) differ")
        }
    }

    /// Long option → the commands README's row says it changes: each row's first cell names options, and its
    /// second starts with the commands, "(`sync`, `plan`)". An option in two rows changes what both name.
    private static func readmeTable() throws -> [String: Set<String>] {
        let readme = try String(contentsOfFile: readmePath, encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        let header = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("| option | ") }, "README has no option table")
        var table: [String: Set<String>] = [:]
        for line in lines[(header + 2)...].prefix(while: { $0.hasPrefix("|") }) {
            let cells = line.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
            XCTAssertEqual(cells.count, 3, "README option table: \(line)")
            guard cells.count == 3 else { continue }
            let options =
                cells[1].matches(of: /`(?:-[A-Za-z], )?--([a-z0-9-]+)/).map { String($0.output.1) }
                + cells[1].matches(of: /, --([a-z0-9-]+)/).map { String($0.output.1) }
            guard let list = cells[2].firstMatch(of: #/^ \(((?:`[a-z ]+`(?:, )?)+)\)/#) else {
                XCTFail("README option table: the row does not start with the commands it changes: \(line)")
                continue
            }
            let commands = Set(list.output.1.matches(of: /`([a-z ]+)`/).map { String($0.output.1) })
            XCTAssertFalse(options.isEmpty, "README option table: no option in \(line)")
            for option in options { table[option, default: []].formUnion(commands) }
        }
        return table
    }

    /// Long option → the commands it changes, from the parser's own description of every command: those whose help
    /// names them before the option's text ("(sync, plan) …"), or, without such a list, every command that takes it.
    private static func commandsChanged() throws -> [String: Set<String>] {
        let dump = try HaulProcess.run(["--experimental-dump-help"])
        XCTAssertEqual(dump.exitCode, 0, dump.stderr)
        let root = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])?["command"]
                as? [String: Any])
        var changed: [String: Set<String>] = [:]
        var taken: [String: Set<String>] = [:]
        var claimed: [String: Set<String>] = [:]
        func visit(_ command: [String: Any], path: [String]) {
            let subcommands = (command["subcommands"] as? [[String: Any]] ?? []).filter {
                $0["commandName"] as? String != "help"
            }
            for subcommand in subcommands {
                visit(subcommand, path: path + [subcommand["commandName"] as? String ?? "?"])
            }
            guard subcommands.isEmpty, !path.isEmpty else { return }
            let name = path.joined(separator: " ")
            for argument in command["arguments"] as? [[String: Any]] ?? []
            where argument["shouldDisplay"] as? Bool != false {
                let names = argument["names"] as? [[String: Any]] ?? []
                guard let long = names.first(where: { $0["kind"] as? String == "long" })?["name"] as? String,
                    !["help", "version"].contains(long)
                else { continue }
                taken[long, default: []].insert(name)
                let abstract = argument["abstract"] as? String ?? ""
                if let list = abstract.firstMatch(of: #/^\(([a-z ,]+)\) /#) {
                    let named = list.output.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    claimed[long, default: []].formUnion(named)
                    if named.contains(name) { changed[long, default: []].insert(name) }
                } else {
                    changed[long, default: []].insert(name)
                }
            }
        }
        visit(root, path: [])
        // A command a "(…)" list names must take the option: a list naming one that does not is wrong too.
        for (option, commands) in claimed {
            XCTAssertTrue(
                commands.isSubset(of: taken[option] ?? []),
                "--\(option): its help names \(commands.sorted()), but only \((taken[option] ?? []).sorted()) take it")
        }
        return changed
    }
}
