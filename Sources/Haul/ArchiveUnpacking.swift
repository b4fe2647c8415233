import Glibc
import HaulArchive
import HaulDigest
import HaulEngine
import HaulFileSystem
import HaulManifest
import Synchronization

/// An `extract` entry's archive, unpacked while it downloads: its request's `BodyReading`. Each pass over the body
/// unpacks into a folder of its own in the staging area; the newest pass, the one whose body the engine verified
/// before delivering it, is the tree committed, and every other pass's folder goes with its pass.
///
/// Formats that need to seek (7z keeps its index after the data; a zip's modes and symlinks are in its central
/// directory, at the end) are not streamed: their pass only looks at the first bytes, and the archive is unpacked
/// from the verified file once it is delivered (`unpackDelivered`).
final class ArchiveUnpacking: BodyReading {
    private let staging: DirectoryHandle
    /// How messages name the archive: the entry's destination.
    private let archive: String
    private let rule: ExtractRule
    private let selects: @Sendable (String) -> Bool
    private let names: TreeFolderNames
    /// The newest pass: the only one whose tree may be committed.
    private let newest = Mutex<UnpackPass?>(nil)
    /// The format the URL's file name (or `format:`) names, if any.
    private let namedFormat: ArchiveFormat?

    /// `urlFormat`: the format the URL's file name names, if any.
    init(
        archive: String, rule: ExtractRule, urlFormat: ArchiveFormat?, selects: @escaping @Sendable (String) -> Bool,
        staging: DirectoryHandle, names: TreeFolderNames
    ) {
        self.staging = staging
        self.archive = archive
        self.rule = rule
        self.selects = selects
        self.names = names
        namedFormat = rule.format ?? urlFormat
    }

    func makeReader(expectedSize: Int64?) -> (any BodyReader)? {
        let pass = UnpackPass(
            staging: staging, folderName: names.next(), archive: archive,
            rules: rules(archiveSize: expectedSize), streams: namedFormat.map(Self.streams) ?? true)
        newest.withLock { $0 = pass }
        return pass
    }

    private func rules(archiveSize: Int64?) -> UnpackRules {
        UnpackRules(
            format: rule.format, strip: rule.strip, selects: selects,
            maxBytes: rule.maxUnpackedBytes ?? ExtractRule.defaultUnpackedBytes(archiveSize: archiveSize ?? 0),
            maxMembers: ExtractRule.maximumMembers)
    }

    /// Whether libarchive reads the format as it arrives, losing nothing.
    private static func streams(_ format: ArchiveFormat) -> Bool {
        switch format {
        case .zip, .sevenZip: false
        case .tar, .tarGzip, .tarBzip2, .tarXz, .tarZstd: true
        }
    }

    /// The tree of the newest pass, once (the caller commits its folder, and owns it from then on); for a format
    /// that is not streamed, or an archive that never went through the engine (a hit of the content cache),
    /// unpacked now from the verified archive `name` in `folder`. nil when a pass read nothing and said
    /// nothing (it cannot have: the body was verified after its pass ended).
    func unpackDelivered(
        archiveNamed name: String, in folder: DirectoryHandle,
        size: Int64
    ) -> Result<StagedUnpack, UnpackFailure>? {
        let pass =
            newest.withLock { pass in
                defer { pass = nil }; return pass
            }
            ?? UnpackPass(
                staging: staging, folderName: names.next(), archive: archive, rules: rules(archiveSize: size),
                streams: false)
        if pass.wantsFile {
            switch folder.openRegularFileForReading(name) {
            case .success(let descriptor):
                defer { close(descriptor) }
                pass.unpack(file: descriptor, rules: rules(archiveSize: size))
            case .failure(let failure):
                return .failure(UnpackFailure(archive: archive, member: nil, rule: .writeFailed(failure)))
            }
        }
        return pass.take()
    }
}

extension ArchiveUnpacking {
    /// The entry failed (or its server said it had not changed): the newest pass's folder is removed now. A pass
    /// still writing (its attempt just stopped) finds its folder gone and fails; its release removes what it wrote
    /// meanwhile, and the next run's sweep anything a process exit left.
    func abandon() {
        newest.withLock { pass in
            defer { pass = nil }; return pass
        }?.removeFolder()
    }
}

/// What one pass unpacked, ready to commit: its folder in the staging area, and the members written there.
struct StagedUnpack: Sendable {
    var folderName: String
    var tree: UnpackedTree
}

/// One pass over the body: unpacks into its folder, which is removed with the pass unless its tree is taken.
final class UnpackPass: BodyReader {
    private let staging: DirectoryHandle
    private let folderName: String
    private let archive: String
    private let rules: UnpackRules
    /// The format is known to be streamed; otherwise the pass looks at the first bytes to tell.
    private let streams: Bool
    private let state = Mutex(State())

    private struct State {
        var outcome: Result<UnpackedTree, UnpackFailure>?
        /// The archive is a zip or 7z: unpacked from the whole file once it is verified.
        var wantsFile = false
        var taken = false
    }

    init(staging: DirectoryHandle, folderName: String, archive: String, rules: UnpackRules, streams: Bool) {
        self.staging = staging
        self.folderName = folderName
        self.archive = archive
        self.rules = rules
        self.streams = streams
        if !streams { state.withLock { $0.wantsFile = true } }
    }

    deinit { removeFolder() }

    var wantsFile: Bool { state.withLock { $0.wantsFile } }

    /// Removes the folder unless its tree was taken (committed, or being committed).
    func removeFolder() {
        if !state.withLock({ $0.taken }) { _ = staging.removeTree(folderName) }
    }

    func read(_ next: () -> UnsafeRawBufferPointer?) {
        guard streams else { return }
        // The first chunk tells a zip or 7z (whose URL did not say) from what streams; it is handed on as it is.
        var first = next()
        if let chunk = first, Self.needsWholeFile(chunk) {
            state.withLock { $0.wantsFile = true }
            return
        }
        let result = withFolder { folder in
            Unpacker.unpack(archive: archive, rules: rules, into: folder) {
                if let chunk = first {
                    first = nil
                    return chunk
                }
                return next()
            }
        }
        state.withLock { $0.outcome = result }
    }

    /// Unpacks the whole, verified archive (a format that is not streamed).
    func unpack(file descriptor: Int32, rules: UnpackRules) {
        let result = withFolder { Unpacker.unpack(archive: archive, rules: rules, into: $0, file: descriptor) }
        state.withLock { $0.outcome = result }
    }

    /// The tree, once. Anything else is said, and the folder goes now, not when the pass is released: the reader
    /// thread that held it may let go only after the run has ended, leaving the folder for the next run to sweep.
    func take() -> Result<StagedUnpack, UnpackFailure>? {
        let taken = takeOutcome()
        guard case .success? = taken else {
            removeFolder()
            return taken
        }
        return taken
    }

    private func takeOutcome() -> Result<StagedUnpack, UnpackFailure>? {
        state.withLock { state in
            switch state.outcome {
            case nil: return nil
            case .failure(let failure): return .failure(failure)
            case .success(let tree):
                state.taken = true
                return .success(StagedUnpack(folderName: folderName, tree: tree))
            }
        }
    }

    /// Runs `body` in a fresh, empty folder of the pass's own (one a crashed pass left is removed first).
    private func withFolder(
        _ body: (DirectoryHandle) -> Result<UnpackedTree, UnpackFailure>
    ) -> Result<UnpackedTree, UnpackFailure> {
        _ = staging.removeTree(folderName)
        switch staging.subdirectory(folderName, creatingWithMode: 0o700) {
        case .success(let folder): return body(folder)
        case .failure(let failure):
            return .failure(UnpackFailure(archive: archive, member: nil, rule: .writeFailed(failure)))
        }
    }

    /// A zip's local header or 7z's signature: formats libarchive cannot read whole from a stream.
    static func needsWholeFile(_ chunk: UnsafeRawBufferPointer) -> Bool {
        chunk.starts(with: [0x50, 0x4B, 0x03, 0x04]) || chunk.starts(with: [0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C])
    }
}

/// Names for the folders passes unpack into, unique within the run: `<prefix>-<counter>.tree`, all hex, the form
/// the staging sweep knows (`StagingNames.isTreeName`).
final class TreeFolderNames: Sendable {
    private let prefix: String
    private let counter = Mutex(0)

    init(prefix: String) { self.prefix = prefix }

    func next() -> String {
        let number = counter.withLock { value -> Int in
            value += 1
            return value
        }
        return prefix + "-" + String(number, radix: 16) + ".tree"
    }
}
