import ArgumentParser
import Glibc
import Haul
import HaulEngine
import HaulFileSystem
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

            An entry with extract: names an archive (tar, plain or compressed with gzip, bzip2, xz or zstd; zip; 7z): \
            its dest becomes a folder holding the archive's contents, unpacked as the bytes arrive, checked against the \
            archive's digest and, when extract: pins tree:, the tree's (Nix's NAR hash, sha256-<base64>), and switched \
            into place in one exchange. Hostile members (absolute or .. names, links out of the folder, devices, bombs) \
            are refused. haul add --extract URL pins both.

            \(ManualFacts.block("Exit status", ManualFacts.exitStatuses))

            \(ManualFacts.block("Environment", ManualFacts.environment))
            """,
        version: HaulVersion.report,
        subcommands: [SyncCommand.self, PlanCommand.self, Verify.self, Schema.self, AddCommand.self, CacheCommand.self]
    )

    static func main() {
        // Before anything else: a SIGINT or SIGTERM from here on is taken by the watcher, never by the default action.
        InterruptWatcher.watchProcess()
        // A descriptor 0-2 closed by the caller (`haul sync >&-`) would be the next file haul opens (the run
        // lock), and output would be written into it: each is pointed at /dev/null first.
        for descriptor in Int32(0)...2 {
            var info = stat()
            if fstat(descriptor, &info) != 0, errno == EBADF { _ = open("/dev/null", O_RDWR | O_CLOEXEC) }
        }
        // A write to a closed pipe (`haul … | head`) must be an error to handle, not a silent death.
        signal(SIGPIPE, SIG_IGN)
        // Likewise a file-size limit (`ulimit -f`): one entry fails with EFBIG, the run goes on.
        signal(SIGXFSZ, SIG_IGN)
        // A low soft open-file limit (`ulimit -n`) is raised to the hard one: every command opens files by the
        // thousand, a sync by the transfer.
        _ = DescriptorLimit.raised()
        do {
            // Under an address-space limit (`ulimit -v`), threads and malloc arenas are sized to it before any starts.
            try RunLimits.start()
            var command = try parseAsRoot()
            try command.run()
        } catch {
            Output.flushLog()
            exitPrinting(error)
        }
        let status = Output.exitStatus(after: 0)
        if status != 0 { Glibc.exit(status) }
    }

    /// As the argument parser's `exit(withError:)`, but every error line starts `error:` like haul's own: help and
    /// `--version` go to standard output with status 0, anything else to standard error with its status.
    private static func exitPrinting(_ error: any Error) -> Never {
        let status = exitCode(for: error)
        let message = fullMessage(for: error)
        if !message.isEmpty {
            let lines = message.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                TerminalText(line.hasPrefix("Error: ") ? "error: " + line.dropFirst(7) : String(line))
            }
            if status.isSuccess { Output.lines(lines) } else { Output.errors(lines) }
        }
        Glibc.exit(Output.exitStatus(after: status.rawValue))
    }
}

/// Options every subcommand that reads a manifest shares.
struct ManifestOptions: ParsableArguments {
    @Argument(help: "The manifest to read (- for standard input).", completion: .file())
    var manifest: String = "haul.yaml"

    @Option(
        help: ArgumentHelp(
            "Put the files under this folder (relative to the current directory) instead of the "
                + "manifest's root.", valueName: "dir"), completion: .directory)
    var root: String?

}

/// `--shard K/N` or `HAUL_SHARD`: manage only one of N parts of the manifest (see `Shard` for which).
struct ShardOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Manage only shard K of N (1-based, by a hash of each destination path); N shards may run at once on "
                + "one root (or set HAUL_SHARD).", valueName: "K/N"))
    var shard: String?

    /// The shard asked for: the option, else the environment; a malformed one is a usage error (64).
    func resolved() throws -> Shard? {
        if let shard {
            guard let parsed = Shard(shard) else { throw ValidationError("--shard: " + Shard.problem(with: shard)) }
            return parsed
        }
        guard let text = Environment.current["HAUL_SHARD"], !text.isEmpty else { return nil }
        guard let parsed = Shard(text) else { throw ValidationError("HAUL_SHARD: " + Shard.problem(with: text)) }
        return parsed
    }

    func validate() throws { _ = try resolved() }
}

/// What a run may do beyond fetching, and what it refuses up front.
struct PolicyOptions: ParsableArguments {
    @Flag(
        help: ArgumentHelp(
            "(sync, plan) Delete files this manifest synced earlier and no longer lists (as `prune: true` does). "
                + "Only unchanged files haul wrote are deleted; modified ones are kept with a warning."))
    var prune = false

    @Flag(
        help: "(sync, plan) With pruning, accept an empty files list (which deletes every file this manifest synced).")
    var force = false

    @Flag(
        name: .customLong("require-checksums"),
        help: "(sync, plan) Refuse (exit 3) if any entry has no checksum: for CI, where every byte must be pinned.")
    var requireChecksums = false

    @Option(
        help: ArgumentHelp(
            "(sync, plan) Make this manifest the owner of the files a manifest that is gone wrote "
                + "(named as plan --prune names it, relative to root), so that pruning covers them; naming "
                + "this manifest vouches for the files a state without haul's proof says it wrote. May be "
                + "given more than once.", valueName: "manifest"), completion: .file())
    var adopt: [String] = []

    @Flag(
        help: ArgumentHelp(
            "(sync, plan) Ask the server about every unpinned file, even one it said is still fresh (max-age, "
                + "Expires) or within its entry's refresh interval."))
    var refresh = false

    /// Prints each violation and exits 3 before anything is observed or fetched.
    func enforce(on manifest: Manifest) throws {
        let violations = RunPolicy.violations(
            manifest, requireChecksums: requireChecksums,
            prune: prune || manifest.prune, force: force)
        guard violations.isEmpty else {
            Output.errors(violations.map { TerminalText($0.description) })
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
    }
}

/// Options for commands that may fetch.
struct TransferOptions: ParsableArguments {
    // Options read through a `transform` (to say why a value is refused) get no "(default: …)" from the parser:
    // their help says it, from the same constant.
    private static let defaultTransfers = 16
    static let defaultMaxFileSize = ByteSize(bytes: 16 << 30)

    @Option(
        name: .shortAndLong, help: "(sync) Transfers to run at once (1-256). (default: \(defaultTransfers))",
        transform: OptionValueError.wholeNumber(from: 1...256))
    var jobs: Int = defaultTransfers

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "(sync) Verify TLS against this CA bundle instead of the system's (or set HAUL_CA_FILE, CURL_CA_BUNDLE or "
                + "SSL_CERT_FILE).",
            valueName: "file"), completion: .file())
    var caFile: String?

    @Option(
        name: .customLong("per-host"),
        help:
            "(sync) Connections to one host at once (1-256; HTTP/2 multiplexes over one). (default: \(defaultTransfers))",
        transform: OptionValueError.wholeNumber(from: 1...256))
    var perHost: Int = defaultTransfers

    @Option(
        name: .customLong("max-file-size"),
        help: ArgumentHelp(
            "(sync) Largest download accepted for an entry without size (e.g. 500M, 2G). (default: \(defaultMaxFileSize))",
            valueName: "size"), transform: ByteSize.init(parsing:))
    var maxFileSize: ByteSize = defaultMaxFileSize

    func validate() throws {
        try CABundle.resolve(option: caFile)?.validate()
    }

    var resolvedCAFile: String? { CABundle.resolve(option: caFile)?.path }

    /// The run's settings, with as many transfers at once as the open-file and address-space limits allow
    /// (`warning` says so when that is fewer than asked), and the rest of them shared between the run's parts; exits
    /// 64 when a limit is too low to sync at all (`RunLimits.apply`).
    func syncOptions(
        prune: Bool, rewrites: URLRewriter, cacheDirectory: String?, entries: Int,
        warning: (String) -> Void
    ) throws -> SyncOptions {
        var options = SyncOptions(
            jobs: jobs, connectionsPerHost: perHost, caFile: resolvedCAFile,
            maxFileSize: maxFileSize.bytes, prune: prune, rewrites: rewrites, cacheDirectory: cacheDirectory)
        try RunLimits.apply(to: &options, transfers: true, entries: entries, warning: warning)
        return options
    }
}

/// `sync`, `plan` and `verify` take the very same options, so that one command line works for all three
/// (`haul plan … --jobs 4` is not a usage error); an option says in its help which commands it changes ("(sync)"),
/// and does nothing in the others.
///
/// Each command declares the groups itself, one level deep, rather than through one group holding the others: in a
/// debug build the argument parser checks every group once per enclosing group, and the nesting made each start of
/// the test suite's thousands of runs cost 0.6 s instead of 0.1 s.
protocol ManifestCommand: ParsableCommand {
    var manifestOptions: ManifestOptions { get }
    var reporting: ReportingOptions { get }
    var configOptions: ConfigOptions { get }
    var transferOptions: TransferOptions { get }
    var policy: PolicyOptions { get }
    var sharding: ShardOptions { get }
    var cacheOptions: CacheOptions { get }
    var durabilityOptions: DurabilityOptions { get }
    var netrcOptions: NetrcOptions { get }
    var requestOptions: RequestOptions { get }
    var runOptions: RunOptions { get }
}

extension ManifestCommand {
    /// Every option, as one value.
    var flags: SyncFlags {
        SyncFlags(
            manifestOptions: manifestOptions, reporting: reporting, configOptions: configOptions,
            transferOptions: transferOptions, policy: policy, sharding: sharding, cacheOptions: cacheOptions,
            durabilityOptions: durabilityOptions, netrcOptions: netrcOptions, requestOptions: requestOptions,
            run: runOptions)
    }
}

/// Every option of `sync`, `plan` and `verify` (see `ManifestCommand`).
struct SyncFlags {
    let manifestOptions: ManifestOptions
    let reporting: ReportingOptions
    let configOptions: ConfigOptions
    let transferOptions: TransferOptions
    let policy: PolicyOptions
    let sharding: ShardOptions
    let cacheOptions: CacheOptions
    let durabilityOptions: DurabilityOptions
    let netrcOptions: NetrcOptions
    let requestOptions: RequestOptions
    let run: RunOptions

    /// The manifest's `from:` entries pinned from their signed lists (nothing to do without `lists:`), each list's
    /// outcome reported. `offline`: the copies kept by earlier syncs alone (`verify`).
    func pinLists(
        _ manifest: Manifest, options: SyncOptions, reporter: RunReporter, offline: Bool = false,
        cancellation: Cancellation? = nil
    ) -> SignedLists.Pins {
        guard !manifest.lists.isEmpty else { return SignedLists.Pins(manifest: manifest) }
        let area = try? PrivateArea.existing(root: manifest.root)
        let pins = SignedLists.pin(
            manifest, options: options, area: area, offline: offline, cancellation: cancellation)
        reporter.lists(pins.outcomes, verbose: reporting.verbose)
        return pins
    }

    /// `--wait`, `--wait-timeout`: what to do when another run holds root; the wait is announced (who holds it) unless
    /// the output is JSON or `--quiet`.
    func waiting(root: String) -> RunLock.Waiting {
        let quietly = quiet || reporting.json
        let notice: @Sendable (String?) -> Void = { holder in
            guard !quietly else { return }
            Output.errors([
                TerminalText("haul: waiting for another haul syncing \"\(root)\" (\(StoreWording.holder(holder)))")
            ])
        }
        if let waitTimeout = run.waitTimeout { return .upTo(waitTimeout.seconds, notice: notice) }
        return run.wait ? .forever(notice: notice) : .no
    }
}

/// How a run goes: a dry run, waiting for another run, rehashing, a time limit.
struct RunOptions: ParsableArguments {
    @Flag(help: "(sync) Print the plan and change nothing.")
    var dryRun = false

    @Flag(help: "(sync) If another haul is syncing the same root, wait for it instead of exiting with status 4.")
    var wait = false

    @Option(
        name: .customLong("wait-timeout"),
        help: ArgumentHelp(
            "(sync) Wait as --wait does, for at most this long (e.g. 30s, 10m); then exit with status 4.",
            valueName: "duration"),
        transform: RunDuration.init(parsing:))
    var waitTimeout: RunDuration?

    @Flag(help: "(sync, plan) Hash every local file instead of trusting the state cache for unchanged ones.")
    var rehash = false

    @Option(
        name: .customLong("max-time"),
        help: ArgumentHelp(
            "(sync) Stop the whole run after this long (e.g. 90s, 10m, 1h): entries not finished by then fail, exit 1.",
            valueName: "duration"),
        transform: RunDuration.init(parsing:))
    var maxTime: RunDuration?
}

/// What the three manifest commands do alike with their options: load the manifest, look at root, report.
extension SyncFlags {
    var quiet: Bool { reporting.quiet }

    /// What a command observes, or exits: 5 when root's private folder is not what haul made, 4 when another run
    /// holds root, 1 for any other failure (each printed).
    func observe(_ sync: Sync, _ access: Observation.Access, rehash: Bool = false) throws -> Observation {
        do {
            return try sync.observe(access, rehash: rehash)
        } catch {
            Output.errors(["error: \(StoreWording.sentence(error))"])
            throw ExitCode(error.exitStatus.rawValue)
        }
    }

    /// A `HeadStart` for a sync of `input`, when it is large enough to be worth one, with the options the command
    /// line alone gives (the manifest's `netrc:` is not known yet); nil when not, or when those options are wrong
    /// (the sync proper then says why).
    func headStart(for input: ManifestInput, rewrites: URLRewriter) -> HeadStart? {
        guard input.size >= HeadStart.minimumManifestBytes else { return nil }
        do {
            var options = try transferOptions.syncOptions(
                prune: false, rewrites: rewrites, cacheDirectory: cacheOptions.directory(),
                entries: input.size / 100, warning: { _ in })
            options.shard = try sharding.resolved()
            options.netrc = try netrcOptions.credentials(manifestWants: false)
            try requestOptions.apply(to: &options)
            guard let root = ManifestFingerprint.declaredRoot(input, environment: Environment.current) else {
                return nil
            }
            return HeadStart.begin(options: options, root: root)
        } catch {
            return nil
        }
    }

    /// Reads and validates the manifest; on failure prints every diagnostic and exits 3.
    func load() throws -> Manifest { try load(read(), fingerprinting: false) }

    /// Opens the manifest (a file is read by each pass that needs it); on failure prints why and exits 3.
    func read() throws -> ManifestInput {
        do {
            return try ManifestLoader.read(path: manifestOptions.manifest, root: manifestOptions.root)
        } catch {
            throw refuse(error)
        }
    }

    /// Validates what `read` read; on failure prints every diagnostic and exits 3. `fingerprinting`: for a sync that
    /// may record a settled snapshot (`ManifestLoader.load`).
    func load(_ input: ManifestInput, fingerprinting: Bool, early: EarlyEntries.Handler? = nil) throws -> Manifest {
        do {
            let manifest = try ManifestLoader.load(
                input, environment: Environment.current,
                commandLineHeaders: requestOptions.standInHeaderNames,
                fingerprinting: fingerprinting, early: early)
            if !quiet { Output.errors(manifest.warningLines.map { TerminalText($0) }) }
            report(manifest.warnings)
            return manifest
        } catch {
            throw refuse(error)
        }
    }

    /// An invalid manifest said every way the run reports, and its exit status.
    private func refuse(_ error: DiagnosticsError) -> ExitCode {
        Output.errors(error.lines.map { TerminalText($0) })
        report(error.diagnostics)
        if let problem = reporting.gitHub?.invalidManifest(error.diagnostics, manifest: manifestName) { warn(problem) }
        return ExitCode(ExitStatus.invalidManifest.rawValue)
    }

    /// The settled fast path (`SettledRun`): the plan of a run with nothing to do when a snapshot shows it without
    /// validating the manifest; nil when the manifest must be read. Never waits for another run: the whole way
    /// does, and says so.
    /// `listsPlan`: the command prints the plan (`plan`, `--dry-run`); `rewrites`: the config's.
    func settled(
        _ input: ManifestInput, holder: String?, listsPlan: Bool, rewrites: URLRewriter
    ) throws -> SettledRun.Verdict? {
        let started = MonotonicClock.seconds()
        guard
            var verdict = SettledRun.check(
                input, environment: Environment.current,
                commandLineHeaders: requestOptions.standInHeaderNames,
                shard: try sharding.resolved(), prunes: policy.prune, adopts: !policy.adopt.isEmpty,
                rehash: run.rehash,
                access: holder.map { .exclusive(wait: .no, holder: $0) } ?? .lookingOnly,
                listsPlan: listsPlan, freshnessDiffers: policy.refresh || !rewrites.isEmpty)
        else { return nil }
        verdict.seconds = MonotonicClock.seconds() - started
        return verdict
    }

    /// Diagnostics as `--json` and `--annotations` want them, besides the human lines on standard error.
    private func report(_ diagnostics: [Diagnostic]) {
        if reporting.json { Output.lines(diagnostics.map { TerminalText(JSONEvents.diagnostic($0).encoded()) }) }
        reporting.gitHub?.diagnostics(diagnostics)
    }

    /// The reporter `--json`, `--quiet`, `--verbose` and `--progress` ask for, annotating for GitHub when that is on.
    func makeReporter(rewrites: URLRewriter = .none) -> RunReporter {
        let reporter = reporting.makeReporter(rewrites: rewrites, manifest: manifestOptions.manifest)
        guard let gitHub = reporting.gitHub else { return reporter }
        return AnnotatingReporter(reporter, annotations: gitHub, manifest: manifestName)
    }

    /// The manifest as annotations and the step summary name it.
    var manifestName: String {
        manifestOptions.manifest == "-" ? ManifestLoader.standardInputName : manifestOptions.manifest
    }

    /// A problem that does not change the exit status, said as the run's reporter would say it (a JSON event under
    /// `--json`, nothing under `--quiet`), for commands that have no reporter at that point.
    func warn(_ text: String) {
        if reporting.json {
            Output.lines([TerminalText(JSONEvents.warning(dest: nil, message: text).encoded())])
        } else if !quiet {
            Output.errors([TerminalText("warning: " + text)])
        }
    }
}

struct SyncCommand: ManifestCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Download what is missing or wrong, verify it, and move it into place.",
        discussion: """
            Examples:
              haul sync                            (haul.yaml in this folder)
              haul sync assets.yaml --jobs 32 --per-host 8
              haul sync assets.yaml --dry-run      (print the plan only)
              haul sync assets.yaml --require-checksums --progress plain   (CI)
              haul sync assets.yaml --prune        (delete what is no longer listed)
              haul sync assets.yaml --json | jq -c 'select(.event == "failed")'
              HAUL_CA_FILE=/etc/ssl/internal.pem haul sync assets.yaml --wait
              haul sync assets.yaml --config mirrors.yaml -v   (rewrite URLs to a mirror)
              haul sync assets.yaml --shard 2/4 --cache ~/.cache/haul   (one CI job of four)
            """)

    @OptionGroup var manifestOptions: ManifestOptions
    @OptionGroup var reporting: ReportingOptions
    @OptionGroup var configOptions: ConfigOptions
    @OptionGroup var transferOptions: TransferOptions
    @OptionGroup var policy: PolicyOptions
    @OptionGroup var sharding: ShardOptions
    @OptionGroup var cacheOptions: CacheOptions
    @OptionGroup var durabilityOptions: DurabilityOptions
    @OptionGroup var netrcOptions: NetrcOptions
    @OptionGroup var requestOptions: RequestOptions
    @OptionGroup var runOptions: RunOptions

    func run() throws {
        let (flags, manifestOptions) = (flags, manifestOptions)
        let dryRun = flags.run.dryRun
        let rewrites = try flags.configOptions.rewrites()
        let holder = "pid \(getpid()), haul sync \(manifestOptions.manifest)"
        let input = try flags.read()
        if let verdict = try flags.settled(input, holder: dryRun ? nil : holder, listsPlan: dryRun, rewrites: rewrites)
        {
            let reporter = flags.makeReporter(rewrites: rewrites)
            reporter.plan(verdict.plan, acting: !dryRun)
            guard !dryRun else { return }
            reporter.summary(
                SyncResult(plan: verdict.plan, outcomes: [], seconds: verdict.seconds), exitStatus: 0,
                interruptedBy: nil)
            return withExtendedLifetime(verdict) {}
        }
        // Downloads begin while a large manifest is read; none is put in place unless the manifest is valid.
        let headStart = dryRun ? nil : flags.headStart(for: input, rewrites: rewrites)
        defer { headStart?.abandon() }
        let manifest = try flags.load(
            input, fingerprinting: !dryRun, early: headStart.map { headStart in { headStart.offer($0) } })
        try flags.policy.enforce(on: manifest)
        let reporter = flags.makeReporter(rewrites: rewrites)
        var options = try flags.transferOptions.syncOptions(
            prune: flags.policy.prune, rewrites: rewrites,
            cacheDirectory: flags.cacheOptions.directory(),
            entries: manifest.files.count, warning: reporter.warning)
        options.shard = try flags.sharding.resolved()
        options.durability = try flags.durabilityOptions.resolved()
        options.netrc = try flags.netrcOptions.credentials(manifestWants: manifest.netrc)
        options.revalidatesFreshFiles = flags.policy.refresh
        options.adopts = Set(flags.policy.adopt)
        try flags.requestOptions.apply(to: &options)
        let cancellation = Cancellation()
        let interrupts = InterruptWatcher(
            cancelling: cancellation, timeLimit: flags.run.maxTime.map { ($0.seconds, $0.written) })
        let lists = flags.pinLists(manifest, options: options, reporter: reporter, cancellation: cancellation)
        let sync = Sync(manifest: manifest, options: options, lists: lists)
        // A dry run changes nothing, so it need not hold the lock to look.
        let observation = try flags.observe(
            sync, dryRun ? .lookingOnly : .exclusive(wait: flags.waiting(root: manifest.root), holder: holder),
            rehash: flags.run.rehash)
        if !dryRun {
            for problem in observation.stateProblems { reporter.warning(StoreWording.sentence(problem)) }
            lists.save(beside: observation)
        }
        let plan = sync.plan(observation)
        let prefetched = headStart?.finish()
        reporter.plan(plan, acting: !dryRun)
        guard !dryRun else { return keepUntilExit(observation, plan) }
        interrupts.beginChanging()
        let result = sync.apply(
            plan, observed: observation, observer: reporter, cancellation: cancellation,
            prefetched: prefetched)
        prefetched?.remove()
        let status = interrupts.exitStatus ?? result.exitStatus.rawValue
        reporter.summary(
            result, exitStatus: status, interruptedBy: interrupts.exitStatus == nil ? nil : interrupts.signalName)
        keepUntilExit(observation, result)
        if status != 0 { throw ExitCode(status) }
    }
}

struct PlanCommand: ManifestCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show what sync would do. Exits 2 when anything would change.",
        usage: "haul plan [<options>] [<manifest>]",
        discussion: """
            Exits 0 when nothing would change, 2 when something would (a revalidation of an unpinned file included).
            Examples:
              haul plan assets.yaml || echo "changes pending"
              haul plan assets.yaml --prune --json
            """)

    @OptionGroup var manifestOptions: ManifestOptions
    @OptionGroup var reporting: ReportingOptions
    @OptionGroup var configOptions: ConfigOptions
    @OptionGroup var transferOptions: TransferOptions
    @OptionGroup var policy: PolicyOptions
    @OptionGroup var sharding: ShardOptions
    @OptionGroup var cacheOptions: CacheOptions
    @OptionGroup var durabilityOptions: DurabilityOptions
    @OptionGroup var netrcOptions: NetrcOptions
    @OptionGroup var requestOptions: RequestOptions
    @OptionGroup var runOptions: RunOptions

    func run() throws {
        let flags = flags
        let rewrites = try flags.configOptions.rewrites()
        let input = try flags.read()
        if let verdict = try flags.settled(input, holder: nil, listsPlan: true, rewrites: rewrites) {
            return flags.makeReporter(rewrites: rewrites).plan(verdict.plan, acting: false)
        }
        let manifest = try flags.load(input, fingerprinting: false)
        try flags.policy.enforce(on: manifest)
        var options = SyncOptions(
            prune: flags.policy.prune, shard: try flags.sharding.resolved(), rewrites: rewrites,
            cacheDirectory: flags.cacheOptions.directory())
        try RunLimits.apply(to: &options, transfers: false, entries: manifest.files.count)
        options.revalidatesFreshFiles = flags.policy.refresh
        options.adopts = Set(flags.policy.adopt)
        let reporter = flags.makeReporter(rewrites: rewrites)
        let lists = try flags.pinLists(manifest, options: listOptions(manifest, rewrites: rewrites), reporter: reporter)
        let sync = Sync(manifest: manifest, options: options, lists: lists)
        let plan = sync.plan(try flags.observe(sync, .lookingOnly, rehash: flags.run.rehash))
        reporter.plan(plan, acting: false)
        keepUntilExit(plan)
        if plan.hasChanges { throw ExitCode(ExitStatus.changesPending.rawValue) }
    }

    /// How the lists are fetched: as a sync would fetch (its CA file, proxy, credentials and headers), no more.
    private func listOptions(_ manifest: Manifest, rewrites: URLRewriter) throws -> SyncOptions {
        guard !manifest.lists.isEmpty else { return SyncOptions(prune: false, rewrites: rewrites) }
        var options = try flags.transferOptions.syncOptions(
            prune: false, rewrites: rewrites, cacheDirectory: nil, entries: manifest.lists.count, warning: { _ in })
        options.netrc = try flags.netrcOptions.credentials(manifestWants: manifest.netrc)
        try flags.requestOptions.apply(to: &options)
        return options
    }
}

struct Verify: ManifestCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hash every local file and compare with the manifest (no network).",
        usage: "haul verify [<options>] [<manifest>]",
        discussion: """
            Ignores the state cache: every pinned file is hashed. Exits 1 if any file is missing or differs.
            Examples:
              haul verify assets.yaml
              haul verify assets.yaml --quiet --json
            """)

    @OptionGroup var manifestOptions: ManifestOptions
    @OptionGroup var reporting: ReportingOptions
    @OptionGroup var configOptions: ConfigOptions
    @OptionGroup var transferOptions: TransferOptions
    @OptionGroup var policy: PolicyOptions
    @OptionGroup var sharding: ShardOptions
    @OptionGroup var cacheOptions: CacheOptions
    @OptionGroup var durabilityOptions: DurabilityOptions
    @OptionGroup var netrcOptions: NetrcOptions
    @OptionGroup var requestOptions: RequestOptions
    @OptionGroup var runOptions: RunOptions
    // Verify fetches nothing; the config is read only so that a broken one is noticed.

    func run() throws {
        let flags = flags
        _ = try flags.configOptions.rewrites()
        var manifest = try flags.load()
        if let shard = try flags.sharding.resolved() { manifest = manifest.restricted(to: shard) }
        var limits = SyncOptions()
        try RunLimits.apply(to: &limits, transfers: false, entries: manifest.files.count)
        // The pins of `from:` entries come from the lists' copies the last sync verified: no request.
        let lists = flags.pinLists(manifest, options: limits, reporter: flags.makeReporter(), offline: true)
        let result: VerificationResult
        do {
            result = try VerificationResult(
                manifest: lists.manifest, unverifiedLists: lists.unverified, concurrency: limits.descriptors.observers)
        } catch {
            Output.errors(["error: \(StoreWording.sentence(error))"])
            throw ExitCode(error.exitStatus.rawValue)
        }
        let lines = HumanReport.verifyLines(result)
        if let problem = flags.reporting.gitHub?.verified(result, manifest: flags.manifestName) { flags.warn(problem) }
        if flags.reporting.json {
            Output.lines([TerminalText(JSONEvents.verify(result).encoded())])
        } else {
            Output.lines((flags.quiet ? lines.dropLast() : lines[...]).map { TerminalText($0) })
        }
        if result.exitStatus != .success { throw ExitCode(result.exitStatus.rawValue) }
    }
}

struct Schema: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the manifest's JSON Schema (draft 2020-12).",
        discussion: "Example: haul schema > haul-manifest.schema.json")

    func run() throws {
        // Line by line: a line break inside one line would be shown as `\n`. (The schema has nothing to escape.)
        let lines = ManifestSchema.json.split(separator: "\n", omittingEmptySubsequences: false)
        Output.lines(lines.map { TerminalText(String($0)) })
    }
}

/// `--durability full|none` or `HAUL_DURABILITY`: whether committed files must survive a power loss.
struct DurabilityOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "(sync) full: each file is on disk before it is reported done (default). none: no flushing; still atomic if haul "
                + "is killed, not across a power loss (ephemeral CI runners). Or set HAUL_DURABILITY.",
            valueName: "full|none"))
    var durability: String?

    /// The level asked for: the option, else the environment, else `full`; an unknown one is a usage error (64).
    func resolved() throws -> Durability {
        if let durability { return try Self.parse(durability, from: "--durability") }
        return try Self.fromEnvironment()
    }

    /// HAUL_DURABILITY, else `full` (for `haul add`, which has no option for it).
    static func fromEnvironment() throws -> Durability {
        guard let text = Environment.current["HAUL_DURABILITY"], !text.isEmpty else { return .full }
        return try Self.parse(text, from: "HAUL_DURABILITY")
    }

    func validate() throws { _ = try resolved() }

    private static func parse(_ text: String, from source: String) throws -> Durability {
        guard let level = Durability(rawValue: text) else {
            throw ValidationError("\(source): '\(text)' is not a durability level: use full or none")
        }
        return level
    }
}

/// A duration on the command line, read as a manifest's `timeout` is: `90s`, `10m`, `1h`, `250ms`, bare seconds.
struct RunDuration {
    var seconds: Double
    /// As the user wrote it, for messages.
    var written: String

    /// The argument parser prints what is thrown after "The value '…' is invalid for '--option <duration>': ".
    init(parsing argument: String) throws(RuleFailure) {
        seconds = try Seconds(duration: argument).value
        written = argument
    }
}

/// `1048576`, `512K`, `2.5M`, `2G`, `1T` (binary units), as `ByteSizeText` reads a manifest's sizes, and decimals as curl
/// takes them.
struct ByteSize: CustomStringConvertible {
    var bytes: Int64

    var description: String {
        for (suffix, unit) in [("T", Int64(1) << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)]
        where bytes % unit == 0 {
            return "\(bytes / unit)\(suffix)"
        }
        return "\(bytes)"
    }

    init(bytes: Int64) { self.bytes = bytes }

    /// The argument parser prints what is thrown after "The value '…' is invalid for '--option <size>': ".
    init(parsing argument: String) throws(OptionValueError) {
        do {
            bytes = try ByteSizeText.parse(argument, fractions: true)
        } catch {
            throw OptionValueError(error.description)
        }
    }
}

/// Why a value on the command line was refused, said after the argument parser's "The value '…' is invalid for
/// '--option <value>': ".
struct OptionValueError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// A parser for a whole number within `range`, for `@Option(transform:)`.
    static func wholeNumber(from range: ClosedRange<Int>) -> @Sendable (String) throws -> Int {
        { text in
            guard let value: Int = wholeNumber(text) else {
                throw OptionValueError("expected a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            guard range.contains(value) else {
                throw OptionValueError("must be from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
    }

    /// An archive format by its `format:` name, for `@Option(transform:)`.
    static func archiveFormat(_ text: String) throws(OptionValueError) -> ArchiveFormat {
        guard let format = ArchiveFormat(rawValue: text) else {
            throw OptionValueError("expected one of " + ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return format
    }

    /// A number of bytes, 0 or more, for `@Option(transform:)`.
    static func byteCount(_ text: String) throws(OptionValueError) -> Int64 {
        guard let value: Int64 = wholeNumber(text) else { throw OptionValueError("expected a whole number of bytes") }
        guard value >= 0 else { throw OptionValueError("must be 0 or more") }
        return value
    }

    /// `text` as a whole number in digits (a `-` before a negative one; no `+`, space or fraction), or nil.
    static func wholeNumber<Number: FixedWidthInteger>(_ text: String) -> Number? {
        text.hasPrefix("+") ? nil : Number(text)
    }
}

extension ObservationFailure {
    var exitStatus: ExitStatus {
        switch self {
        case .privateArea(.unsafe): .unsafePrivateFolder
        case .lock(.busy): .rootBusy
        case .privateArea, .lock: .entryFailed
        }
    }
}
