import Glibc
import Synchronization

/// A child process the test does not wait for at once: started, watched, sent signals (SIGKILL included), and
/// reaped later. Output (stdout and stderr together) goes to a file, so a child that is killed mid-write or that
/// nobody reads from can never block on a full pipe.
///
/// The child runs in its own process group; whatever happens to the test, `deinit` kills the group and reaps it.
public final class BackgroundProcess: Sendable {
    public let pid: pid_t
    public let outputPath: String
    /// The exit status once reaped, in the shell's convention (128 + signal for a child killed by a signal).
    private let reaped = Mutex<Int32?>(nil)

    public enum Wait: Equatable, Sendable {
        case conditionMet
        case exited(Int32)
        case timedOut
    }

    /// - Parameters:
    ///   - environment: merged over `ProcessRunner.minimalEnvironment`.
    ///   - outputPath: created or truncated; receives stdout and stderr.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        currentDirectory: String, outputPath: String
    ) throws {
        let merged = ProcessRunner.minimalEnvironment.merging(environment) { _, override in override }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        guard let addChdir = GNUFunctions.addChdir else {
            throw ProcessRunnerError.systemCall(
                SystemCallError(call: "posix_spawn_file_actions_addchdir_np", errno: ENOSYS))
        }
        let result = addChdir(&actions, currentDirectory)
        guard result == 0 else {
            throw ProcessRunnerError.systemCall(
                SystemCallError(call: "posix_spawn_file_actions_addchdir_np", errno: result))
        }
        self.outputPath = outputPath
        self.pid = try ProcessRunner.spawn(
            executable, arguments, actions: &actions, environment: merged, newProcessGroup: true)
    }

    deinit {
        if reaped.withLock({ $0 }) == nil {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    /// Sends `signal` to the child itself (not its group), as an operator or the kernel would.
    public func send(_ signal: Int32) {
        if reaped.withLock({ $0 }) == nil { kill(pid, signal) }
    }

    /// The exit status if the child has exited (reaping it), nil while it runs.
    public func poll() -> Int32? {
        reaped.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            guard result == pid else { return nil }
            status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            return status
        }
    }

    /// Polls `condition` (every few milliseconds) until it holds, the child exits, or `timeout` passes.
    /// The condition is checked once more after an exit, so a state reached just before exiting still counts.
    public func wait(until condition: () -> Bool, timeout: Double = 15) -> Wait {
        let deadline = monotonicSeconds() + timeout
        while true {
            if condition() { return .conditionMet }
            if let status = poll() { return condition() ? .conditionMet : .exited(status) }
            if monotonicSeconds() >= deadline { return .timedOut }
            usleep(2_000)
        }
    }

    /// Waits for the child to exit; nil if it is still running after `timeout`.
    public func waitForExit(timeout: Double = 15) -> Int32? {
        let deadline = monotonicSeconds() + timeout
        while true {
            if let status = poll() { return status }
            if monotonicSeconds() >= deadline { return nil }
            usleep(2_000)
        }
    }

    /// Everything the child wrote so far.
    public var output: String {
        guard let file = fopen(outputPath, "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension HaulProcess {
    /// Starts the built `haul` without waiting for it.
    public static func start(
        _ arguments: [String], environment: [String: String] = [:], currentDirectory: String,
        outputPath: String
    ) throws -> BackgroundProcess {
        try BackgroundProcess(
            executablePath, arguments, environment: environment, currentDirectory: currentDirectory,
            outputPath: outputPath)
    }
}
