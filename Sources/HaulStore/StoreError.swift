import Glibc
import HaulFileSystem

/// A failure of a local file operation, naming the path and the cause, e.g.
/// `cannot rename into "data/a.csv": Permission denied`.
///
/// `errno` is kept so that callers can classify (out of space, permission, …) without parsing text. When haul's
/// own path-safety rule refused the operation, no system call failed: `errno` is then 0 and `detail` says why.
package struct StoreError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What was attempted, phrased to follow "cannot": `rename into`, `create directory`, …
    package let operation: String
    /// Relative to root for destinations and the directories above them; absolute for haul's temporary files.
    package let path: String
    package let errno: Int32
    /// Replaces strerror in the message when the system's wording alone would mislead (a directory in the
    /// way, a symlink leaving root); nil for plain system-call failures.
    package let detail: String?

    package init(operation: String, path: String, errno: Int32, detail: String? = nil) {
        self.operation = operation
        self.path = path
        self.errno = errno
        self.detail = detail
    }

    package var description: String {
        "cannot \(operation) \"\(path)\": \(cause)"
    }

    /// The message shown under `destination`'s name (`! data/a.csv (…)`, `error: data/a.csv: …`): the path is
    /// left out when it is the destination itself, so a line does not name its file twice.
    package func description(about destination: String) -> String {
        path == destination ? "cannot \(operation) it: \(cause)" : description
    }

    private var cause: String { detail ?? Errno(errno).description }
}
