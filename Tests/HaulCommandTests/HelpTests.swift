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
