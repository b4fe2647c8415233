import ArgumentParser
import Glibc
import Haul
import HaulEngine
import HaulFileSystem
import HaulManifest
import HaulPlanner

/// GitHub Actions workflow commands: manifest diagnostics and failed entries as annotations on the manifest's
/// lines (`::error file=…,line=…,col=…::…`), and the run's summary appended to `$GITHUB_STEP_SUMMARY` as a
/// table. On when `GITHUB_ACTIONS=true` (set on every GitHub runner) or `--annotations github`; `--annotations none`
/// turns it off. The runner reads workflow commands from standard output; under `--json`, which keeps standard
/// output to JSON events, they go to standard error.
struct GitHubAnnotations: Sendable {
    let toStandardError: Bool
    /// `$GITHUB_STEP_SUMMARY`: the file a step's summary is appended to; nil when the runner gave none.
    let summaryFile: String?

    /// nil when annotations are off.
    static func resolve(_ choice: AnnotationStyle?, json: Bool, environment: [String: String] = Environment.current) -> GitHubAnnotations? {
        switch choice {
        case .none?: return nil
        case .github?: break
        case nil: guard environment["GITHUB_ACTIONS"] == "true" else { return nil }
        }
        return GitHubAnnotations(toStandardError: json,
                                 summaryFile: environment["GITHUB_STEP_SUMMARY"].flatMap { $0.isEmpty ? nil : $0 })
    }

    /// One per diagnostic, at its place in the manifest.
    func diagnostics(_ diagnostics: [Diagnostic]) {
        emit(diagnostics.map { diagnostic in
            Self.command(diagnostic.severity == .error ? "error" : "warning", file: diagnostic.file,
                         line: diagnostic.location?.line, column: diagnostic.location?.column,
                         message: (diagnostic.keyPath.map { $0 + ": " } ?? "") + diagnostic.message)
        })
    }

    /// A failed entry, at its place in `manifest`. The message names the destination: an annotation is shown on its
    /// own, by its line, where the entry's `dest` may be lines away.
    func failed(_ entry: FileEntry, _ failure: EntryFailure, manifest: String) {
        let message = "\(entry.destination): " + HumanReport.failureMessages(entry: entry, failure: failure, manifest: manifest).joined(separator: "\n")
        emit([Self.command("error", file: manifest, line: entry.location.line, column: entry.location.column, message: message)])
    }

    /// The run, as a Markdown table, appended to the step's summary; a warning when it could not be (naming the
    /// file and why), nil otherwise. The run's exit status does not depend on it.
    func summary(_ result: SyncResult, manifest: String, exitStatus: Int32) -> String? {
        guard let summaryFile else { return nil }
        let counts = result.counts
        var text = "### haul sync \(Self.markdownCell(manifest))\n\n"
            + "| fetched | from cache | confirmed (304) | up to date | failed | exit |\n|---|---|---|---|---|---|\n"
            + "| \(counts.fetched) (\(ByteCount.format(counts.fetchedBytes))) | \(counts.cached) | \(counts.notModified) "
            + "| \(result.plan.upToDateCount) | \(counts.failed) | \(exitStatus) |\n"
        let failures = zip(result.plan.files, result.outcomes).compactMap { entry, outcome -> (FileEntry, EntryFailure)? in
            if case .failed(let failure) = outcome { return (entry, failure) }
            return nil
        }
        if !failures.isEmpty {
            text += "\n| failed | line | why |\n|---|---|---|\n"
            for (entry, failure) in failures.prefix(100) {
                let why = HumanReport.failureMessages(entry: entry, failure: failure, manifest: manifest).joined(separator: "; ")
                text += "| \(Self.markdownCell(entry.destination.description)) | \(entry.location.line) | \(Self.markdownCell(why)) |\n"
            }
            if failures.count > 100 { text += "\n… and \(failures.count - 100) more\n" }
        }
        guard let problem = Self.append(text + "\n", to: summaryFile) else { return nil }
        return "the step summary could not be appended to GITHUB_STEP_SUMMARY (\(summaryFile)): \(problem)"
    }

    /// Appends `text` to the regular file at `path`, made if missing; nil when done, else why not. Opened without
    /// blocking and refused unless it is a regular file: a FIFO nobody reads would hold the run forever (and a
    /// device is no summary).
    private static func append(_ text: String, to path: String) -> String? {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0o644)
        var info = stat()
        guard descriptor >= 0 else {
            let code = errno
            // A FIFO nobody reads refuses a non-blocking open with ENXIO: say what is there rather than that.
            if code == ENXIO, stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG { return notRegularFile(info) }
            return SystemError.message(for: code)
        }
        defer { close(descriptor) }
        guard fstat(descriptor, &info) == 0 else { return SystemError.message(for: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else { return notRegularFile(info) }
        let file = OutputDescriptor(descriptor)
        file.write(text, waitingUntil: 0)
        return file.failure.map { SystemError.message(for: $0) }
    }

    private static func notRegularFile(_ info: stat) -> String { "it is \(FileKindName.of(info)), not a regular file" }

    private func emit(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        let text = lines.map { TerminalText(workflowCommand: $0) }
        if toStandardError { Output.errors(text) } else { Output.lines(text) }
    }

    /// `::error file=F,line=L,col=C::message`, escaped as the runner reads it: `%`, CR and LF everywhere, and `:`
    /// and `,` in property values.
    static func command(_ kind: String, file: String, line: Int?, column: Int?, message: String) -> String {
        var properties = ["file=" + property(file)]
        if let line { properties.append("line=\(line)") }
        if let column { properties.append("col=\(column)") }
        return "::\(kind) \(properties.joined(separator: ","))::\(data(message))"
    }

    static func data(_ text: String) -> String {
        text.replacing("%", with: "%25").replacing("\r", with: "%0D").replacing("\n", with: "%0A")
    }

    static func property(_ text: String) -> String {
        data(text).replacing(":", with: "%3A").replacing(",", with: "%2C")
    }

    /// Text a manifest, a server or the command line chose, inert in the summary's Markdown (a table cell, the
    /// heading): shown as the log shows it (`TerminalText`: no line break, no control or bidi scalar raw), then
    /// every ASCII punctuation character backslash-escaped, which CommonMark reads as that character and nothing
    /// more. So no link or image (`[`, `]`, `(`, `)`, `!`), autolink (`<`, `:`, `.` of `www.`, `@`), HTML or entity
    /// (`<`, `>`, `&`), code, emphasis or math (`` ` ``, `*`, `_`, `~`, `$`), and no cell break (`|`, which
    /// GitHub's tables read escaped even inside code).
    static func markdownCell(_ text: String) -> String {
        var cell = ""
        for scalar in TerminalText.escaping(text, workflowCommands: false).unicodeScalars {
            // CommonMark's ASCII punctuation: `!` to `/`, `:` to `@`, `[` to `` ` ``, `{` to `~`.
            let value = scalar.value
            if (0x21...0x2F).contains(value) || (0x3A...0x40).contains(value) || (0x5B...0x60).contains(value)
                || (0x7B...0x7E).contains(value) {
                cell += "\\"
            }
            cell.unicodeScalars.append(scalar)
        }
        return cell
    }
}

/// `--annotations`: GitHub workflow commands, or none.
enum AnnotationStyle: String, ExpressibleByArgument, CaseIterable, Sendable {
    case github
    case none
}

/// Another reporter's output, plus GitHub annotations for failed entries and the step summary at the end.
final class AnnotatingReporter: RunReporter {
    private let inner: RunReporter
    private let annotations: GitHubAnnotations
    private let manifest: String

    init(_ inner: RunReporter, annotations: GitHubAnnotations, manifest: String) {
        self.inner = inner
        self.annotations = annotations
        self.manifest = manifest
    }

    var wantsProgress: Bool { inner.wantsProgress }
    func warning(_ text: String) { inner.warning(text) }
    func plan(_ plan: Plan, acting: Bool) { inner.plan(plan, acting: acting) }
    func entry(_ entry: FileEntry, started source: String) { inner.entry(entry, started: source) }
    func entry(_ entry: FileEntry, progress: TransferProgress) { inner.entry(entry, progress: progress) }
    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, next: NextAttempt?) {
        inner.entry(entry, attemptFailed: failure, next: next)
    }
    func pruned(_ destination: DestinationPath, outcome: PruneOutcome) { inner.pruned(destination, outcome: outcome) }

    func entry(_ entry: FileEntry, finished outcome: EntryOutcome) {
        inner.entry(entry, finished: outcome)
        if case .failed(let failure) = outcome {
            annotations.failed(entry, failure, manifest: manifest)
        }
    }

    /// The step summary first: a warning that it could not be written then comes before the run's own summary,
    /// which stays the last line (and under `--json` the last event).
    func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?) {
        if let problem = annotations.summary(result, manifest: manifest, exitStatus: exitStatus) { inner.warning(problem) }
        inner.summary(result, exitStatus: exitStatus, interruptedBy: signal)
    }
}
