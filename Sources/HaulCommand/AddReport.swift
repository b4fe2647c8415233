import Haul
import HaulManifest
import Synchronization

/// What `haul add` tells: lines for a person, nothing but warnings and errors with `--quiet`, or with `--json`
/// one `pinned` event per entry and a `summary` last, whatever the exit (its messages are `error` and `warning`
/// events then, `Output.writeDiagnosticsAsEvents`).
final class AddReport: Sendable {
    enum Style { case text, quiet, json }

    private struct Tally {
        var added = 0
        var updated = 0
        var unchanged = 0
        var placed = 0
    }

    private let style: Style
    private let manifest: String
    private let tally = Mutex(Tally())

    init(style: Style, manifest: String) {
        self.style = style
        self.manifest = manifest
        if style == .json { Output.writeDiagnosticsAsEvents() }
    }

    /// Lines for a person (what was added, updated, placed, what to run next): shown only as text.
    func say(_ lines: [TerminalText]) {
        guard style == .text else { return }
        Output.lines(lines)
    }

    /// The file's `url` as written in the manifest: its userinfo is redacted here, as every URL haul shows.
    func pinned(_ file: PinnedFile) {
        tally.withLock { tally in
            switch file.result {
            case .added: tally.added += 1
            case .updated: tally.updated += 1
            case .unchanged: tally.unchanged += 1
            }
        }
        guard style == .json else { return }
        Output.lines([
            TerminalText(
                JSONEvents.pinned(
                    dest: file.destination, url: Redaction.redactingUserinfo(file.url), digest: file.digest,
                    size: file.size, result: file.result.rawValue
                ).encoded())
        ])
    }

    func placed(_ count: Int) { tally.withLock { $0.placed += count } }

    /// The `summary` event, with JSON; nothing otherwise.
    func finish(exitStatus: Int32) {
        guard style == .json else { return }
        let counts = tally.withLock { $0 }
        Output.lines([
            TerminalText(
                JSONEvents.addSummary(
                    manifest: manifest, added: counts.added, updated: counts.updated,
                    unchanged: counts.unchanged, placed: counts.placed,
                    exitStatus: exitStatus
                ).encoded())
        ])
    }
}
