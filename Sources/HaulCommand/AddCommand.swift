import ArgumentParser
import Glibc
import Haul
import HaulDigest
import HaulEngine
import HaulManifest
import HaulSignature
import HaulStore

/// `haul add URL...`: download each once, pin what arrived (sha256 and size), append the entries to the manifest,
/// and put the files in place (`--extract`: each an archive, unpacked once to pin its tree too, then put in place
/// as a folder); `haul add --from-sums LIST`: pin every file a published checksum list names, without
/// downloading them.
///
/// Everything that can be checked without the network is checked first (the URLs, the destinations, that the
/// manifest can take the entries and still validate), so that a mistake costs no download. The manifest is
/// replaced once, atomically, only after the edited text has been loaded back by the real loader and reads back
/// every new entry exactly. The downloads are then placed by a sync of the new entries alone (`KeptDownloads`).
///
/// The decisions are the `Pinning` step's, as values (`PinningRequest` in, `PinningOutcome` out), so that they can
/// be tested without a process; what stays here is what needs one: the options, signals, the lock's wait, the words.
struct AddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Download URLs once and pin them in the manifest (url, dest, sha256, size).",
        usage: "haul add <url>... [--dest <path>] [--manifest <file>] [<options>]\n"
            + "haul add --extract <url>... [--strip <n>] [--format <format>] [<options>]\n"
            + "haul add --from-sums <url> [--match <glob>]... [<options>]\n"
            + "haul add --from-sums <url> --trusted-key <key>... [--signature <url>]\n"
            + "haul add --update <dest>... [<options>]\n"
            + "haul add --update-all [<options>]",
        discussion: """
            Each file is fetched once through the same engine as sync and measured; once the manifest is written, the \
            files are put in place as sync would (the root's lock, an atomic commit, the state recorded), so the next \
            sync makes no request for them. The entries go after the last entry of files:, in the manifest's own \
            indentation; comments and formatting are left as they are. A missing manifest is created. The manifest \
            is replaced atomically, once, and only if it still validates. A destination already in the manifest is \
            refused (exit 3), with the haul add --update command that pins it anew; a URL already listed under another \
            destination is added with a warning. If another haul holds the root, the files are left for the next sync \
            (exit 4), unless --wait or --wait-timeout waits for it as sync does. --quiet prints only warnings and \
            errors; --json writes a pinned event per entry (dest, url, sha256, digest, size, result), error and \
            warning events for its messages, and a summary event last, whatever the exit.

            --update DEST (repeatable) pins the entries of those destinations anew; --update-all pins every entry \
            that has a checksum anew, as terraform init -upgrade does. Each is downloaded first; the changed ones get \
            their new checksum and size where they stand, identical ones are left alone, and the manifest is rewritten \
            once, only if every download succeeded (a failure exits 1 naming the entry and the URL, the manifest \
            untouched).

            --extract pins an archive and the tree it unpacks to: the archive is downloaded and hashed, unpacked once \
            into a private temporary folder (never the destination) by the rules sync will apply (--strip, --format), \
            and the tree's NAR digest written as extract: tree: sha256-…, the value nix hash path prints for it. The \
            folder is named after the archive less its suffix (sdk-1.2.tar.gz: sdk-1.2/) unless --dest names it. An \
            archive that does not unpack (a member named ../x, an absolute name, a device node, a bomb, …) is refused \
            naming the URL, the member and the rule (exit 1), the manifest untouched. With --sha256, --sha512 or \
            --integrity nothing is downloaded, and the tree is not pinned.

            --from-sums reads a checksum list published beside a release's files (sha256sum or sha512sum output, or \
            the BSD form "SHA256 (name) = hex") and pins each file it names, by its listed digest, at the list's \
            folder + name, without downloading the files; --dest DIR/ puts them in that folder instead. A line that \
            is not a checksum stops it (exit 3, its line named), the manifest untouched. Run again, it adds only what \
            the manifest lacks ("2 already pinned"); an entry whose digest the list now gives differently is refused \
            (exit 3) unless --update-all is given, which pins it anew.

            --trusted-key KEY (repeatable: an inline minisign or signify key RW…, an SSH public key line, or a key file: \
            minisign or SSH .pub, an OpenPGP keyring) makes --from-sums check the list's signature before reading it: \
            --signature URL, or auto (the default), the first of the list's URL + .minisig, .sig, .asc, .gpg the \
            server has; a clear-signed list (gpg --clearsign) is read only as far as it is signed. A bad or missing \
            signature exits 1, the manifest untouched; the entries are written below a comment naming the list, the \
            signature and the key. --verbose prints minisign's trusted comment.

            Examples:
              haul add https://example.com/v1.2/tool.tar.gz --dest bin/tool.tar.gz
              haul add https://example.com/a.csv https://example.com/b.csv
              haul add https://example.com/data.csv --print
              haul add --extract https://example.com/v1.2/sdk-1.2.tar.gz --strip 1
              haul add --from-sums https://example.com/v1.2/SHA256SUMS --match '*.tar.gz'
              haul add https://example.com/v1.2/tool.tar.gz --sha256 9f86d0…  (no download)
              haul add --update bin/tool.tar.gz      (upstream changed: pin it anew)
              haul add --update sdk-1.2              (an archive: its checksum and its tree anew)
              haul add --update-all                  (every pinned entry, rewritten once)
              haul add --from-sums https://example.com/v1.3/SHA256SUMS --dest vendor/
              haul add --from-sums https://example.com/SHA256SUMS --trusted-key key.pub
            """)

    @Argument(
        help: ArgumentHelp(
            "The http or https URLs to pin; ${VAR} expands from the environment, as in a manifest.",
            valueName: "url"))
    var urls: [String] = []

    @Option(
        help: ArgumentHelp(
            "Where sync will put the file (with --extract, the folder), relative to the manifest's "
                + "root (default: the URL's file name, less its archive suffix with --extract; one URL only); with --from-sums, "
                + "a folder (DIR/) for every file of the list.",
            valueName: "path"))
    var dest: String?

    @Flag(
        name: .customLong("extract"),
        help: ArgumentHelp(
            "Each URL is an archive to unpack into a folder (default: the URL's file name less its suffix, sdk-1.2.tar.gz: "
                + "sdk-1.2): pin the archive and the tree it unpacks to (extract: tree: sha256-…)."))
    var extract = false

    @Option(
        name: .customLong("strip"),
        help: ArgumentHelp(
            "With --extract: drop this many leading folders from every member, as tar --strip-components does (written as "
                + "extract: strip: and part of the tree pinned).", valueName: "n"),
        transform: OptionValueError.wholeNumber(from: 0...DestinationPath.maximumBytes))
    var strip: Int?

    @Option(
        name: .customLong("format"),
        help: ArgumentHelp(
            "With --extract: the archive's format when the URL's file name does not tell it: "
                + ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", ") + ".", valueName: "format"),
        transform: OptionValueError.archiveFormat)
    var format: ArchiveFormat?

    @Option(
        help: ArgumentHelp(
            "The manifest to add the entries to: a regular file, created when missing (not standard input).",
            valueName: "file"), completion: .file())
    var manifest: String = "haul.yaml"

    @Flag(name: .customLong("print"), help: "Print the entries instead of adding them; no manifest is read or written.")
    var printOnly = false

    @Option(
        name: .customLong("from-sums"),
        help: ArgumentHelp(
            "Pin every file this checksum list names (sha256sum/sha512sum output or BSD form), at the list's folder + "
                + "name, without downloading them.", valueName: "url"))
    var fromSums: String?

    @Option(
        name: .customLong("match"),
        help: ArgumentHelp(
            "With --from-sums: only the files whose name matches this glob (as the shell matches: *, ?, [...]); may be "
                + "given more than once.", valueName: "glob"))
    var matches: [String] = []

    @Option(
        // Not `--key`: that is the client certificate's private key (`--cert`), which add shares with sync.
        name: .customLong("trusted-key"),
        help: ArgumentHelp(
            "With --from-sums: a key the list must be signed by: a minisign or signify key (RW…), an SSH public key "
                + "line (ssh-ed25519 AAAA…), or a key file (minisign or SSH .pub, an OpenPGP keyring); may be given "
                + "more than once.", valueName: "key"))
    var keys: [String] = []

    @Option(
        name: .customLong("signature"),
        help: ArgumentHelp(
            "With --trusted-key: the list's signature's URL, or auto (the default with --trusted-key): the first of the list's URL + "
                + ".minisig, .sig, .asc, .gpg the server has (a clear-signed list needs none).", valueName: "url"))
    var signature: String?

    @Flag(
        name: [.customShort("v"), .customLong("verbose")],
        help: "With --trusted-key: also print the signature's trusted comment (minisign).")
    var verbose = false

    @Option(
        name: .customLong("update"),
        help: ArgumentHelp(
            "Pin the manifest's entry for this destination anew, after its file changed upstream: its own url is "
                + "downloaded (or --sha256 … is taken) and its checksum and size are rewritten where they stand; may be "
                + "given more than once.",
            valueName: "dest"))
    var updates: [String] = []

    @Flag(
        name: .customLong("update-all"),
        help: ArgumentHelp(
            "Pin every pinned entry of the manifest anew (with --from-sums: the list's entries whose digest changed); "
                + "the manifest is rewritten once, only if every download succeeded."))
    var updateAll = false

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "Print nothing but warnings and errors.")
    var quiet = false

    @Flag(
        name: .customLong("json"),
        help: ArgumentHelp(
            "Write newline-delimited JSON events to stdout instead of text (see README, JSON events)."))
    var json = false

    @Flag(
        help:
            "If another haul is syncing the same root when the files are put in place, wait for it instead of exiting with status 4."
    )
    var wait = false

    @Option(
        name: .customLong("wait-timeout"),
        help: ArgumentHelp(
            "Wait as --wait does, for at most this long (e.g. 30s, 10m); then exit with status 4.",
            valueName: "duration"),
        transform: RunDuration.init(parsing:))
    var waitTimeout: RunDuration?

    @Option(
        name: .customLong("sha256"),
        help: ArgumentHelp(
            "Pin with this SHA-256 (hex) instead of downloading the file; one URL. Its size is --size, else what a HEAD "
                + "request announces.", valueName: "hex"))
    var sha256: String?

    @Option(name: .customLong("sha512"), help: ArgumentHelp("As --sha256, with a SHA-512.", valueName: "hex"))
    var sha512: String?

    @Option(
        name: .customLong("integrity"),
        help: ArgumentHelp(
            "As --sha256, with a Subresource Integrity value (sha384-<base64>).", valueName: "sri"))
    var integrity: String?

    @Option(
        name: .customLong("size"),
        help: ArgumentHelp(
            "With --sha256, --sha512 or --integrity: the file's size in bytes; no request is made at all.",
            valueName: "bytes"),
        transform: OptionValueError.byteCount)
    var size: Int64?

    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "Verify TLS against this CA bundle instead of the system's (or set HAUL_CA_FILE, CURL_CA_BUNDLE or SSL_CERT_FILE).",
            valueName: "file"), completion: .file())
    var caFile: String?

    /// The download goes where the config's rewrites send it; the manifest gets the URL as given.
    @OptionGroup var configOptions: ConfigOptions

    @OptionGroup var netrcOptions: NetrcOptions

    @OptionGroup var requestOptions: RequestOptions

    @Option(
        name: .customLong("max-file-size"),
        help: ArgumentHelp(
            "Largest download accepted (e.g. 500M, 2G). (default: \(TransferOptions.defaultMaxFileSize))",
            valueName: "size"),
        transform: ByteSize.init(parsing:))
    var maxFileSize: ByteSize = TransferOptions.defaultMaxFileSize

    /// `--update` or `--update-all` (without `--from-sums`, which re-pins from its list instead).
    var isUpdating: Bool { !updates.isEmpty || (updateAll && fromSums == nil) }

    /// `--wait`, `--wait-timeout`: as sync waits for another run holding root, announced unless quiet or JSON.
    func waiting(root: String) -> RunLock.Waiting {
        let quietly = quiet || json
        let notice: @Sendable (String?) -> Void = { holder in
            guard !quietly else { return }
            Output.errors([
                TerminalText("haul: waiting for another haul syncing \"\(root)\" (\(StoreWording.holder(holder)))")
            ])
        }
        if let waitTimeout { return .upTo(waitTimeout.seconds, notice: notice) }
        return wait ? .forever(notice: notice) : .no
    }

    /// Same resolution and check as `sync`'s `--ca-file`.
    private var resolvedCAFile: String? { CABundle.resolve(option: caFile)?.path }

    func validate() throws {
        try CABundle.resolve(option: caFile)?.validate()
        // Placing the downloads flushes as sync does: a bad HAUL_DURABILITY must stop add before anything is written.
        _ = try DurabilityOptions.fromEnvironment()
        // The manifest is read, then replaced by name: standard input (`-`, `/dev/stdin` from a pipe) can be read
        // once and replaced never.
        guard printOnly || !ManifestLoader.isStandardInputOrDescriptor(manifest) else {
            throw ValidationError(
                "--manifest \(String(reflecting: manifest)): haul add edits a manifest file in place; give the file's own path "
                    + "(standard input cannot be edited; --print shows the entries without a manifest)")
        }
        guard !(json && quiet) else { throw ValidationError("--json and --quiet: give one of them") }
        guard fromSums != nil || (keys.isEmpty && signature == nil) else {
            throw ValidationError(
                "--trusted-key and --signature check the signature of a --from-sums list: give --from-sums")
        }
        guard signature == nil || !keys.isEmpty else {
            throw ValidationError("--signature names the list's signature: give the --trusted-key to check it by")
        }
        guard !(printOnly && (json || quiet)) else {
            throw ValidationError("--print prints the entries: give no --json or --quiet")
        }
        if isUpdating {
            guard updates.isEmpty || !updateAll else {
                throw ValidationError("--update-all pins every entry anew: give no --update")
            }
            guard urls.isEmpty else { throw ValidationError("--update fetches the entry's own url: give no URL") }
            guard fromSums == nil, dest == nil, !printOnly else {
                throw ValidationError("--update goes without --from-sums, --dest and --print")
            }
            guard givenDigests.isEmpty || updates.count == 1 else {
                throw ValidationError("--\(givenDigests.first?.0 ?? "sha256") pins one file: give one --update with it")
            }
        }
        if !extract {
            guard strip == nil, format == nil else { throw ValidationError("--strip and --format go with --extract") }
        } else {
            guard fromSums == nil else {
                throw ValidationError(
                    "--extract unpacks the URLs given: --from-sums pins files without downloading them")
            }
            guard !isUpdating else {
                throw ValidationError(
                    "--update unpacks an archive entry by its own extract: settings: give no --extract")
            }
        }
        guard givenDigests.count <= 1 else { throw ValidationError("give one of --sha256, --sha512 and --integrity") }
        if !givenDigests.isEmpty {
            guard fromSums == nil else {
                throw ValidationError("--from-sums takes each digest from its list: give no --\(givenDigests[0].0)")
            }
            guard urls.count == 1 || isUpdating else {
                throw ValidationError("--\(givenDigests[0].0) pins one file: give one URL with it")
            }
        }
        if size != nil {
            guard !givenDigests.isEmpty else {
                throw ValidationError("--size goes with --sha256, --sha512 or --integrity")
            }
        }
        if fromSums != nil {
            guard urls.isEmpty else {
                throw ValidationError("--from-sums pins the files its list names: give no other URL")
            }
            guard dest.map({ $0.hasSuffix("/") }) ?? true else {
                throw ValidationError(
                    "--dest with --from-sums names the folder the list's files go to: end it with / (--dest \(dest ?? "")/)"
                )
            }
        } else {
            guard !urls.isEmpty || isUpdating else {
                throw ValidationError(
                    "give a URL to pin, --from-sums with a checksum list's URL, --update with a destination, or --update-all"
                )
            }
            guard matches.isEmpty else { throw ValidationError("--match selects files of a --from-sums list") }
            guard dest == nil || urls.count == 1 else {
                throw ValidationError("--dest names one file: give one URL with it")
            }
        }
    }

    func run() throws {
        let report = AddReport(style: json ? .json : quiet ? .quiet : .text, manifest: manifest)
        do {
            try add(reportingTo: report)
        } catch let exit as ExitCode {
            report.finish(exitStatus: exit.rawValue)
            throw exit
        } catch {
            report.finish(
                exitStatus: error is ValidationError ? ExitStatus.usage.rawValue : ExitStatus.entryFailed.rawValue)
            throw error
        }
        report.finish(exitStatus: ExitStatus.success.rawValue)
    }

    private func add(reportingTo report: AddReport) throws {
        let rewrites = try configOptions.rewrites()
        if isUpdating { return try update(rewrites: rewrites, report: report) }
        let drafts: [EntryDraft]
        do {
            drafts = try (urls.isEmpty ? [fromSums ?? ""] : urls).map { url throws(EntryDraftError) in
                // The list's own file name is never a destination: a stand-in keeps the draft's checks to the URL.
                try EntryDraft(
                    url: url, destination: fromSums == nil ? dest : "list", environment: Environment.current,
                    unpacks: extract)
            }
        } catch {
            Output.errors(error.messages.map { "error: \($0)" })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        let pinning = Pinning(request(drafts, given: try givenDigest()), reading: reading)
        let signing = try signatureRequest()
        if printOnly {
            let netrc = try netrcOptions.credentials(manifestWants: false)
            let entries = try measure(pinning, rewrites: rewrites, netrc: netrc, signing: signing).entries
            Output.lines(
                entries.flatMap { $0.yamlSnippet.dropLast().split(separator: "\n", omittingEmptySubsequences: false) }
                    .map { TerminalText(String($0)) })
            return
        }

        let original = try readManifest()
        let preparation: Pinning.Preparation
        do { preparation = try pinning.prepare(original) } catch { throw fail(error) }
        preparation.notices.forEach(warnings)
        let netrc = try netrcOptions.credentials(manifestWants: preparation.wantsNetrc)

        // The downloads are kept until they are in place: the next sync then makes no request for them.
        let kept = fromSums == nil && pinning.request.given == nil ? try keptDownloads() : nil
        defer { kept?.remove() }
        let (pinned, interrupts, signed) = try measure(
            pinning, rewrites: rewrites, netrc: netrc, manifestHeaders: preparation.headers,
            keepingIn: kept, signing: signing)
        if let signed { report.say(lines(signed)) }
        let outcome: PinningOutcome
        do {
            let sorting = try pinning.sort(pinned, against: original)
            sorting.unchanged.forEach(report.pinned)
            outcome = try pinning.adding(sorting, to: original, comment: signed.map(provenance))
        } catch {
            throw fail(error)
        }
        guard let bytes = outcome.manifest.bytes, let loaded = outcome.manifest.manifest else {
            return report.say(lines(outcome) + ["\(manifest) was not modified."])
        }
        try replaceManifest(original, with: bytes, interrupts: interrupts)
        outcome.files(.updated).forEach(report.pinned)
        outcome.files(.added).forEach(report.pinned)
        let placing = outcome.files(.updated).count + outcome.files(.added).count
        guard let kept else {
            return report.say(
                lines(outcome) + ["Run \"\(syncCommand)\" to put \(placing == 1 ? "it" : "them") in place."])
        }
        report.say(lines(outcome))
        try place(
            outcome.placing, of: loaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts,
            report: report)
    }

    /// What the options ask the `Pinning` step for.
    func request(_ drafts: [EntryDraft], given: Digest?) -> PinningRequest {
        let source: PinningRequest.Source
        if isUpdating {
            source = .entries(updateAll ? nil : updates)
        } else if let list = drafts.first, fromSums != nil {
            source = .checksumList(list, matching: matches, folder: dest)
        } else {
            source = .urls(drafts)
        }
        return PinningRequest(
            source: source, extract: extractRule, given: given.map { ($0, size) },
            repinsChangedListEntries: updateAll)
    }

    /// The manifest read as sync reads the file, in this environment.
    var reading: ManifestReading {
        ManifestReading(
            fileName: manifest, environment: Environment.current, commandLineHeaders: requestOptions.standInHeaderNames)
    }

    /// The URLs' entries, measured or pinned by the digest given, or the entries a checksum list names: exits 1
    /// when a fetch fails (naming each URL tried) or the list's signature is refused (`signing`: `--trusted-key`), 3
    /// when a line of a list is not a checksum or names no destination, 64 when `--match` selects nothing or
    /// `--dest DIR/` makes a name no destination.
    private func measure(
        _ pinning: Pinning, rewrites: URLRewriter, netrc: Netrc?, manifestHeaders: [HeaderField] = [],
        keepingIn kept: KeptDownloads? = nil, signing: SignatureRequest? = nil
    ) throws -> (entries: [PinnedEntry], interrupts: InterruptWatcher, signed: SignedList?) {
        let warnings = self.warnings
        guard fromSums != nil else {
            let (entries, interrupts) = try transferring(
                rewrites: rewrites, netrc: netrc, manifestHeaders: manifestHeaders
            ) { options, cancellation throws(PinFailure) in
                try pinning.measure(options: options, keepingIn: kept, cancellation: cancellation, notices: warnings)
            }
            return (entries, interrupts, nil)
        }
        // The list's own cap, when it is the lower limit, is the one a message must name.
        let describe = { (reason: FailureReason) -> String in
            guard case .tooLarge(let limit) = reason, limit == ChecksumList.maximumBytes, limit < maxFileSize.bytes
            else {
                return HumanReport.describe(reason, checksum: nil)
            }
            return "more than \(ByteCount.format(limit)), the most haul reads of a checksum list"
        }
        let ((bytes, fetched), interrupts) = try transferring(rewrites: rewrites, netrc: netrc, describing: describe) {
            options, cancellation throws(PinFailure) -> ([UInt8], SignatureFetch?) in
            let list = try pinning.fetchList(options: options, cancellation: cancellation, notices: warnings)
            // A clear-signed list carries its signature, unless one was named.
            guard let signing, !(signing.probing && SignatureFormat.isClearSigned(list)) else { return (list, nil) }
            let signature = try ListVerification.fetchSignature(
                signing.candidates, probing: signing.probing, options: options, cancellation: cancellation
            ) { failure, next in warnings(.attemptFailed(failure, next: next)) }
            return (list, signature)
        }
        // Only what the signature covers is read: a clear-signed list's signed text, never the lines around it.
        let signed = try signing.map { signing in try verify(bytes, signature: fetched, request: signing) }
        do {
            return (try pinning.listedEntries(signed?.verified.text ?? bytes), interrupts, signed)
        } catch {
            throw fail(error)
        }
    }

    /// What `--extract`, `--strip` and `--format` ask, without the tree (pinned once the archive is unpacked); nil
    /// without `--extract`.
    var extractRule: ExtractRule? {
        extract ? ExtractRule(format: format, strip: strip ?? 0) : nil
    }

    /// The digest `--sha256`, `--sha512` or `--integrity` gives, nil without one. A digest that is not one, or
    /// a `--size` that no file of that digest can have, exits 64.
    func givenDigest() throws -> Digest? {
        guard let (key, text) = givenDigests.first else { return nil }
        let digest: Digest
        do {
            digest = try CommandLineDigest.parse(text, as: key)
        } catch {
            Output.errors(error.messages.map { TerminalText("error: \($0)") })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        if let size, let contradiction = PinnedSize.contradiction(size, digest: digest) {
            Output.errors([TerminalText("error: --size \(size) contradicts --\(key): \(contradiction)")])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        return digest
    }

    /// The digest options given, as (manifest key, value).
    var givenDigests: [(String, String)] {
        [("sha256", sha256), ("sha512", sha512), ("integrity", integrity)].compactMap { key, value in
            value.map { (key, $0) }
        }
    }

    /// Writes the edited manifest over `original`, atomically; exits 1 if the file changed since it was read (the
    /// download may have taken minutes, and an edit made meanwhile must not be overwritten), or with the signal's
    /// status if one came (they stay blocked after the download: one that came since must still stop the run,
    /// unwritten).
    func replaceManifest(_ original: [UInt8]?, with bytes: [UInt8], interrupts: InterruptWatcher) throws {
        let current: [UInt8]?
        do { current = try ManifestFile.read(manifest) } catch {
            Output.errors(["error: \(StoreWording.sentence(error))"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        guard current == original else {
            Output.errors([
                "error: \(manifest) changed while haul add was downloading; it was not modified (run haul add again)"
            ])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        if let status = interrupts.exitStatus {
            Output.errors(["haul: interrupted by \(interrupts.signalName); \(manifest) was not modified"])
            throw ExitCode(status)
        }
        do { try ManifestFile.replace(manifest, with: bytes) } catch {
            Output.errors(["error: \(StoreWording.sentence(error)); \(manifest) was not modified"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// Where the downloads wait to be put in place; exits 1 when it cannot be made.
    func keptDownloads() throws -> KeptDownloads {
        do {
            return try KeptDownloads.make()
        } catch {
            Output.errors(["error: \(StoreWording.sentence(error))"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// Puts the new entries in place from what was downloaded, as a sync of them would (the manifest is already
    /// written: whatever happens here, it stays). Exits 1 when an entry could not be put in place, 4 when another
    /// haul holds root; either way the next sync does the rest.
    func place(
        _ destinations: [String], of loaded: Manifest, from kept: KeptDownloads, netrc: Netrc?,
        rewrites: URLRewriter, interrupts: InterruptWatcher, report: AddReport
    ) throws {
        var options = SyncOptions(
            caFile: resolvedCAFile, maxFileSize: maxFileSize.bytes,
            durability: try DurabilityOptions.fromEnvironment(), rewrites: rewrites)
        options.netrc = netrc
        try requestOptions.apply(to: &options)
        // The kept downloads are put in place from a cache (`KeptDownloads`).
        try RunLimits.apply(to: &options, transfers: true, entries: destinations.count, cache: true)
        let pending = "run \"\(syncCommand)\" to put \(destinations.count == 1 ? "it" : "them") in place"
        let result: SyncResult
        do {
            result = try kept.place(
                Set(destinations), of: loaded, options: options, wait: waiting(root: loaded.root),
                holder: "pid \(getpid()), haul add", cancellation: interrupts.cancellation)
        } catch {
            Output.errors(["warning: \(StoreWording.sentence(error)); \(pending)"])
            throw ExitCode(error.exitStatus.rawValue)
        }
        let failures = zip(result.plan.files, result.outcomes).flatMap { entry, outcome -> [String] in
            switch outcome {
            case .failed(let failure): HumanReport.failureLines(entry: entry, failure: failure)
            case .fetchedNotDurable(_, let error), .stillNotDurable(let error):
                [HumanReport.notDurableLine(entry: entry, error: error)]
            case .upToDate, .notModified, .fetched: []
            }
        }
        if let status = interrupts.exitStatus {
            Output.errors(["haul: interrupted by \(interrupts.signalName); \(pending)"])
            throw ExitCode(status)
        }
        guard failures.isEmpty else {
            Output.errors(failures.map { TerminalText($0) } + [TerminalText("hint: " + pending)])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        let placed = destinations.map { Self.shown(loaded.root + "/" + $0) }.joined(separator: ", ")
        report.placed(destinations.count)
        report.say([
            TerminalText(
                "Placed \(placed); the next sync makes no request for \(destinations.count == 1 ? "it" : "them").")
        ])
    }

    /// An absolute path as the user would type it here: relative to the current directory when under it.
    private static func shown(_ path: String) -> String {
        guard let buffer = getcwd(nil, 0) else { return path }
        defer { free(buffer) }
        let current = String(cString: buffer)
        let prefix = current == "/" ? "/" : current + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }

    /// The manifest's bytes, or nil when there is none yet.
    func readManifest() throws -> [UInt8]? {
        do {
            return try ManifestFile.read(manifest)
        } catch {
            Output.errors(["error: \(StoreWording.sentence(error))"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
    }

    /// Runs `body` with the transfer settings, SIGINT and SIGTERM turned into a cancellation; exits 1 (naming each
    /// URL tried, and why, in `describing`'s words) when it fails.
    func transferring<Result>(
        rewrites: URLRewriter, netrc: Netrc?, manifestHeaders: [HeaderField] = [],
        describing: (FailureReason) -> String = { HumanReport.describe($0, checksum: nil) },
        _ body: (SyncOptions, Cancellation) throws(PinFailure) -> Result
    ) throws -> (Result, InterruptWatcher) {
        let cancellation = Cancellation()
        let interrupts = InterruptWatcher(cancelling: cancellation)
        // The download is cancelled, not abandoned: its scratch folder is removed on the way out.
        interrupts.beginChanging()
        var options = SyncOptions(
            jobs: 1, connectionsPerHost: 1, caFile: resolvedCAFile, maxFileSize: maxFileSize.bytes,
            rewrites: rewrites)
        try RunLimits.apply(to: &options, transfers: true, entries: 1)
        options.netrc = netrc
        try requestOptions.apply(to: &options)
        options.commandLineHeaders = HeaderRules.merge(defaults: manifestHeaders, entry: options.commandLineHeaders)
        do {
            return (try body(options, cancellation), interrupts)
        } catch {
            if let status = interrupts.exitStatus {
                Output.errors(["haul: interrupted by \(interrupts.signalName); nothing was written"])
                throw ExitCode(status)
            }
            Output.errors(PinWording.lines(error, describing: describing).map { "error: \($0)" })
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// What to run next, copy-pastable: the manifest argument only when it is not the default.
    var syncCommand: String {
        guard manifest != "haul.yaml" else { return "haul sync" }
        return "haul sync " + CommandHint.shellWord(manifest)
    }

    /// ` --manifest FILE` for a command to run next, when the manifest is not the default.
    var manifestArgument: String {
        manifest == "haul.yaml" ? "" : " --manifest " + CommandHint.shellWord(manifest)
    }
}
