import Glibc

/// A private directory outside any root, for bytes that are measured and thrown away (`haul add` downloads a
/// file once to learn its digest): mode 0700 under `$TMPDIR`, so nobody else reads them meanwhile.
public struct ScratchDirectory: Sendable {
    public let path: String

    /// `$TMPDIR/<prefix>.XXXXXX` (`/tmp` when TMPDIR is unset or empty).
    public static func make(prefix: String) throws(StoreError) -> ScratchDirectory {
        var base = getenv("TMPDIR").map { String(cString: $0) } ?? ""
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        if base.isEmpty { base = "/tmp" }
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } != nil }
        guard made else { throw StoreError(operation: "create a temporary directory in", path: base, errno: errno) }
        return ScratchDirectory(path: String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// Whatever was left in it (a measured file, a partial one after a failure), then the directory.
    public func remove() {
        for name in FileSystem.entries(of: path) { _ = unlink(FileSystem.join(path, name)) }
        _ = rmdir(path)
    }
}
