import CLinuxShims
import Glibc
import HaulFailures

/// An open directory that names are resolved in, one at a time, with the `*at` system calls.
///
/// A path is walked again by the kernel on every call, through whatever symlinks its components are at that
/// moment; a descriptor is the directory that was checked when it was opened, whatever happens to its path
/// afterwards. haul's own folder (`<root>/.haul` and what is in it) is only ever reached this way, so a symlink
/// planted there can never send a write, a rename or a deletion outside root.
///
/// Every name given to a method is one component (no `/`); a final symlink is never followed.
package final class DirectoryHandle: Sendable {
    package let descriptor: Int32
    /// The directory's path as the user would name it: for messages only, never for system calls.
    package let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close(descriptor) }

    /// Opens `path`, following symlinks on the way: for folders whose path the user chose (root, a scratch
    /// folder under `$TMPDIR`), where a symlink is theirs to have.
    package static func open(_ path: String) -> Result<DirectoryHandle, SystemError> {
        let descriptor = path.withCString { Glibc.open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else { return .failure(SystemError(errno: errno, path: path)) }
        return .success(DirectoryHandle(descriptor: descriptor, path: path))
    }

    /// The same, throwing: for callers that handle a folder that cannot be opened as any other error.
    package static func opening(_ path: String) throws(SystemError) -> DirectoryHandle {
        try open(path).get()
    }

    /// `name` in this directory, shown as the user would write it.
    package func displayPath(of name: String) -> String {
        path.hasSuffix("/") ? path + name : path + "/" + name
    }

    /// Opens the directory `name` in this one, refusing a symlink (`ELOOP`) or anything that is not a directory
    /// (`ENOTDIR`). With `creatingWithMode`, a missing one is made first.
    package func subdirectory(
        _ name: String, creatingWithMode mode: mode_t? = nil
    ) -> Result<DirectoryHandle, SystemError> {
        for _ in 0..<2 {
            let opened = name.withCString { openat(descriptor, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if opened >= 0 { return .success(DirectoryHandle(descriptor: opened, path: displayPath(of: name))) }
            let code = errno
            guard code == ENOENT, let mode else {
                return .failure(SystemError(errno: code, path: displayPath(of: name)))
            }
            // Another process may make it between the two calls: EEXIST is then as good as success.
            if name.withCString({ mkdirat(descriptor, $0, mode) }) != 0, errno != EEXIST {
                return .failure(SystemError(errno: errno, path: displayPath(of: name)))
            }
        }
        return .failure(SystemError(errno: ENOENT, path: displayPath(of: name)))
    }

    /// `lstat` of `name`.
    package func status(of name: String) -> Result<stat, SystemError> {
        var info = stat()
        let rc = name.withCString { fstatat(descriptor, $0, &info, AT_SYMLINK_NOFOLLOW) }
        return rc == 0 ? .success(info) : .failure(SystemError(errno: errno, path: displayPath(of: name)))
    }

    /// `open(2)` of `name`, never through a final symlink, closed on exec. The caller closes the descriptor.
    package func openFile(_ name: String, flags: Int32, mode: mode_t = 0o600) -> Result<Int32, SystemError> {
        while true {
            let opened = name.withCString { openat(descriptor, $0, flags | O_NOFOLLOW | O_CLOEXEC, mode) }
            if opened >= 0 { return .success(opened) }
            if errno == EINTR { continue }
            return .failure(SystemError(errno: errno, path: displayPath(of: name)))
        }
    }

    /// A new file `name` (which must not exist), open for reading and writing, with `mode` exactly, or 0600 without
    /// one. In haul's private folders a file may carry its final mode from the start, so that moving it into place
    /// needs no chmod. `hasMode`: the mode is exactly `mode` (`open` gives it narrowed by the umask and without the
    /// special bits: it is then set by descriptor). `umask`: the process's (`ProcessUmask`), nil when unknown.
    package func createFile(
        _ name: String, mode: UInt32?, umask: UInt32?
    ) -> Result<(descriptor: Int32, hasMode: Bool), SystemError> {
        let bits = mode ?? 0o600
        let descriptor: Int32
        switch openFile(name, flags: O_RDWR | O_CREAT | O_EXCL, mode: mode_t(bits & 0o777)) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return .failure(failure)
        }
        var hasMode = mode != nil
        if hasMode, bits & ~0o777 != 0 || umask.map({ bits & $0 != 0 }) ?? true {
            hasMode = fchmod(descriptor, mode_t(bits & 0o7777)) == 0
        }
        return .success((descriptor, hasMode))
    }

    /// Opens the regular file `name` for reading, or says what else is there: `O_NONBLOCK` so that a FIFO
    /// planted under the name cannot make the open wait forever.
    package func openRegularFileForReading(_ name: String) -> Result<Int32, SystemError> {
        let opened: Int32
        switch openFile(name, flags: O_RDONLY | O_NONBLOCK) {
        case .success(let descriptor): opened = descriptor
        case .failure(let failure): return .failure(failure)
        }
        var info = stat()
        guard fstat(opened, &info) == 0 else {
            let code = errno
            close(opened)
            return .failure(SystemError(errno: code, path: displayPath(of: name)))
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(opened)
            return .failure(SystemError(errno: EINVAL, path: displayPath(of: name), problem: .notARegularFile))
        }
        return .success(opened)
    }

    /// Removes the file `name` (not a directory); nil on success.
    @discardableResult
    package func remove(_ name: String) -> SystemError? {
        name.withCString { unlinkat(descriptor, $0, 0) } == 0
            ? nil : SystemError(errno: errno, path: displayPath(of: name))
    }

    /// `unlinkat(2)` of the directory `name`, which must be empty (`ENOTEMPTY` otherwise); nil on success.
    package func removeEmptyDirectory(_ name: String) -> SystemError? {
        name.withCString { unlinkat(descriptor, $0, AT_REMOVEDIR) } == 0
            ? nil : SystemError(errno: errno, path: displayPath(of: name))
    }

    /// `mkdirat(2)`: a new directory `name` (one already there, of any kind, is `EEXIST`), its mode narrowed by
    /// the umask; nil on success.
    package func makeDirectory(_ name: String, mode: mode_t) -> SystemError? {
        name.withCString { mkdirat(descriptor, $0, mode) } == 0
            ? nil : SystemError(errno: errno, path: displayPath(of: name))
    }

    /// `symlinkat(2)`: a new symlink `name` whose text is `target` (nothing is checked about it, nothing followed);
    /// nil on success.
    package func makeSymlink(_ name: String, to target: String) -> SystemError? {
        let rc = target.withCString { text in name.withCString { symlinkat(text, descriptor, $0) } }
        return rc == 0 ? nil : SystemError(errno: errno, path: displayPath(of: name))
    }

    /// `linkat(2)`: `name` becomes a second name of `existing` in `folder`. Without `AT_SYMLINK_FOLLOW`, a symlink
    /// there would be linked itself, never followed; nil on success.
    package func makeHardLink(_ name: String, to existing: String, in folder: DirectoryHandle) -> SystemError? {
        let rc = existing.withCString { old in name.withCString { linkat(folder.descriptor, old, descriptor, $0, 0) } }
        return rc == 0 ? nil : SystemError(errno: errno, path: displayPath(of: name))
    }

    /// `renameat(2)` of `name` to `newName` in `target` (this directory when nil); nil on success.
    package func rename(_ name: String, to newName: String, in target: DirectoryHandle? = nil) -> SystemError? {
        let destination = target ?? self
        let rc = name.withCString { old in newName.withCString { renameat(descriptor, old, destination.descriptor, $0) }
        }
        return rc == 0 ? nil : SystemError(errno: errno, path: destination.displayPath(of: newName))
    }

    /// `renameat2(2)` of `name` to `newName` in `target`, failing with `EEXIST` rather than replacing what is there;
    /// `EINVAL` where the file system does not take the flag (FUSE without rename2, some NFS).
    package func renameWithoutReplacing(_ name: String, to newName: String, in target: DirectoryHandle) -> SystemError?
    {
        renameTwo(name, to: newName, in: target, flags: haul_RENAME_NOREPLACE)
    }

    /// `renameat2(RENAME_EXCHANGE)`: `name` here and `otherName` in `target` swap places in one step, whatever they
    /// are (both must exist); `EINVAL` where the file system does not take the flag.
    package func exchange(_ name: String, with otherName: String, in target: DirectoryHandle) -> SystemError? {
        renameTwo(name, to: otherName, in: target, flags: haul_RENAME_EXCHANGE)
    }

    private func renameTwo(
        _ name: String, to newName: String, in target: DirectoryHandle, flags: UInt32
    ) -> SystemError? {
        let rc = name.withCString { old in
            newName.withCString { renameat2(descriptor, old, target.descriptor, $0, flags) }
        }
        return rc == 0 ? nil : SystemError(errno: errno, path: target.displayPath(of: newName))
    }

    /// `linkat(2)`: `newName` in `target` becomes one more name of the file `name` (a symlink is linked itself,
    /// never followed); `EEXIST` when `newName` is taken.
    package func link(_ name: String, as newName: String, in target: DirectoryHandle) -> SystemError? {
        let rc = name.withCString { old in newName.withCString { linkat(descriptor, old, target.descriptor, $0, 0) } }
        return rc == 0 ? nil : SystemError(errno: errno, path: target.displayPath(of: newName))
    }

    /// Makes `newName` in `target` a symlink with the very bytes of the symlink `name` here (`readlinkat`, then
    /// `symlinkat`: no text decoding on the way); `EEXIST` when `newName` is taken.
    package func copySymlink(_ name: String, as newName: String, in target: DirectoryHandle) -> SystemError? {
        switch linkTargetBytes(name) {
        case .failure(let failure):
            return failure
        case .success(let bytes):
            let cString = bytes.map { CChar(bitPattern: $0) } + [0]
            let rc = newName.withCString { symlinkat(cString, target.descriptor, $0) }
            return rc == 0 ? nil : SystemError(errno: errno, path: target.displayPath(of: newName))
        }
    }

    /// `fchmodat(2)`: the mode of `name` exactly, not narrowed by the umask.
    package func setMode(_ mode: mode_t, of name: String) -> SystemError? {
        name.withCString { fchmodat(descriptor, $0, mode, 0) } == 0
            ? nil : SystemError(errno: errno, path: displayPath(of: name))
    }

    /// The mode of this directory itself.
    package func setOwnMode(_ mode: mode_t) -> SystemError? {
        fchmod(descriptor, mode) == 0 ? nil : SystemError(errno: errno, path: path)
    }

    /// `fsync(2)` of the directory: its entries (a rename, a new file) survive a crash only once it returns.
    package func synchronize() -> SystemError? {
        fsync(descriptor) == 0 ? nil : SystemError(errno: errno, path: path)
    }

    /// The text of the symlink `name`, for messages.
    package func linkTarget(_ name: String) -> String? {
        guard case .success(let target) = linkTargetBytes(name) else { return nil }
        return String(decoding: target, as: UTF8.self)
    }

    /// The target of the symlink `name`, byte for byte (`readlinkat(2)`; Linux holds at most `PATH_MAX - 1` bytes).
    package func linkTargetBytes(_ name: String) -> Result<[UInt8], SystemError> {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = name.withCString { readlinkat(descriptor, $0, &buffer, buffer.count - 1) }
        guard count >= 0 else { return .failure(SystemError(errno: errno, path: displayPath(of: name))) }
        return .success(Array(buffer[..<count]))
    }

    /// The names in this directory but `.` and `..`; nil when it cannot be listed.
    package func names() -> [String]? {
        var names: [String] = []
        let failure = forEachName { names.append(String(decoding: $0, as: UTF8.self)) }
        return failure == nil ? names : nil
    }

    /// Calls `body` with the bytes of each name in this directory but `.` and `..`, in the order the file system
    /// lists them (`getdents64` through `readdir`); nil when the whole listing was read.
    package func forEachName(_ body: (UnsafeBufferPointer<UInt8>) -> Void) -> SystemError? {
        Self.forEachName(inFolder: descriptor, shownAs: path, body)
    }

    /// `forEachName` of any open folder (one a walk holds by its descriptor alone).
    package static func forEachName(
        inFolder descriptor: Int32, shownAs path: String,
        _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) -> SystemError? {
        forEachEntry(inFolder: descriptor, shownAs: path) { name, _ in body(name) }
    }

    /// `forEachName`, with each entry's type as the listing gives it (`DT_REG`, `DT_DIR`, …; `DT_UNKNOWN` where the
    /// file system does not say, and then only an `lstat` tells).
    package func forEachEntry(_ body: (_ name: UnsafeBufferPointer<UInt8>, _ type: UInt8) -> Void) -> SystemError? {
        Self.forEachEntry(inFolder: descriptor, shownAs: path, body)
    }

    private static func forEachEntry(
        inFolder descriptor: Int32, shownAs path: String,
        _ body: (_ name: UnsafeBufferPointer<UInt8>, _ type: UInt8) -> Void
    ) -> SystemError? {
        // fdopendir takes the descriptor over: give it a copy, positioned at the start.
        let copy = dup(descriptor)
        guard copy >= 0 else { return SystemError(errno: errno, path: path) }
        guard let stream = fdopendir(copy) else {
            let code = errno
            close(copy)
            return SystemError(errno: code, path: path)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        while true {
            errno = 0
            guard let entry = readdir(stream) else { return errno == 0 ? nil : SystemError(errno: errno, path: path) }
            let type = entry.pointee.d_type
            withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let name = UnsafeBufferPointer(rebasing: raw.assumingMemoryBound(to: UInt8.self).prefix { $0 != 0 })
                let dots = name.count <= 2 && name.allSatisfy { $0 == UInt8(ascii: ".") }
                if !dots { body(name, type) }
            }
        }
    }
}

/// The same open folder (the same descriptor held), not merely the same path.
extension DirectoryHandle: Equatable {
    package static func == (lhs: DirectoryHandle, rhs: DirectoryHandle) -> Bool { lhs === rhs }
}

extension FileKind {
    package init(_ info: stat) { self.init(mode: info.st_mode) }

    /// From a mode's file-type bits (`S_IFMT`), as `stat` or an archive's header gives them.
    package init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symlink
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        default: self = .unknown
        }
    }
}
