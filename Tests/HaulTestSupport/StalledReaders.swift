import Glibc

/// A FIFO the test holds open for reading and does not read until it chooses to: a pipe nobody drains, a stalled
/// log shipper. Its buffer is one page, the least the kernel allows, so a few lines fill it and the writer's next
/// write waits for a reader. Pass `path` as a `BackgroundProcess`'s `outputPath`: the child's open does not wait,
/// since a reader is there.
public final class StalledPipe {
    public let path: String
    private let reader: Int32

    public init(path: String) throws {
        guard mkfifo(path, 0o600) == 0 else { throw SystemCallError(call: "mkfifo", errno: errno) }
        reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard reader >= 0 else { throw SystemCallError(call: "open", errno: errno) }
        self.path = path
        // F_SETPIPE_SZ, which Glibc's module does not name.
        guard fcntl(reader, 1031, Int32(getpagesize())) >= 0 else {
            let code = errno
            close(reader)
            throw SystemCallError(call: "fcntl(F_SETPIPE_SZ)", errno: code)
        }
    }

    deinit {
        close(reader)
    }

    /// Bytes written and not yet read.
    public var buffered: Int {
        var count: Int32 = 0
        return ioctl(reader, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
    }

    /// What is in the pipe now, read without waiting (the reader reading at last).
    public func drain() -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = read(reader, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A pseudo-terminal whose output is stopped, as Ctrl-S stops a terminal (`tcflow(TCOOFF)`): a program writing to
/// it waits in `write(2)` until output is started again. Pass `path` (the terminal's `/dev/pts/N`) as a
/// `BackgroundProcess`'s `outputPath`.
public final class StoppedTerminal {
    public let path: String
    private let controller: Int32
    private let terminal: Int32

    public init() throws {
        controller = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard controller >= 0 else { throw SystemCallError(call: "open(/dev/ptmx)", errno: errno) }
        // TIOCSPTLCK and TIOCGPTN (unlockpt and ptsname, which Glibc's module does not declare).
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard ioctl(controller, 0x4004_5431, &unlock) == 0, ioctl(controller, 0x8004_5430, &number) == 0 else {
            let code = errno
            close(controller)
            throw SystemCallError(call: "ioctl(TIOCSPTLCK, TIOCGPTN)", errno: code)
        }
        path = "/dev/pts/\(number)"
        terminal = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard terminal >= 0 else {
            let code = errno
            close(controller)
            throw SystemCallError(call: "open", errno: code)
        }
        guard tcflow(terminal, TCOOFF) == 0 else {
            let code = errno
            close(terminal)
            close(controller)
            throw SystemCallError(call: "tcflow(TCOOFF)", errno: code)
        }
    }

    deinit {
        _ = tcflow(terminal, TCOON)
        close(terminal)
        close(controller)
    }

    /// Starts output again (Ctrl-Q) and returns what the terminal shows, read without waiting long.
    public func resumeAndRead() -> String {
        _ = tcflow(terminal, TCOON)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var entry = pollfd(fd: controller, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 200) > 0 else { break }
            let count = read(controller, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
