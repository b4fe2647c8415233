import Foundation
import Glibc

/// Archives for tests, made by the tools users make them with (`tar`, `zstd`, `zip`) or, for the hostile ones no
/// archiver would make, member by member by `Tests/Tools/craft_archive.py`; and a tree on disk written out as
/// lines, to compare unpacked trees with what was packed.
public enum Archives {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The formats `pack` makes, named as a manifest's `format:` names them.
    public static let packedFormats = ["tar", "tar.gz", "tar.bz2", "tar.xz", "tar.zst", "zip"]

    /// Packs `names` (entries of `folder`, with everything under them) into `output` as `format` (one of
    /// `packedFormats`, or `7z`: p7zip, which not every machine has); symlinks are stored as symlinks. The archive's
    /// bytes.
    @discardableResult
    public static func pack(_ names: [String], in folder: String, format: String, to output: String) throws -> [UInt8] {
        let script: String
        switch format {
        case "tar": script = "tar -cf \"$OUT\" \"$@\""
        case "tar.gz": script = "tar -czf \"$OUT\" \"$@\""
        case "tar.bz2": script = "tar -cjf \"$OUT\" \"$@\""
        case "tar.xz": script = "tar -cJf \"$OUT\" \"$@\""
        case "tar.zst": script = "tar -cf - \"$@\" | zstd -q -c > \"$OUT\""
        case "zip": script = "zip -q -X -r -y \"$OUT\" \"$@\""
        case "7z": script = "rm -f \"$OUT\"; 7z a -bd -bso0 -snl \"$OUT\" \"$@\""
        default: throw Failure("no way to pack \(format)")
        }
        try run("/bin/sh", ["-c", "set -e; " + script, "pack"] + names, in: folder, environment: ["OUT": output])
        return try bytes(of: output)
    }

    /// An archive written member by member (`format`: gnu, pax or ustar tar, or zip); see `craft_archive.py` for
    /// the keys of a member. The archive's bytes.
    @discardableResult
    public static func craft(_ members: [[String: Any]], format: String, to output: String) throws -> [UInt8] {
        let list = try JSONSerialization.data(withJSONObject: members)
        let input = output + ".json"
        try list.write(to: URL(fileURLWithPath: input))
        defer { unlink(input) }
        try run("/bin/sh", ["-c", "python3 \"$0\" \"$1\" \"$2\" < \"$3\"", craftScript, format, output, input])
        return try bytes(of: output)
    }

    /// `Tests/Tools/craft_archive.py`, found from this source file's place in the repository.
    public static var craftScript: String {
        var path = "\(#filePath)"
        for _ in 0..<2 { path = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) }
        return path + "/Tools/craft_archive.py"
    }

    /// The tree at `root` as lines, in byte order of their paths: `path/` for a folder, `path -> target` for a
    /// symlink, `path file SIZE [x ]SHA256` for a file (executable: any execute bit; SHA-256 from `sha256sum`),
    /// `path special` for anything else. Empty when `root` is not there.
    public static func listing(of root: String) throws -> [String] {
        var lines: [(path: String, line: String)] = []
        var files: [(path: String, size: Int64, executable: Bool)] = []
        let walker = FileManager.default.enumerator(atPath: root)
        while let path = walker?.nextObject() as? String {
            var info = stat()
            guard lstat(root + "/" + path, &info) == 0 else { throw Failure("lstat \(path)") }
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
            guard digests.count == files.count else { throw Failure("sha256sum gave \(digests.count) sums") }
            for (file, digest) in zip(files, digests) {
                lines.append((file.path, "\(file.path) file \(file.size) \(file.executable ? "x " : "")\(digest)"))
            }
        }
        return lines.sorted { Array($0.path.utf8).lexicographicallyPrecedes(Array($1.path.utf8)) }.map(\.line)
    }

    /// Runs a tool, throwing what it said when it fails; its standard output.
    @discardableResult
    public static func run(
        _ tool: String, _ arguments: [String], in folder: String? = nil,
        environment: [String: String] = [:]
    ) throws -> String {
        let result = try ProcessRunner.run(tool, arguments, environment: environment, currentDirectory: folder)
        guard result.exitCode == 0 else {
            throw Failure("\(tool) \(arguments.joined(separator: " ")) exited \(result.exitCode): \(result.stderr)")
        }
        return result.stdout
    }

    private static func bytes(of path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw Failure("cannot read \(path)") }
        return [UInt8](data)
    }
}
