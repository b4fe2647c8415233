import ArgumentParser
import Glibc
import Haul
import HaulEngine
import HaulManifest
import HaulStore

/// `haul add URL`: download once, pin what arrived (sha256 and size), append the entry to the manifest.
///
/// Everything that can be checked without the network is checked first (the URL, the destination, that the
/// manifest can take the entry and still validate), so that a mistake costs no download. The manifest is
/// replaced only after the edited text has been loaded back by the real loader and reads back the entry exactly.
struct AddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Download a URL once and pin it in the manifest (url, dest, sha256, size).",
        usage: "haul add <url> [--dest <path>] [--manifest <file>] [--print] [<options>]",
        discussion: """
        The file is fetched once through the same engine as sync, measured, and deleted: add only pins; \
        "haul sync" puts the file in place. The entry goes after the last entry of files:, in the manifest's own \
        indentation; comments and formatting are left as they are. A missing manifest is created. The manifest \
        is replaced atomically, and only if it still validates. A destination already in the manifest is refused \
        (exit 3); a URL already listed under another destination is added with a warning.

        Examples:
          haul add https://example.com/v1.2/tool.tar.gz --dest bin/tool.tar.gz
          haul add https://example.com/data.csv --manifest assets/haul.yaml
          haul add https://example.com/data.csv --print
        """)

    @Argument(help: ArgumentHelp("The http or https URL to pin; ${VAR} expands from the environment, as in a manifest.",
                                 valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("Where sync will put the file, relative to the manifest's root (default: the URL's file name).",
                               valueName: "path"))
    var dest: String?

    @Option(help: ArgumentHelp("The manifest to add the entry to; created when missing.", valueName: "file"))
    var manifest: String = "haul.yaml"

    @Flag(name: .customLong("print"), help: "Print the entry instead of adding it; no manifest is read or written.")
    var printOnly = false

    @Option(name: .customLong("ca-file"), help: ArgumentHelp(
        "Verify TLS against this CA bundle instead of the system's (or set HAUL_CA_FILE).", valueName: "file"))
    var caFile: String?

    /// The download goes where the config's rewrites send it; the manifest gets the URL as given.
    @OptionGroup var configOptions: ConfigOptions

    @Option(name: .customLong("max-file-size"), help: ArgumentHelp(
        "Largest download accepted (e.g. 500M, 2G).", valueName: "size"))
    var maxFileSize: ByteSize = ByteSize(bytes: 16 << 30)

    /// Same resolution and check as `sync`'s `--ca-file`.
    private var resolvedCAFile: String? { CABundle.resolve(option: caFile)?.path }

    func validate() throws {
        try CABundle.resolve(option: caFile)?.validate()
    }

    func run() throws {
        let rewrites = try configOptions.rewrites()
        let draft: EntryDraft
        do {
            draft = try EntryDraft(url: url, destination: dest, environment: Environment.current)
        } catch {
            Output.errors(error.messages.map { "error: \($0)" })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        if printOnly {
            let (entry, _) = try download(draft, rewrites: rewrites)
            Output.lines(entry.yamlSnippet.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map {
                TerminalText(String($0))
            })
            return
        }

        let original = try readManifest()
        // A stand-in digest and size: the manifest must be able to take the entry before anything is fetched.
        let trial = try editManifest(original, adding: draft.trialEntry)
        for listed in trial.edit.sameURL {
            let position = "\(manifest):\(listed.location.line):\(listed.location.column)"
            let destination = listed.destination.map { " (dest \(String(reflecting: $0)))" } ?? ""
            Output.errors(["warning: \(position): files[\(listed.index)]\(destination) already fetches "
                           + "\(draft.url); adding another entry for it"])
        }

        let (entry, interrupts) = try download(draft, rewrites: rewrites)
        let (edit, loaded) = try editManifest(original, adding: entry)
        // The download may have taken minutes; an edit made meanwhile must not be overwritten.
        let current: [UInt8]?
        do { current = try ManifestFile.read(manifest) } catch {
            Output.errors(["error: \(error)"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        guard current == original else {
            Output.errors(["error: \(manifest) changed while haul add was downloading; it was not modified (run haul add again)"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        // The signals stay blocked after the download: one that came since must still stop the run, unwritten.
        if let status = interrupts.exitStatus {
            Output.errors(["haul: interrupted by \(interrupts.signalName); \(manifest) was not modified"])
            throw ExitCode(status)
        }
        do { try ManifestFile.replace(manifest, with: edit.bytes) } catch {
            Output.errors(["error: \(error); \(manifest) was not modified"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        let line = loaded.files[edit.entryIndex].location.line
        let what = "\(entry.destination) (\(ByteCount.format(entry.size)), sha256 \(entry.digest.hex.prefix(12))…)"
        Output.lines([
            original == nil
                ? "Created \(manifest) with \(what) as files[0], line \(line)."
                : "Added \(what) to \(manifest) as files[\(edit.entryIndex)], line \(line).",
            "Run \"\(syncCommand)\" to put it in place.",
        ])
    }

    /// The manifest's bytes, or nil when there is none yet.
    private func readManifest() throws -> [UInt8]? {
        do {
            return try ManifestFile.read(manifest)
        } catch {
            Output.errors(["error: \(error)"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
    }

    /// The edited text, loaded back; exits 3 when the manifest cannot take the entry. Problems the manifest
    /// already had are reported as `sync` would report them, at their own lines.
    private func editManifest(_ original: [UInt8]?, adding entry: PinnedEntry) throws -> (edit: ManifestEdit, loaded: Manifest) {
        let edit: ManifestEdit
        do {
            edit = try ManifestEditor.appending(entry, to: original, fileName: manifest)
        } catch {
            if case .destinationTaken = error.reason {
                Output.errors([TerminalText(error.description), "hint: choose another destination with --dest"])
            } else {
                Output.errors((existingProblems(original) ?? [error.description]).map { TerminalText($0) })
            }
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        let loaded: Manifest
        do {
            loaded = try ManifestLoader.parse(bytes: edit.bytes, fileName: manifest, manifestDirectory: manifestDirectory,
                                              environment: Environment.current)
        } catch {
            // The manifest was valid, so the new entry is what breaks it (a folder another entry needs, …).
            Output.errors((existingProblems(original) ?? error.diagnostics.filter { $0.severity == .error }.map {
                "error: \($0.keyPath.map { "\($0): " } ?? "")\($0.message)"
            }).map { TerminalText($0) })
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        guard loaded.files.indices.contains(edit.entryIndex), entry.matches(loaded.files[edit.entryIndex]) else {
            Output.errors(["error: internal error: the edited manifest does not read back the new entry; \(manifest) was not modified"])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
        return (edit, loaded)
    }

    /// The manifest's own errors, if it has any.
    private func existingProblems(_ original: [UInt8]?) -> [String]? {
        guard let original else { return nil }
        do {
            _ = try ManifestLoader.parse(bytes: original, fileName: manifest, manifestDirectory: manifestDirectory,
                                         environment: Environment.current)
            return nil
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    /// Fetches once, hashing as the bytes arrive; exits 1 (naming each URL tried) when that fails. The watcher
    /// is returned because SIGINT and SIGTERM stay blocked from here on: the caller must look at it.
    private func download(_ draft: EntryDraft, rewrites: URLRewriter) throws -> (PinnedEntry, InterruptWatcher) {
        let cancellation = Cancellation()
        let interrupts = InterruptWatcher(cancelling: cancellation)
        // The download is cancelled, not abandoned: its scratch folder is removed on the way out.
        interrupts.beginChanging()
        let options = SyncOptions(jobs: 1, connectionsPerHost: 1, caFile: resolvedCAFile, maxFileSize: maxFileSize.bytes,
                                  rewrites: rewrites)
        do {
            let measured = try Pinner.measure(draft.url, options: options, cancellation: cancellation) { failure, next in
                guard let next, next.delay > 0 else { return }
                Output.errors(["warning: \(failure); retrying in \((next.delay * 10).rounded() / 10) s"])
            }
            if let encoding = measured.contentEncoding {
                Output.errors(["warning: \(measured.sourceDisplayURL): \(HumanReport.encodingWarning(encoding: encoding)); "
                               + "the pin is of those bytes"])
            }
            return (draft.pinned(digest: measured.digest, size: measured.size), interrupts)
        } catch {
            if let status = interrupts.exitStatus {
                Output.errors(["haul: interrupted by \(interrupts.signalName); nothing was written"])
                throw ExitCode(status)
            }
            switch error {
            case .workspace, .unfinished:
                Output.errors(["error: \(error)"])
            case .transfer(let failure):
                Output.errors(failure.lastFailurePerSource.map {
                    "error: \($0.sourceDisplayURL): \(HumanReport.describe($0.reason, checksum: nil))"
                })
            }
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// The folder `root` is relative to: the manifest's, as the loader takes it.
    private var manifestDirectory: String {
        guard let slash = manifest.lastIndex(of: "/") else { return "." }
        return slash == manifest.startIndex ? "/" : String(manifest[..<slash])
    }

    /// What to run next, copy-pastable: the manifest argument only when it is not the default.
    private var syncCommand: String {
        guard manifest != "haul.yaml" else { return "haul sync" }
        let safe = manifest.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+".contains($0)) }
        return "haul sync " + (safe ? manifest : "'" + manifest.map { $0 == "'" ? "'\\''" : String($0) }.joined() + "'")
    }
}
