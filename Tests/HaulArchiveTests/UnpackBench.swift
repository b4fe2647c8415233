import Foundation
import Glibc
import HaulArchive
import HaulFileSystem
import HaulTestSupport
import XCTest

/// A test's folders: each unpack gets a fresh, empty `tree-N`; `outside/sentinel` sits beside the trees, and
/// `work` holds the archives. What an unpack may change is its own tree and nothing else.
final class UnpackBench {
    let directory: TemporaryDirectory
    private var trees = 0
    static let sentinelText = "nothing may touch this\n"

    init() throws {
        directory = try TemporaryDirectory(prefix: "haul-archive")
        try directory.write("outside/sentinel", Self.sentinelText)
        try directory.makeDirectory("work")
    }

    var base: String { directory.path }
    func work(_ name: String) -> String { directory.path("work/" + name) }

    /// A new empty folder to unpack into, and its relative name.
    func freshTree() throws -> String {
        trees += 1
        try directory.makeDirectory("tree-\(trees)")
        return "tree-\(trees)"
    }

    /// Runs a tool in `work`, failing the test's setup when it fails.
    @discardableResult
    func run(_ tool: String, _ arguments: [String], in folder: String? = nil) throws -> String {
        let result = try ProcessRunner.run(tool, arguments, currentDirectory: folder ?? work(""))
        guard result.exitCode == 0 else {
            throw SetupFailure("\(tool) \(arguments.joined(separator: " ")) exited \(result.exitCode): \(result.stderr)")
        }
        return result.stdout
    }

    /// An archive written member by member by `Tests/Tools/craft_archive.py` (`format`: gnu, pax, ustar or zip).
    func craft(_ name: String, format: String = "gnu", _ members: [[String: Any]]) throws -> String {
        let list = try JSONSerialization.data(withJSONObject: members)
        let input = work(name + ".json")
        try list.write(to: URL(fileURLWithPath: input))
        try run("/bin/sh", ["-c", "python3 \"$0\" \"$1\" \"$2\" < \"$3\"", Self.craftScript, format, work(name), input])
        return work(name)
    }

    /// Unpacks `archive` into a fresh tree, fed to `next` in chunks of `chunk` bytes; with `cutAt`, the body ends
    /// after that many bytes.
    func unpack(_ archive: String, rules: UnpackRules = UnpackRules(), chunk: Int = 4096,
                cutAt: Int? = nil) throws -> (tree: String, result: Result<UnpackedTree, UnpackFailure>) {
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: archive)))
        let tree = try freshTree()
        let folder = try DirectoryHandle.opening(directory.path(tree))
        let end = min(cutAt ?? bytes.count, bytes.count)
        let result = bytes.withUnsafeBytes { all in
            var offset = 0
            return Unpacker.unpack(archive: (archive as NSString).lastPathComponent, rules: rules, into: folder) {
                guard offset < end else { return nil }
                let count = min(chunk, end - offset)
                defer { offset += count }
                return UnsafeRawBufferPointer(rebasing: all[offset..<offset + count])
            }
        }
        return (tree, result)
    }

    /// Unpacks `archive` from the file itself (libarchive may seek).
    func unpackFile(_ archive: String, rules: UnpackRules = UnpackRules()) throws
        -> (tree: String, result: Result<UnpackedTree, UnpackFailure>) {
        let tree = try freshTree()
        let folder = try DirectoryHandle.opening(directory.path(tree))
        let descriptor = open(archive, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SetupFailure("cannot open \(archive)") }
        defer { close(descriptor) }
        return (tree, Unpacker.unpack(archive: (archive as NSString).lastPathComponent, rules: rules, into: folder,
                                      file: descriptor))
    }

    /// The failure an unpack must end in, as its message.
    func failure(_ result: Result<UnpackedTree, UnpackFailure>, file: StaticString = #filePath, line: UInt = #line) -> String? {
        switch result {
        case .success(let tree):
            XCTFail("unpacked although it should not have: \(tree.members)", file: file, line: line)
            return nil
        case .failure(let failure): return failure.description
        }
    }

    func tree(_ result: Result<UnpackedTree, UnpackFailure>, file: StaticString = #filePath, line: UInt = #line) -> UnpackedTree? {
        switch result {
        case .success(let tree): return tree
        case .failure(let failure):
            XCTFail("\(failure)", file: file, line: line)
            return nil
        }
    }

    /// Everything but the trees is as the bench made it: the sentinel untouched, nothing new beside it or in
    /// `work` but archives, and nothing at all at `escapes` (paths a hostile archive aims at).
    func assertNothingOutsideTrees(escapes: [String] = [], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(directory.read("outside/sentinel"), Array(Self.sentinelText.utf8), file: file, line: line)
        XCTAssertEqual(directory.list("outside"), ["sentinel"], file: file, line: line)
        let beside = directory.list().filter { !$0.hasPrefix("tree-") }
        XCTAssertEqual(beside, ["outside", "work"], file: file, line: line)
        for path in escapes {
            var info = stat()
            XCTAssertNotEqual(lstat(path, &info), 0, "\(path) exists", file: file, line: line)
        }
    }

    /// The tree on disk as lines, in byte order of their paths: `path/` for a folder, `path -> target` for a
    /// symlink, `path file SIZE [x ]SHA256` for a file (executable: any execute bit), SHA-256 from `sha256sum`.
    /// The same form as `UnpackedMember.description`, made independently of it.
    func listing(of relative: String) throws -> [String] {
        let root = directory.path(relative)
        var lines: [(path: String, line: String)] = []
        var files: [(path: String, size: Int64, executable: Bool)] = []
        let walker = FileManager.default.enumerator(atPath: root)
        while let path = walker?.nextObject() as? String {
            var info = stat()
            guard lstat(root + "/" + path, &info) == 0 else { throw SetupFailure("lstat \(path)") }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: lines.append((path, path + "/"))
            case S_IFLNK:
                let target = try FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + path)
                lines.append((path, "\(path) -> \(target)"))
            case S_IFREG: files.append((path, Int64(info.st_size), info.st_mode & 0o111 != 0))
            default: lines.append((path, "\(path) special"))
            }
        }
        if !files.isEmpty {
            let sums = try run("sha256sum", ["--zero"] + files.map { root + "/" + $0.path })
            let digests = sums.split(separator: "\0").map { String($0.prefix(64)) }
            guard digests.count == files.count else { throw SetupFailure("sha256sum gave \(digests.count) sums") }
            for (file, digest) in zip(files, digests) {
                lines.append((file.path, "\(file.path) file \(file.size) \(file.executable ? "x " : "")\(digest)"))
            }
        }
        return lines.sorted { Array($0.path.utf8).lexicographicallyPrecedes(Array($1.path.utf8)) }.map(\.line)
    }

    /// `Tests/Tools/craft_archive.py`, found from this source file's place in the repository.
    static var craftScript: String {
        var path = "\(#filePath)"
        for _ in 0..<2 { path = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) }
        return path + "/Tools/craft_archive.py"
    }
}

struct SetupFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
