import Glibc

/// haul's private area under root, `<root>/.haul/tmp/`, where downloads are written before they are verified.
///
/// Temporary files live here rather than beside their destinations (`a.csv.part`) so that a crash never leaves
/// a half-written file under a name the user or a glob might pick up, and so that one directory holds all the
/// leftovers to clean. Being under root keeps them on the destinations' filesystem, which rename(2) needs.
public final class StagingArea: Sendable {
    public let root: String
    public let directory: String
    /// Interrupted downloads of pinned files, named by their digest, kept for the next attempt to resume.
    public let partialDirectory: String

    public init(root: String) {
        self.root = FileSystem.normalizedRoot(root)
        self.directory = FileSystem.join(FileSystem.join(self.root, ".haul"), "tmp")
        self.partialDirectory = FileSystem.join(FileSystem.join(self.root, ".haul"), "partial")
    }

    /// Removes what crashed or interrupted runs left behind: every temporary file, and every partial whose name
    /// is not in `keptPartials` (partials of files the manifest still wants stay, with their metadata, to be
    /// resumed). Only safe while holding the root's `RunLock`: another run's live files would look the same.
    /// `keptPartials` is asked for only if there are partials at all (usually there are none, and naming the
    /// partial of each of 100,000 entries would cost more than the rest of the sweep).
    public func sweep(keepingPartials keptPartials: @autoclosure () -> Set<String>) {
        for name in FileSystem.entries(of: directory) { _ = unlink(directory + "/" + name) }
        let partials = FileSystem.entries(of: partialDirectory)
        guard !partials.isEmpty else { return }
        let kept = keptPartials()
        for name in partials {
            let base = name.hasSuffix(".meta") ? String(name.dropLast(5)) : name
            if !kept.contains(base) { _ = unlink(partialDirectory + "/" + name) }
        }
    }

    /// Only paths inside the staging directories are removed: the store never deletes anything else.
    public func discard(_ path: String) {
        guard path.hasPrefix(directory + "/") || path.hasPrefix(partialDirectory + "/") else { return }
        _ = path.withCString { unlink($0) }
    }

    /// Creates root and the private area up front, so that a run can fail once, clearly, before any transfer.
    public func prepare() throws(StoreError) {
        if let code = FileSystem.makeDirectories(root, mode: 0o755) {
            throw StoreError(operation: "create directory", path: root, errno: code)
        }
        try makePrivateDirectory(FileSystem.parentOf(directory))
        try makePrivateDirectory(directory)
        try makePrivateDirectory(partialDirectory)
    }

    /// A symlink here would send every download somewhere else: refuse rather than follow it. One found open to
    /// others is closed: temporary files carry their final mode before they are verified.
    private func makePrivateDirectory(_ path: String) throws(StoreError) {
        if let code = FileSystem.makeDirectory(path, mode: 0o700), code != EEXIST {
            throw StoreError(operation: "create directory", path: path, errno: code)
        }
        switch FileSystem.linkStatus(path) {
        case .success(let info) where FileKind(mode: info.st_mode) == .directory:
            if info.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
                throw StoreError(operation: "make private", path: path, errno: errno)
            }
            return
        case .success:
            throw StoreError(operation: "use", path: path, errno: ENOTDIR,
                             detail: "not a directory (haul keeps its temporary files there)")
        case .failure(let code):
            throw StoreError(operation: "inspect", path: path, errno: code)
        }
    }
}
