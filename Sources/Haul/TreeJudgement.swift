import HaulDigest
import HaulManifest
import HaulPlanner
import HaulStore

/// An `extract` entry's folder, judged against the records of what haul unpacked there, from a walk of it (readdir
/// and lstat of every node, as `find` does): no file is opened.
///
/// A member file is intact when its identity is the recorded one and was already old when recorded; a member
/// symlink, when its identity is the recorded one and its target the recorded target (its record's digest is the
/// target's SHA-256). A file or symlink no record names is the user's: never deleted, carried into a new tree when
/// the tree is unpacked again. Folders are the tree's shape, not its content: a folder the user added is neither a
/// change nor carried (it goes with the old tree when that is replaced, once emptied of the user's files).
struct TreeJudgement: Sendable {
    /// What the planner is told.
    var state: LocalState
    /// The user's files and symlinks in the folder (relative to it), carried into a new tree.
    var usersFiles: [String]
    /// Where the user's symlinks among them point: one that points where the new tree's member of its name does
    /// is that member, not carried.
    var usersLinks: [String: String] = [:]
    /// Member files whose identity does not vouch for them by itself (edited in the tick they were recorded, or
    /// `--rehash`): hashed, and compared with their records, before the tree is called intact (none when a change
    /// is known already: the tree is unpacked again whatever they hold).
    var unproven: [(path: String, record: StateRecord)]

    /// `members`: the records of this tree's members, by path relative to the folder. `trusts`: whether a record
    /// still vouches, unread, for a file whose identity is the one found now.
    static func judge(
        nodes: [TreeNode], members: [String: StateRecord],
        trusts: (StateRecord, FileIdentity) -> Bool
    ) -> TreeJudgement {
        var changed: [MemberChange] = []
        var seen = 0
        var usersFiles: [String] = []
        var usersLinks: [String: String] = [:]
        var unproven: [(path: String, record: StateRecord)] = []
        for node in nodes {
            let record = members[node.path]
            if record != nil { seen += 1 }
            switch node.kind {
            case .folder:
                if record != nil { changed.append(MemberChange(node.path, .replaced)) }
            case .file(let identity):
                guard let record else {
                    usersFiles.append(node.path)
                    continue
                }
                if record.identity.size != identity.size {
                    changed.append(MemberChange(node.path, .edited))
                } else if !trusts(record, identity) {
                    unproven.append((node.path, record))
                }
            case .symlink(let target, let identity):
                guard let record else {
                    usersFiles.append(node.path)
                    usersLinks[node.path] = target
                    continue
                }
                if record.identity != identity || record.digest != digest(ofTarget: target) {
                    changed.append(MemberChange(node.path, .edited))
                }
            case .other:
                if record != nil {
                    changed.append(MemberChange(node.path, .replaced))
                } else {
                    usersFiles.append(node.path)
                }
            }
        }
        if seen < members.count {
            let found = Set(nodes.lazy.map(\.path))
            changed += members.keys.filter { !found.contains($0) }.sorted().map { MemberChange($0, .missing) }
        }
        let from = members.values.lazy.compactMap { $0.origin?.unpacked }.first
        return TreeJudgement(
            state: .tree(from, changed: changed), usersFiles: usersFiles, usersLinks: usersLinks,
            unproven: changed.isEmpty ? unproven : [])
    }

    /// What a symlink member's record keeps as its digest: the SHA-256 of its target's bytes.
    static func digest(ofTarget target: String) -> Digest {
        StreamingHasher.digest(Array(target.utf8), algorithm: .sha256)
    }
}
