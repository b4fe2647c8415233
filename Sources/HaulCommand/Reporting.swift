import ArgumentParser
import Glibc
import Haul
import HaulManifest
import HaulPlanner

/// How a sync shows what it does. `sync`, `plan` and `verify` tell their reporter what happened; the reporter
/// alone decides what is written where, so `--json` can promise that nothing else reaches stdout.
protocol RunReporter: SyncObserver {
    /// A problem that does not stop the run (an unusable state cache, a prune that kept a modified file).
    func warning(_ text: String)
    /// The plan, before anything is fetched; `acting` is false for `plan` and `--dry-run`.
    func plan(_ plan: Plan, acting: Bool)
    /// The end of a sync. `interruptedBy` names the signal that stopped it, if one did.
    func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?)
    /// What each signed list gave, before the plan: a list that pinned nothing is an error.
    func lists(_ outcomes: [SignedLists.Outcome], verbose: Bool)
}

extension RunReporter {
    /// The sync's warnings, in the words every reporter shows.
    func warning(_ warning: SyncWarning) { self.warning(HumanReport.sentence(warning)) }
}

/// `--progress`: what a person or a log sees while files arrive.
enum ProgressStyle: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// `bar` on a terminal, `plain` elsewhere (a pipe, a CI log, `TERM=dumb`).
    case auto
    /// A live view redrawn in place: overall line and one line per active transfer.
    case bar
    /// One line per finished file and a heartbeat for long transfers: no cursor movement, fit for logs.
    case plain
    /// Only the plan, failures and the summary.
    case none

    /// `auto` made concrete for this process: cursor tricks only on a terminal that understands them, and not in CI.
    func resolved(environment: [String: String], stderrIsTerminal: Bool) -> ProgressStyle {
        guard self == .auto else { return self }
        let term = environment["TERM"] ?? ""
        let inCI = !(environment["CI"] ?? "").isEmpty
        return stderrIsTerminal && !inCI && term != "dumb" && !term.isEmpty ? .bar : .plain
    }
}

/// Options every command that reports shares.
struct ReportingOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Print only errors.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Also print each file fetched and each retry.")
    var verbose = false

    @Option(
        help: ArgumentHelp(
            "(sync) Progress while files arrive: auto (bar on a terminal, plain otherwise), bar, plain, none.",
            valueName: "style"))
    var progress: ProgressStyle = .auto

    @Flag(
        help: ArgumentHelp(
            "Write newline-delimited JSON events to stdout and nothing else: each command writes a "
                + "diagnostic per manifest problem; sync writes plan, start, progress, retry, warning, done, failed, "
                + "pruned and summary; plan writes plan; verify writes verify."))
    var json = false

    @Option(
        help: ArgumentHelp(
            "Workflow commands for a CI: github (annotations on the manifest's lines, and a table in "
                + "$GITHUB_STEP_SUMMARY; the default when GITHUB_ACTIONS=true) or none.", valueName: "style"))
    var annotations: AnnotationStyle?

    var gitHub: GitHubAnnotations? { GitHubAnnotations.resolve(annotations, json: json) }

    /// `rewrites`: the config's, so that `--verbose` can say where a URL was rewritten from; `manifest`: its path as
    /// given, for the commands a failure names.
    func makeReporter(rewrites: URLRewriter = .none, manifest: String = "haul.yaml") -> RunReporter {
        if json { return JSONReporter(rewrites: rewrites, manifest: manifest) }
        let environment = Environment.current
        let style =
            quiet ? .none : progress.resolved(environment: environment, stderrIsTerminal: isatty(STDERR_FILENO) == 1)
        return HumanReporter(
            style: style, quiet: quiet, verbose: verbose, rewrites: rewrites, manifest: manifest,
            colour: Colour.enabled(environment: environment, isTerminal: isatty(STDERR_FILENO) == 1))
    }
}

/// ANSI colour for a terminal, never for a pipe, and never when the environment says no even on a terminal:
/// `NO_COLOR` set (https://no-color.org), `TERM=dumb`, or `CI` set — CI runners often give the job a
/// pseudo-terminal whose output ends up in a log, where escape codes are noise (the same rule that gives CI the
/// plain progress format).
enum Colour {
    static func enabled(environment: [String: String], isTerminal: Bool) -> Bool {
        isTerminal && !isSet("NO_COLOR", in: environment) && !isSet("CI", in: environment)
            && environment["TERM"] != "dumb"
    }

    /// Set and not empty: `CI=` and `NO_COLOR=` count as unset, as the conventions say.
    private static func isSet(_ name: String, in environment: [String: String]) -> Bool {
        !(environment[name] ?? "").isEmpty
    }
}
