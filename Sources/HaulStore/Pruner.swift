import Glibc
import HaulManifest

/// Deletes destinations a manifest no longer lists. The planner has already decided that each one is still
/// exactly what haul wrote; the pruner checks, right before unlinking, that the file is still the one that was
/// observed (same identity), so a file the user touched in the meantime survives.
public struct Pruner: Sendable {
    public let root: String
    /// Resolved once: every deletion checks its parents against it.
    private let realRoot: String

    public init(root: String) {
        self.root = FileSystem.normalizedRoot(root)
        if case .success(let real) = FileSystem.realPath(self.root) { realRoot = real } else { realRoot = self.root }
    }

    /// Removes `destination` if its identity is still `expected`, then every parent directory this leaves empty,
    /// up to (not including) root. A directory with anything in it stays: rmdir(2) only removes empty ones.
    public func delete(_ destination: DestinationPath, expected: FileIdentity) -> Result<Void, StoreError> {
        var parent = ParentResolver(root: root, realRoot: realRoot, remembersFailures: false)
        guard case .directory(let directory) = parent.resolve(destination.parentComponents, create: false) else {
            return .failure(StoreError(operation: "delete", path: destination.description, errno: 0,
                                       detail: "its parent directory changed since it was observed"))
        }
        let path = FileSystem.join(directory, destination.fileName)
        guard FileIdentity.of(path: path) == expected else {
            return .failure(StoreError(operation: "delete", path: destination.description, errno: 0,
                                       detail: "it changed since it was observed; kept"))
        }
        guard unlink(path) == 0 else { return .failure(StoreError(operation: "delete", path: destination.description, errno: errno)) }
        var components = destination.parentComponents
        while !components.isEmpty, components.first != ".haul" {
            let emptied = FileSystem.join(root, components.joined(separator: "/"))
            guard rmdir(emptied) == 0 else { break }
            components = components.dropLast()
        }
        if let code = FileSystem.syncDirectory(directory), code != ENOENT {
            return .failure(StoreError(operation: "sync the directory of", path: destination.description, errno: code))
        }
        return .success(())
    }
}
