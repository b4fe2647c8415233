import ArgumentParser
import Haul
import HaulDigest
import HaulManifest

/// The words `haul add` says for what the `Pinning` step returns: its notices as they come, the lines of its outcome,
/// and the errors of a step that stopped, with the exit status each stands for.
extension AddCommand {
    /// A notice as a warning line; nil for a failed attempt nothing follows (the failure itself is reported).
    static func warning(_ notice: PinningNotice, manifest: String) -> TerminalText? {
        switch notice {
        case .urlAlreadyListed(let url, let listed):
            let position = "\(manifest):\(listed.location.line):\(listed.location.column)"
            let destination = listed.destination.map { " (dest \(String(reflecting: $0)))" } ?? ""
            return
                "warning: \(position): files[\(listed.index)]\(destination) already fetches \(url); adding another entry for it"
        case .attemptFailed(let failure, let next):
            guard let next, next.delay > 0 else { return nil }
            return "warning: \(FailureWording.attempt(failure)); retrying in \(HumanReport.formatSeconds(next.delay))"
        case .contentEncoded(let url, let encoding):
            return "warning: \(url): \(HumanReport.encodingWarning(encoding: encoding)); the pin is of those bytes"
        case .noAnnouncedSize(let url):
            return "warning: \(url) announces no size; the entry has none (add --size to pin it)"
        case .impossibleAnnouncedSize(let url, let announced, let contradiction):
            return
                "warning: \(url) announces Content-Length: \(announced), which cannot be the size of the file pinned: "
                + "\(contradiction); the entry has no size (add --size to pin it)"
        }
    }

    /// Writes each notice's warning as it comes.
    var warnings: @Sendable (PinningNotice) -> Void {
        let manifest = manifest
        return { notice in
            if let line = Self.warning(notice, manifest: manifest) { Output.errors([line]) }
        }
    }

    /// Writes the failure's errors and exits with its status.
    func fail(_ failure: PinningFailure) -> ExitCode {
        Output.errors(errors(failure).map { TerminalText($0) })
        return ExitCode(failure.exitStatus.rawValue)
    }

    func errors(_ failure: PinningFailure) -> [String] {
        let unmodified = "\(manifest) was not modified"
        switch failure {
        case .destinationTaken(let error, let taken):
            let update = taken.map { "\"\(CommandHint.update($0, manifest: manifest))\"" }
            let hint =
                switch (update, fromSums == nil) {
                case (let update?, true):
                    "hint: to pin it anew from its own url, run \(update); or choose another destination with --dest"
                case (let update?, false): "hint: to pin it anew from its own url, run \(update)"
                case (nil, true): "hint: choose another destination with --dest"
                case (nil, false): nil as String?
                }
            return [error.description] + (hint.map { [$0] } ?? [])
        case .destinationRepeated(let first, let second, let urls, let destination):
            // A checksum list's repeated names are refused with their lines before this; these are URLs.
            return [
                "error: \(urls.0 ?? "URL \(first + 1)") and \(urls.1 ?? "URL \(second + 1)") would both be saved as "
                    + "\(String(reflecting: destination)); \(unmodified)",
                "hint: add them one at a time, each with its own --dest",
            ]
        case .notEditable(let error, let existing):
            return existing ?? [error.description]
        case .editDoesNotLoad(let error, let existing):
            return existing ?? Self.withoutPositions(error).map { "error: \($0)" }
        case .entryDoesNotReadBack:
            return ["error: internal error: the edited manifest does not read back the new entry; \(unmodified)"]
        case .pinDoesNotReadBack:
            return ["error: internal error: the edited manifest does not read back the new pin; \(unmodified)"]
        case .notADestination(let folder, let path):
            return ["error: --dest \(Quoted.text(folder)): \(Quoted.text(path)) cannot be a destination; \(unmodified)"]
        case .checksumList(let error):
            return ["\(error)", unmodified]
        case .nothingMatches(let list, let patterns):
            return ["error: no file of \(list) matches \(patterns.map { "'\($0)'" }.joined(separator: " or "))"]
        case .listedDigestsChanged(let changed):
            return changed.map { changed in
                "error: \(position(changed.entry)): \(subject(changed.entry)) is pinned to \(Self.shortPin(changed.was, tree: nil)); "
                    + "the list now says \(Self.shortPin(changed.now, tree: nil))"
            } + [
                "hint: run \"haul add --from-sums \(CommandHint.shellWord(fromSums ?? ""))\(manifestArgument) --update-all\" "
                    + "to pin \(changed.count == 1 ? "it" : "them") anew; \(unmodified)"
            ]
        case .listedEntriesPinSizes(let sized):
            return sized.map { entry in
                "error: \(position(entry)): \(subject(entry)) pins a size, which the list does not give; run "
                    + "\"\(CommandHint.update(entry.destination, manifest: manifest))\" to download it and pin both"
            } + [unmodified]
        case .repinRefused(let error):
            return [error.description, unmodified]
        case .repinDoesNotLoad(let error, let entries):
            guard let first = entries.first else {
                return Self.withoutPositions(error).map { "error: \($0)" } + [unmodified]
            }
            return [
                "error: \(position(first)): \(Quoted.firstFew(entries, subject)): the new pin does not load back: "
                    + Self.withoutPositions(error).joined(separator: "; "), unmodified,
            ]
        case .noManifest:
            return ["error: \(manifest) does not exist: there is no entry to update"]
        case .invalidManifest(let error):
            return error.lines
        case .noSuchEntries(let missing):
            return missing.map { "error: \(manifest) has no entry with dest \(String(reflecting: $0))" }
        case .givenDigestForTree(let entry):
            return [
                "error: \(subject(entry)) pins the tree its archive unpacks to; --update downloads the archive to pin both "
                    + "(give no --\(givenDigests.first?.0 ?? "sha256"))"
            ]
        case .pinnedByList(let listed):
            return listed.map { listed in
                "error: \(position(listed.entry)): \(subject(listed.entry)) takes its digest from the signed list "
                    + "\(Quoted.text(listed.list)) (from:), which each sync reads; it has no pin of its own to update"
            } + [
                unmodified,
                "hint: --update pins only entries with a digest of their own; to pin one yourself instead of taking "
                    + "the list's, replace its from: with sha256:",
            ]
        }
    }

    /// The lines telling what the run pinned, before what it placed.
    func lines(_ outcome: PinningOutcome) -> [TerminalText] {
        var lines: [TerminalText] = []
        let unchanged = outcome.files(.unchanged)
        let modified = outcome.manifest.bytes != nil
        if isUpdating {
            if unchanged.count == 1, let only = unchanged.first {
                lines.append(
                    TerminalText(
                        "\(subject(only)) is already pinned to what \(only.url) serves"
                            + (modified ? "." : "; \(manifest) was not modified.")))
            } else if !unchanged.isEmpty {
                lines.append(
                    TerminalText(
                        "\(unchanged.count) already pinned to what their URLs serve: "
                            + Quoted.firstFew(unchanged) { $0.destination }
                            + (modified ? "." : "; \(manifest) was not modified.")))
            }
        } else if !unchanged.isEmpty {
            lines.append(
                TerminalText(
                    "\(unchanged.count) already pinned: " + Quoted.firstFew(unchanged) { $0.destination } + "."))
        }
        for file in outcome.files(.updated) {
            let old = file.previous?.digest.map { Self.shortPin($0, tree: file.previous?.tree) } ?? "unpinned"
            let size = file.measuredSize.map { ", \(ByteCount.format($0))" } ?? ""
            lines.append(
                TerminalText(
                    "Updated \(subject(file)) in \(manifest), line \(file.line ?? 0): \(old) → "
                        + "\(Self.shortPin(file.digest, tree: file.tree))\(size)."))
        }
        for (number, file) in outcome.files(.added).enumerated() {
            let size = file.size.map { "\(ByteCount.format($0)), " } ?? ""
            let what = "\(file.destination) (\(size)\(Self.shortPin(file.digest, tree: file.tree)))"
            lines.append(
                TerminalText(
                    outcome.created && number == 0
                        ? "Created \(manifest) with \(what) as files[0], line \(file.line ?? 0)."
                        : "Added \(what) to \(manifest) as files[\(file.index)], line \(file.line ?? 0)."))
        }
        return lines
    }

    /// `files[2] (bin/tool)`, as messages name an entry.
    private func subject(_ entry: ManifestEntryReference) -> String { "files[\(entry.index)] (\(entry.destination))" }
    private func subject(_ file: PinnedFile) -> String { "files[\(file.index)] (\(file.destination))" }

    private func position(_ entry: ManifestEntryReference) -> String {
        "\(manifest):\(entry.location.line):\(entry.location.column)"
    }

    /// The errors of an edited text that did not load, each with its key path but without its line and column:
    /// those point into a text that was never written, not into the file the user has.
    static func withoutPositions(_ error: DiagnosticsError) -> [String] {
        error.diagnostics.filter { $0.severity == .error }.map { "\($0.keyPath.map { "\($0): " } ?? "")\($0.message)" }
    }

    /// A pin as messages show it: `sha256 9f86d081884c…`, and an archive's tree `tree sha256-n4bQgYhMfWWa…`.
    static func shortPin(_ digest: Digest, tree: Digest?) -> String {
        "\(digest.algorithm.rawValue) \(digest.hex.prefix(12))…"
            + (tree.map { ", tree \($0.subresourceIntegrity.prefix(19))…" } ?? "")
    }
}
