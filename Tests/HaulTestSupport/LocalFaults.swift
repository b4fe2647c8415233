import Glibc

/// Why a local fault cannot be produced on this machine (not root, no mount permission, a file system without
/// the needed feature, a missing tool). Tests turn it into a skip that says so.
public struct FaultUnavailable: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Mounts that produce real kernel errors (ENOSPC, EXDEV), undone by `unmount()` or at the latest by `deinit`.
/// Needs CAP_SYS_ADMIN (root in most containers); without it `FaultUnavailable` says so.
public final class TestMount: Sendable {
    public let path: String
    /// The backing file of a loop mount, removed after unmounting.
    private let image: String?

    private init(path: String, image: String? = nil) {
        self.path = path
        self.image = image
    }

    deinit { unmount() }

    /// A tmpfs of `size` bytes at `path` (an existing directory): writes past it fail with ENOSPC.
    public static func tmpfs(at path: String, size: Int) throws -> TestMount {
        try run(["mount", "-t", "tmpfs", "-o", "size=\(size),mode=0755", "tmpfs", path], what: "mount a tmpfs")
        return TestMount(path: path)
    }

    /// A fresh, journaled ext4 file system of `size` bytes on a loop device at `path` (an existing, empty
    /// directory). The image file lives beside the mount point and goes with `unmount()`. (For whole-second
    /// timestamps, see `FaultFileSystem(coarse:)`: kernels from 6.18 mount an ext4 with 128-byte inodes read-only.)
    public static func loopExt4(at path: String, size: Int) throws -> TestMount {
        let image = path + ".img"
        guard let file = fopen(image, "w") else { throw FaultUnavailable("cannot create \(image)") }
        let sized = ftruncate(fileno(file), off_t(size)) == 0
        fclose(file)
        guard sized else { throw FaultUnavailable("cannot size \(image)") }
        // 256-byte inodes whatever the size: some mke2fs.conf give small file systems 128-byte ones, which newer
        // kernels mount read-only.
        try run(["mkfs.ext4", "-q", "-F", "-I", "256", image], what: "make an ext4 file system")
        try run(["mount", "-o", "loop", image, path], what: "loop-mount an ext4 image")
        let mount = TestMount(path: path, image: image)
        // A kernel may mount a file system it deprecates read-only without failing the mount: a test on it would
        // fail for the wrong reason.
        guard access(path, W_OK) == 0 || errno != EROFS else {
            throw FaultUnavailable("the kernel mounted the ext4 image at \(path) read-only")
        }
        return mount
    }

    /// `path` bind-mounted onto itself, read-only: a separate mount with the same files.
    public static func readOnlyBind(at path: String) throws -> TestMount {
        try run(["mount", "--bind", path, path], what: "bind-mount")
        let mount = TestMount(path: path)
        try run(["mount", "-o", "remount,ro,bind", path], what: "remount a bind mount read-only")
        return mount
    }

    /// Changes a tmpfs's size in place (its files stay).
    public func resize(to size: Int) throws {
        try Self.run(["mount", "-o", "remount,size=\(size)", path], what: "resize a tmpfs")
    }

    /// Idempotent; lazy, so a process still holding a descriptor there cannot keep the mount alive.
    public func unmount() {
        _ = try? ProcessRunner.run("umount", ["-l", path], timeout: 20)
        if let image { unlink(image) }
    }

    private static func run(_ command: [String], what: String) throws {
        guard geteuid() == 0 else { throw FaultUnavailable("cannot \(what): the tests do not run as root") }
        let result: ProcessResult
        do {
            result = try ProcessRunner.run(command[0], Array(command.dropFirst()), timeout: 20)
        } catch {
            throw FaultUnavailable("cannot \(what): \(error)")
        }
        guard result.exitCode == 0 else {
            throw FaultUnavailable(
                "cannot \(what) here (\(command.joined(separator: " ")) exited \(result.exitCode): "
                    + "\(result.stderr.trimmingTrailingNewlines))")
        }
    }
}

/// The ext4/xfs/btrfs immutable attribute (`chattr +i`): nobody, root included, may add, remove or rename
/// entries in such a directory. Removed again by `release()` or `deinit`, so the test's directory can be deleted.
public final class ImmutableAttribute: Sendable {
    public let path: String

    public init(_ path: String) throws {
        guard geteuid() == 0 else { throw FaultUnavailable("chattr +i needs root (CAP_LINUX_IMMUTABLE)") }
        let result: ProcessResult
        do {
            result = try ProcessRunner.run("chattr", ["+i", path], timeout: 20)
        } catch {
            throw FaultUnavailable("cannot run chattr: \(error)")
        }
        guard result.exitCode == 0 else {
            throw FaultUnavailable(
                "chattr +i is not supported here (the file system of \(path) may not have the "
                    + "immutable attribute): \(result.stderr.trimmingTrailingNewlines)")
        }
        self.path = path
    }

    deinit { release() }

    public func release() {
        _ = try? ProcessRunner.run("chattr", ["-i", path], timeout: 20)
    }
}

/// Runs a command as an unprivileged user through util-linux's `setpriv`, because tests run as root and root
/// ignores permission bits: a directory the user cannot write is only a fault for someone else.
public enum Unprivileged {
    /// nobody/nogroup on Debian.
    public static let uid: uid_t = 65534
    public static let gid: gid_t = 65534

    /// The command line that runs `arguments` as `uid`/`gid` with no supplementary groups.
    public static func command(_ arguments: [String]) -> [String] {
        ["setpriv", "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups"] + arguments
    }

    /// Throws `FaultUnavailable` unless `setpriv` can run `haul --version` as the unprivileged user from
    /// `directory` (which must be reachable by that user).
    public static func checkAvailable(currentDirectory directory: String) throws {
        guard geteuid() == 0 else {
            throw FaultUnavailable("the tests do not run as root: cannot switch to uid \(uid)")
        }
        let arguments = command([HaulProcess.executablePath, "--version"])
        let result: ProcessResult
        do {
            result = try ProcessRunner.run(
                arguments[0], Array(arguments.dropFirst()), currentDirectory: directory, timeout: 20)
        } catch {
            throw FaultUnavailable("cannot run setpriv: \(error)")
        }
        guard result.exitCode == 0 else {
            throw FaultUnavailable(
                "cannot run haul as uid \(uid) with setpriv (exit \(result.exitCode)): "
                    + "\(result.stderr.trimmingTrailingNewlines)")
        }
    }

    /// `chown -R` to the unprivileged user.
    public static func giveAway(_ path: String) throws {
        let result = try ProcessRunner.run("chown", ["-R", "\(uid):\(gid)", path], timeout: 20)
        guard result.exitCode == 0 else { throw FaultUnavailable("chown failed: \(result.stderr)") }
    }
}

/// An LD_PRELOAD library that SIGKILLs the process at an exact system call, so a test can stop a real `haul` at a
/// precise step of its commit (before the first rename, between two renames, before a directory's fsync,
/// before the state cache is renamed into place) instead of sleeping and hoping. haul is killed, not asked to
/// stop: nothing of its own runs after the signal, exactly as with the OOM killer or `kill -9`.
///
/// Interposing works because haul calls these through libc's dynamic symbols; counting is process-wide, so
/// "the 3rd rename" is deterministic whichever thread commits.
public enum KillSwitch {
    /// Where haul must die.
    public enum Point: Sendable, CustomStringConvertible {
        /// The `n`th rename(2), renameat(2) or renameat2(2) (a tree's exchange) whose target path starts with `prefix`
        /// (1-based), before it happens.
        case rename(n: Int, targetPrefix: String)
        /// The `n`th syncfs(2), before it happens.
        case syncfs(n: Int)
        /// The `n`th fsync(2) of a descriptor open on exactly `path`, before it happens.
        case fsync(n: Int, path: String)

        public var description: String {
            switch self {
            case .rename(let n, let prefix): "rename #\(n) into \(prefix)…"
            case .syncfs(let n): "syncfs #\(n)"
            case .fsync(let n, let path): "fsync #\(n) of \(path)"
            }
        }
    }

    /// The environment that arms the switch in a child.
    public static func environment(_ point: Point) throws -> [String: String] {
        var environment = ["LD_PRELOAD": try library.get()]
        switch point {
        case .rename(let n, let prefix): environment["HAUL_TEST_KILL_AT_RENAME"] = "\(n):\(prefix)"
        case .syncfs(let n): environment["HAUL_TEST_KILL_AT_SYNCFS"] = "\(n)"
        case .fsync(let n, let path): environment["HAUL_TEST_KILL_AT_FSYNC"] = "\(n):\(path)"
        }
        return environment
    }

    static let source = """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <signal.h>
        #include <stdatomic.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>

        static int (*real_rename)(const char *, const char *);
        static int (*real_renameat)(int, const char *, int, const char *);
        static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
        static int (*real_syncfs)(int);
        static int (*real_fsync)(int);
        static atomic_long renames, syncfses, fsyncs;

        __attribute__((constructor)) static void haul_kill_switch_init(void) {
            real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
            real_renameat = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
            real_renameat2 = (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
            real_syncfs = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
            real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
        }

        static void die(void) { kill(getpid(), SIGKILL); for (;;) pause(); }

        /* "N:TEXT" -> N, and *text points at TEXT ("" when there is none). */
        static long parse(const char *spec, const char **text) {
            char *end;
            long n = strtol(spec, &end, 10);
            *text = *end == ':' ? end + 1 : end;
            return n;
        }

        /* Counts the renames into a target under the armed prefix; dies before the armed one. */
        static void count_rename(const char *to) {
            const char *spec = getenv("HAUL_TEST_KILL_AT_RENAME");
            if (spec && to) {
                const char *prefix;
                long n = parse(spec, &prefix);
                if (strncmp(to, prefix, strlen(prefix)) == 0 && atomic_fetch_add(&renames, 1) + 1 == n) die();
            }
        }

        int rename(const char *from, const char *to) {
            count_rename(to);
            return real_rename(from, to);
        }

        /* The committer renames relative to held folders: the target counts by its full path. */
        static void count_rename_at(int todir, const char *to) {
            if (to && to[0] != '/' && todir >= 0) {
                char link[64], target[4096];
                snprintf(link, sizeof link, "/proc/self/fd/%d", todir);
                ssize_t length = readlink(link, target, sizeof target - 1);
                if (length > 0) {
                    target[length] = 0;
                    strncat(target, "/", sizeof target - strlen(target) - 1);
                    strncat(target, to, sizeof target - strlen(target) - 1);
                    count_rename(target);
                }
            } else {
                count_rename(to);
            }
        }

        int renameat(int fromdir, const char *from, int todir, const char *to) {
            count_rename_at(todir, to);
            return real_renameat(fromdir, from, todir, to);
        }

        int renameat2(int fromdir, const char *from, int todir, const char *to, unsigned int flags) {
            count_rename_at(todir, to);
            return real_renameat2(fromdir, from, todir, to, flags);
        }

        int syncfs(int fd) {
            const char *spec = getenv("HAUL_TEST_KILL_AT_SYNCFS");
            if (spec) {
                const char *unused;
                long n = parse(spec, &unused);
                if (atomic_fetch_add(&syncfses, 1) + 1 == n) die();
            }
            return real_syncfs(fd);
        }

        int fsync(int fd) {
            const char *spec = getenv("HAUL_TEST_KILL_AT_FSYNC");
            if (spec) {
                const char *path;
                long n = parse(spec, &path);
                char link[64], target[4096];
                snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
                ssize_t length = readlink(link, target, sizeof target - 1);
                if (length > 0) {
                    target[length] = 0;
                    if (strcmp(target, path) == 0 && atomic_fetch_add(&fsyncs, 1) + 1 == n) die();
                }
            }
            return real_fsync(fd);
        }
        """

    /// Compiled once per build directory (next to the test bundle), named by a hash of its source.
    static let library: Result<String, FaultUnavailable> = compile()

    private static func compile() -> Result<String, FaultUnavailable> {
        let executable = HaulProcess.executablePath
        guard let slash = executable.lastIndex(of: "/") else { return .failure(FaultUnavailable("no build directory")) }
        let directory = String(executable[..<slash])
        let path =
            "\(directory)/haul-test-kill-switch-\(StaticFiles.etag(for: Array(source.utf8)).filter(\.isHexDigit)).so"
        if access(path, R_OK) == 0 { return .success(path) }
        let unique = "\(path).\(getpid()).tmp"
        let sourcePath = unique + ".c"
        guard let file = fopen(sourcePath, "w") else {
            return .failure(FaultUnavailable("cannot write \(sourcePath): \(String(cString: strerror(errno)))"))
        }
        defer { unlink(sourcePath) }
        let bytes = Array(source.utf8)
        let written = fwrite(bytes, 1, bytes.count, file)
        fclose(file)
        guard written == bytes.count else { return .failure(FaultUnavailable("cannot write \(sourcePath)")) }
        for compiler in ["cc", "clang", "gcc"] {
            guard
                let result = try? ProcessRunner.run(
                    compiler, ["-shared", "-fPIC", "-O1", "-o", unique, sourcePath, "-ldl"],
                    timeout: 60)
            else { continue }
            if result.exitCode == 0, rename(unique, path) == 0 { return .success(path) }
            unlink(unique)
        }
        return .failure(FaultUnavailable("no C compiler (cc, clang, gcc) could build the LD_PRELOAD kill switch"))
    }
}

extension String {
    var trimmingTrailingNewlines: String {
        var text = self
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}

/// `Tests/Tools/faultfs.py` mounted over a folder: a real file system (FUSE, passing through to a backing
/// folder) that fails chosen operations with a chosen errno, for faults no mount option can make (EIO on a read,
/// on a folder's fsync). With `coarse`, every time it reports has whole seconds (ext3, FAT, NFS and many FUSE
/// mounts). Needs root, /dev/fuse, and Debian's `fuse` and `python3-fusepy`.
public final class FaultFileSystem: Sendable {
    public let mountPoint: String
    public let backing: String
    private let control: String
    private let process: BackgroundProcess

    /// Makes the folders `mountPoint` and `backing` in `directory` and mounts the one over the other.
    public convenience init(
        over directory: TemporaryDirectory, mountPoint: String, backing: String,
        coarse: Bool = false
    ) throws {
        try directory.makeDirectory(backing)
        try directory.makeDirectory(mountPoint)
        try self.init(mountPoint: directory.path(mountPoint), backing: directory.path(backing), coarse: coarse)
    }

    /// Mounts at `mountPoint` (an existing, empty folder), passing through to `backing` (an existing folder).
    public init(mountPoint: String, backing: String, coarse: Bool = false) throws {
        guard geteuid() == 0 else { throw FaultUnavailable("a FUSE mount needs root here") }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { throw FaultUnavailable("no /dev/fuse") }
        let script = Self.scriptPath
        guard access(script, R_OK) == 0 else { throw FaultUnavailable("cannot find \(script)") }
        self.mountPoint = mountPoint
        self.backing = backing
        control = backing + ".faults"
        _ = fopen(control, "w").map { fclose($0) }
        process = try BackgroundProcess(
            "/usr/bin/python3", [script, backing, mountPoint, control],
            environment: coarse ? ["FAULTFS_COARSE": "1"] : [:],
            currentDirectory: "/", outputPath: backing + ".faultfs-output")
        let mounted = process.wait(until: { Self.isMounted(mountPoint) }, timeout: 20)
        guard mounted == .conditionMet else {
            throw FaultUnavailable("faultfs did not mount (\(mounted)); is python3-fusepy installed? \(process.output)")
        }
    }

    deinit { unmount() }

    /// Replaces the faults: lines of `<operation> <path substring> [errno name]`.
    public func inject(_ rules: [String]) throws {
        guard let file = fopen(control, "w") else { throw FaultUnavailable("cannot write \(control)") }
        let text = rules.map { $0 + "\n" }.joined()
        fputs(text, file)
        fclose(file)
    }

    public func unmount() {
        guard Self.isMounted(mountPoint) else { return }
        _ = try? ProcessRunner.run("fusermount", ["-u", "-z", mountPoint], timeout: 20)
        _ = process.waitForExit(timeout: 10)
    }

    private static func isMounted(_ path: String) -> Bool {
        guard let file = fopen("/proc/self/mounts", "r") else { return false }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), file) != nil {
            let fields = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).split(
                separator: " ")
            if fields.count > 2, fields[1] == path, fields[2].hasPrefix("fuse") { return true }
        }
        return false
    }

    /// `Tests/Tools/faultfs.py`, found from this source file's place in the repository.
    static var scriptPath: String {
        var path = "\(#filePath)"
        for _ in 0..<2 { path = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)]) }
        return path + "/Tools/faultfs.py"
    }
}
