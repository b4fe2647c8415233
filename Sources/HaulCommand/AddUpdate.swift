import ArgumentParser
import Glibc
import Haul
import HaulDigest
import HaulEngine
import HaulManifest

/// `haul add --update DEST…` and `--update-all`: entries pinned anew, after their files changed upstream, as
/// `terraform init -upgrade` moves its lock file. Each entry's own url is fetched (with its headers, as sync sends
/// them) and hashed with the entry's own algorithm, or the digest given is taken; then only the checksum and size
/// values change, where they stand, in the entry's own notation: every comment and line around them stays. An
/// archive entry (`extract:`) is unpacked by its own settings and its tree pinned anew as well.
///
/// Every download comes first: one that fails leaves the manifest as it was (a lock file half moved to new pins is
/// worse than none moved). The manifest is then rewritten once, with every changed pin, and the new files put in
/// place as `haul add` puts a new entry's.
extension AddCommand {
    /// One entry's pin as its URL serves it now.
    private struct Repin {
        let index: Int
        let digest: Digest
        let size: Int64?
        let tree: Digest?
    }

    /// `names`: the destinations given to `--update`; nil for `--update-all` (every entry with a checksum).
    func update(_ names: [String]?, rewrites: URLRewriter, report: AddReport) throws {
        guard let original = try readManifest() else {
            Output.errors(["error: \(manifest) does not exist: there is no entry to update"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        let loaded: Manifest
        do {
            loaded = try parseManifest(original)
        } catch {
            Output.errors(error.lines.map { TerminalText($0) })
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        let indices = try entries(named: names, in: loaded)
        guard !indices.isEmpty else {
            return report.say([TerminalText("\(manifest) has no pinned entry; nothing to update.")])
        }
        let netrc = try netrcOptions.credentials(manifestWants: loaded.netrc)
        let given = try givenDigest()
        if given != nil, let index = indices.first, loaded.files[index].extract?.tree != nil {
            Output.errors([TerminalText("error: \(subject(index, loaded)) pins the tree its archive unpacks to; --update downloads "
                                        + "the archive to pin both (give no --\(givenDigests[0].0))")])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        let kept = given == nil ? try keptDownloads() : nil
        defer { kept?.remove() }

        var current: Int?
        let repins: [Repin]
        let interrupts: InterruptWatcher
        do {
            (repins, interrupts) = try transferring(rewrites: rewrites, netrc: netrc) { options, cancellation throws(PinFailure) in
                try indices.map { index throws(PinFailure) in
                    current = index
                    return try repin(index, of: loaded, given: given, options: options, keepingIn: kept, cancellation: cancellation)
                }
            }
        } catch let exit as ExitCode {
            if let current, exit.rawValue == ExitStatus.entryFailed.rawValue {
                Output.errors([TerminalText("error: \(subject(current, loaded)) could not be pinned anew; \(manifest) was not modified")])
            }
            throw exit
        }

        // A size the entry lacks is added by a named update; --update-all leaves an entry whose bytes are the same alone.
        let changed = repins.filter { repin in
            let entry = loaded.files[repin.index]
            let sizeChanged = repin.size != nil && entry.size != repin.size && (names != nil || entry.size != nil)
            return entry.checksum?.digest != repin.digest || sizeChanged || (repin.tree != nil && entry.extract?.tree != repin.tree)
        }
        let unchanged = repins.filter { repin in !changed.contains { $0.index == repin.index } }
        for repin in unchanged {
            let entry = loaded.files[repin.index]
            report.pinned(dest: entry.destination.description, url: entry.url.description, digest: repin.digest,
                          size: repin.size ?? entry.size, .unchanged)
        }
        var lines: [TerminalText] = []
        if unchanged.count == 1, let only = unchanged.first {
            lines.append(TerminalText("\(subject(only.index, loaded)) is already pinned to what \(loaded.files[only.index].url) serves"
                                      + (changed.isEmpty ? "; \(manifest) was not modified." : ".")))
        } else if !unchanged.isEmpty {
            lines.append(TerminalText("\(unchanged.count) already pinned to what their URLs serve: "
                                      + Quoted.firstFew(unchanged) { loaded.files[$0.index].destination.description }
                                      + (changed.isEmpty ? "; \(manifest) was not modified." : ".")))
        }
        let placing = repins.map { loaded.files[$0.index].destination.description }
        guard !changed.isEmpty else {
            report.say(lines)
            if let kept {
                try place(placing, of: loaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts, report: report)
            }
            return
        }
        let reloaded = try rewrite(original, with: changed, of: loaded)
        try replaceManifest(original, with: reloaded.bytes, interrupts: interrupts)
        for repin in changed {
            let entry = loaded.files[repin.index]
            let old = entry.checksum.map { Self.shortPin($0.digest, tree: repin.tree == nil ? nil : entry.extract?.tree) } ?? "unpinned"
            let sizeText = repin.size.map { ", \(ByteCount.format($0))" } ?? ""
            let line = reloaded.manifest.files[repin.index].location.line
            lines.append(TerminalText("Updated \(subject(repin.index, loaded)) in \(manifest), line \(line): \(old) → "
                                      + "\(Self.shortPin(repin.digest, tree: repin.tree))\(sizeText)."))
            report.pinned(dest: entry.destination.description, url: entry.url.description, digest: repin.digest,
                          size: repin.size ?? entry.size, .updated)
        }
        guard let kept else {
            return report.say(lines + [TerminalText("Run \"\(syncCommand)\" to put it in place.")])
        }
        report.say(lines)
        try place(placing, of: reloaded.manifest, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts, report: report)
    }

    /// `files[2] (bin/tool)`, as messages name an entry.
    private func subject(_ index: Int, _ loaded: Manifest) -> String {
        "files[\(index)] (\(loaded.files[index].destination))"
    }

    /// The positions of the entries `names` are the destinations of, each once, in the order given; nil: every entry
    /// with a checksum. Exits 64 naming every name that is no entry's, before anything is downloaded.
    private func entries(named names: [String]?, in loaded: Manifest) throws -> [Int] {
        guard let names else { return loaded.files.indices.filter { loaded.files[$0].checksum != nil } }
        var indices: [Int] = []
        var missing: [String] = []
        for name in names {
            let destination = DestinationPath.commandLine(name) ?? name
            guard let index = loaded.files.firstIndex(where: { $0.destination.description == destination }) else {
                missing.append(destination)
                continue
            }
            if !indices.contains(index) { indices.append(index) }
        }
        guard missing.isEmpty else {
            Output.errors(missing.map { TerminalText("error: \(manifest) has no entry with dest \(String(reflecting: $0))") })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        return indices
    }

    /// What `files[index]`'s url serves now, hashed with the entry's own algorithm (a weak one is replaced by
    /// SHA-256, so that its notation can stay), or the digest given.
    private func repin(_ index: Int, of loaded: Manifest, given: Digest?, options: SyncOptions, keepingIn kept: KeptDownloads?,
                       cancellation: Cancellation) throws(PinFailure) -> Repin {
        let entry = loaded.files[index]
        var options = options
        // The entry's headers, as sync sends them; the command line's win, as they do in sync.
        options.commandLineHeaders = HeaderRules.merge(defaults: entry.headers, entry: options.commandLineHeaders)
        if let given {
            if let size { return Repin(index: index, digest: given, size: size, tree: nil) }
            return Repin(index: index, digest: given, size: try announcedSize(entry.url, digest: given, options: options,
                                                                              cancellation: cancellation), tree: nil)
        }
        let algorithm = entry.checksum.map { $0.digest.algorithm.isWeak ? DigestAlgorithm.sha256 : $0.digest.algorithm } ?? .sha256
        guard let rule = entry.extract else {
            let measured = try Pinner.measure(entry.url, options: options, algorithm: algorithm, keepingIn: kept,
                                              cancellation: cancellation, attemptFailed: Self.retrying)
            Self.warnIfEncoded(measured)
            return Repin(index: index, digest: measured.digest, size: measured.size, tree: nil)
        }
        let measured = try Pinner.measureArchive(entry.url, rule: rule, options: options, algorithm: algorithm, keepingIn: kept,
                                                 cancellation: cancellation, attemptFailed: Self.retrying)
        Self.warnIfEncoded(measured.archive)
        return Repin(index: index, digest: measured.archive.digest, size: measured.archive.size, tree: measured.tree)
    }

    /// The manifest with every changed pin written where it stands, loaded back and checked to read each one; exits
    /// 3 when the text cannot take one (naming it), 1 when it does not read back.
    private func rewrite(_ original: [UInt8], with changed: [Repin], of loaded: Manifest) throws -> (bytes: [UInt8], manifest: Manifest) {
        var edited = original
        for repin in changed {
            do {
                edited = try ManifestEditor.repinning(repin.index, digest: repin.digest, size: repin.size, tree: repin.tree,
                                                      in: edited, fileName: manifest)
            } catch {
                Output.errors([TerminalText(error.description), "\(manifest) was not modified"])
                throw ExitCode(ExitStatus.invalidManifest.rawValue)
            }
        }
        let reloaded: Manifest
        do {
            reloaded = try parseManifest(edited)
        } catch {
            // The manifest loaded before the edit: the new pins are what does not load, at their entries' lines.
            let first = loaded.files[changed[0].index]
            let position = "\(manifest):\(first.location.line):\(first.location.column)"
            let subjects = Quoted.firstFew(changed) { subject($0.index, loaded) }
            Output.errors([TerminalText("error: \(position): \(subjects): the new pin does not load back: "
                                        + Self.withoutPositions(error).joined(separator: "; ")),
                           "\(manifest) was not modified"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        for repin in changed {
            let entry = reloaded.files.indices.contains(repin.index) ? reloaded.files[repin.index] : nil
            guard let entry, entry.checksum?.digest == repin.digest, repin.size == nil || entry.size == repin.size,
                  repin.tree == nil || entry.extract?.tree == repin.tree else {
                Output.errors(["error: internal error: the edited manifest does not read back the new pin; \(manifest) was not modified"])
                throw ExitCode(ExitStatus.entryFailed.rawValue)
            }
        }
        return (edited, reloaded)
    }
}
