import Glibc
import HaulDigest
import HaulEngine
import HaulManifest

/// `haul add`'s decisions, from values: whether the manifest can take the new entries (tried with stand-in pins before
/// anything is fetched, so that a mistake costs no download), what each URL pins, which of a checksum list's entries
/// are new, the same or changed, and the one edit of the manifest's text, loaded back and checked to read every pin
/// exactly. It writes no file: the caller replaces the manifest with `PinningOutcome.manifest` (after checking the
/// file did not change meanwhile) and puts `placing` in place (`KeptDownloads`).
package struct Pinning: Sendable {
    package let request: PinningRequest
    package let reading: ManifestReading

    package init(_ request: PinningRequest, reading: ManifestReading) {
        self.request = request
        self.reading = reading
    }

    /// What the manifest says about fetching the new entries, learned before anything is fetched.
    package struct Preparation: Sendable {
        /// The new entries' URLs already fetched by other entries.
        package let notices: [PinningNotice]
        /// The manifest asks for `.netrc` credentials.
        package let wantsNetrc: Bool
        /// The manifest's `defaults.headers`, as sync sends them to a new entry's URL (a token, say).
        package let headers: [HeaderField]
    }

    /// For URLs: the entries with stand-in pins, edited into `original` and loaded back, so that a manifest that
    /// cannot take them is refused before the download. For a checksum list, whose entries are known only once it is
    /// fetched: what the manifest asks of the list's own fetch (a manifest that does not load asks nothing).
    package func prepare(_ original: [UInt8]?) throws(PinningFailure) -> Preparation {
        guard case .urls(let drafts) = request.source else {
            let wantsNetrc = (try? reading.load(original ?? []))?.netrc ?? false
            return Preparation(notices: [], wantsNetrc: wantsNetrc, headers: [])
        }
        let trial = try edit(original, adding: drafts.map { $0.trialEntry(extract: request.extract) }, from: drafts)
        let notices = zip(drafts, trial.edit.sameURL).flatMap { draft, listed in
            listed.map { PinningNotice.urlAlreadyListed(url: draft.url.description, listed: $0) }
        }
        return Preparation(
            notices: notices, wantsNetrc: trial.loaded.netrc, headers: trial.loaded.files[trial.edit.firstIndex].headers
        )
    }

    // MARK: Measuring

    /// Each URL's entry, downloaded once and measured (an archive also unpacked, its tree pinned), or pinned by the
    /// digest given. `options`: the transfer settings, with the manifest's headers; `kept`: where downloads wait to
    /// be put in place. A checksum list's entries come from `fetchList` and `listedEntries`, an update's from `repin`.
    package func measure(
        options: SyncOptions, keepingIn kept: KeptDownloads?, cancellation: Cancellation?,
        notices: @escaping @Sendable (PinningNotice) -> Void
    ) throws(PinFailure) -> [PinnedEntry] {
        guard case .urls(let drafts) = request.source else { return [] }
        let attemptFailed = Self.attemptFailed(notices)
        if let given = request.given, let draft = drafts.first {
            guard let size = given.size else {
                let announced = try Self.announcedSize(
                    draft.url, digest: given.digest, options: options, cancellation: cancellation,
                    notices: notices)
                return [draft.pinned(digest: given.digest, size: announced, extract: request.extract)]
            }
            return [draft.pinned(digest: given.digest, size: size, extract: request.extract)]
        }
        return try drafts.map { draft throws(PinFailure) in
            guard let rule = request.extract else {
                let measured = try Pinner.measure(
                    draft.url, options: options, keepingIn: kept, cancellation: cancellation,
                    attemptFailed: attemptFailed)
                Self.noticeEncoding(measured, notices)
                return draft.pinned(digest: measured.digest, size: measured.size)
            }
            let measured = try Pinner.measureArchive(
                draft.url, rule: rule, options: options, keepingIn: kept,
                cancellation: cancellation, attemptFailed: attemptFailed)
            Self.noticeEncoding(measured.archive, notices)
            return draft.pinned(
                digest: measured.archive.digest, size: measured.archive.size, extract: rule.pinning(tree: measured.tree)
            )
        }
    }

    /// The checksum list's bytes, read into memory whole: a list is kilobytes, and a server must not make haul hold
    /// gigabytes (`ChecksumList.maximumBytes`, when it is the lower limit).
    package func fetchList(
        options: SyncOptions, cancellation: Cancellation?,
        notices: @escaping @Sendable (PinningNotice) -> Void
    ) throws(PinFailure) -> [UInt8] {
        guard case .checksumList(let list, _, _) = request.source else { return [] }
        var options = options
        options.maxFileSize = min(options.maxFileSize, ChecksumList.maximumBytes)
        return try Pinner.fetch(
            list.url, options: options, cancellation: cancellation, attemptFailed: Self.attemptFailed(notices))
    }

    /// The entries the fetched list names, those `matching` selects, at the list's folder or the one asked for.
    package func listedEntries(_ bytes: [UInt8]) throws(PinningFailure) -> [PinnedEntry] {
        guard case .checksumList(let list, let patterns, _) = request.source else { return [] }
        let entries: [PinnedEntry]
        do {
            let parsed = try ChecksumList.parse(bytes, file: list.url.description)
            entries = try ChecksumList(
                items: parsed.items.filter { item in
                    patterns.isEmpty || patterns.contains { fnmatch($0, item.name, 0) == 0 }
                }
            ).entries(listURL: list.url, file: list.url.description)
        } catch {
            throw .checksumList(error)
        }
        guard !entries.isEmpty else { throw .nothingMatches(list: list.url.description, patterns: patterns) }
        return try inFolder(entries)
    }

    /// With a folder asked for, each of the list's files goes to folder + its name.
    func inFolder(_ entries: [PinnedEntry]) throws(PinningFailure) -> [PinnedEntry] {
        guard case .checksumList(_, _, let folder?) = request.source else { return entries }
        return try entries.map { entry throws(PinningFailure) in
            guard let destination = DestinationPath.commandLine(folder + entry.destination) else {
                throw .notADestination(folder: folder, path: folder + entry.destination)
            }
            return PinnedEntry(
                url: entry.url, destination: destination, digest: entry.digest, size: entry.size, extract: entry.extract
            )
        }
    }

    /// The size a HEAD request announces for a file pinned by `digest` alone: nil (noticed) when the server announces
    /// none, or a size no file of that digest can have (`Content-Length: 0` beside the digest of non-empty content):
    /// pinned, it would fail every sync.
    static func announcedSize(
        _ url: TemplatedString, digest: Digest, options: SyncOptions, cancellation: Cancellation?,
        notices: @escaping @Sendable (PinningNotice) -> Void
    ) throws(PinFailure) -> Int64? {
        let announced = try Pinner.announcedSize(
            url, options: options, cancellation: cancellation,
            attemptFailed: attemptFailed(notices))
        guard let announced else {
            notices(.noAnnouncedSize(url: url.description))
            return nil
        }
        if let contradiction = PinnedSize.contradiction(announced, digest: digest) {
            notices(.impossibleAnnouncedSize(url: url.description, announced: announced, contradiction: contradiction))
            return nil
        }
        return announced
    }

    static func attemptFailed(
        _ notices: @escaping @Sendable (PinningNotice) -> Void
    ) -> @Sendable (AttemptFailure, NextAttempt?) -> Void {
        { failure, next in notices(.attemptFailed(failure, next: next)) }
    }

    static func noticeEncoding(_ measured: Measurement, _ notices: (PinningNotice) -> Void) {
        if let encoding = measured.contentEncoding {
            notices(.contentEncoded(url: measured.sourceDisplayURL, encoding: encoding))
        }
    }

    // MARK: Editing

    /// Measured entries sorted against the manifest they go into.
    package struct Sorting: Sendable {
        /// To append.
        package let new: [PinnedEntry]
        /// A checksum list's entries the manifest already pins to the same digest: left alone.
        package let unchanged: [PinnedFile]
        /// A checksum list's entries whose digest the list now gives differently: pinned anew where they stand.
        package let changed: [(entry: ManifestEntryReference, was: Digest, now: PinnedEntry)]
    }

    /// Anything but a checksum list added again to a manifest that loads is all new (a manifest that does not load
    /// is left for the edit to report). Of a list added again: new entries, those the manifest already pins to the
    /// same digest, and those whose digest changed, refused unless the request allows it, and refused when the
    /// entry pins a size (a list gives none: the old size would stay beside the new digest and fail every sync).
    package func sort(_ entries: [PinnedEntry], against original: [UInt8]?) throws(PinningFailure) -> Sorting {
        guard case .checksumList = request.source, let original, let loaded = try? reading.load(original) else {
            return Sorting(new: entries, unchanged: [], changed: [])
        }
        var listed: [DestinationKey: Int] = [:]
        for (index, file) in loaded.files.enumerated() { listed[DestinationKey(file.destination)] = index }
        var new: [PinnedEntry] = []
        var unchanged: [PinnedFile] = []
        var changed: [(entry: ManifestEntryReference, was: Digest, now: PinnedEntry)] = []
        for entry in entries {
            guard let index = listed[DestinationKey(entry.destination)] else {
                new.append(entry)
                continue
            }
            let was = loaded.files[index].checksum?.digest
            if was == entry.digest {
                unchanged.append(
                    PinnedFile(
                        index: index, destination: entry.destination, url: entry.url, digest: entry.digest,
                        size: entry.size, measuredSize: entry.size, tree: nil, result: .unchanged,
                        line: nil, previous: nil))
            } else if let was, was.algorithm == entry.digest.algorithm {
                changed.append((ManifestEntryReference(index, of: loaded), was, entry))
            } else {
                // Unpinned, or pinned another way: the edit refuses the destination as taken, and says what to do.
                new.append(entry)
            }
        }
        guard changed.isEmpty || request.repinsChangedListEntries else {
            throw .listedDigestsChanged(changed.map { ($0.entry, $0.was, $0.now.digest) })
        }
        let sized = changed.filter { loaded.files[$0.entry.index].size != nil }
        guard sized.isEmpty else { throw .listedEntriesPinSizes(sized.map(\.entry)) }
        return Sorting(new: new, unchanged: unchanged, changed: changed)
    }

    /// The manifest with the sorted entries: the changed ones pinned anew where they stand, the new ones appended
    /// after the last entry of `files:`, in one edit loaded back. `comment`: a line written as a YAML comment just
    /// above the new entries (where a verified list came from), as `ManifestEditor.appending` writes it.
    package func adding(
        _ sorting: Sorting, to original: [UInt8]?, comment: String? = nil
    ) throws(PinningFailure) -> PinningOutcome {
        guard !sorting.new.isEmpty || !sorting.changed.isEmpty else {
            return PinningOutcome(files: sorting.unchanged, manifest: .unchanged(nil), placing: [], created: false)
        }
        var base = original
        for changed in sorting.changed {
            do {
                base = try ManifestEditor.repinning(
                    changed.entry.index, digest: changed.now.digest, size: nil, in: base ?? [],
                    fileName: reading.fileName)
            } catch {
                throw .repinRefused(error)
            }
        }
        let bytes: [UInt8]
        let firstIndex: Int
        let loaded: Manifest
        if sorting.new.isEmpty {
            bytes = base ?? []
            do {
                loaded = try reading.load(bytes)
            } catch {
                throw .repinDoesNotLoad(error, entries: [])
            }
            firstIndex = loaded.files.count
        } else {
            let edited = try edit(base, adding: sorting.new, comment: comment)
            (bytes, firstIndex, loaded) = (edited.edit.bytes, edited.edit.firstIndex, edited.loaded)
        }
        let updated = sorting.changed.map { changed in
            PinnedFile(
                index: changed.entry.index, destination: changed.now.destination, url: changed.now.url,
                digest: changed.now.digest, size: changed.now.size, measuredSize: changed.now.size, tree: nil,
                result: .updated, line: loaded.files[changed.entry.index].location.line,
                previous: PinnedFile.PreviousPin(digest: changed.was, tree: nil))
        }
        let added = sorting.new.enumerated().map { number, entry in
            PinnedFile(
                index: firstIndex + number, destination: entry.destination, url: entry.url, digest: entry.digest,
                size: entry.size, measuredSize: entry.size, tree: entry.extract?.tree, result: .added,
                line: loaded.files[firstIndex + number].location.line, previous: nil)
        }
        return PinningOutcome(
            files: sorting.unchanged + updated + added, manifest: .replaced(bytes: bytes, manifest: loaded),
            placing: sorting.new.map(\.destination), created: original == nil)
    }

    /// `entries` appended to `original` and loaded back, every new entry read back exactly. `drafts`: the URLs the
    /// entries come from, to name them.
    private func edit(
        _ original: [UInt8]?, adding entries: [PinnedEntry],
        from drafts: [EntryDraft] = [], comment: String? = nil
    ) throws(PinningFailure) -> (edit: ManifestEdit, loaded: Manifest) {
        let edit: ManifestEdit
        do {
            edit = try ManifestEditor.appending(entries, to: original, fileName: reading.fileName, comment: comment)
        } catch {
            switch error.reason {
            case .destinationTaken(let index):
                let taken = original.flatMap { try? reading.load($0) }.flatMap { loaded in
                    loaded.files.indices.contains(index) ? loaded.files[index].destination.description : nil
                }
                throw .destinationTaken(error, taken: taken)
            case .destinationRepeated(let first, let second):
                let url = { (index: Int) in drafts.indices.contains(index) ? drafts[index].url.description : nil }
                throw .destinationRepeated(
                    first: first, second: second, urls: (url(first), url(second)),
                    destination: entries[second].destination)
            case .notEditable:
                throw .notEditable(error, existingProblems: reading.existingProblems(original))
            }
        }
        let loaded: Manifest
        do {
            loaded = try reading.load(edit.bytes)
        } catch {
            // The manifest was valid, so the new entries are what breaks it (a folder another entry needs, …).
            throw .editDoesNotLoad(error, existingProblems: reading.existingProblems(original))
        }
        for (number, entry) in entries.enumerated() {
            let index = edit.firstIndex + number
            guard loaded.files.indices.contains(index), entry.matches(loaded.files[index]) else {
                throw .entryDoesNotReadBack
            }
        }
        return (edit, loaded)
    }
}
