import Glibc

/// glibc functions that Swift's Glibc module hides because it is not built with `_GNU_SOURCE`.
/// This target has no shim header of its own, so they are looked up once at run time; glibc has exported
/// all three for years (2.10 / 2.9 / 2.29), and each caller keeps a portable fallback anyway.
enum GNUFunctions {
    typealias Accept4 =
        @convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32) -> Int32
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

    /// Accepted sockets and pipes must be close-on-exec atomically: tests run in parallel, and a descriptor
    /// inherited by a concurrently spawned `haul` would keep a connection open past the server's close or RST.
    static let accept4 = symbol("accept4", as: Accept4.self)
    static let pipe2 = symbol("pipe2", as: Pipe2.self)
    static let addChdir = symbol("posix_spawn_file_actions_addchdir_np", as: AddChdir.self)

    private static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        guard let address = dlsym(nil, name) else { return nil }
        return unsafeBitCast(address, to: type)
    }
}

/// An error from a system call, with the call's name so a failing test says what broke.
public struct SystemCallError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32
    public var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}

/// Threads for the server: real kernel threads rather than tasks, because the cooperative pool has only
/// two threads on the CI machines and a blocking server there starves the code under test.
enum POSIXThread {
    private final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts a joinable thread. 4 MiB of stack gives handlers room (debug frames are large); it is only
    /// reserved address space, so hundreds of connection threads stay cheap.
    static func spawn(_ body: @escaping @Sendable () -> Void) throws -> pthread_t {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, 4 << 20)
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, &attributes,
            { raw in
                guard let raw else { return nil }
                Unmanaged<Body>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw SystemCallError(call: "pthread_create", errno: result)
        }
        return thread
    }

    static func join(_ thread: pthread_t) {
        _ = pthread_join(thread, nil)
    }

    static func isCurrent(_ thread: pthread_t) -> Bool {
        pthread_equal(thread, pthread_self()) != 0
    }
}

enum Socket {
    /// Writes everything or reports failure. `MSG_NOSIGNAL` because a client that hangs up mid-body is an
    /// ordinary test event, and SIGPIPE would kill the whole test process.
    static func sendAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                guard let base = raw.baseAddress else { return true }
                let sent = send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if sent < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += sent
            }
            return true
        }
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        sendAll(fd, bytes[...])
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes written but not yet acknowledged by the peer's kernel (SIOCOUTQ).
    static func queuedOutput(_ fd: Int32) -> Int32? {
        var queued: Int32 = 0
        guard ioctl(fd, UInt(TIOCOUTQ), &queued) == 0 else { return nil }
        return queued
    }

    /// Closes so that the peer sees a TCP RST instead of a FIN: lingering with a zero timeout makes the
    /// kernel abort the connection.
    static func closeWithReset(_ fd: Int32) {
        var option = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        _ = close(fd)
    }

    /// Waits until `fd` is readable or `wake` becomes readable (the server's stop signal).
    /// Returns false when woken for stop or on a poll error.
    static func waitReadable(_ fd: Int32, wake: Int32) -> Bool {
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if fds[1].revents != 0 { return false }
            if fds[0].revents != 0 { return true }
        }
    }
}

/// Monotonic seconds, for deadlines that must not jump with the wall clock.
public func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// haul's run lock as another run holds it: a write lock on the byte range of `<root>/.haul/lock` that stands for
/// every destination (or for one shard's), taken as haul takes it, with an open-file-description lock.
public enum RootLock {
    /// The bytes standing for every destination: 2⁶², as haul's `Shard.lockSpace`.
    public static let everyDestination: Range<Int64> = 0..<(Int64(1) << 62)

    /// Takes the lock on `descriptor` without waiting; false when someone else holds part of it.
    public static func take(_ descriptor: Int32, _ range: Range<Int64> = everyDestination) -> Bool {
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = off_t(range.lowerBound)
        request.l_len = off_t(range.count)
        return fcntl(descriptor, 37 /* F_OFD_SETLK */, &request) == 0
    }

    public static func release(_ descriptor: Int32, _ range: Range<Int64> = everyDestination) {
        var request = flock()
        request.l_type = Int16(F_UNLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = off_t(range.lowerBound)
        request.l_len = off_t(range.count)
        _ = fcntl(descriptor, 37 /* F_OFD_SETLK */, &request)
    }

    /// Whether some process is queued behind a lock on the file at `path` (`/proc/locks` lists waiters after
    /// `->`, by device and inode: open-file-description locks name no process).
    public static func hasWaiters(path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, let bytes = readFile("/proc/locks") else { return false }
        let suffix = ":\(info.st_ino) "
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").contains {
            $0.contains("->") && $0.contains(suffix)
        }
    }
}

/// Which files in some folders were opened meanwhile (inotify `IN_OPEN`): proof that a run read nothing it did
/// not need to, without touching the files (their identity is what the run under test judges them by).
public final class FileOpenWatch {
    private let descriptor: Int32
    private var folders: [Int32: String] = [:]

    /// `folders`: absolute paths; names are reported relative to `base`.
    public init(folders: [String], base: String) throws {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { throw SystemCallError(call: "inotify_init1", errno: errno) }
        for folder in folders {
            let watch = inotify_add_watch(descriptor, folder, UInt32(IN_OPEN))
            guard watch >= 0 else { throw SystemCallError(call: "inotify_add_watch \(folder)", errno: errno) }
            self.folders[watch] = String(folder.dropFirst(base.count + 1))
        }
    }

    deinit { close(descriptor) }

    /// Files opened since the last call, as `folder/name` relative to `base`.
    public func opened() -> Set<String> {
        var names: Set<String> = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { return names }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let (watch, length) = buffer.withUnsafeBytes { raw in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.wd, Int(event.len))
                }
                let start = offset + MemoryLayout<inotify_event>.size
                let name = buffer[start..<(start + length)].prefix { $0 != 0 }
                if !name.isEmpty, let folder = folders[watch] {
                    names.insert((folder.isEmpty ? "" : folder + "/") + String(decoding: name, as: UTF8.self))
                }
                offset = start + length
            }
        }
    }
}
