import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Reads and replaces a manifest for `haul add`. A manifest is the user's own file, often under version control:
/// after a crash or a full disk it must be the old text or the new, never half of one, and it keeps its mode.
///
/// Only a regular file is a manifest `add` edits (or a missing one, which it creates), whatever a symlink leads
/// to: a device, a FIFO or a socket is refused before anything is opened for writing, and never replaced by a
/// file (as root, `--manifest /dev/null` would otherwise replace `/dev/null`).
package enum ManifestFile {
    /// The whole file; nil when it does not exist. Opened without waiting (`O_NONBLOCK`): a FIFO would otherwise
    /// hold the open until some writer came, deaf to SIGTERM.
    package static func read(_ path: String) throws(StoreError) -> [UInt8]? {
        switch FileSystem.status(path) {
        case .success(let info): try requireRegular(info, path: path)
        case .failure(Errno(ENOENT)): return nil
        case .failure(let failure): throw StoreError(operation: .read, path: path, errno: failure.code)
        }
        let descriptor = path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            throw StoreError(operation: .read, path: path, errno: code)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw StoreError(operation: .read, path: path, errno: errno) }
        try requireRegular(info, path: path)  // it may have been replaced since it was looked at
        switch BoundedRead.all(descriptor, limit: ManifestLoader.maximumBytes, sizeHint: Int(info.st_size)) {
        case .success(let bytes): return bytes
        case .failure(.tooLarge):
            throw StoreError(operation: .read, path: path, errno: EFBIG, problem: .manifestTooLarge)
        case .failure(.system(let code)): throw StoreError(operation: .read, path: path, errno: code)
        }
    }

    private static func requireRegular(_ info: stat, path: String) throws(StoreError) {
        guard info.st_mode & S_IFMT != S_IFREG else { return }
        throw StoreError(operation: .edit, path: path, errno: EINVAL, problem: .notEditable(FileKind(info)))
    }

    /// Writes a temporary file beside the target, flushes it, gives it the target's mode (a new file gets
    /// 0666 less the umask, as any editor's would), and renames it over the target, then flushes the directory.
    /// A symlink is followed, so the link stays a link and its target gets the new text.
    ///
    /// The temporary file is `.<name>.haul-<random>`, held under a `LifetimeLock` until it is renamed: those that a
    /// killed `add` left beside the target are removed first, and a live one of another `add` is never touched.
    package static func replace(_ path: String, with bytes: [UInt8]) throws(StoreError) {
        var target = path
        if case .success(let info) = FileSystem.linkStatus(path), FileKind(mode: info.st_mode) == .symlink {
            switch FileSystem.realPath(path) {
            case .success(let resolved): target = resolved
            case .failure(let failure):
                throw StoreError(operation: .resolveSymlink, path: path, errno: failure.code)
            }
        }
        var existing: stat?
        switch FileSystem.status(target) {
        case .success(let info): existing = info
        case .failure(Errno(ENOENT)): existing = nil
        case .failure(let failure): throw StoreError(operation: .inspect, path: path, errno: failure.code)
        }
        if let existing { try requireRegular(existing, path: path) }

        let directoryPath = FileSystem.parentOf(target)
        let name =
            target.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(target[target.utf8.index(after: $0)...]) }
            ?? target
        let directory: DirectoryHandle
        do { directory = try DirectoryHandle.opening(directoryPath) } catch {
            throw StoreError(operation: .createTemporaryFileBeside, path: path, errno: error.errno)
        }
        removeAbandonedTemporaries(beside: name, in: directory)
        let (temporary, alive) = try createTemporary(in: directory, beside: name, path: path)
        var renamed = false
        defer { if !renamed { directory.remove(temporary) } }
        if let existing {
            // Ownership is kept when allowed (root editing someone's file); failing that, the file is ours.
            _ = fchown(alive.descriptor, existing.st_uid, existing.st_gid)
            guard fchmod(alive.descriptor, existing.st_mode & 0o7777) == 0 else {
                throw StoreError(operation: .setModeOf, path: directory.displayPath(of: temporary), errno: errno)
            }
        }
        try writeAll(bytes, to: alive.descriptor, path: directory.displayPath(of: temporary))
        guard fsync(alive.descriptor) == 0 else {
            throw StoreError(operation: .flush, path: directory.displayPath(of: temporary), errno: errno)
        }
        if let failure = directory.rename(temporary, to: name) {
            throw StoreError(operation: .replace, path: path, errno: failure.errno)
        }
        renamed = true
        // The new text is in place; a failed directory flush only weakens durability across a power cut.
        _ = directory.synchronize()
    }

    /// The temporary files of `add`s that were killed while writing `name`'s new text.
    static func removeAbandonedTemporaries(beside name: String, in directory: DirectoryHandle) {
        for candidate in directory.names() ?? [] where isTemporaryName(candidate, beside: name) {
            LifetimeLock.whenAbandoned(candidate, in: directory) { directory.remove(candidate) }
        }
    }

    /// `.<name>.haul-` and the base-36 digits of a random 64-bit number.
    static func isTemporaryName(_ candidate: String, beside name: String) -> Bool {
        let prefix = temporaryPrefix(beside: name)
        guard candidate.utf8.count > prefix.utf8.count, candidate.hasPrefix(prefix) else { return false }
        let digits = candidate.utf8.dropFirst(prefix.utf8.count)
        return digits.count <= 13 && digits.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) }
    }

    private static func temporaryPrefix(beside name: String) -> String { "." + name + ".haul-" }

    /// A new temporary name, made with O_EXCL (so that a concurrent writer or a leftover never shares the file)
    /// and locked for this process's lifetime.
    private static func createTemporary(
        in directory: DirectoryHandle, beside name: String,
        path: String
    ) throws(StoreError) -> (String, LifetimeLock) {
        for _ in 0..<16 {
            let candidate = temporaryPrefix(beside: name) + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            switch directory.openFile(candidate, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o666) {
            case .success(let descriptor):
                // nil: swept in the instant before its lock was held; another name is tried.
                if let alive = LifetimeLock.claim(descriptor) { return (candidate, alive) }
            case .failure(let failure) where failure.errno == EEXIST:
                continue
            case .failure(let failure):
                throw StoreError(operation: .createTemporaryFileBeside, path: path, errno: failure.errno)
            }
        }
        throw StoreError(operation: .createTemporaryFileBeside, path: path, errno: EEXIST)
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32, path: String) throws(StoreError) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { raw in
                write(descriptor, raw.baseAddress.map { $0 + offset }, raw.count - offset)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw StoreError(operation: .write, path: path, errno: errno)
            }
            offset += count
        }
    }
}
