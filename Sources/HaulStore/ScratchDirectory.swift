import Glibc
import HaulFailures
import HaulFileSystem

/// A private directory outside any root, for what `haul add` downloads until it is measured and thrown away or put
/// in place: mode 0700 under `$TMPDIR`, so nobody else reads the bytes meanwhile.
///
/// A killed `add` cannot remove its folder, so each holds a `lock` file (`LifetimeLock`) for as long as it lives,
/// and making a folder first removes every folder of the same prefix whose maker is gone: what a SIGKILL left is
/// gone by the next `add`, and a folder in use is never touched.
package struct ScratchDirectory: Sendable {
    package let path: String
    /// The folder, held open from the moment it was made.
    package let folder: DirectoryHandle
    /// Held until the value (and every copy) goes away: the folder's maker is alive.
    private let alive: LifetimeLock

    /// The file inside whose lock says the folder is in use.
    static let lockName = "lock"

    /// `$TMPDIR/<prefix>.XXXXXX` (`/tmp` when TMPDIR is unset or empty).
    package static func make(prefix: String) throws(StoreError) -> ScratchDirectory {
        var base = getenv("TMPDIR").map { String(cString: $0) } ?? ""
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        if base.isEmpty { base = "/tmp" }
        removeAbandoned(in: base, prefix: prefix)
        // Another `add` sweeping at this very moment may take a folder made here before its lock is held: then
        // it is made again.
        for _ in 0..<8 {
            var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { buffer in
                buffer.baseAddress.flatMap { mkdtemp($0) } != nil
            }
            guard made else { throw StoreError(operation: .createTemporaryDirectory, path: base, errno: errno) }
            let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let folder: DirectoryHandle
            switch DirectoryHandle.open(path) {
            case .success(let opened): folder = opened
            case .failure(let failure):
                _ = rmdir(path)
                throw StoreError(operation: .open, path: path, errno: failure.errno)
            }
            switch folder.openFile(lockName, flags: O_RDWR | O_CREAT | O_EXCL) {
            case .success(let descriptor):
                if let alive = LifetimeLock.claim(descriptor) {
                    return ScratchDirectory(path: path, folder: folder, alive: alive)
                }
            case .failure(let failure) where failure.errno != ENOENT:
                _ = rmdir(path)
                throw StoreError(operation: .create, path: failure.path, errno: failure.errno)
            case .failure:
                break  // the folder was swept before its lock existed
            }
            empty(folder)
            _ = rmdir(path)
        }
        throw StoreError(operation: .createTemporaryDirectory, path: base, errno: EAGAIN)
    }

    /// Whatever was left in it (a measured file, a partial one after a failure, folders of kept files), then the
    /// directory.
    package func remove() {
        Self.empty(folder)
        _ = rmdir(path)
    }

    /// Removes the folders `<prefix>.XXXXXX` in `base` that this user made and whose maker is gone (their lock is
    /// free). A folder without a lock file is left: its maker may be about to make one.
    static func removeAbandoned(in base: String, prefix: String) {
        guard case .success(let parent) = DirectoryHandle.open(base) else { return }
        for name in parent.names() ?? [] where isScratchName(name, prefix: prefix) {
            guard case .success(let folder) = parent.subdirectory(name) else { continue }
            LifetimeLock.whenAbandoned(lockName, in: folder, ownedByUs: true) {
                empty(folder)
                _ = parent.removeEmptyDirectory(name)
            }
        }
    }

    /// `<prefix>.` and the six characters `mkdtemp` puts in place of `XXXXXX`.
    static func isScratchName(_ name: String, prefix: String) -> Bool {
        let suffix = name.utf8.dropFirst(prefix.utf8.count + 1)
        return name.utf8.count == prefix.utf8.count + 7 && name.hasPrefix(prefix + ".")
            && suffix.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0)
            }
    }

    private static func empty(_ folder: DirectoryHandle) {
        for name in folder.names() ?? [] {
            if case .success(let info) = folder.status(of: name), info.st_mode & S_IFMT == S_IFDIR,
                case .success(let inner) = folder.subdirectory(name)
            {
                empty(inner)
                _ = folder.removeEmptyDirectory(name)
            } else {
                folder.remove(name)
            }
        }
    }
}
