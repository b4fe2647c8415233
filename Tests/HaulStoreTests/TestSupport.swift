import Foundation
import Glibc
import HaulCommand
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulStore
import HaulTestSupport
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

    /// Makes an empty file named by `relative` and then `bytes`, which need not be UTF-8 (as a name on Linux need not).
    func touch(_ relative: String, nameEndingWith bytes: [UInt8]) throws {
        let path = (Array(at(relative).utf8) + bytes).map { CChar(bitPattern: $0) } + [0]
        let made = creat(path, 0o644)
        guard made >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        close(made)
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

    static func name(_ path: String) -> String {
        (path as NSString).lastPathComponent
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
    /// The staging folders of `root` as a sync opens them (root and `.haul` made as needed).
    convenience init(root: String) throws {
        try self.init(area: PrivateArea.create(root: root))
    }

    /// Stands in for the engine, which writes each download into a fresh private file in the staging area; the
    /// file's full path.
    func makeTestFile() throws -> String {
        let path = temporary.path + "/" + UUID().uuidString + ".part"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        close(fd)
        return path
    }
}

extension Committer {
    /// A committer taking verified files from `staging`'s temporary folder.
    convenience init(root: String, staging: StagingArea, durability: Durability = .full) {
        self.init(root: root, staging: staging.temporary, durability: durability)
    }
}

extension CommitRequest {
    /// For a temporary file given by its full path in the staging folder.
    init(temporaryPath: String, destination: DestinationPath, mode: FileMode, hasMode: Bool = false) {
        self.init(
            temporaryName: FileSystemPath.name(temporaryPath), destination: destination, mode: mode, hasMode: hasMode)
    }
}

/// The store's failures as the command words them: these tests pin the message a user reads, as well as the value.
extension StoreError {
    var description: String { StoreWording.sentence(self) }
}

extension SystemError {
    var description: String { StoreWording.sentence(self) }
}

/// The store's entry points by root path, for tests that do not care about the private folder's handle: each
/// opens (or makes) `<root>/.haul` exactly as a sync would.
extension StateCache {
    func save(root: String) throws {
        try save(in: PrivateArea.create(root: root))
    }

    static func load(root: String) -> (cache: StateCache, problems: [StateProblem]) {
        load(area: try? PrivateArea.existing(root: root))
    }
}

extension RunLock {
    convenience init(root: String, wait: Bool, holder: String) throws {
        try self.init(
            area: PrivateArea.create(root: root), wait: wait ? .forever(notice: { _ in }) : .no, holder: holder)
    }
}

/// Calls `body` with a small tree (`bin/tool`, `share/doc/README`) on a FUSE file system that fails the operations
/// the test injects (`FaultFileSystem`): real I/O errors from reading a file or listing a folder. The tree's handle
/// is closed before the file system is unmounted, which would otherwise wait for it.
func withFaultyTree(_ body: (DirectoryHandle, FaultFileSystem) throws -> Void) throws {
    let directory = try TemporaryDirectory()
    let faults = try Capability.required { try FaultFileSystem(over: directory, mountPoint: "out", backing: "back") }
    defer { faults.unmount() }
    try directory.write("back/tree/bin/tool", "#!/bin/sh\n")
    try directory.write("back/tree/share/doc/README", "read me\n")
    try body(try DirectoryHandle.opening(directory.path("out/tree")), faults)
}
