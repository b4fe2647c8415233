import Glibc

/// Reads and replaces a manifest for `haul add`. A manifest is the user's own file, often under version control:
/// after a crash or a full disk it must be the old text or the new, never half of one, and it keeps its mode.
package enum ManifestFile {
    /// The whole file; nil when it does not exist.
    package static func read(_ path: String) throws(StoreError) -> [UInt8]? {
        let descriptor = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            throw StoreError(operation: "read", path: path, errno: code)
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError(operation: "read", path: path, errno: errno)
            }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// Writes a temporary file beside the target, flushes it, gives it the target's mode (a new file gets
    /// 0666 less the umask, as any editor's would), and renames it over the target, then flushes the directory.
    /// A symlink is followed, so the link stays a link and its target gets the new text.
    package static func replace(_ path: String, with bytes: [UInt8]) throws(StoreError) {
        var target = path
        if case .success(let info) = FileSystem.linkStatus(path), FileKind(mode: info.st_mode) == .symlink {
            switch FileSystem.realPath(path) {
            case .success(let resolved): target = resolved
            case .failure(let code): throw StoreError(operation: "resolve the symlink", path: path, errno: code)
            }
        }
        var existing: stat?
        switch FileSystem.status(target) {
        case .success(let info): existing = info
        case .failure(ENOENT): existing = nil
        case .failure(let code): throw StoreError(operation: "inspect", path: path, errno: code)
        }

        let directory = FileSystem.parentOf(target)
        let name = target.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(target[target.utf8.index(after: $0)...]) } ?? target
        let (temporary, descriptor) = try createTemporary(in: directory, beside: name, path: path)
        var written = false
        defer { if !written { _ = temporary.withCString { unlink($0) } } }
        do {
            defer { close(descriptor) }
            if let existing {
                // Ownership is kept when allowed (root editing someone's file); failing that, the file is ours.
                _ = fchown(descriptor, existing.st_uid, existing.st_gid)
                guard fchmod(descriptor, existing.st_mode & 0o7777) == 0 else {
                    throw StoreError(operation: "set the mode of", path: temporary, errno: errno)
                }
            }
            try writeAll(bytes, to: descriptor, path: temporary)
            guard fsync(descriptor) == 0 else { throw StoreError(operation: "flush", path: temporary, errno: errno) }
        }
        guard rename(temporary, target) == 0 else { throw StoreError(operation: "replace", path: path, errno: errno) }
        written = true
        // The new text is in place; a failed directory flush only weakens durability across a power cut.
        _ = FileSystem.syncDirectory(directory)
    }

    /// `.<name>.haul-<random>` with O_EXCL, so that a concurrent writer or a leftover never shares the file.
    private static func createTemporary(in directory: String, beside name: String,
                                        path: String) throws(StoreError) -> (String, Int32) {
        for _ in 0..<16 {
            let candidate = directory + "/." + name + ".haul-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let descriptor = candidate.withCString { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666) }
            if descriptor >= 0 { return (candidate, descriptor) }
            if errno != EEXIST { throw StoreError(operation: "create a temporary file beside", path: path, errno: errno) }
        }
        throw StoreError(operation: "create a temporary file beside", path: path, errno: EEXIST)
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32, path: String) throws(StoreError) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { raw in
                write(descriptor, raw.baseAddress.map { $0 + offset }, raw.count - offset)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError(operation: "write", path: path, errno: errno)
            }
            offset += count
        }
    }
}
