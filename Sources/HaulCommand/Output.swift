import Foundation
import Haul
import HaulEngine
import HaulManifest
import Synchronization

/// stdout for results, stderr for diagnostics; whole lines, never interleaved mid-line across threads.
enum Output {
    private static let lock = Mutex(())

    static func lines(_ lines: [String]) { write(lines, to: STDOUT_FILENO) }
    static func errors(_ lines: [String]) { write(lines, to: STDERR_FILENO) }

    /// Straight to the file descriptor: no stdio buffer to flush, and a closed pipe (EPIPE, SIGPIPE ignored)
    /// simply ends the output.
    private static func write(_ lines: [String], to descriptor: Int32) {
        guard !lines.isEmpty else { return }
        var text = lines.joined(separator: "\n") + "\n"
        lock.withLock { _ in
            text.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { return }
                    offset += written
                }
            }
        }
    }
}

enum Environment {
    static var current: [String: String] { ProcessInfo.processInfo.environment }
}
