import Foundation
import HaulTestSupport
import XCTest

/// The completion scripts `haul --generate-completion-script` prints, loaded into bash, zsh and fish themselves:
/// the manifest and every option that names a file or a folder complete the names in the current folder.
final class CompletionTests: XCTestCase {
    /// What the current folder holds: two names and a folder that start with "ex", and one that does not.
    private static let files = ["example.yaml", "extra.pem", "other.txt"]
    private static let everyName: Set<String> = ["example.yaml", "exdir", "extra.pem"]
    private static let folders: Set<String> = ["exdir"]

    /// Each command line ends in the word being completed, "ex".
    private static let cases: [(words: [String], expected: Set<String>)] = [
        (["haul", "sync", "ex"], everyName),
        (["haul", "plan", "ex"], everyName),
        (["haul", "verify", "ex"], everyName),
        (["haul", "sync", "--root", "ex"], folders),
        (["haul", "verify", "--root", "ex"], folders),
        (["haul", "sync", "--ca-file", "ex"], everyName),
        (["haul", "sync", "--config", "ex"], everyName),
        (["haul", "plan", "--adopt", "ex"], everyName),
        (["haul", "sync", "--cache", "ex"], folders),
        (["haul", "add", "--manifest", "ex"], everyName),
        (["haul", "add", "--ca-file", "ex"], everyName),
        (["haul", "add", "--config", "ex"], everyName),
        (["haul", "cache", "info", "--cache", "ex"], folders),
        (["haul", "cache", "gc", "--cache", "ex"], folders),
    ]

    func testBashCompletesPaths() throws {
        let shell = try Self.shell("/bin/bash", package: "bash")
        let setting = try Setting(shell: "bash", scriptName: "haul.bash")
        // The function bash-completion would call, with the variables bash sets for it; COMPREPLY is the answer.
        try setting.directory.write(
            "complete.bash",
            """
            source "$1"
            shift
            COMP_WORDS=("$@")
            COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            COMP_LINE="${COMP_WORDS[*]}"
            COMP_POINT=${#COMP_LINE}
            COMPREPLY=()
            _haul haul "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
            printf '%s\\n' "${COMPREPLY[@]}"

            """)
        for (words, expected) in Self.cases {
            let result = try setting.run(
                shell,
                [
                    "--norc", "--noprofile", setting.directory.path("complete.bash"),
                    setting.script,
                ] + words)
            XCTAssertEqual(result.exitCode, 0, "\(words): \(result.stderr)")
            XCTAssertEqual(Self.names(result.stdout.split(separator: "\n")), expected, words.joined(separator: " "))
        }
    }

    func testZshCompletesPaths() throws {
        let shell = try Self.shell("/usr/bin/zsh", package: "zsh")
        let setting = try Setting(shell: "zsh", scriptName: "_haul")
        // Completion runs only inside the line editor, so an interactive zsh on a pseudo-terminal (zpty) is given
        // the line and a Tab; its compadd reports each match that completion really added.
        try setting.directory.write(
            "capture.zsh",
            """
            autoload -U compinit && compinit -u -D
            source "$HAUL_COMPLETION_SCRIPT"
            compdef _haul haul
            compadd() {
                if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then
                    builtin compadd "$@"
                    return $?
                fi
                local -a hits
                builtin compadd -A hits "$@"
                local -i before=$compstate[nmatches]
                builtin compadd "$@"
                local -i result=$?
                if (( compstate[nmatches] > before )); then
                    local hit
                    for hit in $hits; do print -r -- "<<match>>$hit"; done
                fi
                return result
            }
            capture_complete() { _main_complete; print -r -- "<<done>>" }
            zle -C capture-complete complete-word capture_complete
            bindkey '^I' capture-complete

            """)
        try setting.directory.write(
            "complete.zsh",
            """
            zmodload zsh/zpty
            zpty shell 'zsh -f -i'
            zpty -w shell "source ${(q)0:h}/capture.zsh"
            zpty -w -n shell "$*"$'\\t'
            zpty -r shell output '*<<done>>*'
            print -r -- "$output"
            zpty -d shell

            """)
        for (words, expected) in Self.cases {
            let result = try setting.run(
                shell, ["-f", setting.directory.path("complete.zsh")] + words,
                environment: ["HAUL_COMPLETION_SCRIPT": setting.script])
            XCTAssertEqual(result.exitCode, 0, "\(words): \(result.stderr)")
            let matches = result.stdout.matches(of: /<<match>>([^\r\n]*)/).map { $0.output.1 }
            XCTAssertEqual(Self.names(matches), expected, words.joined(separator: " "))
        }
    }

    func testFishCompletesPaths() throws {
        let shell = try Self.shell("/usr/bin/fish", package: "fish")
        let setting = try Setting(shell: "fish", scriptName: "haul.fish")
        for (words, expected) in Self.cases {
            let line = words.joined(separator: " ")
            let result = try setting.run(
                shell,
                [
                    "--no-config", "-c", "source $argv[1]; complete -C $argv[2]",
                    setting.script, line,
                ])
            XCTAssertEqual(result.exitCode, 0, "\(line): \(result.stderr)")
            // Each line is a candidate, then a tab and its description when it has one.
            let candidates = result.stdout.split(separator: "\n").map {
                $0.split(separator: "\t", maxSplits: 1).first ?? ""
            }
            XCTAssertEqual(Self.names(candidates), expected, line)
        }
        // fish made its folders in the setting's home, not where every other test's haul looks for a config.
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: ProcessRunner.minimalEnvironment["XDG_CONFIG_HOME"] ?? ""))
    }

    /// A temporary folder with the generated script, a home for the shell, and `work/`, where completion runs.
    private struct Setting {
        let directory: TemporaryDirectory
        let script: String

        init(shell: String, scriptName: String) throws {
            directory = try TemporaryDirectory()
            let generated = try HaulProcess.run(["--generate-completion-script", shell])
            XCTAssertEqual(generated.exitCode, 0, generated.stderr)
            try directory.write(scriptName, generated.stdout)
            script = directory.path(scriptName)
            try directory.makeDirectory("home")
            try directory.makeDirectory("work/exdir")
            for name in CompletionTests.files { try directory.write("work/" + name, "") }
        }

        /// The shell's home and XDG folders are the setting's own: fish makes its config and data folders where
        /// they point, and the suite's unreachable defaults (`ProcessRunner.minimalEnvironment`) must stay unmade.
        func run(_ shell: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
            let home = directory.path("home")
            let own = [
                "HOME": home, "XDG_CONFIG_HOME": home + "/.config", "XDG_DATA_HOME": home + "/.local/share",
                "XDG_CACHE_HOME": home + "/.cache",
            ]
            return try ProcessRunner.run(
                shell, arguments, environment: environment.merging(own) { a, _ in a },
                currentDirectory: directory.path("work"), timeout: 60)
        }
    }

    /// The names offered, less the "/" some shells put after a folder's.
    private static func names(_ candidates: [some StringProtocol]) -> Set<String> {
        Set(candidates.map { String($0.hasSuffix("/") ? $0.dropLast() : $0[...]) }.filter { !$0.isEmpty })
    }

    private static func shell(_ path: String, package: String) throws -> String {
        guard access(path, X_OK) == 0 else {
            throw Capability.unavailable("\(package) is not installed (scripts/setup-debian.sh installs it)")
        }
        return path
    }
}
