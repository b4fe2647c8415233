import Foundation
import Glibc

/// A fresh directory per test, removed when the object goes away, so tests never share state on disk.
public final class TemporaryDirectory: Sendable {
    public let path: String

    /// mkdtemp under NSTemporaryDirectory(), which honours $TMPDIR.
    public init(prefix: String = "haul-test") throws {
        var base = NSTemporaryDirectory()
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) } != nil
        }
        guard created else { throw SystemCallError(call: "mkdtemp", errno: errno) }
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        Self.removeTree(path)
    }

    /// The absolute path of `relativePath` inside this directory.
    public func path(_ relativePath: String) -> String {
        relativePath.hasPrefix("/") ? path + relativePath : path + "/" + relativePath
    }

    /// Writes the file, creating parent directories as needed.
    public func write(_ relativePath: String, _ bytes: [UInt8]) throws {
        let target = path(relativePath)
        let parent = (target as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: target))
    }

    public func write(_ relativePath: String, _ string: String) throws {
        try write(relativePath, Array(string.utf8))
    }

    public func makeDirectory(_ relativePath: String) throws {
        try FileManager.default.createDirectory(atPath: path(relativePath), withIntermediateDirectories: true)
    }

    /// The file's bytes, or nil when it does not exist or is not readable.
    public func read(_ relativePath: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path(relativePath)).map { [UInt8]($0) }
    }

    public func exists(_ relativePath: String) -> Bool {
        FileManager.default.fileExists(atPath: path(relativePath))
    }

    /// Entries directly inside `relativePath`, sorted; empty when it is not a directory.
    public func list(_ relativePath: String = "") -> [String] {
        let directory = relativePath.isEmpty ? path : path(relativePath)
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// Whether a download's temporary file (`*.part`) with bytes in it lies anywhere under `relativePath`: what a
    /// test waits for before it interrupts a download.
    public func holdsBytesInFlight(under relativePath: String) -> Bool {
        let files = (try? FileManager.default.subpathsOfDirectory(atPath: path(relativePath))) ?? []
        return files.contains { name in
            var info = stat()
            return name.hasSuffix(".part") && lstat(path(relativePath + "/" + name), &info) == 0 && info.st_size > 0
        }
    }

    /// `rm -rf`, including trees whose directories a test made read-only (a store under test may do that):
    /// permissions are restored first, then removal is retried.
    private static func removeTree(_ root: String) {
        let manager = FileManager.default
        if (try? manager.removeItem(atPath: root)) != nil { return }
        chmod(root, 0o700)
        if let walker = manager.enumerator(atPath: root) {
            while let relative = walker.nextObject() as? String {
                let full = root + "/" + relative
                var info = stat()
                if lstat(full, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR { chmod(full, 0o700) }
            }
        }
        try? manager.removeItem(atPath: root)
    }
}
