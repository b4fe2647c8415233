import HaulFailures
import HaulManifest

/// One member's header as the archive gives it, as a value: everything the rules judge.
struct MemberHeader: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case file
        case directory
        /// `target`: the link's text as the archive holds it.
        case symlink(target: [UInt8])
        /// A second name for an earlier member (tar); `target` is that member's name as the archive spells it.
        case hardLink(target: [UInt8])
        /// A device node, FIFO, socket or unknown type.
        case special(FileKind)
    }

    /// The name's bytes as the archive holds them.
    var name: [UInt8]
    var kind: Kind
    /// The permission bits; only whether any execute bit is set is kept.
    var permissions: UInt32 = 0o644
    /// The size the header states, nil when it states none (a zip member streamed with a data descriptor).
    var declaredSize: Int64? = nil
    /// A sparse member: its holes are read as zeros up to `declaredSize`.
    var isSparse = false
}

/// What the unpacker does with one member.
enum MemberVerdict: Sendable, Equatable {
    /// Not unpacked: stripped away, left out by the selection, or the tree's root folder itself.
    case skip
    /// A folder member for a folder the tree already has: nothing to do.
    case present
    case write(PlannedMember)
    case refuse(UnpackFailure.Rule)
}

/// A member the rules allow, with where it goes and what is made for it.
struct PlannedMember: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case file(executable: Bool)
        case directory
        case symlink(target: String)
        /// A second name of the regular file at `to`, which an earlier member wrote.
        case hardLink(to: DestinationPath)
    }

    let path: DestinationPath
    let kind: Kind
    /// Folders made first, outermost first: the ancestors of `path` no member has made yet.
    let newFolders: [DestinationPath]
}

/// What the tree holds so far, by path (compared by bytes): all the rules need to know of earlier members.
struct TreeLedger: Sendable {
    enum Entry: Sendable, Equatable { case folder, file, symlink }

    private var entries: [DestinationKey: Entry] = [:]

    subscript(path: DestinationPath) -> Entry? { self[path.description] }

    /// By the normalized path's text (`a/b`).
    subscript(path: String) -> Entry? { entries[DestinationKey(path)] }

    /// `member` and the folders made for it are in the tree.
    mutating func record(_ member: PlannedMember) {
        for folder in member.newFolders { entries[DestinationKey(folder.description)] = .folder }
        let entry: Entry =
            switch member.kind {
            case .file, .hardLink: .file
            case .directory: .folder
            case .symlink: .symlink
            }
        entries[DestinationKey(member.path.description)] = entry
    }
}

/// The rules every member is held to, decided from its header and the ledger alone (no I/O), so that each is
/// tested from values.
///
/// - Names, for every member, kept or not: valid UTF-8, no NUL, not absolute, no `..` component. An archive that
///   holds such a name is hostile whether or not this entry wants that member.
/// - `strip` then drops leading components, counted as `tar --strip-components` counts them (`.` is one, `//` is
///   one separator); a member with no more components than `strip` is skipped. `selects` sees what remains,
///   normalized (`a/b`, no `./`, no trailing `/`); a member it declines is skipped.
/// - What is kept must fit haul's path limits (`DestinationPath`), be a file, folder, symlink or hard link, and
///   not go through a symlink or file an earlier member made. A path already in the tree is a duplicate, unless
///   folder and folder. Symlinks and hard links must stay in the tree (see `symlinkTarget` and `hardLinkTarget`).
/// - Folders: a folder member is made when `selects` keeps it, even if every member inside it is left out; any
///   other folder only as an ancestor of a kept member.
struct MemberRules: Sendable {
    let strip: Int
    let selects: @Sendable (String) -> Bool

    init(strip: Int, selects: @escaping @Sendable (String) -> Bool) {
        self.strip = max(0, strip)
        self.selects = selects
    }

    func judge(_ header: MemberHeader, in ledger: TreeLedger) -> MemberVerdict {
        let path: DestinationPath
        switch Self.destination(of: header.name, strip: strip) {
        case .skipped: return .skip
        case .refused(let rule): return .refuse(rule)
        case .root: return header.kind == .directory ? .skip : .refuse(.namesTheRoot)
        case .path(let found): path = found
        }
        guard selects(path.description) else { return .skip }

        let kind: PlannedMember.Kind
        switch header.kind {
        case .file: kind = .file(executable: header.permissions & 0o111 != 0)
        case .directory: kind = .directory
        case .special(let what): return .refuse(.special(what))
        case .symlink(let target):
            switch Self.symlinkTarget(target, of: path) {
            case .success(let text): kind = .symlink(target: text)
            case .failure(let rule): return .refuse(rule)
            }
        case .hardLink(let target):
            switch hardLinkTarget(target, in: ledger) {
            case .success(let existing): kind = .hardLink(to: existing)
            case .failure(let rule): return .refuse(rule)
            }
        }

        var newFolders: [DestinationPath] = []
        var ancestor = ""
        for component in path.parentComponents {
            ancestor = ancestor.isEmpty ? component : ancestor + "/" + component
            switch ledger[ancestor] {
            case nil:
                // A part of a valid path is one.
                guard let folder = DestinationPath(ancestor) else {
                    return .refuse(.nameTooLong(bytes: ancestor.utf8.count))
                }
                newFolders.append(folder)
            case .folder: continue
            case .symlink: return .refuse(.throughSymlink(ancestor))
            case .file: return .refuse(.throughNonFolder(ancestor))
            }
        }
        if let existing = ledger[path] {
            return existing == .folder && kind == .directory ? .present : .refuse(.duplicate)
        }
        return .write(PlannedMember(path: path, kind: kind, newFolders: newFolders))
    }

    /// Where a member name puts its member, after `strip`.
    enum Destination: Sendable, Equatable {
        case path(DestinationPath)
        /// Nothing is left but the tree's root (`./`).
        case root
        /// Fewer components than `strip`.
        case skipped
        case refused(UnpackFailure.Rule)
    }

    static func destination(of name: [UInt8], strip: Int) -> Destination {
        if name.contains(0) { return .refused(.containsNUL) }
        guard let text = String(validating: name, as: UTF8.self) else { return .refused(.invalidUTF8) }
        if name.first == UInt8(ascii: "/") { return .refused(.absolute) }
        let components = text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        if components.contains(where: { $0.elementsEqual("..".utf8) }) { return .refused(.parentComponent) }
        guard !components.isEmpty else { return .root }
        guard components.count > strip else { return .skipped }
        let kept = components.dropFirst(strip).filter { !$0.elementsEqual(".".utf8) }
        guard !kept.isEmpty else { return .root }
        if let path = DestinationPath(kept.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")) {
            return .path(path)
        }
        // DestinationPath refuses only what is over its limits once NUL, `/` and `..` are ruled out: say which.
        if let long = kept.first(where: { $0.count > DestinationPath.maximumNameBytes }) {
            return .refused(.componentTooLong(component: String(decoding: long, as: UTF8.self), bytes: long.count))
        }
        return .refused(.nameTooLong(bytes: kept.reduce(kept.count - 1) { $0 + $1.count }))
    }

    /// A symlink's target, if it stays in the tree whatever else the archive makes: relative, and every `..`
    /// before the first name, no more of them than the link's folder is deep. A `..` after a name (`a/../b`) is
    /// refused even when it would resolve inside lexically, because `a` may be (or later become) a symlink
    /// itself, and the kernel takes `..` from where `a` leads. With `..` only in front, each step up starts from
    /// the link's own folder, which is a real folder of the tree (no member goes through a symlink), and every
    /// symlink followed on the way down is held to the same rule.
    static func symlinkTarget(_ target: [UInt8], of path: DestinationPath) -> Result<String, UnpackFailure.Rule> {
        guard !target.isEmpty else { return .failure(.symlinkTargetInvalid(.empty)) }
        guard !target.contains(0), let text = String(validating: target, as: UTF8.self) else {
            return .failure(.symlinkTargetInvalid(.notUTF8))
        }
        guard target.count <= DestinationPath.maximumBytes else {
            return .failure(.symlinkTargetInvalid(.tooLong(bytes: target.count)))
        }
        if target.first == UInt8(ascii: "/") { return .failure(.symlinkTargetAbsolute(text)) }
        var climbs = 0, namesSeen = false
        for component in text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            if component.elementsEqual(".".utf8) { continue }
            if component.elementsEqual("..".utf8) {
                if namesSeen { return .failure(.symlinkTargetClimbsAfterName(text)) }
                climbs += 1
            } else {
                namesSeen = true
            }
        }
        return climbs < path.components.count ? .success(text) : .failure(.symlinkTargetOutside(text))
    }

    /// A hard link's target: its name, stripped as every name is, must be a regular file an earlier member wrote.
    func hardLinkTarget(_ target: [UInt8], in ledger: TreeLedger) -> Result<DestinationPath, UnpackFailure.Rule> {
        let shown = String(decoding: target, as: UTF8.self)
        guard case .path(let existing) = Self.destination(of: target, strip: strip), ledger[existing] == .file else {
            return .failure(.hardLinkTarget(shown))
        }
        return .success(existing)
    }
}
