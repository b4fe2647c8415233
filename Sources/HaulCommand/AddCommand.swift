import ArgumentParser
import Glibc
import Haul
import HaulDigest
import HaulEngine
import HaulManifest
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
struct AddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Download URLs once and pin them in the manifest (url, dest, sha256, size).",
        usage: "haul add <url>... [--dest <path>] [--manifest <file>] [<options>]\n"
            + "haul add --extract <url>... [--strip <n>] [--format <format>] [<options>]\n"
            + "haul add --from-sums <url> [--match <glob>]... [<options>]\n"
            + "haul add --update <dest> [<options>]",
        discussion: """
        Each file is fetched once through the same engine as sync and measured; once the manifest is written, the \
        files are put in place as sync would (the root's lock, an atomic commit, the state recorded), so the next \
        sync makes no request for them. The entries go after the last entry of files:, in the manifest's own \
        indentation; comments and formatting are left as they are. A missing manifest is created. The manifest \
        is replaced atomically, once, and only if it still validates. A destination already in the manifest is \
        refused (exit 3); a URL already listed under another destination is added with a warning.

        --extract pins an archive and the tree it unpacks to: the archive is downloaded and hashed, unpacked once \
        into a private temporary folder (never the destination) by the rules sync will apply (--strip, --format), \
        and the tree's NAR digest written as extract: tree: sha256-…, the value nix hash path prints for it. The \
        folder is named after the archive less its suffix (sdk-1.2.tar.gz: sdk-1.2/) unless --dest names it. An \
        archive that does not unpack (a member named ../x, an absolute name, a device node, a bomb, …) is refused \
        naming the URL, the member and the rule (exit 1), the manifest untouched. With --sha256, --sha512 or \
        --integrity nothing is downloaded, and the tree is not pinned.

        --from-sums reads a checksum list published beside a release's files (sha256sum or sha512sum output, or \
        the BSD form "SHA256 (name) = hex") and pins each file it names, by its listed digest, at the list's \
        folder + name, without downloading the files. A line that is not a checksum stops it (exit 3, its line \
        named), the manifest untouched.

        Examples:
          haul add https://example.com/v1.2/tool.tar.gz --dest bin/tool.tar.gz
          haul add https://example.com/a.csv https://example.com/b.csv
          haul add https://example.com/data.csv --print
          haul add --extract https://example.com/v1.2/sdk-1.2.tar.gz --strip 1
          haul add --from-sums https://example.com/v1.2/SHA256SUMS --match '*.tar.gz'
          haul add https://example.com/v1.2/tool.tar.gz --sha256 9f86d0…  (no download)
          haul add --update bin/tool.tar.gz      (upstream changed: pin it anew)
          haul add --update sdk-1.2              (an archive: its checksum and its tree anew)
        """)

    @Argument(help: ArgumentHelp("The http or https URLs to pin; ${VAR} expands from the environment, as in a manifest.",
                                 valueName: "url"))
    var urls: [String] = []

    @Option(help: ArgumentHelp("Where sync will put the file (with --extract, the folder), relative to the manifest's "
                               + "root (default: the URL's file name, less its archive suffix with --extract; one URL only).",
                               valueName: "path"))
    var dest: String?

    @Flag(name: .customLong("extract"), help: ArgumentHelp(
        "Each URL is an archive to unpack into a folder (default: the URL's file name less its suffix, sdk-1.2.tar.gz: "
            + "sdk-1.2): pin the archive and the tree it unpacks to (extract: tree: sha256-…)."))
    var extract = false

    @Option(name: .customLong("strip"), help: ArgumentHelp(
        "With --extract: drop this many leading folders from every member, as tar --strip-components does (written as "
            + "extract: strip: and part of the tree pinned).", valueName: "n"),
            transform: OptionValueError.wholeNumber(from: 0...DestinationPath.maximumBytes))
    var strip: Int?

    @Option(name: .customLong("format"), help: ArgumentHelp(
        "With --extract: the archive's format when the URL's file name does not tell it: "
            + ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", ") + ".", valueName: "format"),
            transform: OptionValueError.archiveFormat)
    var format: ArchiveFormat?

    @Option(help: ArgumentHelp("The manifest to add the entries to: a regular file, created when missing (not standard input).",
                               valueName: "file"), completion: .file())
    var manifest: String = "haul.yaml"

    @Flag(name: .customLong("print"), help: "Print the entries instead of adding them; no manifest is read or written.")
    var printOnly = false

    @Option(name: .customLong("from-sums"), help: ArgumentHelp(
        "Pin every file this checksum list names (sha256sum/sha512sum output or BSD form), at the list's folder + "
            + "name, without downloading them.", valueName: "url"))
    var fromSums: String?

    @Option(name: .customLong("match"), help: ArgumentHelp(
        "With --from-sums: only the files whose name matches this glob (as the shell matches: *, ?, [...]); may be "
            + "given more than once.", valueName: "glob"))
    var matches: [String] = []

    @Option(name: .customLong("update"), help: ArgumentHelp(
        "Pin the manifest's entry for this destination anew, after its file changed upstream: its own url is "
            + "downloaded (or --sha256 … is taken) and its checksum and size are rewritten where they stand.",
        valueName: "dest"))
    var update: String?

    @Option(name: .customLong("sha256"), help: ArgumentHelp(
        "Pin with this SHA-256 (hex) instead of downloading the file; one URL. Its size is --size, else what a HEAD "
            + "request announces.", valueName: "hex"))
    var sha256: String?

    @Option(name: .customLong("sha512"), help: ArgumentHelp("As --sha256, with a SHA-512.", valueName: "hex"))
    var sha512: String?

    @Option(name: .customLong("integrity"), help: ArgumentHelp(
        "As --sha256, with a Subresource Integrity value (sha384-<base64>).", valueName: "sri"))
    var integrity: String?

    @Option(name: .customLong("size"), help: ArgumentHelp(
        "With --sha256, --sha512 or --integrity: the file's size in bytes; no request is made at all.", valueName: "bytes"),
            transform: OptionValueError.byteCount)
    var size: Int64?

    @Option(name: .customLong("ca-file"), help: ArgumentHelp(
        "Verify TLS against this CA bundle instead of the system's (or set HAUL_CA_FILE, CURL_CA_BUNDLE or SSL_CERT_FILE).",
        valueName: "file"), completion: .file())
    var caFile: String?

    /// The download goes where the config's rewrites send it; the manifest gets the URL as given.
    @OptionGroup var configOptions: ConfigOptions

    @OptionGroup var netrcOptions: NetrcOptions

    @OptionGroup var requestOptions: RequestOptions

    @Option(name: .customLong("max-file-size"), help: ArgumentHelp(
        "Largest download accepted (e.g. 500M, 2G). (default: \(TransferOptions.defaultMaxFileSize))", valueName: "size"),
            transform: ByteSize.init(parsing:))
    var maxFileSize: ByteSize = TransferOptions.defaultMaxFileSize

    /// Same resolution and check as `sync`'s `--ca-file`.
    private var resolvedCAFile: String? { CABundle.resolve(option: caFile)?.path }

    func validate() throws {
        try CABundle.resolve(option: caFile)?.validate()
        // Placing the downloads flushes as sync does: a bad HAUL_DURABILITY must stop add before anything is written.
        _ = try DurabilityOptions.fromEnvironment()
        // The manifest is read, then replaced by name: standard input (`-`, `/dev/stdin` from a pipe) can be read
        // once and replaced never.
        guard printOnly || !ManifestLoader.isStandardInputOrDescriptor(manifest) else {
            throw ValidationError("--manifest \(String(reflecting: manifest)): haul add edits a manifest file in place; give the file's own path "
                                  + "(standard input cannot be edited; --print shows the entries without a manifest)")
        }
        if update != nil {
            guard urls.isEmpty else { throw ValidationError("--update fetches the entry's own url: give no URL") }
            guard fromSums == nil, dest == nil, !printOnly else {
                throw ValidationError("--update goes without --from-sums, --dest and --print")
            }
        }
        if !extract {
            guard strip == nil, format == nil else { throw ValidationError("--strip and --format go with --extract") }
        } else {
            guard fromSums == nil else { throw ValidationError("--extract unpacks the URLs given: --from-sums pins files without downloading them") }
            guard update == nil else {
                throw ValidationError("--update unpacks an archive entry by its own extract: settings: give no --extract")
            }
        }
        guard givenDigests.count <= 1 else { throw ValidationError("give one of --sha256, --sha512 and --integrity") }
        if !givenDigests.isEmpty {
            guard fromSums == nil else { throw ValidationError("--from-sums takes each digest from its list: give no --\(givenDigests[0].0)") }
            guard urls.count == 1 || update != nil else {
                throw ValidationError("--\(givenDigests[0].0) pins one file: give one URL with it")
            }
        }
        if size != nil {
            guard !givenDigests.isEmpty else { throw ValidationError("--size goes with --sha256, --sha512 or --integrity") }
        }
        if fromSums != nil {
            guard urls.isEmpty else { throw ValidationError("--from-sums pins the files its list names: give no other URL") }
            guard dest == nil else { throw ValidationError("--dest names one file: --from-sums takes each name from its list") }
        } else {
            guard !urls.isEmpty || update != nil else {
                throw ValidationError("give a URL to pin, --from-sums with a checksum list's URL, or --update with a destination")
            }
            guard matches.isEmpty else { throw ValidationError("--match selects files of a --from-sums list") }
            guard dest == nil || urls.count == 1 else { throw ValidationError("--dest names one file: give one URL with it") }
        }
    }

    func run() throws {
        let rewrites = try configOptions.rewrites()
        if let update { return try self.update(update, rewrites: rewrites) }
        let drafts: [EntryDraft]
        do {
            drafts = try (urls.isEmpty ? [fromSums ?? ""] : urls).map { url throws(EntryDraftError) in
                // The list's own file name is never a destination: a stand-in keeps the draft's checks to the URL.
                try EntryDraft(url: url, destination: fromSums == nil ? dest : "list", environment: Environment.current,
                               unpacks: extract)
            }
        } catch {
            Output.errors(error.messages.map { "error: \($0)" })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        let pinning = try self.pinning()
        if printOnly {
            let netrc = try netrcOptions.credentials(manifestWants: false)
            let entries = try pin(drafts, pinning, rewrites: rewrites, netrc: netrc).entries
            Output.lines(entries.flatMap { $0.yamlSnippet.dropLast().split(separator: "\n", omittingEmptySubsequences: false) }
                .map { TerminalText(String($0)) })
            return
        }

        let original = try readManifest()
        var netrc: Netrc?
        // The manifest's `defaults.headers`, as sync sends them to the new entries' URLs (a token, say).
        var manifestHeaders: [HeaderField] = []
        if fromSums == nil {
            // Stand-in digests and sizes: the manifest must be able to take the entries before anything is fetched.
            let trial = try editManifest(original, adding: drafts.map { $0.trialEntry(extract: extractRule) }, from: drafts)
            for (draft, listed) in zip(drafts, trial.edit.sameURL).flatMap({ draft, listed in listed.map { (draft, $0) } }) {
                let position = "\(manifest):\(listed.location.line):\(listed.location.column)"
                let destination = listed.destination.map { " (dest \(String(reflecting: $0)))" } ?? ""
                Output.errors(["warning: \(position): files[\(listed.index)]\(destination) already fetches "
                               + "\(draft.url); adding another entry for it"])
            }
            netrc = try netrcOptions.credentials(manifestWants: trial.loaded.netrc)
            manifestHeaders = trial.loaded.files[trial.edit.firstIndex].headers
        } else {
            let wanted = try? parseManifest(original ?? []).netrc
            netrc = try netrcOptions.credentials(manifestWants: wanted ?? false)
        }

        // The downloads are kept until they are in place: the next sync then makes no request for them.
        let kept = pinning == .download ? try keptDownloads() : nil
        defer { kept?.remove() }
        let (entries, interrupts) = try pin(drafts, pinning, rewrites: rewrites, netrc: netrc, manifestHeaders: manifestHeaders,
                                            keepingIn: kept)
        guard !entries.isEmpty else { return }
        let (edit, loaded) = try editManifest(original, adding: entries)
        try replaceManifest(original, with: edit.bytes, interrupts: interrupts)
        var lines: [TerminalText] = []
        for (number, entry) in entries.enumerated() {
            let index = edit.firstIndex + number
            let line = loaded.files[index].location.line
            let size = entry.size.map { "\(ByteCount.format($0)), " } ?? ""
            let what = "\(entry.destination) (\(size)\(Self.shortPin(entry.digest, tree: entry.extract?.tree)))"
            lines.append(original == nil && number == 0
                ? "Created \(manifest) with \(what) as files[0], line \(line)."
                : "Added \(what) to \(manifest) as files[\(index)], line \(line).")
        }
        guard let kept else {
            return Output.lines(lines + ["Run \"\(syncCommand)\" to put \(entries.count == 1 ? "it" : "them") in place."])
        }
        Output.lines(lines)
        try place(entries.map(\.destination), of: loaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts)
    }

    /// What `--extract`, `--strip` and `--format` ask, without the tree (pinned once the archive is unpacked); nil
    /// without `--extract`.
    var extractRule: ExtractRule? {
        extract ? ExtractRule(format: format, strip: strip ?? 0) : nil
    }

    /// A pin as messages show it: `sha256 9f86d081884c…`, and an archive's tree `tree sha256-n4bQgYhMfWWa…`.
    static func shortPin(_ digest: Digest, tree: Digest?) -> String {
        "\(digest.algorithm.rawValue) \(digest.hex.prefix(12))…" + (tree.map { ", tree \($0.subresourceIntegrity.prefix(19))…" } ?? "")
    }

    /// How the new entries get their digests.
    private enum Pinning: Equatable {
        /// Each URL is downloaded once and measured.
        case download
        /// `--sha256`, `--sha512` or `--integrity`: as given, with `--size` or what a HEAD request announces.
        case given(Digest)
        /// `--from-sums`: as a checksum list says.
        case checksumList
    }

    /// The way the options ask for; a digest that is not one exits 64.
    private func pinning() throws -> Pinning {
        if fromSums != nil { return .checksumList }
        guard let digest = try givenDigest() else { return .download }
        return .given(digest)
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

    /// The size a HEAD request announces for a file pinned by `digest` alone: nil (with a warning) when the server
    /// announces none, or a size no file of that digest can have (`Content-Length: 0` beside the digest of
    /// non-empty content): pinned, it would fail every sync.
    func announcedSize(_ url: TemplatedString, digest: Digest, options: SyncOptions,
                       cancellation: Cancellation) throws(PinFailure) -> Int64? {
        let announced = try Pinner.announcedSize(url, options: options, cancellation: cancellation, attemptFailed: Self.retrying)
        guard let announced else {
            Output.errors(["warning: \(url) announces no size; the entry has none (add --size to pin it)"])
            return nil
        }
        if let contradiction = PinnedSize.contradiction(announced, digest: digest) {
            Output.errors([TerminalText("warning: \(url) announces Content-Length: \(announced), which cannot be the "
                                        + "size of the file pinned: \(contradiction); the entry has no size (add --size to pin it)")])
            return nil
        }
        return announced
    }

    /// The digest options given, as (manifest key, value).
    var givenDigests: [(String, String)] {
        [("sha256", sha256), ("sha512", sha512), ("integrity", integrity)].compactMap { key, value in value.map { (key, $0) } }
    }

    private func pin(_ drafts: [EntryDraft], _ pinning: Pinning, rewrites: URLRewriter, netrc: Netrc?,
                     manifestHeaders: [HeaderField] = [], keepingIn kept: KeptDownloads? = nil)
        throws -> (entries: [PinnedEntry], interrupts: InterruptWatcher) {
        switch pinning {
        case .download: try download(drafts, rewrites: rewrites, netrc: netrc, manifestHeaders: manifestHeaders, keepingIn: kept)
        case .given(let digest): try given(digest, for: drafts[0], rewrites: rewrites, netrc: netrc, manifestHeaders: manifestHeaders)
        case .checksumList: try listed(drafts[0], rewrites: rewrites, netrc: netrc)
        }
    }

    /// The entry with the digest given; its size is `--size`, else what a HEAD request announces (none if the server
    /// announces none). Exits 1 when the HEAD request fails.
    private func given(_ digest: Digest, for draft: EntryDraft, rewrites: URLRewriter, netrc: Netrc?, manifestHeaders: [HeaderField])
        throws -> (entries: [PinnedEntry], interrupts: InterruptWatcher) {
        try transferring(rewrites: rewrites, netrc: netrc, manifestHeaders: manifestHeaders) { options, cancellation throws(PinFailure) in
            guard let size else {
                let announced = try announcedSize(draft.url, digest: digest, options: options, cancellation: cancellation)
                return [draft.pinned(digest: digest, size: announced, extract: extractRule)]
            }
            return [draft.pinned(digest: digest, size: size, extract: extractRule)]
        }
    }

    /// Writes the edited manifest over `original`, atomically; exits 1 if the file changed since it was read (the
    /// download may have taken minutes, and an edit made meanwhile must not be overwritten), or with the signal's
    /// status if one came (they stay blocked after the download: one that came since must still stop the run,
    /// unwritten).
    func replaceManifest(_ original: [UInt8]?, with bytes: [UInt8], interrupts: InterruptWatcher) throws {
        let current: [UInt8]?
        do { current = try ManifestFile.read(manifest) } catch {
            Output.errors(["error: \(error)"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        guard current == original else {
            Output.errors(["error: \(manifest) changed while haul add was downloading; it was not modified (run haul add again)"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        if let status = interrupts.exitStatus {
            Output.errors(["haul: interrupted by \(interrupts.signalName); \(manifest) was not modified"])
            throw ExitCode(status)
        }
        do { try ManifestFile.replace(manifest, with: bytes) } catch {
            Output.errors(["error: \(error); \(manifest) was not modified"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// Where the downloads wait to be put in place; exits 1 when it cannot be made.
    func keptDownloads() throws -> KeptDownloads {
        do {
            return try KeptDownloads.make()
        } catch {
            Output.errors(["error: \(error)"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// Puts the new entries in place from what was downloaded, as a sync of them would (the manifest is already
    /// written: whatever happens here, it stays). Exits 1 when an entry could not be put in place, 4 when another
    /// haul holds root; either way the next sync does the rest.
    func place(_ destinations: [String], of loaded: Manifest, from kept: KeptDownloads, netrc: Netrc?,
               rewrites: URLRewriter, interrupts: InterruptWatcher) throws {
        var options = SyncOptions(caFile: resolvedCAFile, maxFileSize: maxFileSize.bytes,
                                  durability: try DurabilityOptions.fromEnvironment(), rewrites: rewrites)
        options.netrc = netrc
        try requestOptions.apply(to: &options)
        // The kept downloads are put in place from a cache (`KeptDownloads`).
        try RunLimits.apply(to: &options, transfers: true, entries: destinations.count, cache: true)
        let pending = "run \"\(syncCommand)\" to put \(destinations.count == 1 ? "it" : "them") in place"
        let result: SyncResult
        do {
            result = try kept.place(Set(destinations), of: loaded, options: options,
                                    holder: "pid \(getpid()), haul add", cancellation: interrupts.cancellation)
        } catch {
            Output.errors(["warning: \(error); \(pending)"])
            throw ExitCode(error.exitStatus.rawValue)
        }
        let failures = zip(result.plan.files, result.outcomes).flatMap { entry, outcome -> [String] in
            switch outcome {
            case .failed(let failure): HumanReport.failureLines(entry: entry, failure: failure)
            case .fetchedNotDurable(_, let error), .stillNotDurable(let error): [HumanReport.notDurableLine(entry: entry, error: error)]
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
        Output.lines([TerminalText("Placed \(placed); the next sync makes no request for \(destinations.count == 1 ? "it" : "them").")])
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
            Output.errors(["error: \(error)"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
    }

    /// The edited text, holding every entry, loaded back; exits 3 when the manifest cannot take them. Problems the
    /// manifest already had are reported as `sync` would report them, at their own lines. `drafts`: the URLs the
    /// entries come from, to name them.
    private func editManifest(_ original: [UInt8]?, adding entries: [PinnedEntry],
                              from drafts: [EntryDraft] = []) throws -> (edit: ManifestEdit, loaded: Manifest) {
        let edit: ManifestEdit
        do {
            edit = try ManifestEditor.appending(entries, to: original, fileName: manifest)
        } catch {
            switch error.reason {
            case .destinationTaken:
                Output.errors([TerminalText(error.description)]
                              + (fromSums == nil ? ["hint: choose another destination with --dest"] : []))
            case .destinationRepeated(let first, let second):
                // A checksum list's repeated names are refused with their lines before this; these are URLs.
                let shown = { (index: Int) in drafts.indices.contains(index) ? "\(drafts[index].url)" : "URL \(index + 1)" }
                Output.errors([TerminalText("error: \(shown(first)) and \(shown(second)) would both be saved as "
                                            + "\(String(reflecting: entries[second].destination)); \(manifest) was not modified"),
                               "hint: add them one at a time, each with its own --dest"])
            case .notEditable:
                Output.errors((existingProblems(original) ?? [error.description]).map { TerminalText($0) })
            }
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        let loaded: Manifest
        do {
            loaded = try parseManifest(edit.bytes)
        } catch {
            // The manifest was valid, so the new entries are what breaks it (a folder another entry needs, …).
            Output.errors((existingProblems(original) ?? Self.withoutPositions(error).map { "error: \($0)" }).map { TerminalText($0) })
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        for (number, entry) in entries.enumerated() {
            let index = edit.firstIndex + number
            guard loaded.files.indices.contains(index), entry.matches(loaded.files[index]) else {
                Output.errors(["error: internal error: the edited manifest does not read back the new entry; \(manifest) was not modified"])
                throw ExitCode(ExitStatus.entryFailed.rawValue)
            }
        }
        return (edit, loaded)
    }

    /// The errors of an edited text that did not load, each with its key path but without its line and column:
    /// those point into a text that was never written, not into the file the user has.
    static func withoutPositions(_ error: ManifestError) -> [String] {
        error.diagnostics.filter { $0.severity == .error }.map { "\($0.keyPath.map { "\($0): " } ?? "")\($0.message)" }
    }

    /// The manifest's own errors, if it has any.
    private func existingProblems(_ original: [UInt8]?) -> [String]? {
        guard let original else { return nil }
        do {
            _ = try parseManifest(original)
            return nil
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    /// Fetches each once, hashing as the bytes arrive; exits 1 (naming each URL tried) when one fails. The
    /// watcher is returned because SIGINT and SIGTERM stay blocked from here on: the caller must look at it.
    private func download(_ drafts: [EntryDraft], rewrites: URLRewriter, netrc: Netrc?, manifestHeaders: [HeaderField] = [],
                          keepingIn kept: KeptDownloads? = nil) throws -> (entries: [PinnedEntry], interrupts: InterruptWatcher) {
        try transferring(rewrites: rewrites, netrc: netrc, manifestHeaders: manifestHeaders) { options, cancellation throws(PinFailure) in
            try drafts.map { draft throws(PinFailure) in
                guard let rule = extractRule else {
                    let measured = try Pinner.measure(draft.url, options: options, keepingIn: kept, cancellation: cancellation,
                                                      attemptFailed: Self.retrying)
                    Self.warnIfEncoded(measured)
                    return draft.pinned(digest: measured.digest, size: measured.size)
                }
                let measured = try Pinner.measureArchive(draft.url, rule: rule, options: options, keepingIn: kept,
                                                         cancellation: cancellation, attemptFailed: Self.retrying)
                Self.warnIfEncoded(measured.archive)
                return draft.pinned(digest: measured.archive.digest, size: measured.archive.size, extract: rule.pinning(tree: measured.tree))
            }
        }
    }

    /// The server applied a `Content-Encoding` unasked: the pin is of the encoded bytes, which the user should know.
    static func warnIfEncoded(_ measured: Measurement) {
        if let encoding = measured.contentEncoding {
            Output.errors(["warning: \(measured.sourceDisplayURL): \(HumanReport.encodingWarning(encoding: encoding)); "
                           + "the pin is of those bytes"])
        }
    }

    /// The entries a checksum list names (those `--match` selects): exits 1 when the list cannot be fetched, 3 when
    /// a line of it is not a checksum or names no destination, 64 when `--match` selects nothing.
    private func listed(_ list: EntryDraft, rewrites: URLRewriter, netrc: Netrc?) throws -> (entries: [PinnedEntry], interrupts: InterruptWatcher) {
        // The list's own cap, when it is the lower limit, is the one a message must name.
        let describe = { (reason: FailureReason) -> String in
            guard case .tooLarge(let limit) = reason, limit == ChecksumList.maximumBytes, limit < maxFileSize.bytes else {
                return HumanReport.describe(reason, checksum: nil)
            }
            return "more than \(ByteCount.format(limit)), the most haul reads of a checksum list"
        }
        let (bytes, interrupts) = try transferring(rewrites: rewrites, netrc: netrc, describing: describe) {
            options, cancellation throws(PinFailure) in
            // Read into memory whole: a list is kilobytes, and a server must not make haul hold gigabytes.
            var options = options
            options.maxFileSize = min(options.maxFileSize, ChecksumList.maximumBytes)
            return try Pinner.fetch(list.url, options: options, cancellation: cancellation, attemptFailed: Self.retrying)
        }
        let entries: [PinnedEntry]
        do {
            let parsed = try ChecksumList.parse(bytes, file: list.url.description)
            entries = try ChecksumList(items: parsed.items.filter { item in
                matches.isEmpty || matches.contains { fnmatch($0, item.name, 0) == 0 }
            }).entries(listURL: list.url, file: list.url.description)
        } catch {
            Output.errors(["\(error)", "\(manifest) was not modified"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        guard !entries.isEmpty else {
            Output.errors(["error: no file of \(list.url) matches \(matches.map { "'\($0)'" }.joined(separator: " or "))"])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        return (entries, interrupts)
    }

    /// Runs `body` with the transfer settings, SIGINT and SIGTERM turned into a cancellation; exits 1 (naming each
    /// URL tried, and why, in `describing`'s words) when it fails.
    func transferring<Result>(rewrites: URLRewriter, netrc: Netrc?, manifestHeaders: [HeaderField] = [],
                              describing: (FailureReason) -> String = { HumanReport.describe($0, checksum: nil) },
                              _ body: (SyncOptions, Cancellation) throws(PinFailure) -> Result) throws -> (Result, InterruptWatcher) {
        let cancellation = Cancellation()
        let interrupts = InterruptWatcher(cancelling: cancellation)
        // The download is cancelled, not abandoned: its scratch folder is removed on the way out.
        interrupts.beginChanging()
        var options = SyncOptions(jobs: 1, connectionsPerHost: 1, caFile: resolvedCAFile, maxFileSize: maxFileSize.bytes,
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
            switch error {
            case .workspace, .unfinished, .unpack:
                Output.errors(["error: \(error)"])
            case .transfer(let failure):
                Output.errors(failure.lastFailurePerSource.map {
                    "error: \($0.sourceDisplayURL): \(describing($0.reason))"
                })
            }
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    static let retrying: @Sendable (AttemptFailure, NextAttempt?) -> Void = { failure, next in
        guard let next, next.delay > 0 else { return }
        Output.errors(["warning: \(failure); retrying in \(HumanReport.formatSeconds(next.delay))"])
    }

    /// The manifest's text read as sync reads the file, in this environment.
    func parseManifest(_ bytes: [UInt8]) throws(ManifestError) -> Manifest {
        try ManifestLoader.parse(bytes: bytes, fileName: manifest, manifestDirectory: manifestDirectory, environment: Environment.current)
    }

    /// The folder `root` is relative to: the manifest's, as the loader takes it.
    private var manifestDirectory: String {
        guard let slash = manifest.lastIndex(of: "/") else { return "." }
        return slash == manifest.startIndex ? "/" : String(manifest[..<slash])
    }

    /// What to run next, copy-pastable: the manifest argument only when it is not the default.
    var syncCommand: String {
        guard manifest != "haul.yaml" else { return "haul sync" }
        let safe = manifest.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+".contains($0)) }
        return "haul sync " + (safe ? manifest : "'" + manifest.map { $0 == "'" ? "'\\''" : String($0) }.joined() + "'")
    }
}
