import HaulManifest

/// Refusals decided from the manifest and the flags alone, before anything is observed or fetched. Each is
/// a diagnostic naming the file (and the entry, with its line and column), and the run exits 3.
package enum RunPolicy {
    package static func violations(
        _ manifest: Manifest, requireChecksums: Bool, prune: Bool, force: Bool
    ) -> [Diagnostic] {
        var found: [Diagnostic] = []
        if requireChecksums {
            // CI's guard: an unpinned entry is whatever its server sends today. An entry a signed list pins
            // (`from:`) is pinned: the sync refuses it whenever the list does not check out.
            for entry in manifest.files where !entry.isPinned && entry.listPin == nil {
                // `add --update` pins an unpinned entry too (an archive's checksum and its tree), in place.
                let what = entry.extract == nil ? "its checksum" : "the archive's checksum and its tree"
                let advice =
                    "`\(CommandHint.update(entry.destination.description, manifest: manifest.sourcePath))` "
                    + "fetches it and writes \(what) into the manifest"
                found.append(
                    Diagnostic(
                        severity: .error, file: manifest.sourcePath, location: entry.location,
                        keyPath: "files[\(entry.index)]",
                        message: "\(entry.destination) has no checksum, and --require-checksums is set "
                            + "(\(advice))"))
            }
        }
        if prune && manifest.files.isEmpty && !force {
            // Most likely a manifest emptied by mistake (a bad merge, a failed template): it would delete every
            // file this manifest wrote.
            found.append(
                Diagnostic(
                    severity: .error, file: manifest.sourcePath, location: nil, keyPath: "files",
                    message: "is empty and pruning is on, which would delete every file this manifest "
                        + "synced under \(manifest.root); pass --force to do that"))
        }
        return found
    }
}
