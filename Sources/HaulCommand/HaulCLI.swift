import ArgumentParser
import Glibc
import Haul
import HaulEngine
import HaulManifest
import HaulStore

@main
struct HaulCLI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "haul",
        abstract: "Reconcile files on disk with a manifest of URLs and checksums.",
        discussion: """
        haul reads a YAML manifest, looks at what is on disk, plans only the downloads that are needed, fetches \
        them concurrently while verifying each hash, and moves each verified file into place atomically.

        Exit status: 0 everything in its desired state (plan: nothing to do); 1 an entry failed; 2 plan found \
        changes; 3 the manifest is invalid (nothing touched); 64 usage error.
        """,
        version: HaulVersion.current,
        subcommands: [Sync.self, PlanCommand.self, Verify.self, Schema.self, AddCommand.self]
    )

    static func main() {
        // A write to a closed pipe (`haul … | head`) must be an error to handle, not a silent death.
        signal(SIGPIPE, SIG_IGN)
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            exit(withError: error)
        }
    }
}

/// Options every subcommand that reads a manifest shares.
struct ManifestOptions: ParsableArguments {
    @Argument(help: "The manifest to read.")
    var manifest: String = "haul.yaml"

    @Flag(name: .shortAndLong, help: "Print only errors.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Also print each file fetched and each retry.")
    var verbose = false

    /// Reads and validates the manifest; on failure prints every diagnostic and exits 3.
    func load() throws -> Manifest {
        do {
            let manifest = try ManifestLoader.load(path: manifest, environment: Environment.current)
            Output.errors(manifest.warnings.map(\.description))
            return manifest
        } catch {
            Output.errors(error.diagnostics.map(\.description))
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
    }
}

/// Options for commands that may fetch.
struct TransferOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "Transfers to run at once (1-256).")
    var jobs: Int = 16

    @Option(name: .customLong("ca-file"), help: ArgumentHelp(
        "Verify TLS against this CA bundle instead of the system's (or set HAUL_CA_FILE).", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("per-host"), help: "Connections to one host at once (HTTP/2 multiplexes over one).")
    var perHost: Int = 16

    @Option(name: .customLong("max-file-size"), help: ArgumentHelp(
        "Largest download accepted for an entry without size (e.g. 500M, 2G).", valueName: "size"))
    var maxFileSize: ByteSize = ByteSize(bytes: 16 << 30)

    func validate() throws {
        guard (1...256).contains(jobs) else { throw ValidationError("--jobs must be between 1 and 256, not \(jobs)") }
        guard (1...256).contains(perHost) else { throw ValidationError("--per-host must be between 1 and 256, not \(perHost)") }
        if let caFile = resolvedCAFile, access(caFile, R_OK) != 0 {
            throw ValidationError("cannot read CA bundle \"\(caFile)\": \(String(cString: strerror(errno)))")
        }
    }

    var resolvedCAFile: String? { caFile ?? Environment.current["HAUL_CA_FILE"].flatMap { $0.isEmpty ? nil : $0 } }

    var syncOptions: SyncOptions {
        SyncOptions(jobs: jobs, connectionsPerHost: perHost, caFile: resolvedCAFile, maxFileSize: maxFileSize.bytes)
    }
}

struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download what is missing or wrong, verify it, and move it into place.",
        discussion: "Example: haul sync assets.yaml --jobs 32")

    @OptionGroup var manifestOptions: ManifestOptions
    @OptionGroup var transferOptions: TransferOptions

    @Flag(help: "Print the plan and change nothing.")
    var dryRun = false

    @Flag(help: "If another haul is syncing the same root, wait for it instead of exiting with status 4.")
    var wait = false

    @Flag(help: "Hash every local file instead of trusting the state cache for unchanged ones.")
    var rehash = false

    func run() throws {
        let manifest = try manifestOptions.load()
        if manifest.prune {
            Output.errors(["warning: \(manifest.sourcePath): prune is not implemented yet; no file is deleted"])
        }
        let reconciler = Reconciler(manifest: manifest, options: transferOptions.syncOptions)
        if dryRun {
            Output.lines(HumanReport.planLines(reconciler.assess(rehash: rehash).plan))
            return
        }
        let cancellation = Cancellation()
        let interrupts = InterruptWatcher(cancelling: cancellation)
        // Held until the process exits: observing, fetching and committing all happen under it.
        let lock: RunLock
        do {
            lock = try RunLock(root: manifest.root, wait: wait,
                               holder: "pid \(getpid()), haul sync \(manifestOptions.manifest)")
        } catch {
            Output.errors(["error: \(error)"])
            throw ExitCode(error.isBusy ? ExitStatus.rootBusy.rawValue : ExitStatus.entryFailed.rawValue)
        }
        defer { withExtendedLifetime(lock) {} }
        let assessment = reconciler.assess(rehash: rehash)
        if let warning = assessment.cacheWarning { Output.errors(["warning: \(warning)"]) }
        let plan = assessment.plan
        if plan.hasChanges && !manifestOptions.quiet { Output.lines(HumanReport.planLines(plan)) }
        let printer = ProgressPrinter(verbose: manifestOptions.verbose)
        let result = reconciler.apply(assessment, observer: printer, cancellation: cancellation)
        if let status = interrupts.exitStatus {
            let stopped = result.failures.count
            Output.errors(["haul: interrupted by \(interrupts.signalName); \(stopped) unfinished "
                           + "\(stopped == 1 ? "entry keeps its" : "entries keep their") old content (partial downloads are kept to resume)"])
            throw ExitCode(status)
        }
        if !manifestOptions.quiet { Output.lines([HumanReport.syncSummary(result)]) }
        if result.exitStatus != .success { throw ExitCode(result.exitStatus.rawValue) }
    }
}

struct PlanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show what sync would do. Exits 2 when anything would change.",
        discussion: "Example: haul plan assets.yaml || echo \"changes pending\"")

    @OptionGroup var manifestOptions: ManifestOptions

    func run() throws {
        let manifest = try manifestOptions.load()
        let plan = Reconciler(manifest: manifest, options: SyncOptions()).plan()
        if !manifestOptions.quiet { Output.lines(HumanReport.planLines(plan)) }
        if plan.hasChanges { throw ExitCode(ExitStatus.changesPending.rawValue) }
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hash every local file and compare with the manifest (no network).",
        discussion: "Example: haul verify assets.yaml")

    @OptionGroup var manifestOptions: ManifestOptions

    func run() throws {
        let result = VerificationResult(manifest: try manifestOptions.load())
        let lines = result.lines()
        if manifestOptions.quiet {
            Output.lines(Array(lines.dropLast()))
        } else {
            Output.lines(lines)
        }
        if result.exitStatus != .success { throw ExitCode(result.exitStatus.rawValue) }
    }
}

struct Schema: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the manifest's JSON Schema (draft 2020-12).",
        discussion: "Example: haul schema > haul-manifest.schema.json")

    func run() throws {
        Output.lines([ManifestSchema.json])
    }
}

/// `1048576`, `512K`, `500M`, `2G`, `1T` (binary units).
struct ByteSize: ExpressibleByArgument, CustomStringConvertible {
    var bytes: Int64

    var description: String {
        for (suffix, unit) in [("T", Int64(1) << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] where bytes % unit == 0 {
            return "\(bytes / unit)\(suffix)"
        }
        return "\(bytes)"
    }

    var defaultValueDescription: String { description }

    init(bytes: Int64) { self.bytes = bytes }

    init?(argument: String) {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var text = argument.uppercased()
        if text.hasSuffix("IB") { text.removeLast(2) } else if text.hasSuffix("B") { text.removeLast() }
        var multiplier: Int64 = 1
        if let last = text.last, let unit = units[last] {
            multiplier = unit
            text.removeLast()
        }
        guard let value = Int64(text), value > 0 else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { return nil }
        bytes = product
    }
}

extension RunLock.Failure {
    var isBusy: Bool {
        if case .busy = self { return true }
        return false
    }
}
