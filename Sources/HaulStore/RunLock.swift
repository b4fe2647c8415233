import CLinuxShims
import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulThreads

/// One sync at a time per destination: a write lock on a byte range of `<root>/.haul/lock`, held for the life of
/// the process. An unsharded run locks the whole destination space; `--shard K/N` locks only its share of it
/// (`Shard.lockRange`), so the N shards of a root run at once while an unsharded run still excludes them all.
///
/// Open-file-description locks (`F_OFD_SETLK`), rather than `flock` or a pid file: they are released when their
/// holder dies however it dies (SIGKILL included), they lock ranges, they belong to the descriptor and not to
/// the process (threads cannot steal them from each other), and NFS carries them as byte-range locks, where its
/// `flock` emulation would turn one shard's shared whole-file lock into a conflict with every other shard.
///
/// The file's content only names holders for the message of whoever finds the root busy: an unsharded run writes
/// its line in slot 0, shard K in slot K.
package final class RunLock: Sendable {
    private let descriptor: Int32

    package enum Failure: Error, Sendable {
        /// Another process holds the lock; `holder` is what it wrote about itself (nil: unknown). `waited`: for how
        /// long this run waited for it (`--wait-timeout`), nil when it did not.
        case busy(root: String, holder: String?, shard: Shard?, waited: Double? = nil)
        case system(StoreError)
    }

    /// What to do when another run holds the lock.
    package enum Waiting: Sendable {
        /// Fail at once (`busy`).
        case no
        /// Wait until it is free; `notice` is told once, with the holder's line (nil: unknown), before the wait
        /// begins.
        case forever(notice: @Sendable (String?) -> Void)
        /// The same, for at most this many seconds, then `busy`.
        case upTo(Double, notice: @Sendable (String?) -> Void)
    }

    /// - Parameters:
    ///   - area: the root's private folder, where the lock file lives.
    ///   - shard: lock only this shard's destinations; nil: all of them.
    ///   - wait: whether, and how long, to wait for a holder instead of failing at once.
    ///   - holder: a line naming this process for others' messages (pid, command).
    package init(area: PrivateArea, shard: Shard? = nil, wait: Waiting, holder: String) throws(Failure) {
        let path = area.folder.displayPath(of: PrivateArea.Member.lock.rawValue)
        let name = PrivateArea.Member.lock.rawValue
        var descriptor: Int32
        var writable = true
        switch area.folder.openFile(name, flags: O_RDWR | O_CREAT | O_NONBLOCK) {
        case .success(let opened): descriptor = opened
        case .failure(let failure) where failure.errno == EROFS:
            // A read-only root: a read lock needs no write access and still excludes a run that reaches the same
            // files through a writable mount; only the holder line is left out.
            switch area.folder.openFile(name, flags: O_RDONLY | O_NONBLOCK) {
            case .success(let opened): descriptor = opened
            case .failure(let failure): throw .system(StoreError(operation: .open, path: path, errno: failure.errno))
            }
            writable = false
        case .failure(let failure): throw .system(StoreError(operation: .open, path: path, errno: failure.errno))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw .system(StoreError(operation: .use, path: path, errno: EINVAL, problem: .notARegularFile))
        }
        let range = shard?.lockRange ?? 0..<Shard.lockSpace
        if let code = Self.acquire(descriptor, range, exclusive: writable, wait: wait) {
            defer { close(descriptor) }
            if code == EAGAIN || code == EACCES {
                let waited: Double? = if case .upTo(let limit, _) = wait { limit } else { nil }
                throw .busy(root: area.root, holder: Self.holder(in: range, descriptor), shard: shard, waited: waited)
            }
            throw .system(StoreError(operation: .lock, path: path, errno: code))
        }
        self.descriptor = descriptor
        guard writable else { return }
        // The range first: whoever finds a lock in its way reads the line of that very range (a finished shard's
        // line stays behind until an unsharded run clears the file).
        var line = Array(Array("\(range.lowerBound) \(range.count) \(holder)".utf8).prefix(Self.slotSize - 1)) + [0x0A]
        if shard == nil {
            // Holding every destination, an unsharded run clears what earlier runs wrote: its line is the file.
            _ = ftruncate(descriptor, 0)
        } else {
            // A shard's slot may hold a longer line of an earlier run: blanked to its end.
            line += [UInt8](repeating: 0, count: Self.slotSize - line.count)
        }
        _ = pwrite(descriptor, line, line.count, off_t(Self.slotSize * Self.slot(of: shard)))
    }

    deinit { close(descriptor) }  // closing releases every lock taken through it

    /// Runs `body` while holding the state's own lock: exclusive to rewrite the state (which shards running at
    /// once each rewrite) and to append to the ownership journal (which a state rewrite folds in and removes; an
    /// append between the two would be lost, and a failed append is cut back off, which must not cut another's). Held for milliseconds, never across a transfer. If the lock
    /// cannot be taken (an I/O error), `body` runs anyway: the state is a hint, and a lost record costs a hash.
    package func withStateLock<T, E: Error>(exclusive: Bool, _ body: () throws(E) -> T) throws(E) -> T {
        let taken = Self.lock(descriptor, Self.stateByte, exclusive: exclusive, wait: true) == nil
        defer { if taken { _ = Self.unlock(descriptor, Self.stateByte) } }
        return try body()
    }

    /// The byte standing for the state file, beyond every destination's.
    private static let stateByte: Range<Int64> = Shard.lockSpace..<(Shard.lockSpace + 1)
    private static let slotSize = 256

    private static func slot(of shard: Shard?) -> Int {
        guard let shard else { return 0 }
        return min(shard.index, 255)
    }

    private static func request(_ type: Int32, _ range: Range<Int64>) -> flock {
        var request = flock()  // l_pid 0, as open-file-description locks require
        request.l_type = Int16(type)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = off_t(range.lowerBound)
        request.l_len = off_t(range.count)
        return request
    }

    /// errno of a failed lock, nil when held: at once, or after waiting as `wait` says. A wait with a limit polls
    /// (a blocking `F_OFD_SETLKW` cannot be given one) five times a second.
    private static func acquire(_ descriptor: Int32, _ range: Range<Int64>, exclusive: Bool, wait: Waiting) -> Int32? {
        guard let code = lock(descriptor, range, exclusive: exclusive, wait: false), code == EAGAIN || code == EACCES
        else {
            return nil
        }
        switch wait {
        case .no:
            return code
        case .forever(let notice):
            notice(holder(in: range, descriptor))
            return lock(descriptor, range, exclusive: exclusive, wait: true)
        case .upTo(let limit, let notice):
            notice(holder(in: range, descriptor))
            var remaining = limit
            while remaining > 0 {
                let step = min(0.2, remaining)
                sleepThread(seconds: step)
                remaining -= step
                guard let again = lock(descriptor, range, exclusive: exclusive, wait: false) else { return nil }
                guard again == EAGAIN || again == EACCES else { return again }
            }
            return code
        }
    }

    /// errno of a failed lock, nil when held. Also `LifetimeLock`'s (whole files, never waiting).
    static func lock(_ descriptor: Int32, _ range: Range<Int64>, exclusive: Bool, wait: Bool) -> Int32? {
        var request = Self.request(exclusive ? F_WRLCK : F_RDLCK, range)
        while haul_fcntl_lock(descriptor, wait ? haul_F_OFD_SETLKW : haul_F_OFD_SETLK, &request) != 0 {
            let code = errno
            if code == EINTR { continue }
            return code
        }
        return nil
    }

    private static func unlock(_ descriptor: Int32, _ range: Range<Int64>) -> Int32? {
        var request = Self.request(F_UNLCK, range)
        return haul_fcntl_lock(descriptor, haul_F_OFD_SETLK, &request) == 0 ? nil : errno
    }

    /// The line of whoever holds a lock in the way of `range`; nil when it cannot be known.
    private static func holder(in range: Range<Int64>, _ descriptor: Int32) -> String? {
        var request = Self.request(F_WRLCK, range)
        guard haul_fcntl_lock(descriptor, haul_F_OFD_GETLK, &request) == 0, request.l_type != Int16(F_UNLCK) else {
            return nil
        }
        let key = "\(request.l_start) \(request.l_len) "
        var buffer = [UInt8](repeating: 0, count: slotSize * 256)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        for line in buffer[..<count].split(whereSeparator: { $0 == 0x0A || $0 == 0 }) {
            let text = String(decoding: line, as: UTF8.self)
            if text.hasPrefix(key) { return String(text.dropFirst(key.count)) }
        }
        return nil
    }
}
