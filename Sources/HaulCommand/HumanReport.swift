import Haul
import HaulDigest
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulStore

/// Text for people: the plan, per-entry failures, `verify` and the summary. Pure functions of results, so the
/// exact wording is tested from values (`HumanReportTests`).
package enum HumanReport {
    /// A sync's warning, without the `warning: ` its reporter puts before it.
    package static func sentence(_ warning: SyncWarning) -> String {
        switch warning {
        case .cacheUnavailable(let failure):
            "the cache cannot be used (\(StoreWording.sentence(failure))); syncing without it"
        case .cacheEntryCorrupt(let entry, let destination):
            "\(StoreWording.sentence(entry)); \(destination) is downloaded"
        case .cacheEntryTooLarge(let path, let limit, let destination):
            "the cache entry \(path) is not used: \(SizeLimit.exceeded(limit, pinned: false)); \(destination) is downloaded"
        case .cacheUnreadable(let error, let destination):
            "the cache could not serve \(destination) (\(StoreWording.sentence(error))); such entries are downloaded"
        case .cacheInsertionStopped(let path, let error):
            "files are not added to the cache \(path) in this run (\(StoreWording.sentence(error)))"
        case .unproven(let manifest, let files): unprovenNote((manifest, files))
        case .ownerKeyUnusable(let error, let manifestKey):
            "the root's key is not usable (\(StoreWording.sentence(error))); the files this sync wrote are not pruned "
                + "until --adopt "
                + "\(manifestKey) vouches for them"
        case .stateNotDurable(let error):
            "the state is saved but not yet durable (\(StoreWording.sentence(error))); the journal is kept, and the "
                + "next sync retires it"
        case .stateNotSaved(let error):
            "the state could not be saved (\(StoreWording.sentence(error))); the next sync hashes the files again"
        }
    }

    /// Why files a manifest is said to have written are not pruned: their records carry no proof that haul wrote
    /// them (`Plan.unproven`). One sentence for the plan's line and the sync's warning.
    static func unprovenNote(_ unproven: (manifest: String, files: Int)) -> String {
        "\(unproven.files == 1 ? "1 file" : "\(unproven.files) files") recorded as written by \(unproven.manifest) "
            + "without haul's proof (a state an older haul wrote, or one edited): not pruned (--adopt "
            + "\(unproven.manifest) vouches for them)"
    }

    /// One line per change, then a summary line. Kept files are counted, not listed.
    /// `sources`: lines shown under each entry to fetch (`plan --verbose`: where its URLs were rewritten to).
    /// `members`: under a tree unpacked again, a line per member found changed (`plan --verbose`).
    package static func planLines(
        _ plan: Plan, sources: ((FileEntry) -> [String])? = nil, members: Bool = false
    ) -> [String] {
        var lines: [String] = []
        planLines(plan, sources: sources, members: members) { lines.append($0) }
        return lines
    }

    /// The same lines, handed to `emit` one at a time: a plan of a million changes is written as it is worded,
    /// not first held as a million strings and then as one text.
    /// `unproven`: whether the records without proof get their line; a sync says them as a warning instead
    /// (`unprovenNote`), with or without changes.
    package static func planLines(
        _ plan: Plan, sources: ((FileEntry) -> [String])? = nil, members: Bool = false,
        unproven: Bool = true, emit: (String) -> Void
    ) {
        for (index, planned) in zip(plan.actions.indices, plan.entries) {
            let destination = shown(planned.entry)
            let archive = planned.entry.extract == nil ? "" : "archive, "
            let cached = plan.fromCache?.contains(index) == true ? "; from the cache" : ""
            switch planned.action {
            case .keep:
                continue
            case .fetch(.missing):
                emit("+ \(destination) (\(archive)missing\(cached))")
                if let sources { sources(planned.entry).forEach(emit) }
            case .fetch(let reason):
                let listed = plan.context.changedByList.contains(index) ? "; its list pins a new version" : ""
                emit("~ \(destination) (\(archive)\(describe(reason, of: planned.entry))\(listed)\(cached))")
                if members, case .treeChanged(.membersChanged(let changes)) = reason {
                    changes.map(memberLine).forEach(emit)
                }
                if let sources { sources(planned.entry).forEach(emit) }
            case .revalidate:
                emit("↻ \(destination) (unpinned; ask the server whether it changed)")
                if let sources { sources(planned.entry).forEach(emit) }
            case .fresh(let remaining):
                emit(
                    "= \(destination) (unpinned; fresh for \(ProgressFormatting.duration(remaining)), no request; --refresh asks now)"
                )
            case .refuse(let obstacle):
                emit("! \(destination) (\(StoreWording.obstacle(obstacle, about: planned.entry.destination)))")
            }
        }
        for orphan in plan.orphans {
            emit(
                "! \(count(orphan.files, "file")) written by \(orphan.manifest), which is gone: not pruned "
                    + "(--adopt \(orphan.manifest) makes this manifest their owner)")
        }
        for record in plan.unproven where unproven { emit("! " + unprovenNote(record)) }
        for prune in plan.prunes {
            switch prune.action {
            case .delete: emit("- \(prune.destination) (no longer in the manifest)")
            case .keep(let why):
                emit("! \(prune.destination) (not pruned: \(StoreWording.kept(why, about: prune.destination)))")
            case .forget: continue
            }
        }
        emit(planSummary(plan))
        if plan.unlistedCount > 0 {
            emit("\(count(plan.unlistedCount, "file")) no longer listed (--prune deletes them).")
        }
    }

    package static func planSummary(_ plan: Plan) -> String {
        let tally = plan.tally
        guard tally.hasChanges else {
            return "No changes\(shardNote(plan)): \(count(tally.upToDate, "file")) up to date."
        }
        var parts: [String] = []
        if tally.downloads.count > 0 {
            parts.append("\(tally.downloads.count) to download" + bytesSuffix(tally.downloads))
        }
        if tally.replacements.count > 0 {
            parts.append("\(tally.replacements.count) to replace" + bytesSuffix(tally.replacements))
        }
        if let hits = plan.fromCache, !hits.isEmpty { parts.append("\(hits.count) of those from the cache") }
        if tally.revalidations > 0 { parts.append("\(tally.revalidations) to revalidate") }
        if tally.deletions > 0 { parts.append("\(tally.deletions) to prune") }
        if tally.refusals > 0 { parts.append("\(tally.refusals) blocked") }
        parts.append("\(tally.upToDate) up to date")
        return "Plan\(shardNote(plan)): " + parts.joined(separator: ", ") + "."
    }

    /// ` in shard 2/4 (25,013 of 100,000 entries)`, or nothing for an unsharded plan.
    static func shardNote(_ plan: Plan) -> String {
        guard let scope = plan.shardScope else { return "" }
        let entries = scope.manifestEntries == 1 ? "entry" : "entries"
        return " in shard \(scope.shard) (\(plan.files.count) of \(scope.manifestEntries) \(entries))"
    }

    /// `(1.2 MiB)` when the manifest pins every size, `(at least 1.2 MiB)` when only some.
    static func bytesSuffix(_ fetches: Plan.Tally.Fetches) -> String {
        guard fetches.sized > 0 else { return "" }
        let total = ByteCount.format(fetches.knownBytes)
        return fetches.sized == fetches.count ? " (\(total))" : " (at least \(total))"
    }

    static func describe(_ reason: FetchReason, of entry: FileEntry) -> String {
        switch reason {
        case .missing:
            "missing"
        case .digestMismatch(let local):
            if let checksum = entry.checksum {
                "checksum differs: have \(abbreviated(checksum.render(local))), want \(abbreviated(checksum.rendered))"
            } else {
                "checksum differs"
            }
        case .sizeMismatch(let local, let expected):
            "size differs: have \(local) bytes, want \(expected)"
        case .replacesSymlink:
            "a symlink is in the way; it will be replaced"
        case .unverified:
            "local copy not verified"
        case .unreadable(let error):
            "\(StoreWording.sentence(error, about: entry.destination.description)); it will be replaced"
        case .notWrittenByHaul:
            "not written by haul; the server's copy replaces it"
        case .treeChanged(.membersChanged(let changes)):
            "\(count(changes.count, "file")) in it changed since haul unpacked it; unpacked again, your own files kept"
        case .treeChanged(.notUnpackedByHaul):
            "not unpacked by haul; unpacked again, the files already there kept"
        case .treeChanged(.otherArchive):
            "unpacked from another archive or with other rules"
        }
    }

    /// `haul verify`: one line per problem, then what was verified.
    package static func verifyLines(_ result: VerificationResult) -> [String] {
        var lines = result.problems.map(verifyProblem)
        let unpinned = result.plan.revalidations.count
        var summary = "Verified \(count(result.plan.upToDateCount, "file"))\(shardNote(result.plan))"
        if unpinned > 0 { summary += ", \(unpinned) unpinned present" }
        if !result.problems.isEmpty { summary += ", \(result.problems.count) with problems" }
        lines.append(summary + ".")
        return lines
    }

    /// One file `haul verify` found wrong: `missing a.bin`, `differs b.bin (…)`, `unreadable c.bin (…)`.
    package static func verifyProblem(_ planned: PlannedEntry) -> String {
        let destination = shown(planned.entry)
        switch planned.action {
        case .keep, .fresh, .revalidate: return "ok \(destination)"
        case .fetch(.missing): return "missing \(destination)"
        case .fetch(.unreadable(let error)):
            return
                "unreadable \(destination) (\(StoreWording.sentence(error, about: planned.entry.destination.description)))"
        case .fetch(.treeChanged(.membersChanged(let changes))):
            return "differs \(destination) (\(count(changes.count, "file")) in it changed since haul unpacked it: "
                + Quoted.firstFew(changes) { "\(Quoted.text($0.path)) \(memberChangeWord($0.kind))" } + ")"
        case .fetch(.treeChanged(.notUnpackedByHaul)): return "differs \(destination) (not unpacked by haul)"
        case .fetch(let reason): return "differs \(destination) (\(describe(reason, of: planned.entry)))"
        case .refuse(let obstacle):
            return "unreadable \(destination) (\(StoreWording.obstacle(obstacle, about: planned.entry.destination)))"
        }
    }

    /// `error: data/a.csv: https://h/a.csv: HTTP 404` — one line per URL tried, the last failure of each.
    /// `failureLines` as a JSON event or an annotation carries them, beside the destination rather than in the text:
    /// `https://h/a.csv: HTTP 404`; or `all 2 sources failed`, then a message per source. `manifest`: the path the
    /// command was given, for the commands a message names.
    package static func failureMessages(
        entry: FileEntry, failure: EntryFailure, manifest: String = "haul.yaml"
    ) -> [String] {
        let (summary, sources) = failureParts(entry: entry, failure: failure, verbose: false, manifest: manifest)
        return [summary] + sources
    }

    /// `verbose`: libcurl's own message follows haul's (`FailureWording.libcurlDetail`).
    package static func failureLines(
        entry: FileEntry, failure: EntryFailure, verbose: Bool = false,
        manifest: String = "haul.yaml"
    ) -> [String] {
        let (summary, sources) = failureParts(entry: entry, failure: failure, verbose: verbose, manifest: manifest)
        return ["error: \(entry.destination): \(summary)\(sources.isEmpty ? "" : ":")"] + sources.map { "  " + $0 }
    }

    /// What went wrong, and with several URLs tried, one message per URL (the last failure of each).
    private static func failureParts(
        entry: FileEntry, failure: EntryFailure, verbose: Bool,
        manifest: String
    ) -> (summary: String, sources: [String]) {
        switch failure {
        case .refused(let obstacle):
            return (StoreWording.obstacle(obstacle, about: entry.destination), [])
        case .commit(let error):
            return (StoreWording.sentence(error, about: entry.destination.description), [])
        case .tree(let failure):
            return (UnpackWording.sentence(failure), [])
        case .notAttempted:
            return ("not attempted", [])
        case .transfer(let transfer):
            let last = transfer.lastFailurePerSource
            if let changed = changedUpstream(entry: entry, last, manifest: manifest) { return changed }
            let attempts = last.map {
                "\($0.sourceDisplayURL): \(describe($0, for: entry))\(detail($0.reason, verbose))"
            }
            if attempts.count == 1, let only = attempts.first { return (only, []) }
            return ("all \(attempts.count) sources failed", attempts)
        }
    }

    /// Every source served other bytes than the pinned ones: most likely the file changed upstream, said once, with
    /// the command that pins it anew (`nil` when any source failed otherwise, or compressed a body nobody asked it to
    /// compress: that is the server's doing, not a new version).
    private static func changedUpstream(
        entry: FileEntry, _ last: [AttemptFailure],
        manifest: String
    ) -> (summary: String, sources: [String])? {
        guard !last.isEmpty, last.allSatisfy({ $0.reason.isAboutTheBytes && !$0.reason.isEncoded }) else { return nil }
        let repin =
            "if the change upstream is intended, `\(CommandHint.update(entry.destination.description, manifest: manifest))` pins it anew"
        if last.count == 1, let only = last.first {
            return (
                "\(only.sourceDisplayURL): the server's bytes differ from the pinned checksum: "
                    + "\(differences(only.reason, entry: entry)) (\(repin))", []
            )
        }
        return (
            "every source served bytes that differ from the pinned checksum (\(repin))",
            last.map { "\($0.sourceDisplayURL): \(differences($0.reason, entry: entry))" }
        )
    }

    /// What a source that served other bytes than pinned served: `expected sha256:…, got sha256:…` (in the
    /// manifest's notation) or `size expected 10 bytes, got 12`.
    private static func differences(_ reason: FailureReason, entry: FileEntry) -> String {
        switch reason {
        case .digestMismatch(let expected, let actual, _): expectedAndGot(expected, actual, checksum: entry.checksum)
        case .sizeMismatch(let expected, let actual, _): "size expected \(expected) bytes, got \(actual)"
        default: describe(reason, for: entry)
        }
    }

    /// `expected …, got …` of a checksum mismatch, in the notation the manifest used for the checksum when it has one.
    private static func expectedAndGot(_ expected: Digest, _ actual: Digest, checksum: Checksum?) -> String {
        guard let checksum else { return "expected \(expected), got \(actual)" }
        return "expected \(checksum.render(expected)), got \(checksum.render(actual))"
    }

    /// One attempt's failure for `entry`: a 401 or 403 names the ways to send credentials, and says when a redirect
    /// to another origin kept the entry's headers from the server that refused.
    package static func describe(_ failure: AttemptFailure, for entry: FileEntry) -> String {
        let text = describe(failure.reason, for: entry)
        guard case .httpStatus(let status) = failure.reason, status == 401 || status == 403 else { return text }
        if let elsewhere = failure.headersWithheldAt {
            return text
                + " (the redirect to \(elsewhere) went to another origin, so the entry's headers were not sent there)"
        }
        return text + " (to send credentials: -H 'Authorization: …', the manifest's headers:, or --netrc)"
    }

    /// ` (libcurl: Recv failure: Connection reset by peer)` under `--verbose`, else nothing.
    static func detail(_ reason: FailureReason, _ verbose: Bool) -> String {
        guard verbose, let detail = FailureWording.libcurlDetail(reason) else { return "" }
        return " (libcurl: \(detail))"
    }

    /// `error: data/a.bin: in place, but not yet durable: cannot sync the directory of "data/a.bin": …`: the new
    /// content is there (not "failed", which would promise the old), but a crash may still take it back.
    package static func notDurableLine(entry: FileEntry, error: StoreError) -> String {
        "error: \(entry.destination): \(notDurableMessage(error, about: entry.destination))"
    }

    /// The same without `error: ` and the destination, as a JSON `done` event carries it.
    package static func notDurableMessage(_ error: StoreError, about destination: DestinationPath) -> String {
        "in place, but not yet durable: \(StoreWording.sentence(error, about: destination.description))"
    }

    /// A checksum mismatch is shown in the notation the manifest used for it; a certificate haul could not verify
    /// says how to trust a private CA.
    /// `reason` for `entry`: its checksum in its own notation, and a size limit named after what set it.
    package static func describe(_ reason: FailureReason, for entry: FileEntry) -> String {
        describe(reason, checksum: entry.checksum, pinnedSize: entry.size)
    }

    /// `pinnedSize`: the entry's `size`, which is the limit on its body when it has one (else `--max-file-size` is).
    package static func describe(_ reason: FailureReason, checksum: Checksum?, pinnedSize: Int64? = nil) -> String {
        switch reason {
        case .tooLarge(let limit):
            return SizeLimit.exceeded(limit, pinned: pinnedSize != nil)
        case .digestMismatch(let expected, let actual, let encoding):
            return "checksum mismatch: " + expectedAndGot(expected, actual, checksum: checksum)
                + FailureWording.servedWith(encoding)
        case .network(let code, _) where tlsVerificationCodes.contains(code):
            return FailureWording.reason(reason) + "; to trust a private CA, pass --ca-file FILE or set HAUL_CA_FILE"
        default:
            return FailureWording.reason(reason)
        }
    }

    /// libcurl's codes for a peer certificate that could not be verified against the CA bundle in use.
    private static let tlsVerificationCodes: Set<CurlCode> = [
        .peerFailedVerificationBefore762, .peerFailedVerification, .sslCACertificateBadFile, .sslIssuerError,
    ]

    /// `https://m/a.csv: checksum mismatch: …`: a source that served the wrong bytes, worth a warning when the entry
    /// then succeeds (the next mirror may well serve the right ones: the bad one must not go unnoticed); when the entry
    /// fails, its error names it instead. nil for other failures.
    package static func wrongBytesWarning(entry: FileEntry, failure: AttemptFailure) -> String? {
        guard failure.reason.isAboutTheBytes else { return nil }
        return "\(failure.sourceDisplayURL): \(describe(failure.reason, for: entry))"
    }

    /// `    edited bin/tool`: a member of a tree found changed, under its plan line.
    static func memberLine(_ change: MemberChange) -> String {
        "    \(memberChangeWord(change.kind)) \(change.path)"
    }

    static func memberChangeWord(_ kind: MemberChange.Kind) -> String {
        switch kind {
        case .edited: "edited"
        case .missing: "missing"
        case .replaced: "replaced"
        }
    }

    /// An entry's destination as a person reads it: an `extract` entry's is a folder, `sdk/`.
    package static func shown(_ entry: FileEntry) -> String {
        entry.extract == nil ? entry.destination.description : entry.destination.description + "/"
    }

    /// What a fetch put in place: `sdk.bin (1.2 MiB)`, or for an archive `sdk/ (1,234 files from a 1.2 MiB archive)`.
    package static func fetchedWhat(destination: String, _ file: DownloadedFile) -> String {
        guard let unpacked = file.unpacked else {
            let size = ByteCount.format(file.size)
            return "\(destination) (" + (file.resumedAt.map { "resumed at \(ByteCount.format($0)) of \(size)" } ?? size)
                + ")"
        }
        return
            "\(destination)/ (\(count(unpacked.files, "file")) from a \(ByteCount.format(file.size)) archive\(resumed(file)))"
    }

    /// A file's line as a log shows it once it is in place: `fetched a.bin (4.0 MiB)`, `fetched a.bin (resumed at 1.2
    /// MiB of 4.0 MiB)`, or `from the cache a.bin (4.0 MiB)` for one no request was made for.
    package static func doneLine(destination: String, _ file: DownloadedFile) -> String {
        (file.fromCache ? "from the cache " : "fetched ") + fetchedWhat(destination: destination, file)
    }

    /// `, resumed at 1.2 MiB`: where a download that went on from kept bytes started.
    private static func resumed(_ file: DownloadedFile) -> String {
        guard let offset = file.resumedAt else { return "" }
        return ", resumed at \(ByteCount.format(offset))"
    }

    /// The user's own files a replaced tree kept, named (the first few) so that they can be found.
    package static func keptFilesWarning(folder: String, _ files: [String]) -> String {
        let shown = Quoted.firstFew(files) { Quoted.text(folder + "/" + $0) }
        return "\(folder)/: kept \(count(files.count, "file")) the archive did not put there (\(shown)); "
            + "haul does not manage \(files.count == 1 ? "it" : "them")"
    }

    /// An unpinned file the server encoded although haul asked for no encoding: stored as served.
    package static func encodingWarning(encoding: String) -> String {
        "stored as served with Content-Encoding: \(encoding) (haul asks for no encoding; the file holds the encoded bytes)"
    }

    /// `Fetched 2 files (1.5 MiB), 3 from the cache (4.0 MiB), 40 up to date (3 confirmed by their server), 1 pruned,
    /// 1 failed, 1 not yet durable, 5 interrupted in 0.4 s.` (a file not yet durable is among those fetched: it is in
    /// place; an entry a signal stopped is interrupted, not failed).
    package static func syncSummary(_ result: SyncResult) -> String {
        let counts = result.counts
        let failed = counts.failed - counts.interrupted + result.pruneFailures.count
        let confirmed = counts.notModified
        let upToDate = result.plan.upToDateCount + confirmed
        var line: String
        if counts.fetched == 0 && counts.cached == 0 && failed == 0 && counts.interrupted == 0
            && result.deletedCount == 0
        {
            // Files an earlier run left not durable, still not durable: not "nothing to do" (the run exits 1).
            line = (counts.notDurable == 0 ? "Nothing to do: " : "") + "\(count(upToDate, "file")) up to date"
        } else {
            // `Fetched 2 files (1.5 MiB), 3 from the cache (4.0 MiB), …`; a run served wholly by the cache starts
            // with its count.
            var parts: [String] = []
            if counts.fetched > 0 || counts.cached == 0 {
                parts.append("Fetched \(count(counts.fetched, "file")) (\(ByteCount.format(counts.fetchedBytes)))")
            }
            if counts.cached > 0 {
                let cached = "\(counts.cached) from the cache (\(ByteCount.format(counts.cachedBytes)))"
                parts.append(parts.isEmpty ? cached.prefix(1).uppercased() + cached.dropFirst() : cached)
            }
            line = (parts + ["\(upToDate) up to date"]).joined(separator: ", ")
        }
        if confirmed > 0 { line += " (\(confirmed) confirmed by their server)" }
        if result.deletedCount > 0 { line += ", \(result.deletedCount) pruned" }
        if failed > 0 { line += ", \(failed) failed" }
        if counts.notDurable > 0 { line += ", \(counts.notDurable) not yet durable" }
        if counts.interrupted > 0 { line += ", \(counts.interrupted) interrupted" }
        return line + " in \(formatSeconds(result.seconds))."
    }

    /// `haul: interrupted by SIGTERM; 3 unfinished entries keep their old content (…)`: those the signal stopped,
    /// not those that had already failed.
    package static func interruptedLine(_ result: SyncResult, signal: String) -> String {
        let stopped = result.counts.interrupted
        return
            "haul: interrupted by \(signal); \(stopped) unfinished \(stopped == 1 ? "entry keeps its" : "entries keep their") "
            + "old content (partial downloads are kept to resume)"
    }

    /// A prune that did not delete: a warning when the file was kept (the user's now), an error when deleting failed.
    package static func pruneLine(_ destination: DestinationPath, _ outcome: PruneOutcome) -> String? {
        switch outcome {
        case .deleted, .forgotten: nil
        case .kept(let why):
            "warning: \(destination): not pruned: \(StoreWording.kept(why, about: destination)); haul no longer manages it"
        case .failed(let error):
            "error: \(destination): \(StoreWording.sentence(error, about: destination.description))"
        }
    }

    static func abbreviated(_ rendered: String) -> String {
        rendered.count > 20 ? String(rendered.prefix(20)) + "…" : rendered
    }

    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    static func formatSeconds(_ seconds: Double) -> String {
        let tenths = Int((seconds * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) s"
    }
}
