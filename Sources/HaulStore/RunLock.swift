import Glibc
import HaulFileSystem

/// One sync at a time per root: an exclusive `flock` on `<root>/.haul/lock`, held for the life of the process.
///
/// A kernel lock rather than a pid file, so that it is released when its holder dies however it dies (SIGKILL
/// included) and a stale file never blocks anyone. The file's content only names the holder for the message of
/// whoever finds the root busy.
package final class RunLock: Sendable {
    private let descriptor: Int32

    package enum Failure: Error, Sendable, CustomStringConvertible {
        /// Another process holds the lock; `holder` is what it wrote about itself.
        case busy(root: String, holder: String)
        case system(StoreError)

        package var description: String {
            switch self {
            case .busy(let root, let holder):
                "another haul is syncing \"\(root)\" (\(holder)); wait for it, or run with --wait"
            case .system(let error):
                error.description
            }
        }
    }

    /// - Parameters:
    ///   - area: the root's private folder, where the lock file lives.
    ///   - wait: block until the holder is done instead of failing at once.
    ///   - holder: a line naming this process for others' messages (pid, command).
    package init(area: PrivateArea, wait: Bool, holder: String) throws(Failure) {
        let path = area.folder.displayPath(of: PrivateArea.Member.lock.rawValue)
        let name = PrivateArea.Member.lock.rawValue
        var descriptor: Int32
        var writable = true
        switch area.folder.openFile(name, flags: O_RDWR | O_CREAT | O_NONBLOCK) {
        case .success(let opened): descriptor = opened
        case .failure(let failure) where failure.errno == EROFS:
            // A read-only root: flock(2) needs no write access, so the lock still excludes a run that reaches the
            // same files through a writable mount; only the holder line is left out.
            switch area.folder.openFile(name, flags: O_RDONLY | O_NONBLOCK) {
            case .success(let opened): descriptor = opened
            case .failure(let failure): throw .system(StoreError(operation: "open", path: path, errno: failure.errno))
            }
            writable = false
        case .failure(let failure): throw .system(StoreError(operation: "open", path: path, errno: failure.errno))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw .system(StoreError(operation: "use", path: path, errno: EINVAL, detail: "not a regular file"))
        }
        while flock(descriptor, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0 {
            let code = errno
            if code == EINTR { continue }
            defer { close(descriptor) }
            if code == EWOULDBLOCK { throw .busy(root: area.root, holder: Self.readHolder(descriptor)) }
            throw .system(StoreError(operation: "lock", path: path, errno: code))
        }
        self.descriptor = descriptor
        guard writable else { return }
        let line = Array((holder + "\n").utf8)
        _ = ftruncate(descriptor, 0)
        _ = pwrite(descriptor, line, line.count, 0)
    }

    deinit { close(descriptor) }  // closing releases the lock

    private static func readHolder(_ descriptor: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return "holder unknown" }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return text.split(separator: "\n").first.map(String.init) ?? "holder unknown"
    }
}
