import CLinuxShims
import Glibc
import HaulFailures

extension DirectoryHandle {
    /// Removes `name` and, when it is a folder, everything in it (`TreeRemoval`), holding at most `heldLimit`
    /// folders open (at least 2); a missing `name` is no error. nil when all of it is gone, else the first failure
    /// (whatever else could be removed is removed all the same).
    @discardableResult
    package func removeTree(_ name: String, holdingAtMost heldLimit: Int = TreeRemoval.defaultHeldLimit) -> SystemError?
    {
        TreeRemoval.remove(name, in: self, heldLimit: heldLimit)
    }
}

/// `rm -r --one-file-system`, through descriptors alone. Every folder is opened by name from the folder above it
/// with `O_NOFOLLOW`, and every entry is removed by name from its folder's descriptor (`unlinkat`): a symlink
/// anywhere in the tree is removed as itself, never followed, and nothing outside the folder given is ever reached,
/// whatever the tree holds (no `..`, no path). A folder on another file system (a mount point) is not entered: what
/// is mounted there is not the tree's.
///
/// Names are the kernel's bytes, never decoded: a name that is not UTF-8 goes like any other.
///
/// Descriptors stay bounded however deep the tree is: only the deepest `heldLimit` folders of the current path are
/// held open; a shallower one is opened again by name from the nearest folder held (and must be the same folder,
/// by device and inode) when the removal climbs back to it.
///
/// A folder its owner cannot list or change (a tree unpacked with `0555` folders, a folder made `0000`) gets the
/// owner's `rwx` first: it is being removed, and its own user could not empty it otherwise.
package struct TreeRemoval {
    private struct Folder {
        /// Its name in the folder above it, NUL-terminated.
        let name: [CChar]
        let device: dev_t
        let inode: ino_t
        /// -1 while not held (see `heldLimit`).
        var descriptor: Int32
        /// Entries still to remove, all read when the folder was entered.
        var pending: [[CChar]]
    }

    private let parent: DirectoryHandle
    /// The folders from the one being removed down to the one being emptied now.
    private var path: [Folder] = []
    private var held = 0
    private let heldLimit: Int
    private var firstFailure: SystemError?

    /// Deeper than most trees go: they are removed without opening a folder twice.
    package static let defaultHeldLimit = 16

    private init(parent: DirectoryHandle, heldLimit: Int) {
        self.parent = parent
        self.heldLimit = max(2, heldLimit)
    }

    static func remove(_ name: String, in parent: DirectoryHandle, heldLimit: Int) -> SystemError? {
        let top = Array(name.utf8CString)
        var info = stat()
        guard fstatat(parent.descriptor, top, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            return errno == ENOENT ? nil : SystemError(errno: errno, path: parent.displayPath(of: name))
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            guard unlinkat(parent.descriptor, top, 0) == 0 || errno == ENOENT else {
                return SystemError(errno: errno, path: parent.displayPath(of: name))
            }
            return nil
        }
        var removal = TreeRemoval(parent: parent, heldLimit: heldLimit)
        removal.run(top, device: info.st_dev)
        return removal.firstFailure
    }

    /// Empties the folder on top of `path` one entry at a time, entering folders as they come, and removes each
    /// folder once it is empty.
    private mutating func run(_ top: [CChar], device: dev_t) {
        guard enter(top, from: parent.descriptor) else { return }
        while !path.isEmpty {
            let depth = path.count - 1
            guard let folder = descriptor(at: depth) else {
                leave()  // why is recorded; the folder stays
                continue
            }
            if let entry = path[depth].pending.popLast() {
                removeEntry(entry, in: folder, device: device)
                continue
            }
            let shown = display()
            let name = path[depth].name
            leave()
            guard let above = depth == 0 ? parent.descriptor : descriptor(at: depth - 1) else { continue }
            if unlinkat(above, name, AT_REMOVEDIR) != 0, errno != ENOENT { record(errno, shown) }
        }
    }

    private mutating func removeEntry(_ name: [CChar], in folder: Int32, device: dev_t) {
        var info = stat()
        guard fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno != ENOENT { record(errno, display(name)) }
            return
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            if unlinkat(folder, name, 0) != 0, errno != ENOENT { record(errno, display(name)) }
            return
        }
        guard info.st_dev == device else {
            record(EXDEV, display(name), problem: .anotherMount)
            return
        }
        enter(name, from: folder)
    }

    /// Opens the folder `name` in `above`, reads its entries and puts it on top of `path`.
    @discardableResult
    private mutating func enter(_ name: [CChar], from above: Int32) -> Bool {
        let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        var opened = openat(above, name, flags)
        if opened < 0, errno == EACCES, Self.grantOwnerAccess(name, in: above) { opened = openat(above, name, flags) }
        guard opened >= 0 else {
            record(errno, display(name))
            return false
        }
        var info = stat()
        guard fstat(opened, &info) == 0 else {
            record(errno, display(name))
            close(opened)
            return false
        }
        if info.st_mode & 0o700 != 0o700 { _ = fchmod(opened, (info.st_mode & 0o7777) | 0o700) }
        var entries: [[CChar]] = []
        if let failure = DirectoryHandle.forEachName(
            inFolder: opened, shownAs: display(name), { entries.append($0.map { CChar(bitPattern: $0) } + [0]) })
        {
            record(failure.errno, display(name))
            close(opened)
            return false
        }
        path.append(Folder(name: name, device: info.st_dev, inode: info.st_ino, descriptor: opened, pending: entries))
        held += 1
        trim()
        return true
    }

    /// Takes the folder on top of `path` off it (closed if held).
    private mutating func leave() {
        let folder = path.removeLast()
        if folder.descriptor >= 0 {
            close(folder.descriptor)
            held -= 1
        }
    }

    /// The folder at `depth` of `path`, opened again from the nearest folder above it that is held when it is not.
    private mutating func descriptor(at depth: Int) -> Int32? {
        if path[depth].descriptor >= 0 { return path[depth].descriptor }
        var start = depth
        while start > 0, path[start - 1].descriptor < 0 { start -= 1 }
        var above = start == 0 ? parent.descriptor : path[start - 1].descriptor
        for index in start...depth {
            let opened = openat(above, path[index].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard opened >= 0 else {
                record(errno, display(depth: index))
                return nil
            }
            var info = stat()
            guard fstat(opened, &info) == 0, info.st_dev == path[index].device, info.st_ino == path[index].inode else {
                close(opened)
                record(ESTALE, display(depth: index), problem: .replacedWhileRemoved)
                return nil
            }
            path[index].descriptor = opened
            held += 1
            trim()
            above = opened
        }
        return path[depth].descriptor
    }

    /// Closes the shallowest folders held until no more than `heldLimit` are: the deepest are the ones in use.
    private mutating func trim() {
        var index = 0
        while held > heldLimit, index < path.count {
            if path[index].descriptor >= 0 {
                close(path[index].descriptor)
                path[index].descriptor = -1
                held -= 1
            }
            index += 1
        }
    }

    /// For a folder its owner cannot open: the owner's `rwx` are added to its mode, through a descriptor that names
    /// the folder itself (`O_PATH` and `O_NOFOLLOW`: never a symlink) and that descriptor's `/proc/self/fd` link
    /// (`fchmod` does not take an `O_PATH` descriptor; the link leads to exactly the inode opened).
    private static func grantOwnerAccess(_ name: [CChar], in above: Int32) -> Bool {
        let reference = openat(above, name, haul_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard reference >= 0 else { return false }
        defer { close(reference) }
        var info = stat()
        guard fstat(reference, &info) == 0, info.st_mode & 0o700 != 0o700 else { return false }
        return chmod("/proc/self/fd/\(reference)", (info.st_mode & 0o7777) | 0o700) == 0
    }

    private mutating func record(_ code: Int32, _ shown: String, problem: FileProblem? = nil) {
        if firstFailure == nil { firstFailure = SystemError(errno: code, path: shown, problem: problem) }
    }

    /// For messages: the path of `name` in the folder on top of `path` (of that folder itself when nil), as the
    /// user would write it.
    private func display(_ name: [CChar]? = nil) -> String {
        display(depth: path.count - 1, then: name)
    }

    private func display(depth: Int, then name: [CChar]? = nil) -> String {
        var components = path.prefix(depth + 1).map { Self.text($0.name) }
        if let name { components.append(Self.text(name)) }
        return parent.displayPath(of: components.joined(separator: "/"))
    }

    private static func text(_ name: [CChar]) -> String {
        String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
