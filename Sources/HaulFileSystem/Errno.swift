import Glibc

/// A failed system call's errno: one type for every module, matched by its code, said in the system's words.
package struct Errno: Error, Sendable, Hashable, CustomStringConvertible {
    package let code: Int32

    package init(_ code: Int32) { self.code = code }

    /// glibc's strerror returns static text for every errno it knows (a thread-local buffer otherwise), so it is safe
    /// from any thread.
    package var description: String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}
