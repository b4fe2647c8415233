import Glibc
import HaulFileSystem

/// haul's staging folders under root: `<root>/.haul/tmp/`, where downloads are written before they are verified,
/// and `<root>/.haul/partial/`, where interrupted downloads of pinned files wait to be resumed.
///
/// Temporary files live here rather than beside their destinations (`a.csv.part`) so that a crash never leaves
/// a half-written file under a name the user or a glob might pick up, and so that one directory holds all the
/// leftovers to clean. Being under root keeps them on the destinations' filesystem, which rename(2) needs.
/// Both folders are held open (see `PrivateArea`): nothing here is ever reached through a path.
package final class StagingArea: Sendable {
    package let temporary: DirectoryHandle
    package let partial: DirectoryHandle

    /// Creates the folders as needed, so that a run can fail once, clearly, before any transfer.
    package init(area: PrivateArea) throws(StoreError) {
        try area.makePrivate()
        temporary = try area.privateFolder(.temporary)
        partial = try area.privateFolder(.partial)
    }

    /// Removes what crashed or interrupted runs left behind: every temporary file, and every partial whose name
    /// is not in `keptPartials` (partials of files the manifest still wants stay, with their metadata, to be
    /// resumed). Only names that `isOwnName` says haul makes are touched: a file someone else put there stays.
    /// Only safe while holding the root's `RunLock`: another run's live files would look the same.
    /// `keptPartials` is asked for only if there are partials at all (usually there are none, and naming the
    /// partial of each of 100,000 entries would cost more than the rest of the sweep).
    package func sweep(keepingPartials keptPartials: @autoclosure () -> Set<String>, isOwnName: (String) -> Bool) {
        Self.removeOwnFiles(in: temporary, isOwnName: isOwnName)
        let partials = (partial.names() ?? []).filter(isOwnName)
        guard !partials.isEmpty else { return }
        let kept = keptPartials()
        for name in partials where !kept.contains(Self.partialName(of: name)) { partial.remove(name) }
    }

    /// The same when nothing will be fetched, so no partial is wanted: without making folders that are not there.
    package static func sweepLeftovers(in area: PrivateArea, isOwnName: (String) -> Bool) {
        for member in [PrivateArea.Member.temporary, .partial] {
            guard case .success(let folder) = area.folder.subdirectory(member.rawValue) else { continue }
            removeOwnFiles(in: folder, isOwnName: isOwnName)
        }
    }

    private static func removeOwnFiles(in folder: DirectoryHandle, isOwnName: (String) -> Bool) {
        for name in folder.names() ?? [] where isOwnName(name) { folder.remove(name) }
    }

    /// The partial a name belongs to: itself, or the partial its metadata (or metadata being written) describes.
    private static func partialName(of name: String) -> String {
        for suffix in [".meta.new", ".meta"] where name.hasSuffix(suffix) { return String(name.dropLast(suffix.count)) }
        return name
    }

    /// A temporary file that will not be committed.
    package func discard(_ name: String) {
        temporary.remove(name)
    }
}
