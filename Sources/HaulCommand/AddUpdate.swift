import ArgumentParser
import Haul
import HaulEngine
import HaulManifest

/// `haul add --update DEST…` and `--update-all`: the `Pinning` step pins the entries anew (every download before
/// the one edit); this reads the manifest, holds the downloads for placing, and tells what changed. The manifest is
/// rewritten once, only if every download succeeded, and the new files put in place as `haul add` puts a new
/// entry's.
extension AddCommand {
    func update(rewrites: URLRewriter, report: AddReport) throws {
        let original = try readManifest()
        let targets: Pinning.UpdateTargets
        do {
            targets = try Pinning(request([], given: nil), reading: reading).targets(original)
        } catch {
            throw fail(error)
        }
        guard !targets.indices.isEmpty else {
            return report.say([TerminalText("\(manifest) has no pinned entry; nothing to update.")])
        }
        let netrc = try netrcOptions.credentials(manifestWants: targets.manifest.netrc)
        let pinning = Pinning(request([], given: try givenDigest()), reading: reading)
        do { try pinning.checkGivenDigest(for: targets) } catch { throw fail(error) }
        let kept = pinning.request.given == nil ? try keptDownloads() : nil
        defer { kept?.remove() }

        let warnings = self.warnings
        var failed: ManifestEntryReference?
        let repins: [Pinning.Repin]
        let interrupts: InterruptWatcher
        do {
            (repins, interrupts) = try transferring(rewrites: rewrites, netrc: netrc) {
                options, cancellation throws(PinFailure) in
                do throws(RepinFailure) {
                    return try pinning.repin(
                        targets, options: options, keepingIn: kept, cancellation: cancellation, notices: warnings)
                } catch {
                    failed = error.entry
                    throw error.failure
                }
            }
        } catch let exit as ExitCode {
            if let failed, exit.rawValue == ExitStatus.entryFailed.rawValue {
                Output.errors([
                    TerminalText(
                        "error: files[\(failed.index)] (\(failed.destination)) could not be pinned anew; "
                            + "\(manifest) was not modified")
                ])
            }
            throw exit
        }

        pinning.unchanged(repins, of: targets).forEach(report.pinned)
        let outcome: PinningOutcome
        do { outcome = try pinning.updating(with: repins, of: targets) } catch { throw fail(error) }
        guard let bytes = outcome.manifest.bytes, let reloaded = outcome.manifest.manifest else {
            report.say(lines(outcome))
            if let kept {
                try place(
                    outcome.placing, of: targets.manifest, from: kept, netrc: netrc, rewrites: rewrites,
                    interrupts: interrupts,
                    report: report)
            }
            return
        }
        try replaceManifest(original, with: bytes, interrupts: interrupts)
        outcome.files(.updated).forEach(report.pinned)
        guard let kept else {
            return report.say(lines(outcome) + [TerminalText("Run \"\(syncCommand)\" to put it in place.")])
        }
        report.say(lines(outcome))
        try place(
            outcome.placing, of: reloaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts,
            report: report)
    }
}
