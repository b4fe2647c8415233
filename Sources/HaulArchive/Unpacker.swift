import Glibc
import HaulDigest
import HaulFileSystem
import HaulManifest

/// What an unpack keeps and how much it allows: an entry's `extract:` as the unpacker applies it.
package struct UnpackRules: Sendable {
    /// From the manifest; nil: libarchive recognizes the format (and compression) from the bytes. A named format
    /// restricts libarchive to that format and compression: other bytes are `Rule.notFormat`.
    package var format: ArchiveFormat?
    /// Leading components dropped from every member, as `tar --strip-components` drops them.
    package var strip: Int
    /// After `strip`: whether the member (its path normalized, `a/b`) is kept. The caller decides (include and
    /// exclude patterns).
    package var selects: @Sendable (String) -> Bool
    /// The most bytes the kept members may unpack to, counted as written (a sparse member's holes included).
    package var maxBytes: Int64
    /// The most members (of any kind, kept or not) the archive may hold.
    package var maxMembers: Int

    package init(
        format: ArchiveFormat? = nil, strip: Int = 0,
        selects: @escaping @Sendable (String) -> Bool = { _ in true },
        maxBytes: Int64 = ExtractRule.minimumDefaultUnpackedBytes,
        maxMembers: Int = ExtractRule.maximumMembers
    ) {
        self.format = format
        self.strip = strip
        self.selects = selects
        self.maxBytes = maxBytes
        self.maxMembers = maxMembers
    }
}

/// One thing in an unpacked tree: a file, folder or symlink, as the tree's digest and the state see it.
package struct UnpackedMember: Sendable, Equatable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        /// `digest`: SHA-256 of its bytes, computed as they were written. A hard link is a file like its target.
        case file(size: Int64, executable: Bool, digest: Digest)
        case directory
        case symlink(target: String)
    }

    /// Relative to the tree's root, normalized, `/`-separated.
    package let path: String
    package let kind: Kind

    package init(path: String, kind: Kind) {
        self.path = path
        self.kind = kind
    }

    /// Paths compare by bytes: `caf\u{e9}` and `cafe\u{301}` are two files.
    package static func == (a: UnpackedMember, b: UnpackedMember) -> Bool {
        a.path.hasSameBytes(as: b.path) && a.kind == b.kind
    }

    package var description: String {
        switch kind {
        case .file(let size, let executable, let digest): "\(path) file \(size) \(executable ? "x " : "")\(digest.hex)"
        case .directory: "\(path)/"
        case .symlink(let target): "\(path) -> \(target)"
        }
    }
}

/// What an unpack wrote: every member (the folders it made for them included), in byte order of their paths.
package struct UnpackedTree: Sendable, Equatable {
    package let members: [UnpackedMember]
    /// How many of them are files, and their bytes (a hard link counted as a file of its own).
    package let files: Int
    package let bytes: Int64

    package init(members: [UnpackedMember]) {
        self.members = members.sorted { $0.path.bytesPrecede($1.path) }
        var files = 0, bytes: Int64 = 0
        for case .file(let size, _, _) in members.map(\.kind) {
            files += 1
            bytes += size
        }
        self.files = files
        self.bytes = bytes
    }
}

/// Unpacks an archive into a folder with libarchive reading and haul writing (`TreeWriter`), every member held to
/// `MemberRules` first.
///
/// Runs on the caller's thread, whose locale is C.UTF-8 for the duration (`ArchiveReader.withUTF8Names`, which
/// says how names arrive); the rules refuse a name that is not UTF-8.
package enum Unpacker {
    /// The most descriptors an unpack holds at once beside the folder's own: `TreeWriter`'s recent folders, a walk's
    /// two, and the file being written (or a hard link's second folder). For the run's descriptor budget.
    package static let descriptorsHeld = TreeWriter.descriptorsHeld

    /// Pulls the archive's bytes from `next` (each chunk valid until the next call; nil at the end of the body, or
    /// when the caller abandons it) and writes the kept members into `folder` (an empty folder the caller made).
    /// Returns once libarchive reports the archive's end; the caller reads on to the end of the body for its hash.
    /// A body that ends before the archive does is `Rule.truncated`, and so is a tar without its end-of-archive
    /// blocks. See `ArchiveInput` for what cannot be read this way (7z; a zip's modes and symlinks).
    package static func unpack(
        archive name: String, rules: UnpackRules, into folder: DirectoryHandle,
        next: () -> UnsafeRawBufferPointer?
    ) -> Result<UnpackedTree, UnpackFailure> {
        withoutActuallyEscaping(next) { next in
            unpack(archive: name, rules: rules, into: folder, from: ArchiveInput(stream: next))
        }
    }

    /// The same from the complete archive in `file` (read with `pread`, its offset untouched), which libarchive may
    /// seek in: for 7z, and for a zip's modes and symlinks, which only its central directory holds.
    package static func unpack(
        archive name: String, rules: UnpackRules, into folder: DirectoryHandle,
        file: Int32
    ) -> Result<UnpackedTree, UnpackFailure> {
        guard let input = ArchiveInput(file: file) else {
            return .failure(UnpackFailure(archive: name, member: nil, rule: .outOfMemory))
        }
        return unpack(archive: name, rules: rules, into: folder, from: input)
    }

    private static func unpack(
        archive name: String, rules: UnpackRules, into folder: DirectoryHandle,
        from input: ArchiveInput
    ) -> Result<UnpackedTree, UnpackFailure> {
        ArchiveReader.withUTF8Names {
            guard let reader = ArchiveReader(format: rules.format, input: input) else {
                return .failure(UnpackFailure(archive: name, member: nil, rule: .outOfMemory))
            }
            var unpacking = Unpacking(
                archive: name, rules: rules, reader: reader,
                writer: TreeWriter(root: folder, byteLimit: rules.maxBytes))
            return unpacking.run()
        }
    }
}

/// One unpack: the loop over members, and what the tree holds so far.
private struct Unpacking {
    let archive: String
    let rules: UnpackRules
    let reader: ArchiveReader
    let writer: TreeWriter
    let memberRules: MemberRules
    var ledger = TreeLedger()
    var members: [UnpackedMember] = []
    /// Where each file's member is in `members`, for the hard links to it.
    var fileMembers: [DestinationKey: Int] = [:]

    init(archive: String, rules: UnpackRules, reader: ArchiveReader, writer: TreeWriter) {
        self.archive = archive
        self.rules = rules
        self.reader = reader
        self.writer = writer
        memberRules = MemberRules(strip: rules.strip, selects: rules.selects)
    }

    mutating func run() -> Result<UnpackedTree, UnpackFailure> {
        if case .failure(let failure) = reader.open() { return .failure(fail(openingRule(failure), member: nil)) }
        var count = 0
        while true {
            let header: MemberHeader
            switch reader.nextHeader() {
            case .success(let next?): header = next
            case .success(nil):
                if reader.endsWithoutTarTrailer {
                    return .failure(fail(.truncated("no end-of-archive blocks after the last member"), member: nil))
                }
                return .success(UnpackedTree(members: members))
            case .failure(let failure): return .failure(fail(readingRule(failure), member: nil))
            }
            count += 1
            guard count <= rules.maxMembers else {
                return .failure(fail(.tooManyMembers(limit: rules.maxMembers), header))
            }
            switch memberRules.judge(header, in: ledger) {
            case .skip, .present: continue
            case .refuse(let rule): return .failure(fail(rule, header))
            case .write(let planned):
                if let rule = write(planned, header: header) { return .failure(fail(rule, header)) }
                ledger.record(planned)
            }
        }
    }

    private mutating func write(_ planned: PlannedMember, header: MemberHeader) -> UnpackFailure.Rule? {
        for folder in planned.newFolders {
            if let failure = writer.makeFolder(folder) { return failure }
            members.append(UnpackedMember(path: folder.description, kind: .directory))
        }
        let kind: UnpackedMember.Kind
        switch planned.kind {
        case .directory:
            if let failure = writer.makeFolder(planned.path) { return failure }
            kind = .directory
        case .symlink(let target):
            if let failure = writer.makeSymlink(planned.path, to: target) { return failure }
            kind = .symlink(target: target)
        case .hardLink(let existing):
            guard let index = fileMembers[DestinationKey(existing.description)] else {
                return .hardLinkTarget(existing.description)
            }
            if let failure = writer.makeHardLink(planned.path, to: existing) { return failure }
            kind = members[index].kind
        case .file(let executable):
            let reader = reader
            let written = writer.writeFile(planned.path, executable: executable, header: header) {
                reader.nextBlock().mapError { readingRule($0) }
            }
            switch written {
            case .success(let file): kind = .file(size: file.size, executable: executable, digest: file.digest)
            case .failure(let failure): return failure
            }
        }
        if case .file = kind { fileMembers[DestinationKey(planned.path.description)] = members.count }
        members.append(UnpackedMember(path: planned.path.description, kind: kind))
        return nil
    }

    /// Why the archive could not be opened: its bytes are not the format named (or any format haul reads), or
    /// they ended first.
    private func openingRule(_ failure: ArchiveReader.Failure) -> UnpackFailure.Rule {
        if failure.errno == ENOMEM { return .outOfMemory }
        if reader.input.bytesRead == 0 { return .truncated("there are no bytes") }
        if failure.isUnrecognizedFormat {
            let reason = failure.message ?? "Unrecognized archive format"
            return rules.format.map { .notFormat($0, reason: reason) } ?? .unrecognized(reason)
        }
        return readingRule(failure)
    }

    /// Why reading stopped: a 7z that cannot be streamed, bytes that ended first, or libarchive's reason.
    private func readingRule(_ failure: ArchiveReader.Failure) -> UnpackFailure.Rule {
        if failure.errno == ENOMEM { return .outOfMemory }
        if !reader.input.canSeek && reader.foundSevenZip { return .cannotStream(.sevenZip) }
        return reader.input.isExhausted ? .truncated(failure.message) : .unreadable(failure.message)
    }

    private func fail(_ rule: UnpackFailure.Rule, _ header: MemberHeader) -> UnpackFailure {
        fail(rule, member: String(decoding: header.name, as: UTF8.self))
    }

    private func fail(_ rule: UnpackFailure.Rule, member: String?) -> UnpackFailure {
        UnpackFailure(archive: archive, member: member, rule: rule)
    }
}
