import Foundation
import Glibc

public struct ProcessResult: Sendable {
    /// The exit status; a child killed by a signal reports 128 + signal number, as shells do.
    public let exitCode: Int32
    public let stdout: String
    public let stderr: String

    public init(exitCode: Int32, stdout: String, stderr: String) {
        self.exitCode = exitCode
        self.stdout = stdout
        self.stderr = stderr
    }
}

public enum ProcessRunnerError: Error, CustomStringConvertible, Sendable {
    case spawnFailed(executable: String, errno: Int32)
    /// The child (and its process group) was killed; the output it produced until then is kept for the failure
    /// message.
    case timedOut(command: [String], seconds: Double, partial: ProcessResult)
    case systemCall(SystemCallError)

    public var description: String {
        switch self {
        case .spawnFailed(let executable, let error):
            "cannot start \(executable): \(String(cString: strerror(error)))"
        case .timedOut(let command, let seconds, let partial):
            "timed out after \(seconds) s and killed: \(command.joined(separator: " "))\n"
                + "--- stdout ---\n\(partial.stdout)\n--- stderr ---\n\(partial.stderr)"
        case .systemCall(let error):
            error.description
        }
    }
}

/// Runs a child process to completion without threads: one poll loop drains stdout and stderr together, so a
/// chatty child can never block on a full pipe while we wait on the other one.
public enum ProcessRunner {
    /// What a child sees unless the test asks for more. Not the parent's environment: a developer's
    /// `http_proxy`, `HAUL_*` or locale variables must not change what a test observes, and a proxy would
    /// even route loopback traffic elsewhere.
    public static var minimalEnvironment: [String: String] {
        let parent = ProcessInfo.processInfo.environment
        return [
            "PATH": parent["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
            "HOME": parent["HOME"] ?? "/",
            // Nor may the developer's own haul config (URL rewrites) or cache: a test names them when it wants one.
            "XDG_CONFIG_HOME": "/nonexistent/haul-test-config",
            "XDG_CACHE_HOME": "/nonexistent/haul-test-cache",
        ]
    }

    /// - Parameters:
    ///   - executable: an absolute path, or a bare name looked up in the parent's PATH.
    ///   - environment: merged over `minimalEnvironment` (or over the whole parent environment when
    ///     `inheritEnvironment` is true).
    ///   - timeout: seconds until the child's whole process group is killed and `timedOut` is thrown.
    /// Stdin is /dev/null; SIGPIPE and the signal mask are reset to defaults in the child, whatever the test
    /// process did to its own.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        inheritEnvironment: Bool = false, currentDirectory: String? = nil,
        timeout: Double = 120
    ) throws -> ProcessResult {
        let base = inheritEnvironment ? ProcessInfo.processInfo.environment : minimalEnvironment
        let merged = base.merging(environment) { _, override in override }

        let stdoutPipe = try makePipe()
        let stderrPipe: (read: Int32, write: Int32)
        do { stderrPipe = try makePipe() } catch {
            close(stdoutPipe.read); close(stdoutPipe.write)
            throw error
        }
        let pid: pid_t
        do {
            pid = try spawn(
                executable, arguments, environment: merged, currentDirectory: currentDirectory,
                stdout: stdoutPipe.write, stderr: stderrPipe.write)
        } catch {
            for fd in [stdoutPipe.read, stdoutPipe.write, stderrPipe.read, stderrPipe.write] { close(fd) }
            throw error
        }
        close(stdoutPipe.write)
        close(stderrPipe.write)

        let deadline = monotonicSeconds() + timeout
        var output: [Int32: [UInt8]] = [stdoutPipe.read: [], stderrPipe.read: []]
        var open = [stdoutPipe.read, stderrPipe.read]
        var timedOut = !drain(&open, into: &output, until: deadline)
        var status: Int32 = 0
        if !timedOut {
            // The pipes closed; the child may still be on its way out.
            while true {
                let reaped = waitpid(pid, &status, WNOHANG)
                if reaped == pid || (reaped < 0 && errno != EINTR) { break }
                if monotonicSeconds() >= deadline {
                    timedOut = true
                    break
                }
                usleep(1_000)
            }
        }
        if timedOut {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
            // Keep what the child wrote before dying, but never hang on a stray holder of the pipe.
            _ = drain(&open, into: &output, until: monotonicSeconds() + 2)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        for fd in open { close(fd) }

        let result = ProcessResult(
            exitCode: exitCode(status),
            stdout: String(decoding: output[stdoutPipe.read] ?? [], as: UTF8.self),
            stderr: String(decoding: output[stderrPipe.read] ?? [], as: UTF8.self))
        if timedOut {
            throw ProcessRunnerError.timedOut(command: [executable] + arguments, seconds: timeout, partial: result)
        }
        return result
    }

    /// Runs a command with its output thrown away (as `>/dev/null`; its errors still shown), waiting for it: for
    /// timing a command without the cost of reading what it prints. Its exit status.
    public static func runDiscardingOutput(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        guard devNull >= 0 else {
            throw ProcessRunnerError.systemCall(SystemCallError(call: "open /dev/null", errno: errno))
        }
        defer { close(devNull) }
        let pid = try spawn(
            executable, arguments, environment: ProcessInfo.processInfo.environment, currentDirectory: nil,
            stdout: devNull, stderr: STDERR_FILENO)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return exitCode(status)
    }

    /// A `waitpid` status as a shell shows it: the exit code, or 128 + the signal that ended the process.
    private static func exitCode(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Reads until every descriptor in `open` hit EOF (true) or the deadline passed (false).
    private static func drain(
        _ open: inout [Int32], into output: inout [Int32: [UInt8]], until deadline: Double
    ) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while !open.isEmpty {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return false }
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(min(remaining * 1000, 60_000).rounded(.up)))
            if ready < 0 && errno != EINTR { return false }
            guard ready > 0 else { continue }
            for entry in fds where entry.revents != 0 {
                let count = chunk.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    output[entry.fd, default: []] += chunk[0..<count]
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    close(entry.fd)
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
        return true
    }

    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        let result = fds.withUnsafeMutableBufferPointer { buffer in
            if let pipe2 = GNUFunctions.pipe2 { return pipe2(buffer.baseAddress, O_CLOEXEC) }
            return pipe(buffer.baseAddress)
        }
        guard result == 0 else { throw ProcessRunnerError.systemCall(SystemCallError(call: "pipe", errno: errno)) }
        return (fds[0], fds[1])
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String],
        currentDirectory: String?, stdout: Int32, stderr: Int32
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        if let currentDirectory {
            guard let addChdir = GNUFunctions.addChdir else {
                throw ProcessRunnerError.systemCall(
                    SystemCallError(call: "posix_spawn_file_actions_addchdir_np", errno: ENOSYS))
            }
            let result = addChdir(&actions, currentDirectory)
            guard result == 0 else {
                throw ProcessRunnerError.systemCall(
                    SystemCallError(call: "posix_spawn_file_actions_addchdir_np", errno: result))
            }
        }

        return try spawn(executable, arguments, actions: &actions, environment: environment, newProcessGroup: true)
    }

    /// posix_spawn with the signal state a child should start with (default dispositions, nothing blocked),
    /// optionally in its own process group so that a timeout can kill whatever it started too.
    static func spawn(
        _ executable: String, _ arguments: [String], actions: inout posix_spawn_file_actions_t,
        environment: [String: String], newProcessGroup: Bool
    ) throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
        if newProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result =
            executable.contains("/")
            ? posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
            : posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw ProcessRunnerError.spawnFailed(executable: executable, errno: result) }
        return pid
    }
}

/// Runs the `haul` binary that SwiftPM built alongside the test bundle.
public enum HaulProcess {
    /// dirname(/proc/self/exe) + "/haul": the test runner lives in the same build directory as the products.
    public static var executablePath: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return "haul" }
        let selfPath = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = selfPath.lastIndex(of: "/") else { return "haul" }
        return String(selfPath[..<slash]) + "/haul"
    }

    public static func run(
        _ arguments: [String], environment: [String: String] = [:],
        inheritEnvironment: Bool = false, currentDirectory: String? = nil,
        timeout: Double = 120
    ) throws -> ProcessResult {
        try ProcessRunner.run(
            executablePath, arguments, environment: environment,
            inheritEnvironment: inheritEnvironment, currentDirectory: currentDirectory,
            timeout: timeout)
    }
}

extension TemporaryDirectory {
    /// The built `haul`, run in this folder.
    public func haul(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try HaulProcess.run(arguments, environment: environment, currentDirectory: path)
    }
}
