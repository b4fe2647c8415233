import HaulDigest
import HaulEngine
import HaulManifest

/// `haul add --update` and `--update-all`: entries pinned anew after their files changed upstream, as
/// `terraform init -upgrade` moves its lock file. Each entry's own url is fetched (with its headers, as sync sends
/// them) and hashed with the entry's own algorithm, or the digest given is taken; only the checksum and size values
/// change, where they stand, in the entry's own notation: every comment and line around them stays. An archive entry
/// (`extract:`) is unpacked by its own settings and its tree pinned anew as well.
///
/// Every download comes before the edit: one that fails leaves the manifest as it was (a lock file half moved to new
/// pins is worse than none moved).
extension Pinning {
    /// The entries to pin anew, in the manifest they were read from.
    package struct UpdateTargets: Sendable {
        /// The manifest's text, which the edit starts from.
        package let original: [UInt8]
        package let manifest: Manifest
        /// Their positions in `files:`, each once, in the order asked.
        package let indices: [Int]
    }

    /// One entry's pin as its URL serves it now.
    package struct Repin: Sendable, Equatable {
        package let index: Int
        package let digest: Digest
        /// nil: none learned (a given digest whose server announces none).
        package let size: Int64?
        /// An archive entry's tree, unpacked anew.
        package let tree: Digest?

        package init(index: Int, digest: Digest, size: Int64?, tree: Digest?) {
            self.index = index
            self.digest = digest
            self.size = size
            self.tree = tree
        }
    }

    /// The manifest's entries the request names (every one with a checksum when it names none), checked before
    /// anything is downloaded: every name must be an entry's, and none may take its digest from a signed list
    /// (`from:`; `--update-all` passes those by, as they have no checksum).
    package func targets(_ original: [UInt8]?) throws(PinningFailure) -> UpdateTargets {
        guard let original else { throw .noManifest }
        let loaded: Manifest
        do {
            loaded = try reading.load(original)
        } catch {
            throw .invalidManifest(error)
        }
        let names: [String]? = if case .entries(let names) = request.source { names } else { [] }
        return UpdateTargets(original: original, manifest: loaded, indices: try Self.entries(named: names, in: loaded))
    }

    /// A given digest pins no tree: an archive entry that pins one is downloaded to pin both.
    package func checkGivenDigest(for targets: UpdateTargets) throws(PinningFailure) {
        if request.given != nil, let index = targets.indices.first, targets.manifest.files[index].extract?.tree != nil {
            throw .givenDigestForTree(ManifestEntryReference(index, of: targets.manifest))
        }
    }

    private static func entries(named names: [String]?, in loaded: Manifest) throws(PinningFailure) -> [Int] {
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
        guard missing.isEmpty else { throw .noSuchEntries(missing) }
        let listed = indices.compactMap { index in
            loaded.files[index].listPin.map { (entry: ManifestEntryReference(index, of: loaded), list: $0.list) }
        }
        guard listed.isEmpty else { throw .pinnedByList(listed) }
        return indices
    }

    /// What each target's url serves now, one after the other; the first that fails stops them all.
    package func repin(
        _ targets: UpdateTargets, options: SyncOptions, keepingIn kept: KeptDownloads?, cancellation: Cancellation?,
        notices: @escaping @Sendable (PinningNotice) -> Void
    ) throws(RepinFailure) -> [Repin] {
        try targets.indices.map { index throws(RepinFailure) in
            do throws(PinFailure) {
                return try repin(
                    index, of: targets.manifest, options: options, keepingIn: kept, cancellation: cancellation,
                    notices: notices)
            } catch {
                throw RepinFailure(entry: ManifestEntryReference(index, of: targets.manifest), failure: error)
            }
        }
    }

    /// Hashed with the entry's own algorithm (a weak one is replaced by SHA-256, so that its notation can stay), or
    /// the digest given.
    private func repin(
        _ index: Int, of loaded: Manifest, options: SyncOptions, keepingIn kept: KeptDownloads?,
        cancellation: Cancellation?, notices: @escaping @Sendable (PinningNotice) -> Void
    ) throws(PinFailure) -> Repin {
        let entry = loaded.files[index]
        var options = options
        // The entry's headers, as sync sends them; the command line's win, as they do in sync.
        options.commandLineHeaders = HeaderRules.merge(defaults: entry.headers, entry: options.commandLineHeaders)
        if let given = request.given {
            guard let size = given.size else {
                let announced = try Self.announcedSize(
                    entry.url, digest: given.digest, options: options, cancellation: cancellation,
                    notices: notices)
                return Repin(index: index, digest: given.digest, size: announced, tree: nil)
            }
            return Repin(index: index, digest: given.digest, size: size, tree: nil)
        }
        let algorithm =
            entry.checksum.map { $0.digest.algorithm.isWeak ? DigestAlgorithm.sha256 : $0.digest.algorithm } ?? .sha256
        let attemptFailed = Self.attemptFailed(notices)
        guard let rule = entry.extract else {
            let measured = try Pinner.measure(
                entry.url, options: options, algorithm: algorithm, keepingIn: kept,
                cancellation: cancellation, attemptFailed: attemptFailed)
            Self.noticeEncoding(measured, notices)
            return Repin(index: index, digest: measured.digest, size: measured.size, tree: nil)
        }
        let measured = try Pinner.measureArchive(
            entry.url, rule: rule, options: options, algorithm: algorithm, keepingIn: kept,
            cancellation: cancellation, attemptFailed: attemptFailed)
        Self.noticeEncoding(measured.archive, notices)
        return Repin(index: index, digest: measured.archive.digest, size: measured.archive.size, tree: measured.tree)
    }

    /// The repins whose entries stay as they are: same digest, same tree, and a size that is the same or that
    /// `--update-all` does not add (a named update adds a size the entry lacks).
    package func unchanged(_ repins: [Repin], of targets: UpdateTargets) -> [PinnedFile] {
        let named: Bool = if case .entries(let names) = request.source { names != nil } else { false }
        return repins.filter { repin in
            let entry = targets.manifest.files[repin.index]
            let sizeChanged = repin.size != nil && entry.size != repin.size && (named || entry.size != nil)
            return entry.checksum?.digest == repin.digest && !sizeChanged
                && (repin.tree == nil || entry.extract?.tree == repin.tree)
        }.map { repin in
            let entry = targets.manifest.files[repin.index]
            return PinnedFile(
                index: repin.index, destination: entry.destination.description, url: entry.url.description,
                digest: repin.digest, size: repin.size ?? entry.size, measuredSize: repin.size, tree: repin.tree,
                result: .unchanged, line: nil, previous: nil)
        }
    }

    /// The manifest with every changed pin written where it stands, in one edit loaded back and checked to read each
    /// one; every target is placed from it (or from the manifest as it was, when no pin changed).
    package func updating(with repins: [Repin], of targets: UpdateTargets) throws(PinningFailure) -> PinningOutcome {
        let loaded = targets.manifest
        let unchanged = unchanged(repins, of: targets)
        let changed = repins.filter { repin in !unchanged.contains { $0.index == repin.index } }
        let placing = repins.map { loaded.files[$0.index].destination.description }
        guard !changed.isEmpty else {
            return PinningOutcome(files: unchanged, manifest: .unchanged(loaded), placing: placing, created: false)
        }
        var edited = targets.original
        for repin in changed {
            do {
                edited = try ManifestEditor.repinning(
                    repin.index, digest: repin.digest, size: repin.size, tree: repin.tree,
                    in: edited, fileName: reading.fileName)
            } catch {
                throw .repinRefused(error)
            }
        }
        let reloaded: Manifest
        do {
            reloaded = try reading.load(edited)
        } catch {
            // The manifest loaded before the edit: the new pins are what does not load.
            throw .repinDoesNotLoad(error, entries: changed.map { ManifestEntryReference($0.index, of: loaded) })
        }
        for repin in changed {
            let entry = reloaded.files.indices.contains(repin.index) ? reloaded.files[repin.index] : nil
            guard let entry, entry.checksum?.digest == repin.digest, repin.size == nil || entry.size == repin.size,
                repin.tree == nil || entry.extract?.tree == repin.tree
            else {
                throw .pinDoesNotReadBack
            }
        }
        let updated = changed.map { repin in
            let entry = loaded.files[repin.index]
            return PinnedFile(
                index: repin.index, destination: entry.destination.description, url: entry.url.description,
                digest: repin.digest, size: repin.size ?? entry.size, measuredSize: repin.size, tree: repin.tree,
                result: .updated, line: reloaded.files[repin.index].location.line,
                previous: PinnedFile.PreviousPin(
                    digest: entry.checksum?.digest,
                    tree: repin.tree == nil ? nil : entry.extract?.tree))
        }
        return PinningOutcome(
            files: unchanged + updated, manifest: .replaced(bytes: edited, manifest: reloaded),
            placing: placing, created: false)
    }
}
