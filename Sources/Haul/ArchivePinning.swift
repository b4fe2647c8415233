import Glibc
import HaulArchive
import HaulDigest
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulStore

/// What `haul add --extract` pins of an archive: the archive itself, as any download, and the tree it unpacks to.
package struct ArchiveMeasurement: Sendable {
    package let archive: Measurement
    /// The NAR digest of the unpacked tree (`tree: sha256-…`), the value sync compares the tree it stages with.
    package let tree: Digest
}

extension Pinner {
    /// Downloads the archive as `measure` does, then unpacks the verified file by `rule` (its format, strip and
    /// patterns, the size cap as sync applies it) into a folder beside it in the private workspace, never in any root,
    /// and hashes that tree as sync hashes the tree it stages (`TreeDigest`). The folder is removed before this
    /// returns; the archive is kept (`keepingIn`) only when it unpacked. An archive that does not unpack throws
    /// `.unpack`, naming the URL, the member and the rule.
    package static func measureArchive(
        _ url: TemplatedString, rule: ExtractRule, options: SyncOptions,
        algorithm: DigestAlgorithm = .sha256, keepingIn kept: KeptDownloads? = nil,
        cancellation: Cancellation? = nil,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void = { _, _ in }
    )
        throws(PinFailure) -> ArchiveMeasurement
    {
        try download(
            url, options: options, into: kept?.folder, algorithm: algorithm, cancellation: cancellation,
            attemptFailed: attemptFailed
        ) { file, workspace -> Result<ArchiveMeasurement, PinFailure> in
            treeDigest(of: file, rule: rule, in: workspace).flatMap { tree in
                if let failure = kept?.keep(file) { return .failure(.workspace(failure)) }
                return .success(ArchiveMeasurement(archive: Measurement(of: file), tree: tree))
            }
        }.get()
    }

    /// The tree digest of the downloaded archive unpacked by `rule`, in `<archive>.tree` beside it.
    private static func treeDigest(
        of file: DownloadedFile, rule: ExtractRule,
        in workspace: ScratchDirectory
    ) -> Result<Digest, PinFailure> {
        let treeName = file.temporaryName + ".tree"
        let treePath = workspace.path + "/" + treeName
        _ = workspace.folder.removeTree(treeName)
        let folder: DirectoryHandle
        switch workspace.folder.subdirectory(treeName, creatingWithMode: 0o700) {
        case .success(let made): folder = made
        case .failure(let failure):
            return .failure(.workspace(StoreError(operation: .create, path: treePath, errno: failure.errno)))
        }
        defer { _ = workspace.folder.removeTree(treeName) }
        let archive: Int32
        switch file.folder(in: workspace.folder).openRegularFileForReading(file.temporaryName) {
        case .success(let descriptor): archive = descriptor
        case .failure(let failure):
            return .failure(.workspace(StoreError(operation: .open, path: file.temporaryPath, errno: failure.errno)))
        }
        defer { close(archive) }
        // The rules sync unpacks the entry by, so that the tree hashed here is the tree sync stages.
        let selection = try? MemberSelection(rule)
        let rules = UnpackRules(
            format: rule.format, strip: rule.strip, selects: { selection?.keeps($0) ?? false },
            maxBytes: rule.maxUnpackedBytes ?? ExtractRule.defaultUnpackedBytes(archiveSize: file.size),
            maxMembers: ExtractRule.maximumMembers)
        if case .failure(let failure) = Unpacker.unpack(
            archive: file.sourceDisplayURL, rules: rules, into: folder, file: archive)
        {
            return .failure(.unpack(failure))
        }
        return TreeDigest.of(folder: folder, shownAs: treePath).mapError { .workspace($0) }
    }
}
