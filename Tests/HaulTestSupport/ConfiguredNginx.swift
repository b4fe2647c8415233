import Foundation
import Glibc
import Synchronization

/// A real nginx run from a configuration the test supplies whole (a recipe's file with its placeholders filled
/// in), listening on one loopback port chosen here. Started, watched and stopped as `NginxServer` is: a child in
/// the foreground, with a watchdog that stops it should the test process die.
public final class ConfiguredNginx: Sendable {
    public let port: UInt16
    /// nginx's prefix and the state folder handed to the configuration: pid file, logs, cache.
    public let directory: TemporaryDirectory
    private let processes: Mutex<NginxServer.Processes?>

    private static let bindAttempts = 5

    /// `configuration(port, folder)`: the whole nginx.conf (`daemon off;` is put before it), which must write its pid to `folder/nginx.pid` and its
    /// error log to `folder/error.log`, which is how a start is recognised and explained.
    public init(configuration: (_ port: UInt16, _ folder: String) throws -> String) throws {
        let nginx = try ExternalTool.locate("nginx", package: "nginx-light")
        let directory = try TemporaryDirectory(prefix: "haul-test-nginx")
        // nginx's workers run as `nobody` when the tests run as root: they must reach the paths nginx makes here.
        chmod(directory.path, 0o755)
        self.directory = directory
        var lastFailure = "no attempt made"
        for _ in 0..<Self.bindAttempts {
            let (port, _) = try NginxServer.freePorts()
            // In the foreground, as this process's child: a daemon would outlive the test unwatched.
            try directory.write("nginx.conf", "daemon off;\n" + (try configuration(port, directory.path)))
            unlink(directory.path("nginx.pid"))
            switch try NginxServer.launch(nginx, directory: directory, ports: [port]) {
            case .running(let processes):
                self.port = port
                self.processes = Mutex(processes)
                return
            case .portTaken(let log):
                lastFailure = log
            }
        }
        throw NginxServerError.startFailed("no free port after \(Self.bindAttempts) attempts:\n\(lastFailure)")
    }

    deinit { stop() }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// A file nginx wrote in its folder (a log), as text; complete lines only, waiting briefly for `lines` of
    /// them (nginx writes a request's line just after the response has left).
    public func lines(of name: String, atLeast lines: Int = 0, timeout: Double = 2) -> [String] {
        let deadline = monotonicSeconds() + timeout
        while true {
            let bytes = directory.read(name) ?? []
            let complete =
                bytes.last == UInt8(ascii: "\n")
                ? bytes : Array(bytes[..<(bytes.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0)])
            let found = String(decoding: complete, as: UTF8.self).split(separator: "\n").map(String.init)
            if found.count >= lines || monotonicSeconds() >= deadline { return found }
            usleep(5_000)
        }
    }

    /// Fast shutdown; idempotent.
    public func stop() {
        processes.withLock { processes in
            guard let running = processes else { return }
            processes = nil
            NginxServer.terminate(running)
        }
    }
}
