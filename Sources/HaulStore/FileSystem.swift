import CLinuxShims
import Glibc
import HaulFailures
import HaulFileSystem

/// Thin, allocation-light wrappers over the system calls the store uses. They exist so that errno is read
/// right after the call that set it, before any Swift code that might allocate and clobber it.
enum FileSystem {
    /// `lstat`: never follows a final symlink.
    static func linkStatus(_ path: String) -> Result<stat, Errno> {
        var info = stat()
        let rc = path.withCString { lstat($0, &info) }
        return rc == 0 ? .success(info) : .failure(Errno(errno))
    }

    /// `stat`: follows symlinks (used only on paths already proven to stay inside root).
    static func status(_ path: String) -> Result<stat, Errno> {
        var info = stat()
        let rc = path.withCString { stat($0, &info) }
        return rc == 0 ? .success(info) : .failure(Errno(errno))
    }

    static func realPath(_ path: String) -> Result<String, Errno> {
        let resolved: UnsafeMutablePointer<CChar>? = path.withCString { realpath($0, nil) }
        guard let resolved else { return .failure(Errno(errno)) }
        defer { free(resolved) }
        return .success(String(cString: resolved))
    }

    /// The text of a symlink, for messages only.
    static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = path.withCString { readlink($0, &buffer, buffer.count - 1) }
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func makeDirectory(_ path: String, mode: mode_t) -> Int32? {
        let rc = path.withCString { mkdir($0, mode) }
        return rc == 0 ? nil : errno
    }

    /// `mkdir -p` for paths outside haul's jurisdiction (root itself and its ancestors), where the user chose
    /// the path and symlinks along it are theirs to have.
    static func makeDirectories(_ path: String, mode: mode_t) -> Int32? {
        guard let failure = makeDirectory(path, mode: mode) else { return nil }
        switch failure {
        case EEXIST:
            if case .success(let info) = status(path), FileKind(mode: info.st_mode) == .directory { return nil }
            return ENOTDIR
        case ENOENT:
            let parent = parentOf(path)
            guard parent != path, !parent.isEmpty else { return ENOENT }
            if let parentFailure = makeDirectories(parent, mode: mode) { return parentFailure }
            guard let again = makeDirectory(path, mode: mode) else { return nil }
            if again == EEXIST, case .success(let info) = status(path),
                FileKind(mode: info.st_mode) == .directory
            {
                return nil
            }
            return again
        default:
            return failure
        }
    }

    /// Opens a directory only to fsync it: the rename is durable only once its directory entry is.
    static func syncDirectory(_ path: String) -> Int32? {
        let fd = path.withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return fsync(fd) == 0 ? nil : errno
    }

    static func parentOf(_ path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        if slash == path.utf8.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// The last component of `path`.
    static func fileName(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(path[path.utf8.index(after: slash)...])
    }

    /// Names in `directory`, without `.` and `..`; empty when it cannot be read.
    static func entries(of directory: String) -> [String] {
        var names: [String] = []
        _ = forEachEntry(in: directory) { name in
            names.append(String(decoding: name, as: UTF8.self))
            return true
        }
        return names
    }

    /// Whether `directory` can be listed and lists nothing but `name` (if even that); stops at the first other entry.
    static func holdsNothing(in directory: String, apartFrom name: String) -> Bool {
        forEachEntry(in: directory) { $0.elementsEqual(name.utf8) } == .listed
    }

    private enum Listing { case listed, stopped, unreadable }

    /// Calls `body` with each name in `directory` but `.` and `..`, until it returns false.
    private static func forEachEntry(
        in directory: String, _ body: (UnsafeRawBufferPointer.SubSequence) -> Bool
    ) -> Listing {
        guard let stream = opendir(directory) else { return .unreadable }
        defer { closedir(stream) }
        while true {
            errno = 0
            guard let entry = readdir(stream) else { return errno == 0 ? .listed : .unreadable }
            let goOn = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let name = raw.prefix { $0 != 0 }
                return name.elementsEqual(".".utf8) || name.elementsEqual("..".utf8) || body(name)
            }
            if !goOn { return .stopped }
        }
    }

    /// `base/relative`, without doubling the slash when base is `/`.
    static func join(_ base: String, _ relative: String) -> String {
        base.hasSuffix("/") ? base + relative : base + "/" + relative
    }

    /// Strips trailing slashes so that prefixes and joins compare and print consistently.
    static func normalizedRoot(_ root: String) -> String {
        var text = Substring(root)
        while text.count > 1, text.hasSuffix("/") { text = text.dropLast() }
        return text.isEmpty ? "." : String(text)
    }
}

/// A folder held open while work goes on in it: each call then resolves one name relative to it instead of the
/// kernel walking the whole path again, for every one of the thousands of files a folder may hold. One folder
/// at a time (work comes in runs of neighbouring entries), so a manifest with 100,000 folders does not need
/// 100,000 descriptors.
struct HeldDirectory {
    private var path: String?
    private var descriptor: Int32 = -1

    /// Where `name` in `directory` is for the *at calls: the held folder's descriptor and the name, or, when the
    /// folder cannot be held open (out of descriptors, say), the full path, which works as well, only slower.
    mutating func locate(_ name: String, in directory: String) -> (directory: Int32, name: String) {
        if path != directory {
            close()
            path = directory
            descriptor = directory.withCString { open($0, haul_O_PATH | O_DIRECTORY | O_CLOEXEC) }
        }
        return descriptor >= 0 ? (descriptor, name) : (AT_FDCWD, FileSystem.join(directory, name))
    }

    /// `lstat` of `name` in `directory` (an absolute path inside root, already resolved).
    mutating func linkStatus(_ name: String, in directory: String) -> Result<stat, Errno> {
        let (folder, name) = locate(name, in: directory)
        var info = stat()
        let rc = name.withCString { fstatat(folder, $0, &info, AT_SYMLINK_NOFOLLOW) }
        return rc == 0 ? .success(info) : .failure(Errno(errno))
    }

    mutating func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
        path = nil
    }
}
