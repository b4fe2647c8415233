import Foundation
import Glibc
import HaulArchive
import HaulCommand
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
        try Archives.run(tool, arguments, in: folder ?? work(""))
    }

    /// An archive written member by member by `Tests/Tools/craft_archive.py` (`format`: gnu, pax, ustar or zip).
    func craft(_ name: String, format: String = "gnu", _ members: [[String: Any]]) throws -> String {
        try Archives.craft(members, format: format, to: work(name))
        return work(name)
    }

    /// Unpacks `archive` into a fresh tree, fed to `next` in chunks of `chunk` bytes; with `cutAt`, the body ends
    /// after that many bytes.
    func unpack(
        _ archive: String, rules: UnpackRules = UnpackRules(), chunk: Int = 4096,
        cutAt: Int? = nil
    ) throws -> (tree: String, result: Result<UnpackedTree, UnpackFailure>) {
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
    func unpackFile(
        _ archive: String, rules: UnpackRules = UnpackRules()
    ) throws
        -> (tree: String, result: Result<UnpackedTree, UnpackFailure>)
    {
        let tree = try freshTree()
        let folder = try DirectoryHandle.opening(directory.path(tree))
        let descriptor = open(archive, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SetupFailure("cannot open \(archive)") }
        defer { close(descriptor) }
        return (
            tree,
            Unpacker.unpack(
                archive: (archive as NSString).lastPathComponent, rules: rules, into: folder,
                file: descriptor)
        )
    }

    /// The failure an unpack must end in, as its message.
    func failure(
        _ result: Result<UnpackedTree, UnpackFailure>, file: StaticString = #filePath, line: UInt = #line
    ) -> String? {
        switch result {
        case .success(let tree):
            XCTFail("unpacked although it should not have: \(tree.members)", file: file, line: line)
            return nil
        case .failure(let failure): return UnpackWording.sentence(failure)
        }
    }

    func tree(
        _ result: Result<UnpackedTree, UnpackFailure>, file: StaticString = #filePath, line: UInt = #line
    ) -> UnpackedTree? {
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

    /// The tree on disk as lines (`Archives.listing`): the same form as `UnpackedMember.description`, made
    /// independently of it.
    func listing(of relative: String) throws -> [String] {
        try Archives.listing(of: directory.path(relative))
    }
}

struct SetupFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
