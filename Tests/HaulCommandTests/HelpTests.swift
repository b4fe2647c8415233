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
        let syncOnly = ["--jobs", "4", "--per-host", "2", "--durability", "none", "--wait", "--max-time", "1m",
                        "-H", "X-Team: blue", "-A", "ci/1", "--retries", "1", "--timeout", "5s", "--netrc", "--dry-run",
                        "--progress", "plain", "--max-file-size", "1G", "--rehash"]
        for command in ["plan", "verify"] {
            let result = try directory.haul([command] + syncOnly)
            XCTAssertEqual(result.exitCode, 0, "\(command): \(result.stderr)")
        }
        let syncHelp = try directory.haul(["sync", "--help"]).stdout
        for command in ["plan", "verify"] {
            let help = try directory.haul([command, "--help"]).stdout
            let options = { (text: String) in text.split(separator: "\n").filter { $0.hasPrefix("  -") }.map { $0.split(separator: " ")[0] } }
            XCTAssertEqual(options(help), options(syncHelp), "\(command) takes exactly sync's options")
            XCTAssertNotNil(help.firstMatch(of: /-j, --jobs <jobs>\s+\(sync\) Transfers/), help)
            XCTAssertNotNil(help.firstMatch(of: /--prune\s+\(sync, plan\) Delete/), help)
        }
    }
}
