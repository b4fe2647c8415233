import Foundation
import Glibc
import HaulTestSupport
import XCTest

/// A folder for the `extract:` command tests: the archives' sources under `src/`, the archives under `archives/`,
/// an origin on loopback that serves them, a manifest `haul.yaml` whose root is `out`, and `outside/sentinel`,
/// which no run may touch.
final class ArchiveFixture {
    let directory: TemporaryDirectory
    let files: StaticFiles
    let server: LoopbackHTTPServer
    static let sentinelText = "nothing may touch this\n"

    /// A member of a source tree.
    enum Member {
        case file(String, String, executable: Bool = false)
        case symlink(String, to: String)
        case folder(String)
    }

    /// - Parameters:
    ///   - files: what the origin serves (a test that scripts answers around them makes them first).
    ///   - respond: how the origin answers, given its files (default: as nginx serves a folder).
    init(
        files: StaticFiles = StaticFiles(),
        respond: @escaping @Sendable (StaticFiles, RecordedRequest) -> ServerResponse = { $0.respond(to: $1) }
    ) throws {
        directory = try TemporaryDirectory(prefix: "haul-extract")
        self.files = files
        server = try LoopbackHTTPServer { respond(files, $0) }
        try directory.write("outside/sentinel", Self.sentinelText)
        try directory.makeDirectory("archives")
    }

    deinit { server.stop() }

    var root: String { directory.path("out") }

    /// Writes `members` as the folder `src/<name>`; its absolute path.
    @discardableResult
    func source(_ name: String, _ members: [Member]) throws -> String {
        let base = "src/" + name
        try directory.makeDirectory(base)
        for member in members {
            switch member {
            case .file(let path, let text, let executable):
                try directory.write(base + "/" + path, text)
                chmod(directory.path(base + "/" + path), executable ? 0o755 : 0o644)
            case .symlink(let path, let target):
                try directory.makeDirectory(((base + "/" + path) as NSString).deletingLastPathComponent)
                try FileManager.default.createSymbolicLink(
                    atPath: directory.path(base + "/" + path), withDestinationPath: target)
            case .folder(let path):
                try directory.makeDirectory(base + "/" + path)
            }
        }
        return directory.path(base)
    }

    /// The entries of `src/<name>` (or `names` in it) packed as `format`; the archive's bytes.
    func pack(_ name: String, format: String, names: [String]? = nil) throws -> [UInt8] {
        let folder = directory.path("src/" + name)
        let entries = names ?? directory.list("src/" + name)
        return try Archives.pack(entries, in: folder, format: format, to: directory.path("archives/\(name).\(format)"))
    }

    /// An archive written member by member (see `craft_archive.py`); its bytes.
    func craft(_ name: String, format: String = "gnu", _ members: [[String: Any]]) throws -> [UInt8] {
        try Archives.craft(members, format: format, to: directory.path("archives/" + name))
    }

    /// Serves `bytes` at `path`; the URL.
    @discardableResult
    func publish(_ path: String, _ bytes: [UInt8]) -> String {
        files.set(path, bytes)
        return server.url(path)
    }

    /// One entry of a manifest: `extract` lines go under `extract:` (none: `extract: true`); `extra` lines under the
    /// entry.
    static func entry(
        _ url: String, dest: String, sha256: String? = nil, extract: [String] = [], extra: [String] = []
    ) -> String {
        var yaml = "  - url: \(url)\n    dest: \(dest)\n"
        if let sha256 { yaml += "    sha256: \(sha256)\n" }
        for line in extra { yaml += "    \(line)\n" }
        yaml += extract.isEmpty ? "    extract: true\n" : "    extract:\n" + extract.map { "      \($0)\n" }.joined()
        return yaml
    }

    /// An entry that is a plain file, not an archive.
    static func fileEntry(_ url: String, dest: String, sha256: String) -> String {
        "  - url: \(url)\n    dest: \(dest)\n    sha256: \(sha256)\n"
    }

    /// Makes the manifest one entry, `dest`, that pins the archive of `src/<name>` packed as `format` (published at
    /// `/<name>.<format>`); the archive's bytes.
    @discardableResult
    func manifestPinning(_ name: String, format: String, dest: String) throws -> [UInt8] {
        let archive = try pack(name, format: format)
        try manifest([Self.entry(publish("/\(name).\(format)", archive), dest: dest, sha256: sha256(archive))])
        return archive
    }

    func manifest(_ entries: [String]) throws {
        try directory.write(
            "haul.yaml", "version: 1\nroot: out\nfiles:" + (entries.isEmpty ? " []\n" : "\n" + entries.joined()))
    }

    func haul(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
        try directory.haul(arguments, environment: environment)
    }

    /// `haul sync`, which must exit 0.
    @discardableResult
    func syncSucceeds(
        _ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line
    ) throws -> ProcessResult {
        let result = try haul(["sync"] + arguments)
        XCTAssertEqual(result.exitCode, 0, "\(result.stdout)\(result.stderr)", file: file, line: line)
        return result
    }

    /// The next `haul sync` has nothing to do and asks the server nothing.
    func assertTheNextSyncAsksNothing(file: StaticString = #filePath, line: UInt = #line) throws {
        server.resetLog()
        let again = try syncSucceeds(file: file, line: line)
        XCTAssertTrue(again.stdout.contains("Nothing to do"), again.stdout, file: file, line: line)
        XCTAssertEqual(server.requests.map(\.path), [], file: file, line: line)
    }

    /// The tree at `relative` (in the test's folder) as lines; see `Archives.listing`.
    func listing(_ relative: String) throws -> [String] {
        try Archives.listing(of: directory.path(relative))
    }

    /// What `nix hash path` prints for the folder (the NAR digest in SRI form). Where nix is not installed, the test
    /// cannot run (see `Capability`).
    func nixHash(_ relative: String) throws -> String {
        guard access("/usr/bin/nix", X_OK) == 0 else {
            throw Capability.unavailable(
                "nix is not installed (Debian: nix-bin): tree digests cannot be compared with nix hash path")
        }
        let result = try ProcessRunner.run(
            "/usr/bin/nix",
            [
                "--extra-experimental-features", "nix-command", "hash", "path",
                directory.path(relative),
            ])
        guard result.exitCode == 0 else { throw Archives.Failure("nix hash path failed: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Every path in the test's folder (folders too, relative to it) whose name starts with `escaped`.
    func escapes() -> [String] {
        var found: [String] = []
        let walker = FileManager.default.enumerator(atPath: directory.path)
        while let path = walker?.nextObject() as? String {
            if (path as NSString).lastPathComponent.hasPrefix("escaped") { found.append(path) }
        }
        return found.sorted()
    }

    /// Nothing outside the root's destinations and `.haul` changed: the sentinel is as it was, with one link; no
    /// path named `escaped…` exists anywhere; the root holds `.haul` and `destinations` only; and `.haul/tmp` and
    /// `.haul/partial` are empty (a finished run leaves nothing staged), but for the folder a shard stages in (`shard`:
    /// `shard-K-of-N`), which is kept, empty, once a run of that shard made it.
    func assertNoLitter(
        destinations: [String], _ context: String = "", shard: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(
            directory.read("outside/sentinel"), Array(Self.sentinelText.utf8), context, file: file, line: line)
        var info = stat()
        XCTAssertEqual(lstat(directory.path("outside/sentinel"), &info), 0, file: file, line: line)
        XCTAssertEqual(info.st_nlink, 1, "\(context): a hard link was made to the sentinel", file: file, line: line)
        XCTAssertEqual(directory.list("outside"), ["sentinel"], context, file: file, line: line)
        XCTAssertEqual(escapes(), [], context, file: file, line: line)
        XCTAssertEqual(directory.list("out"), ([".haul"] + destinations).sorted(), context, file: file, line: line)
        for folder in ["/.haul/tmp", "/.haul/partial"] {
            XCTAssertEqual(
                RootInspection.entries(of: root + folder).filter { $0 != shard }, [], context + " " + folder,
                file: file, line: line)
            if let shard {
                XCTAssertEqual(
                    RootInspection.entries(of: root + folder + "/" + shard), [], context + " " + folder, file: file,
                    line: line)
            }
        }
    }

    /// The JSON events a run printed, one object a line.
    static func events(_ stdout: String, file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap { text in
            let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            if object == nil { XCTFail("not a JSON object: \(text)", file: file, line: line) }
            return object
        }
    }
}

/// Deterministic bytes that no compressor shrinks much, so that body offsets mean archive offsets.
func pseudoRandom(_ count: Int, seed: Int) -> [UInt8] {
    var generator = SplitMix(seed: UInt64(seed))
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + 8)
    while bytes.count < count { withUnsafeBytes(of: generator.next()) { bytes += $0 } }
    return Array(bytes.prefix(count))
}
