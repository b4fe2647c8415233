import Foundation
import Glibc
import Synchronization

/// Why a real-server fixture could not be set up. A missing tool is an error, not a skip: the TLS and HTTP/2
/// tests are part of the suite, and a green run without them would hide that they never ran.
public enum NginxServerError: Error, CustomStringConvertible, Sendable {
    case toolMissing(name: String, package: String)
    case commandFailed(command: [String], result: ProcessResult)
    case startFailed(String)

    public var description: String {
        switch self {
        case .toolMissing(let name, let package):
            "\(name) not found on PATH, /usr/sbin or /usr/local/sbin: run scripts/setup-debian.sh "
                + "(it installs the Debian package \(package)); the TLS and HTTP/2 tests need it"
        case .commandFailed(let command, let result):
            "\(command.joined(separator: " ")) exited with \(result.exitCode)\n\(result.stdout)\(result.stderr)"
        case .startFailed(let why):
            "nginx did not start: \(why)"
        }
    }
}

/// A private CA and a server certificate it signed, so TLS tests verify a real chain (`caFile`) and can show
/// that the system store does not trust it. Generated fresh per instance: P-256 keys take milliseconds, and
/// nothing long-lived ever trusts this CA.
public final class TestCertificateAuthority: Sendable {
    public let caCertificatePath: String
    public let serverCertificatePath: String
    public let serverKeyPath: String
    /// Owns the files; they go away with this object.
    private let directory: TemporaryDirectory

    public init() throws {
        let openssl = try ExternalTool.locate("openssl", package: "openssl")
        directory = try TemporaryDirectory(prefix: "haul-test-ca")
        caCertificatePath = directory.path("ca.pem")
        serverCertificatePath = directory.path("server.pem")
        serverKeyPath = directory.path("server.key")
        let caKey = directory.path("ca.key")
        let request = directory.path("server.csr")
        let extensions = directory.path("server.ext")
        // An explicit leaf profile: curl (OpenSSL) rejects a leaf without the SAN it connects to, and a CA
        // without CA:TRUE cannot anchor the chain.
        try directory.write(
            "server.ext",
            """
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1, DNS:localhost

            """)
        let newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try ExternalTool.run(
            openssl,
            ["req", "-x509", "-new"] + newKey + [
                "-keyout", caKey, "-out", caCertificatePath, "-days", "2", "-subj", "/CN=haul test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try ExternalTool.run(
            openssl,
            ["req", "-new"] + newKey + [
                "-keyout", serverKeyPath, "-out", request, "-subj", "/CN=127.0.0.1",
            ])
        try ExternalTool.run(
            openssl,
            [
                "x509", "-req", "-in", request, "-CA", caCertificatePath, "-CAkey", caKey, "-set_serial", "2",
                "-days", "2", "-extfile", extensions, "-out", serverCertificatePath,
            ])
    }

    /// A client certificate this CA signed, for a server that verifies clients (mutual TLS): the certificate and its
    /// key, each in its own PEM file beside the CA's.
    public func issueClientCertificate() throws -> (certificate: String, key: String) {
        let openssl = try ExternalTool.locate("openssl", package: "openssl")
        let (certificate, key, request) = (
            directory.path("client.pem"), directory.path("client.key"), directory.path("client.csr")
        )
        try directory.write(
            "client.ext",
            """
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = clientAuth

            """)
        try ExternalTool.run(
            openssl,
            [
                "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", request, "-subj", "/CN=haul test client",
            ])
        try ExternalTool.run(
            openssl,
            [
                "x509", "-req", "-in", request, "-CA", caCertificatePath, "-CAkey", directory.path("ca.key"),
                "-set_serial", "3",
                "-days", "2", "-extfile", directory.path("client.ext"), "-out", certificate,
            ])
        return (certificate, key)
    }
}

/// One line of nginx's access log, i.e. one request as the server saw it after TLS and HTTP/2 framing.
public struct NginxRequest: Sendable, Equatable {
    /// "http" or "https": tells the two listeners apart.
    public let scheme: String
    public let port: UInt16
    /// "HTTP/2.0", "HTTP/1.1".
    public let protocolVersion: String
    /// nginx's connection serial number: equal numbers mean the requests shared one TCP connection (for
    /// HTTP/2, one multiplexed connection).
    public let connection: Int
    /// Which request this was on its connection, 1-based.
    public let connectionRequest: Int
    public let method: String
    /// The request-target as sent, query included.
    public let uri: String
    public let status: Int
    /// The Host header, or HTTP/2's :authority, without the port.
    public let host: String
    /// nil when the header was absent (nginx cannot tell an absent header from an empty one).
    public let authorization: String?
    public let range: String?
    public let ifRange: String?
}

/// A real nginx on 127.0.0.1, so the engine meets the TLS, ALPN and HTTP/2 behaviour of a production server,
/// which the hand-written `LoopbackHTTPServer` deliberately does not implement.
///
/// nginx runs in the foreground (`daemon off`) as a child of the test process, so its pid is known without
/// races and can be reaped. A small watchdog shell holds the read end of a pipe whose write end only this
/// process has: if the test process dies without calling `stop()` (a crash, SIGKILL), the pipe closes and the
/// watchdog stops nginx, so no server outlives the tests.
public final class NginxServer: Sendable {
    public let httpsPort: UInt16
    public let httpPort: UInt16
    private let directory: TemporaryDirectory
    /// Kept so the certificate files live as long as the server that was configured with them.
    private let authority: TestCertificateAuthority
    private let processes: Mutex<Processes?>

    struct Processes {
        var nginx: pid_t
        var watchdog: pid_t?
        var watchdogPipe: Int32?
    }

    private static let bindAttempts = 5
    private static let startTimeout = 10.0

    /// Serves `root` over HTTPS + HTTP/2 and, on a second port, plain HTTP/1.1, so one server can play both ends
    /// of a scheme change. `extraLocations` goes into both server blocks verbatim, after `{HTTP_PORT}` and
    /// `{HTTPS_PORT}` are replaced: redirects must name ports that are only known once they are chosen.
    public init(root: String, authority: TestCertificateAuthority, extraLocations: String = "") throws {
        let nginx = try ExternalTool.locate("nginx", package: "nginx-light")
        let directory = try TemporaryDirectory(prefix: "haul-test-nginx")
        try directory.makeDirectory("tmp")
        self.directory = directory
        self.authority = authority

        var lastFailure = "no attempt made"
        for _ in 0..<Self.bindAttempts {
            let (httpsPort, httpPort) = try Self.freePorts()
            let configuration = Self.configuration(
                directory: directory, root: root, authority: authority,
                httpsPort: httpsPort, httpPort: httpPort,
                extraLocations: extraLocations)
            try directory.write("nginx.conf", configuration)
            unlink(directory.path("nginx.pid"))
            switch try Self.launch(nginx, directory: directory, ports: [httpsPort, httpPort]) {
            case .running(let processes):
                self.httpsPort = httpsPort
                self.httpPort = httpPort
                self.processes = Mutex(processes)
                return
            case .portTaken(let log):
                lastFailure = log
            }
        }
        throw NginxServerError.startFailed("no free port pair after \(Self.bindAttempts) attempts:\n\(lastFailure)")
    }

    deinit {
        stop()
    }

    public func httpsURL(_ path: String) -> String { "https://127.0.0.1:\(httpsPort)" + Self.slashed(path) }

    public func httpURL(_ path: String) -> String { "http://127.0.0.1:\(httpPort)" + Self.slashed(path) }

    /// Every request logged so far, in the order nginx finished them.
    public func accessLog() -> [NginxRequest] {
        guard let bytes = directory.read("access.log") else { return [] }
        // A line is complete only with its newline: nginx may be mid-write.
        return bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
            .dropLast(bytes.last == UInt8(ascii: "\n") ? 0 : 1)
            .compactMap { Self.parse(Array($0)) }
    }

    /// nginx writes a request's line after the response has left, so a client can finish a hair before the
    /// line exists; this waits (briefly) for `count` lines instead of making tests sleep.
    public func accessLog(atLeast count: Int, timeout: Double = 2) -> [NginxRequest] {
        let deadline = monotonicSeconds() + timeout
        while true {
            let log = accessLog()
            if log.count >= count || monotonicSeconds() >= deadline { return log }
            usleep(5_000)
        }
    }

    /// nginx's error log, for failure messages.
    public func errorLog() -> String {
        String(decoding: directory.read("error.log") ?? [], as: UTF8.self)
    }

    /// Fast shutdown (SIGTERM: the master stops its workers, then exits), escalating to SIGKILL after 5 s.
    /// Only pids this object spawned are signalled, and only before they are reaped, so they cannot have been
    /// reused. Idempotent.
    public func stop() {
        processes.withLock { processes in
            guard let running = processes else { return }
            processes = nil
            Self.terminate(running)
        }
    }

    // MARK: Configuration

    private static func configuration(
        directory: TemporaryDirectory, root: String,
        authority: TestCertificateAuthority, httpsPort: UInt16, httpPort: UInt16,
        extraLocations: String
    ) -> String {
        let extra =
            extraLocations
            .replacingOccurrences(of: "{HTTP_PORT}", with: String(httpPort))
            .replacingOccurrences(of: "{HTTPS_PORT}", with: String(httpsPort))
        func quoted(_ path: String) -> String { "\"" + path + "\"" }
        let temporary = directory.path("tmp")
        // As root, workers would run as `nobody` and could not read a test's private temporary directory.
        let user = geteuid() == 0 ? "user root;" : ""
        // JSON escaping keeps quotes and control bytes in header values from breaking a line apart.
        let format =
            #"{"scheme":"$scheme","port":"$server_port","protocol":"$server_protocol","#
            + #""connection":"$connection","connection_request":"$connection_requests","#
            + #""method":"$request_method","uri":"$request_uri","status":"$status","host":"$host","#
            + #""authorization":"$http_authorization","range":"$http_range","if_range":"$http_if_range"}"#
        return """
            \(user)
            daemon off;
            master_process on;
            worker_processes 1;
            pid \(quoted(directory.path("nginx.pid")));
            error_log \(quoted(directory.path("error.log"))) notice;
            events { worker_connections 512; }
            http {
                log_format haul escape=json '\(format)';
                # No buffer=: each line is written when its request ends, so tests can read it right away.
                access_log \(quoted(directory.path("access.log"))) haul;
                sendfile on;
                tcp_nodelay on;
                keepalive_timeout 60s;
                keepalive_requests 100000;
                default_type application/octet-stream;
                types { }
                client_body_temp_path \(quoted(temporary + "/body"));
                proxy_temp_path \(quoted(temporary + "/proxy"));
                fastcgi_temp_path \(quoted(temporary + "/fastcgi"));
                uwsgi_temp_path \(quoted(temporary + "/uwsgi"));
                scgi_temp_path \(quoted(temporary + "/scgi"));
                server {
                    listen 127.0.0.1:\(httpsPort) ssl http2;
                    ssl_certificate \(quoted(authority.serverCertificatePath));
                    ssl_certificate_key \(quoted(authority.serverKeyPath));
                    ssl_protocols TLSv1.2 TLSv1.3;
                    root \(quoted(root));
                    location / { }
                    \(extra)
                }
                server {
                    listen 127.0.0.1:\(httpPort);
                    root \(quoted(root));
                    location / { }
                    \(extra)
                }
            }

            """
    }

    private static func parse(_ line: [UInt8]) -> NginxRequest? {
        guard let fields = try? JSONDecoder().decode([String: String].self, from: Data(line)) else { return nil }
        func optional(_ key: String) -> String? { fields[key].flatMap { $0.isEmpty ? nil : $0 } }
        return NginxRequest(
            scheme: fields["scheme"] ?? "", port: fields["port"].flatMap { UInt16($0) } ?? 0,
            protocolVersion: fields["protocol"] ?? "",
            connection: fields["connection"].flatMap { Int($0) } ?? -1,
            connectionRequest: fields["connection_request"].flatMap { Int($0) } ?? -1,
            method: fields["method"] ?? "", uri: fields["uri"] ?? "",
            status: fields["status"].flatMap { Int($0) } ?? -1, host: fields["host"] ?? "",
            authorization: optional("authorization"), range: optional("range"),
            ifRange: optional("if_range"))
    }

    private static func slashed(_ path: String) -> String { path.hasPrefix("/") ? path : "/" + path }

    // MARK: Ports

    /// Two distinct ports the kernel just handed out. Both sockets stay open until both are chosen so they
    /// differ; another process may still take one before nginx binds it, which `init` retries.
    static func freePorts() throws -> (UInt16, UInt16) {
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        var ports: [UInt16] = []
        for _ in 0..<2 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw SystemCallError(call: "socket", errno: errno) }
            sockets.append(fd)
            var address = loopback(port: 0)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let failed = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                    guard bind(fd, pointer, length) == 0 else { return errno }
                    guard getsockname(fd, pointer, &length) == 0 else { return errno }
                    return 0
                }
            }
            guard failed == 0 else { throw SystemCallError(call: "bind 127.0.0.1:0", errno: failed) }
            ports.append(UInt16(bigEndian: address.sin_port))
        }
        return (ports[0], ports[1])
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }

    private static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    // MARK: Processes

    enum Launch {
        case running(Processes)
        /// Someone bound one of the ports between our probe and nginx: try other ports.
        case portTaken(String)
    }

    static func launch(_ nginx: String, directory: TemporaryDirectory, ports: [UInt16]) throws -> Launch {
        let output = directory.path("nginx.out")
        let pid = try ChildProcess.spawn(
            nginx,
            [
                "-p", directory.path + "/", "-c", directory.path("nginx.conf"),
                "-e", directory.path("error.log"),
            ],
            stdin: .path("/dev/null"), output: output)
        var running = Processes(nginx: pid)
        func log() -> String {
            String(decoding: (directory.read("error.log") ?? []) + (directory.read("nginx.out") ?? []), as: UTF8.self)
        }
        let deadline = monotonicSeconds() + startTimeout
        while true {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid {
                let text = log()
                if text.contains("Address already in use") { return .portTaken(text) }
                throw NginxServerError.startFailed("exit status \(status)\n\(text)")
            }
            // nginx retries a taken port for seconds before giving up; the log says so at once.
            if log().contains("Address already in use") {
                terminate(running)
                return .portTaken(log())
            }
            // The pid file appears only after every listening socket is bound, so a connect that succeeds
            // afterwards reaches this nginx and not whoever else might hold the port.
            let pidFile = String(decoding: directory.read("nginx.pid") ?? [], as: UTF8.self)
            if Int32(pidFile.trimmingCharacters(in: .whitespacesAndNewlines)) == pid, ports.allSatisfy(accepts) {
                break
            }
            if monotonicSeconds() >= deadline {
                terminate(running)
                throw NginxServerError.startFailed("ports \(ports) not accepting after \(startTimeout) s\n\(log())")
            }
            usleep(5_000)
        }
        do {
            let watchdog = try startWatchdog(for: pid)
            running.watchdog = watchdog.pid
            running.watchdogPipe = watchdog.pipe
        } catch {
            terminate(running)
            throw error
        }
        return .running(running)
    }

    /// `sh` blocked reading a pipe that only this process can write to. It ignores the terminal's signals so
    /// that it outlives a test process killed by them, then stops nginx when the pipe reports EOF.
    private static func startWatchdog(for nginx: pid_t) throws -> (pid: pid_t, pipe: Int32) {
        var fds: [Int32] = [-1, -1]
        let made = fds.withUnsafeMutableBufferPointer { buffer in
            if let pipe2 = GNUFunctions.pipe2 { return pipe2(buffer.baseAddress, O_CLOEXEC) }
            return pipe(buffer.baseAddress)
        }
        guard made == 0 else { throw SystemCallError(call: "pipe", errno: errno) }
        let script = """
            trap '' INT HUP QUIT TERM PIPE
            read -r _ || :
            kill -TERM "$1" 2>/dev/null || exit 0
            i=0
            while [ $i -lt 50 ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
            kill -KILL "$1" 2>/dev/null || :
            """
        do {
            let pid = try ChildProcess.spawn(
                "/bin/sh", ["-c", script, "haul-nginx-watchdog", String(nginx)],
                stdin: .descriptor(fds[0]), output: "/dev/null")
            close(fds[0])
            return (pid, fds[1])
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
    }

    static func terminate(_ running: Processes) {
        // The watchdog goes first, so it cannot signal a pid after nginx has been reaped.
        if let watchdog = running.watchdog {
            kill(watchdog, SIGKILL)
            ChildProcess.reap(watchdog)
        }
        if let pipe = running.watchdogPipe { close(pipe) }
        kill(running.nginx, SIGTERM)
        if !ChildProcess.reap(running.nginx, within: 5) {
            kill(running.nginx, SIGKILL)
            ChildProcess.reap(running.nginx)
        }
    }
}

/// Finds the external programs the fixtures drive.
public enum ExternalTool {
    public static func locate(_ name: String, package: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        // Debian keeps nginx in /usr/sbin, which is not on every user's PATH.
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/usr/bin"]
        for directory in directories where directory.hasPrefix("/") {
            let candidate = directory + "/" + name
            var info = stat()
            if stat(candidate, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        throw NginxServerError.toolMissing(name: name, package: package)
    }

    static func run(_ executable: String, _ arguments: [String]) throws {
        let result = try ProcessRunner.run(executable, arguments, timeout: 30)
        guard result.exitCode == 0 else {
            throw NginxServerError.commandFailed(command: [executable] + arguments, result: result)
        }
    }
}

/// Long-running children (unlike `ProcessRunner`, which runs one to completion).
enum ChildProcess {
    enum Input {
        case path(String)
        case descriptor(Int32)
    }

    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    /// glibc 2.34+. Without it a child could inherit a descriptor another thread opened without O_CLOEXEC
    /// (a client socket, say) and keep that connection alive.
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Starts `executable` with the minimal test environment, default signal handling and an empty signal
    /// mask, in the caller's process group so a Ctrl-C or a group kill reaches it too.
    static func spawn(_ executable: String, _ arguments: [String], stdin: Input, output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        switch stdin {
        case .path(let path): posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        if let addCloseFrom { _ = addCloseFrom(&actions, 3) }

        return try ProcessRunner.spawn(
            executable, arguments, actions: &actions, environment: ProcessRunner.minimalEnvironment,
            newProcessGroup: false)
    }

    /// Waits for the child to exit; false if it is still running after `seconds`.
    @discardableResult
    static func reap(_ pid: pid_t, within seconds: Double = .infinity) -> Bool {
        let deadline = monotonicSeconds() + seconds
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, seconds.isInfinite ? 0 : WNOHANG)
            if reaped == pid || (reaped < 0 && errno != EINTR) { return true }
            if monotonicSeconds() >= deadline { return false }
            if reaped == 0 { usleep(5_000) }
        }
    }
}
