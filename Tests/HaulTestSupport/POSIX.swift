import Glibc

/// glibc functions that Swift's Glibc module hides because it is not built with `_GNU_SOURCE`.
/// This target has no shim header of its own, so they are looked up once at run time; glibc has exported
/// all three for years (2.10 / 2.9 / 2.29), and each caller keeps a portable fallback anyway.
enum GNUFunctions {
    typealias Accept4 = @convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32) -> Int32
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

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
        let result = pthread_create(&thread, &attributes, { raw in
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
