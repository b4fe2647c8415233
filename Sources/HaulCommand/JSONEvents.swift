import Haul
import HaulDigest
import HaulEngine
import HaulManifest
import HaulPlanner
import HaulStore

/// A JSON value with keys in a fixed order, so that every event reads the same from run to run. Encoding is
/// done here rather than with Foundation's encoder: the schema is small, and its order is part of the contract.
package enum JSONValue: Sendable, Equatable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (a: JSONValue, b: JSONValue) -> Bool { a.encoded() == b.encoded() }

    package static func string(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    package static func int(_ value: Int64?) -> JSONValue { value.map { .int($0) } ?? .null }

    package func encoded() -> String {
        var out = ""
        encode(into: &out)
        return out
    }

    /// The object `members`, the member `key` being the array `items`, encoded exactly as `encoded()` would, but
    /// handed to `emit` in pieces of about `pieceBytes` as the items are encoded: a plan of a million entries is an
    /// event of about 100 MB, which is never held whole, nor are its items as values.
    package static func encodeObject(
        _ members: [(String, JSONValue)], streamingArray key: String,
        items: some Sequence<JSONValue>, pieceBytes: Int = 64 << 10,
        emit: (String) -> Void
    ) {
        var out = "{"
        for (index, (name, value)) in members.enumerated() {
            if index > 0 { out += "," }
            quote(name, into: &out)
            out += ":"
            guard name == key else {
                value.encode(into: &out)
                continue
            }
            out += "["
            for (position, item) in items.enumerated() {
                if position > 0 { out += "," }
                item.encode(into: &out)
                if out.utf8.count >= pieceBytes {
                    emit(out)
                    out = ""
                }
            }
            out += "]"
        }
        emit(out + "}")
    }

    private func encode(into out: inout String) {
        switch self {
        case .string(let text): Self.quote(text, into: &out)
        case .int(let number): out += String(number)
        case .double(let number):
            // Durations and delays: milliseconds are enough, and finite by construction.
            out += number.isFinite ? String((number * 1000).rounded() / 1000) : "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .null: out += "null"
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.encode(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                value.encode(into: &out)
            }
            out += "}"
        }
    }

    /// RFC 8259 escaping, and more: DEL, C1 and bidi controls and the line separators are written as `\uXXXX`
    /// too, which JSON allows for any character. The parsed string is exactly the same, but the line itself holds
    /// nothing that a terminal would obey, so `haul sync --json` read on a terminal (or `jq -c` passing it through)
    /// cannot be made to move the cursor or reorder text by a destination's name. Where a workflow runner reads the
    /// line (`TerminalText.readByWorkflowRunner`), the `[` of a `##[` is written `\u005b` too (`WorkflowCommandScan`).
    private static func quote(_ text: String, into out: inout String) {
        out += "\""
        var commands = TerminalText.readByWorkflowRunner ? WorkflowCommandScan(atLineStart: false) : nil
        // Nearly every string (a destination, a URL) holds nothing to escape: one pass over its bytes, and it is
        // appended whole. Scalar by scalar, `plan --json` of a million entries took 6.9 s instead of 5.5.
        let mayStart = UnsafeScalar.mayStartTable
        guard
            text.utf8.contains(where: { byte in
                byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || mayStart[Int(byte)]
                    || (commands != nil && WorkflowCommandScan.mayStart(byte))
            })
        else {
            out += text
            out += "\""
            return
        }
        for scalar in text.unicodeScalars {
            let completesCommand = commands?.completesCommand(scalar) ?? false
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where UnsafeScalar.contains(scalar) || completesCommand:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
                continue
            }
            commands?.escaped()
        }
        out += "\""
    }
}

/// The events of `--json`, one object per line; README documents each. URLs are always the manifest's
/// display form (`${VAR}` kept, userinfo redacted) and error texts are the same scrubbed texts people see.
package enum JSONEvents {
    package static let schemaVersion: Int64 = 1

    /// One of `haul add`'s message lines: `warning` when it is one (its prefix dropped), else `error` (`error: `
    /// dropped; a line that follows an error, such as `hint: …` or `haul.yaml was not modified`, is kept whole).
    package static func diagnostic(line: String) -> JSONValue {
        let warningPrefix = "warning: "
        guard !line.hasPrefix(warningPrefix) else {
            return warning(dest: nil, message: String(line.dropFirst(warningPrefix.count)))
        }
        let errorPrefix = "error: "
        let message = line.hasPrefix(errorPrefix) ? String(line.dropFirst(errorPrefix.count)) : line
        return .object([("event", .string("error")), ("message", .string(message))])
    }

    /// `haul add`: an entry pinned (`added`), pinned anew (`updated`), or found pinned to what its URL serves
    /// (`unchanged`). `sha256` is null for an entry pinned with another algorithm; `digest` names it.
    package static func pinned(dest: String, url: String, digest: Digest, size: Int64?, result: String) -> JSONValue {
        .object([
            ("event", .string("pinned")), ("dest", .string(dest)), ("url", .string(url)),
            ("sha256", .string(digest.algorithm == .sha256 ? digest.hex : nil)),
            ("digest", .string("\(digest.algorithm.rawValue):\(digest.hex)")), ("size", .int(size)),
            ("result", .string(result)),
        ])
    }

    /// `haul add`'s last event, also when it fails: how many entries each way, and the files put in place.
    package static func addSummary(
        manifest: String, added: Int, updated: Int, unchanged: Int, placed: Int,
        exitStatus: Int32
    ) -> JSONValue {
        .object([
            ("event", .string("summary")), ("manifest", .string(manifest)), ("added", .int(Int64(added))),
            ("updated", .int(Int64(updated))), ("unchanged", .int(Int64(unchanged))), ("placed", .int(Int64(placed))),
            ("exit_status", .int(Int64(exitStatus))),
        ])
    }

    /// The `plan` event, in pieces (`JSONValue.encodeObject`): one line however many entries change.
    package static func plan(_ plan: Plan, emit: (String) -> Void) {
        let tally = plan.tally
        let fields: [(String, JSONValue)] = [
            ("event", .string("plan")), ("version", .int(schemaVersion)), ("changes", .array([])),
            ("download", .int(Int64(tally.downloads.count))), ("replace", .int(Int64(tally.replacements.count))),
            ("revalidate", .int(Int64(tally.revalidations))), ("prune", .int(Int64(tally.deletions))),
            ("blocked", .int(Int64(tally.refusals))), ("up_to_date", .int(Int64(tally.upToDate))),
            ("bytes", .int(tally.knownBytesToFetch)),
        ]
        JSONValue.encodeObject(
            fields + shardFields(plan), streamingArray: "changes", items: changes(of: plan), emit: emit)
    }

    /// What each entry that changes (or could) and each prune candidate becomes in the plan, made as it is read.
    private static func changes(of plan: Plan) -> some Sequence<JSONValue> {
        let entries = zip(plan.actions.indices, plan.entries).lazy.compactMap { index, planned -> JSONValue? in
            let action: String
            var reason: String?
            switch planned.action {
            case .keep, .fresh: return nil
            case .fetch(.missing): action = "download"
            case .fetch(let why):
                action = "replace"
                reason = HumanReport.describe(why, of: planned.entry)
            case .revalidate: action = "revalidate"
            case .refuse(let obstacle):
                action = "blocked"
                reason = StoreWording.obstacle(obstacle, about: planned.entry.destination)
            }
            var fields: [(String, JSONValue)] = [
                ("dest", .string(planned.entry.destination.description)),
                ("action", .string(action)), ("reason", .string(reason)),
                ("size", .int(planned.entry.size)),
            ]
            if plan.fromCache?.contains(index) == true { fields.append(("from_cache", .bool(true))) }
            if plan.context.changedByList.contains(index) { fields.append(("list_changed", .bool(true))) }
            return .object(fields)
        }
        let prunes = plan.prunes.lazy.compactMap { prune -> JSONValue? in
            switch prune.action {
            case .delete:
                .object([
                    ("dest", .string(prune.destination.description)), ("action", .string("prune")),
                    ("reason", .null), ("size", .null),
                ])
            case .keep(let why):
                .object([
                    ("dest", .string(prune.destination.description)), ("action", .string("keep")),
                    ("reason", .string(StoreWording.kept(why, about: prune.destination))), ("size", .null),
                ])
            case .forget: nil
            }
        }
        return [AnySequence(entries), AnySequence(prunes)].joined()
    }

    /// `rewrittenFrom`: the manifest's URL (display form) when the config rewrote it into `source`; the event then
    /// ends with `rewritten_from`, which is absent otherwise.
    package static func start(_ entry: FileEntry, source: String, rewrittenFrom: String? = nil) -> JSONValue {
        .object(
            [("event", .string("start")), ("dest", .string(entry.destination.description)), ("url", .string(source))]
                + (rewrittenFrom.map { [("rewritten_from", .string($0))] } ?? []))
    }

    package static func progress(_ entry: FileEntry, _ progress: TransferProgress) -> JSONValue {
        .object([
            ("event", .string("progress")), ("dest", .string(entry.destination.description)),
            ("bytes", .int(progress.totalBytesWritten)), ("total", .int(progress.totalBytesExpected)),
        ])
    }

    /// An attempt failed and haul tries again: `next_url` after `retry_in` seconds, or (`retry_in` null) at once.
    /// nil when nothing comes next: a `failed` event follows.
    package static func retry(_ entry: FileEntry, _ failure: AttemptFailure, next: NextAttempt?) -> JSONValue? {
        guard let next else { return nil }
        return .object([
            ("event", .string("retry")), ("dest", .string(entry.destination.description)),
            ("url", .string(failure.sourceDisplayURL)),
            ("error", .string(HumanReport.describe(failure, for: entry))),
            ("retry_in", next.delay > 0 ? .double(next.delay) : .null),
            ("next_url", .string(next.sourceDisplayURL)),
        ])
    }

    /// A problem that does not stop the run: wrong bytes from a source, an unpinned file stored as the server
    /// encoded it, an unusable state cache (`dest` null), a modified file pruning left alone.
    /// A problem in the manifest (or the config), one event each, before the command exits: where, how bad, the
    /// key path (`files[2].sha256`, null when none), and the message, as the human line says them.
    package static func diagnostic(_ diagnostic: Diagnostic) -> JSONValue {
        .object([
            ("event", .string("diagnostic")), ("file", .string(diagnostic.file)),
            ("line", .int(diagnostic.location.map { Int64($0.line) })),
            ("column", .int(diagnostic.location.map { Int64($0.column) })),
            ("severity", .string(diagnostic.severity.rawValue)), ("path", .string(diagnostic.keyPath)),
            ("message", .string(diagnostic.message)),
        ])
    }

    /// `list`: what one signed list gave: `verified` (with the key, whether it `changed` since the last verified copy,
    /// and whether the server was `requested`), or the `error` that left its entries as they are.
    package static func list(_ outcome: SignedLists.Outcome) -> JSONValue {
        let head: [(String, JSONValue)] = [
            ("event", .string("list")), ("name", .string(outcome.name)), ("url", .string(outcome.url)),
        ]
        switch outcome.result {
        case .success(let verified):
            return .object(
                head + [
                    ("verified", .bool(true)), ("key", .string(verified.list.key)),
                    ("changed", .bool(verified.changed)), ("requested", .bool(verified.requested)),
                    ("trusted_comment", .string(verified.list.trustedComment)),
                ])
        case .failure(let failure):
            return .object(head + [("verified", .bool(false)), ("error", .string(ListWording.reason(failure)))])
        }
    }

    package static func warning(dest: String?, message: String) -> JSONValue {
        .object([("event", .string("warning")), ("dest", .string(dest)), ("message", .string(message))])
    }

    /// `done` for a file in place (fetched, confirmed unchanged by its server, or fetched but not yet durable, with
    /// the error), `failed` otherwise; nil for an entry that was already up to date (the plan counted it).
    /// `rewrittenFrom`: for a file fetched from a rewritten URL, the manifest's URL it came from (a `done` event
    /// then ends with `rewritten_from`). `manifest`: its path as given, for the commands a failure names.
    package static func finished(
        _ entry: FileEntry, _ outcome: EntryOutcome, rewrittenFrom: String? = nil,
        manifest: String = "haul.yaml"
    ) -> JSONValue? {
        let dest = ("dest", JSONValue.string(entry.destination.description))
        switch outcome {
        case .upToDate:
            return nil
        case .notModified:
            return .object([
                ("event", .string("done")), dest, ("result", .string("not-modified")), ("url", .null),
                ("bytes", .null), ("digest", .null), ("error", .null),
            ])
        case .fetched(let file):
            // From the cache: no request was made, so no URL (as for `not-modified`).
            return done(
                dest, file, result: file.fromCache ? "cached" : "fetched", error: nil,
                rewrittenFrom: file.fromCache ? nil : rewrittenFrom)
        case .fetchedNotDurable(let file, let error):
            return done(
                dest, file, result: "fetched-not-durable",
                error: HumanReport.notDurableMessage(error, about: entry.destination),
                rewrittenFrom: rewrittenFrom)
        case .stillNotDurable(let error):
            // Put in place by an earlier run: nothing was fetched, so no URL, size or digest (as for `not-modified`).
            return .object([
                ("event", .string("done")), dest, ("result", .string("not-durable")), ("url", .null),
                ("bytes", .null), ("digest", .null),
                ("error", .string(HumanReport.notDurableMessage(error, about: entry.destination))),
            ])
        case .failed(let failure):
            var sources: [JSONValue] = []
            if case .transfer(let transfer) = failure {
                sources = transfer.lastFailurePerSource.map {
                    .object([
                        ("url", .string($0.sourceDisplayURL)),
                        ("error", .string(HumanReport.describe($0, for: entry))),
                    ])
                }
            }
            let message = HumanReport.failureMessages(entry: entry, failure: failure, manifest: manifest).joined(
                separator: "; ")
            return .object([
                ("event", .string("failed")), dest, ("error", .string(message)), ("sources", .array(sources)),
            ])
        }
    }

    private static func done(
        _ dest: (String, JSONValue), _ file: DownloadedFile, result: String, error: String?,
        rewrittenFrom: String?
    ) -> JSONValue {
        .object(
            [
                ("event", .string("done")), dest, ("result", .string(result)),
                ("url", file.fromCache ? .null : .string(file.sourceDisplayURL)),
                ("bytes", .int(file.size)), ("digest", .string(file.digest.description)), ("error", .string(error)),
                ("served_by", file.fromCache ? .null : .string(file.servedBy)),
                ("http_version", .string(file.httpVersion)),
                ("resumed_at", .int(file.resumedAt)),
            ]
                + (rewrittenFrom.map { [("rewritten_from", .string($0))] } ?? [])
                + (file.unpacked.map { unpacked in
                    [
                        ("files", .int(Int64(unpacked.files))), ("unpacked_bytes", .int(unpacked.bytes)),
                        ("tree", unpacked.tree.map { .string($0.subresourceIntegrity) } ?? .null),
                        ("kept", .array(unpacked.keptFiles.map { .string($0) })),
                    ]
                } ?? []))
    }

    package static func pruned(_ destination: DestinationPath, _ outcome: PruneOutcome) -> JSONValue? {
        let dest = ("dest", JSONValue.string(destination.description))
        switch outcome {
        case .deleted:
            return .object([("event", .string("pruned")), dest, ("result", .string("deleted")), ("reason", .null)])
        case .kept(let why):
            let reason = StoreWording.kept(why, about: destination)
            return .object([
                ("event", .string("pruned")), dest, ("result", .string("kept")), ("reason", .string(reason)),
            ])
        case .forgotten: return nil
        case .failed(let error):
            return .object([
                ("event", .string("failed")), dest,
                ("error", .string(StoreWording.sentence(error, about: destination.description))),
                ("sources", .array([])),
            ])
        }
    }

    /// `haul verify --json`: one event, the problems found and the counts.
    package static func verify(_ result: VerificationResult) -> JSONValue {
        let problems: [JSONValue] = result.problems.map { planned in
            let (problem, detail): (String, String?) =
                switch planned.action {
                case .fetch(.missing): ("missing", nil)
                case .fetch(.unreadable(let error)):
                    ("unreadable", StoreWording.sentence(error, about: planned.entry.destination.description))
                case .fetch(let reason): ("differs", HumanReport.describe(reason, of: planned.entry))
                case .refuse(let obstacle):
                    ("unreadable", StoreWording.obstacle(obstacle, about: planned.entry.destination))
                case .keep, .fresh, .revalidate: ("ok", nil)
                }
            return .object([
                ("dest", .string(planned.entry.destination.description)), ("problem", .string(problem)),
                ("detail", .string(detail)),
            ])
        }
        return .object(
            [
                ("event", .string("verify")), ("verified", .int(Int64(result.plan.upToDateCount))),
                ("unpinned", .int(Int64(result.plan.revalidations.count))), ("problems", .array(problems)),
                ("exit_status", .int(Int64(result.exitStatus.rawValue))),
            ] + shardFields(result.plan))
    }

    /// `shard` and `manifest_entries`, for a plan of one shard; nothing otherwise.
    private static func shardFields(_ plan: Plan) -> [(String, JSONValue)] {
        guard let scope = plan.shardScope else { return [] }
        return [("shard", .string(scope.shard.description)), ("manifest_entries", .int(Int64(scope.manifestEntries)))]
    }

    package static func summary(_ result: SyncResult, exitStatus: Int32, interruptedBy signal: String?) -> JSONValue {
        let counts = result.counts
        return .object([
            ("event", .string("summary")), ("fetched", .int(Int64(counts.fetched))),
            ("bytes", .int(counts.fetchedBytes)),
            ("cached", .int(Int64(counts.cached))), ("cached_bytes", .int(counts.cachedBytes)),
            ("up_to_date", .int(Int64(result.plan.upToDateCount))), ("not_modified", .int(Int64(counts.notModified))),
            ("pruned", .int(Int64(result.deletedCount))),
            ("failed", .int(Int64(counts.failed + result.pruneFailures.count))),
            ("not_durable", .int(Int64(counts.notDurable))),
            ("seconds", .double(result.seconds)), ("exit_status", .int(Int64(exitStatus))),
            ("interrupted", .string(signal)),
        ])
    }
}
