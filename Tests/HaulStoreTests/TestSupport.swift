import Foundation
import Glibc
import HaulManifest
import HaulStore
import XCTest

/// A real directory under $TMPDIR, removed (after restoring write permission) when the test ends.
final class Scratch {
    let path: String

    init() throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array(FileSystemPath.join(base, "haul-store-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        path = String(cString: made)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    func at(_ relative: String) -> String { FileSystemPath.join(path, relative) }

    func write(_ relative: String, _ text: String) throws { try write(relative, Array(text.utf8)) }

    func write(_ relative: String, _ bytes: [UInt8]) throws {
        let full = at(relative)
        try FileManager.default.createDirectory(atPath: FileSystemPath.parent(full), withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: full, contents: Data(bytes)) else {
            throw POSIXError(.EIO)
        }
    }

    func read(_ relative: String) -> [UInt8]? {
        FileManager.default.contents(atPath: at(relative)).map { Array($0) }
    }

    func mkdir(_ relative: String) throws {
        try FileManager.default.createDirectory(atPath: at(relative), withIntermediateDirectories: true)
    }

    func symlink(_ relative: String, to target: String) throws {
        try FileManager.default.createSymbolicLink(atPath: at(relative), withDestinationPath: target)
    }

    /// lstat of a path under the scratch directory.
    func linkStatus(_ relative: String) -> stat? {
        var info = stat()
        return lstat(at(relative), &info) == 0 ? info : nil
    }
}

enum FileSystemPath {
    static func join(_ base: String, _ relative: String) -> String {
        base.hasSuffix("/") ? base + relative : base + "/" + relative
    }

    static func parent(_ path: String) -> String {
        (path as NSString).deletingLastPathComponent
    }
}

func dest(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> DestinationPath {
    try XCTUnwrap(DestinationPath(text), "invalid destination \(text)", file: file, line: line)
}

func isRegular(_ info: stat?) -> Bool { info.map { $0.st_mode & S_IFMT == S_IFREG } ?? false }
func isSymlink(_ info: stat?) -> Bool { info.map { $0.st_mode & S_IFMT == S_IFLNK } ?? false }
func permissions(_ info: stat?) -> mode_t? { info.map { $0.st_mode & 0o7777 } }

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}

extension StagingArea {
    /// Stands in for the engine, which writes each download into a fresh private file in the staging area.
    func makeTestFile() throws -> String {
        try prepare()
        let path = directory + "/" + UUID().uuidString + ".part"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        close(fd)
        return path
    }
}
