import Foundation
import Glibc

/// A port on 127.0.0.1 that refuses every connection: a TCP socket is bound to it and never listens, so the
/// kernel answers each SYN with a reset, and no other process can take the port while this object lives (a port
/// freed by stopping a server could be reused by anything running beside the tests).
public final class RefusingPort: Sendable {
    public let port: UInt16
    private let descriptor: Int32

    public init() throws {
        (descriptor, port) = try LoopbackSocket.bound()
    }

    deinit { close(descriptor) }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)" + path }
}

/// A server that never answers: it listens, so the kernel completes each TCP handshake (up to the backlog), but
/// nothing ever accepts, reads or writes. A client's request goes out and nothing comes back, ever: the stall a
/// hung server or a black-holing middlebox produces.
public final class SilentListener: Sendable {
    public let port: UInt16
    private let descriptor: Int32

    public init() throws {
        (descriptor, port) = try LoopbackSocket.bound()
        guard listen(descriptor, 128) == 0 else {
            let code = errno
            close(descriptor)
            throw SystemCallError(call: "listen", errno: code)
        }
    }

    /// Closing the listener resets the connections still waiting in its backlog.
    deinit { close(descriptor) }

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)" + path }
}

enum LoopbackSocket {
    /// A TCP socket bound to 127.0.0.1 on a port the kernel picks.
    static func bound() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SystemCallError(call: "socket", errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let failure = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(descriptor, pointer, length) == 0 else { return errno }
                guard getsockname(descriptor, pointer, &length) == 0 else { return errno }
                return 0
            }
        }
        guard failure == 0 else {
            close(descriptor)
            throw SystemCallError(call: "bind/getsockname on 127.0.0.1:0", errno: failure)
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }
}

/// A server that answers every connection at once with `banner` and closes it, whatever the client sends: what a
/// TLS client meets on a port that speaks another protocol (plain HTTP, SSH), so that its handshake fails.
public final class BannerServer: Sendable {
    public let port: UInt16
    private let descriptor: Int32
    private let finished = DispatchSemaphore(value: 0)

    public init(banner: String = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n") throws {
        (descriptor, port) = try LoopbackSocket.bound()
        guard listen(descriptor, 128) == 0 else {
            let code = errno
            close(descriptor)
            throw SystemCallError(call: "listen", errno: code)
        }
        let listener = descriptor, finished = self.finished
        let bytes = Array(banner.utf8)
        Thread.detachNewThread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { break }  // stopped: the listener was shut down
                _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(connection)
            }
            finished.signal()
        }
    }

    /// Returns once no connection is being answered any more.
    public func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        finished.wait()
        close(descriptor)
    }

    public func url(_ path: String) -> String { "https://127.0.0.1:\(port)" + path }
}
