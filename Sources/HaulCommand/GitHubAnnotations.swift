import ArgumentParser
import Glibc
import Haul
import HaulEngine
import HaulFailures
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
    /// `$GITHUB_WORKSPACE`: GitHub resolves an annotation's `file=` against it, not against the step's folder.
    var workspace: String? = nil

    /// nil when annotations are off.
    static func resolve(
        _ choice: AnnotationStyle?, json: Bool, environment: [String: String] = Environment.current
    ) -> GitHubAnnotations? {
        switch choice {
        case .none?: return nil
        case .github?: break
        case nil: guard environment["GITHUB_ACTIONS"] == "true" else { return nil }
        }
        return GitHubAnnotations(
            toStandardError: json,
            summaryFile: environment["GITHUB_STEP_SUMMARY"].flatMap { $0.isEmpty ? nil : $0 },
            workspace: environment["GITHUB_WORKSPACE"].flatMap { $0.isEmpty ? nil : $0 })
    }

    /// `path` as GitHub finds it: relative to the workspace when inside it, else absolute (a relative `file=` would be
    /// read against the workspace and name another file). As given when there is no workspace (a local run), and for
    /// standard input, which is no file.
    func fileProperty(_ path: String) -> String {
        guard let workspace, path != ManifestLoader.standardInputName else { return path }
        let absolute = Self.absolute(path)
        for root in Set([Self.absolute(workspace), Self.resolved(workspace)]) {
            let prefix = root.hasSuffix("/") ? root : root + "/"
            if absolute.hasPrefix(prefix) { return String(absolute.dropFirst(prefix.count)) }
        }
        return absolute
    }

    /// `path` from `/`, without `.` or `..` parts; the current folder is the physical one `getcwd` gives, and so is
    /// the path's own folder when it exists, so that a workspace reached through a symlink still matches.
    private static func absolute(_ path: String) -> String {
        var joined = path
        if !path.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buffer, buffer.count) != nil else { return path }
            joined =
                String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
        }
        var parts: [Substring] = []
        for part in joined.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        let lexical = "/" + parts.joined(separator: "/")
        guard let name = parts.last else { return lexical }
        let folder = resolved("/" + parts.dropLast().joined(separator: "/"))
        return (folder.hasSuffix("/") ? folder : folder + "/") + name
    }

    /// `path` with its symlinks resolved, or as given when it cannot be.
    private static func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    /// One per diagnostic, at its place in the manifest.
    func diagnostics(_ diagnostics: [Diagnostic]) {
        emit(
            diagnostics.map { diagnostic in
                Self.command(
                    diagnostic.severity == .error ? "error" : "warning", file: fileProperty(diagnostic.file),
                    line: diagnostic.location?.line, column: diagnostic.location?.column,
                    message: (diagnostic.keyPath.map { $0 + ": " } ?? "") + diagnostic.message)
            })
    }

    /// A failed entry, at its place in `manifest`. The message names the destination: an annotation is shown on its
    /// own, by its line, where the entry's `dest` may be lines away.
    func failed(_ entry: FileEntry, _ failure: EntryFailure, manifest: String) {
        let message =
            "\(entry.destination): "
            + HumanReport.failureMessages(entry: entry, failure: failure, manifest: manifest).joined(separator: "\n")
        emit([
            Self.command(
                "error", file: fileProperty(manifest), line: entry.location.line, column: entry.location.column,
                message: message)
        ])
    }

    /// A signed list that pinned nothing, at its place under `lists:`.
    func list(_ outcome: SignedLists.Outcome, _ failure: SignedLists.ListFailure, manifest: String) {
        emit([
            Self.command(
                "error", file: fileProperty(manifest), line: outcome.location.line, column: outcome.location.column,
                message: ListWording.failure(outcome, failure))
        ])
    }

    /// The run, as a Markdown table, appended to the step's summary; a warning when it could not be (naming the
    /// file and why), nil otherwise. The run's exit status does not depend on it.
    func summary(_ result: SyncResult, manifest: String, exitStatus: Int32) -> String? {
        guard summaryFile != nil else { return nil }
        let counts = result.counts
        var text =
            "### haul sync \(Self.markdownCell(manifest))\n\n"
            + "| fetched | from cache | confirmed (304) | up to date | failed | exit |\n|---|---|---|---|---|---|\n"
            + "| \(counts.fetched) (\(ByteCount.format(counts.fetchedBytes))) | \(counts.cached) | \(counts.notModified) "
            + "| \(result.plan.upToDateCount) | \(counts.failed) | \(exitStatus) |\n"
        let failures = zip(result.plan.files, result.outcomes).compactMap {
            entry, outcome -> (FileEntry, EntryFailure)? in
            if case .failed(let failure) = outcome { return (entry, failure) }
            return nil
        }
        if !failures.isEmpty {
            text += "\n| failed | line | why |\n|---|---|---|\n"
            for (entry, failure) in failures.prefix(100) {
                let why = HumanReport.failureMessages(entry: entry, failure: failure, manifest: manifest).joined(
                    separator: "; ")
                text +=
                    "| \(Self.markdownCell(entry.destination.description)) | \(entry.location.line) | \(Self.markdownCell(why)) |\n"
            }
            if failures.count > 100 { text += "\n… and \(failures.count - 100) more\n" }
        }
        return appendSummary(text)
    }

    /// A manifest that could not be read (exit 3): its errors as a table in the step summary, so that the job's page
    /// says why nothing was synced. A warning when the summary could not be appended.
    func invalidManifest(_ diagnostics: [Diagnostic], manifest: String) -> String? {
        guard summaryFile != nil else { return nil }
        let errors = diagnostics.filter { $0.severity == .error }
        var text = "### haul: \(Self.markdownCell(manifest)) is invalid\n\n| file | line | error |\n|---|---|---|\n"
        for diagnostic in errors.prefix(100) {
            let line = diagnostic.location.map { "\($0.line)" } ?? ""
            let message = (diagnostic.keyPath.map { $0 + ": " } ?? "") + diagnostic.message
            text += "| \(Self.markdownCell(diagnostic.file)) | \(line) | \(Self.markdownCell(message)) |\n"
        }
        if errors.count > 100 { text += "\n… and \(errors.count - 100) more\n" }
        return appendSummary(text + "\nexit \(ExitStatus.invalidManifest.rawValue)\n")
    }

    /// `haul verify`: an annotation per file that is missing, differs or cannot be read, at its entry, and a table in
    /// the step summary. A warning when the summary could not be appended.
    func verified(_ result: VerificationResult, manifest: String) -> String? {
        emit(
            result.problems.map { planned in
                Self.command(
                    "error", file: fileProperty(manifest), line: planned.entry.location.line,
                    column: planned.entry.location.column, message: HumanReport.verifyProblem(planned))
            })
        guard summaryFile != nil else { return nil }
        var text =
            "### haul verify \(Self.markdownCell(manifest))\n\n| verified | unpinned present | problems | exit |\n"
            + "|---|---|---|---|\n| \(result.plan.upToDateCount) | \(result.plan.revalidations.count) | \(result.problems.count) "
            + "| \(result.exitStatus.rawValue) |\n"
        if !result.problems.isEmpty {
            text += "\n| problem | line |\n|---|---|\n"
            for planned in result.problems.prefix(100) {
                text +=
                    "| \(Self.markdownCell(HumanReport.verifyProblem(planned))) | \(planned.entry.location.line) |\n"
            }
            if result.problems.count > 100 { text += "\n… and \(result.problems.count - 100) more\n" }
        }
        return appendSummary(text)
    }

    /// Appends a section to the step summary; nil when done, else the warning that says it could not be.
    private func appendSummary(_ text: String) -> String? {
        guard let summaryFile, let problem = Self.append(text + "\n", to: summaryFile) else { return nil }
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
            return Errno(code).description
        }
        defer { close(descriptor) }
        guard fstat(descriptor, &info) == 0 else { return Errno(errno).description }
        guard info.st_mode & S_IFMT == S_IFREG else { return notRegularFile(info) }
        let file = OutputDescriptor(descriptor)
        file.write(text, waitingUntil: 0)
        return file.failure.map { Errno($0).description }
    }

    private static func notRegularFile(_ info: stat) -> String {
        "it is \(StoreWording.kind(FileKind(info))), not a regular file"
    }

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
                || (0x7B...0x7E).contains(value)
            {
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
    func lists(_ outcomes: [SignedLists.Outcome], verbose: Bool) {
        inner.lists(outcomes, verbose: verbose)
        for outcome in outcomes {
            if case .failure(let failure) = outcome.result { annotations.list(outcome, failure, manifest: manifest) }
        }
    }
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
        if let problem = annotations.summary(result, manifest: manifest, exitStatus: exitStatus) {
            inner.warning(problem)
        }
        inner.summary(result, exitStatus: exitStatus, interruptedBy: signal)
    }
}
