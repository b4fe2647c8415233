import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Writes the members the rules allowed into the tree's folder, through haul's descriptor-relative calls only:
/// every folder is opened with `O_NOFOLLOW | O_DIRECTORY` from the tree's own descriptor, every file is created
/// with `O_EXCL | O_NOFOLLOW`, so whatever is in the folder, nothing is written outside it or through a symlink.
///
/// What the archive says of a member beyond its name, type, data and execute bits is not kept:
/// - modes: files 0644, or 0755 when the archive sets any execute bit; folders 0755; set exactly whatever the
///   umask. setuid, setgid and sticky bits, and write bits for group and others, are dropped, not refused: haul
///   pins what a tree contains, not who may change it;
/// - owners and times are not restored (the tree's digest ignores both, and an unpack as root must not give files
///   to whoever the archive names);
/// - sparse members are written with holes, and count (and hash) as their full size.
final class TreeWriter {
    /// A file as written: its size and SHA-256.
    struct WrittenFile {
        let size: Int64
        let digest: Digest
    }

    /// A block of a member's data and where it goes in the file.
    typealias Block = (offset: Int64, bytes: UnsafeRawBufferPointer)

    private let root: DirectoryHandle
    /// Folders reached lately, so that members of one folder do not walk from the root each time; bounded, so that
    /// a deep or wide tree holds few descriptors.
    private var recentFolders: [DestinationKey: DirectoryHandle] = [:]
    private static let recentFolderLimit = 16
    /// At most: the recent folders, a walk's two, and a file (or a hard link's second folder).
    static let descriptorsHeld = recentFolderLimit + 3
    /// The umask would narrow 0644 or 0755: modes are then set by descriptor.
    private let umaskNarrowsModes: Bool
    /// Zeros to hash a sparse member's holes with; allocated at the first hole.
    private var zeros: UnsafeMutableRawBufferPointer?
    private static let zeroCount = 64 << 10
    /// The most bytes the members may unpack to, and how many they may still.
    let byteLimit: Int64
    private var bytesLeft: Int64

    init(root: DirectoryHandle, byteLimit: Int64) {
        self.root = root
        self.byteLimit = byteLimit
        bytesLeft = max(0, byteLimit)
        umaskNarrowsModes = ProcessUmask.read().map { $0 & 0o755 != 0 } ?? true
    }

    deinit { ReadBuffer.free(zeros) }

    func makeFolder(_ path: DestinationPath) -> UnpackFailure.Rule? {
        let parent: DirectoryHandle
        switch folder(path.parentComponents) {
        case .success(let found): parent = found
        case .failure(let failure): return failure
        }
        if let failure = parent.makeDirectory(path.fileName, mode: 0o755) { return written(path, failure) }
        switch parent.subdirectory(path.fileName) {
        case .success(let made):
            if umaskNarrowsModes, let failure = made.setOwnMode(0o755) { return written(path, failure) }
            remember(made, as: path.components[...])
            return nil
        case .failure(let failure): return written(path, failure)
        }
    }

    func makeSymlink(_ path: DestinationPath, to target: String) -> UnpackFailure.Rule? {
        switch folder(path.parentComponents) {
        case .success(let parent): parent.makeSymlink(path.fileName, to: target).map { written(path, $0) }
        case .failure(let failure): failure
        }
    }

    func makeHardLink(_ path: DestinationPath, to existing: DestinationPath) -> UnpackFailure.Rule? {
        let source: DirectoryHandle
        switch folder(existing.parentComponents) {
        case .success(let found): source = found
        case .failure(let failure): return failure
        }
        switch folder(path.parentComponents) {
        case .success(let parent):
            return parent.makeHardLink(path.fileName, to: existing.fileName, in: source).map { written(path, $0) }
        case .failure(let failure): return failure
        }
    }

    /// Writes the file `path` from `blocks` (nil after the last), hashing each byte as it is written, and counts
    /// them against the limit as they come: a header that lies about the size cannot get past it.
    func writeFile(
        _ path: DestinationPath, executable: Bool, header: MemberHeader,
        blocks: () -> Result<Block?, UnpackFailure.Rule>
    ) -> Result<WrittenFile, UnpackFailure.Rule> {
        if let declared = header.declaredSize, declared > bytesLeft { return .failure(.tooManyBytes(limit: byteLimit)) }
        guard let hasher = StreamingHasher(.sha256) else { return .failure(.outOfMemory) }
        let parent: DirectoryHandle
        switch folder(path.parentComponents) {
        case .success(let found): parent = found
        case .failure(let failure): return .failure(failure)
        }
        let mode: mode_t = executable ? 0o755 : 0o644
        let descriptor: Int32
        switch parent.openFile(path.fileName, flags: O_WRONLY | O_CREAT | O_EXCL, mode: mode) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return .failure(written(path, failure))
        }
        var end: Int64 = 0
        var failure: UnpackFailure.Rule?
        if umaskNarrowsModes, fchmod(descriptor, mode) != 0 { failure = written(path, errno) }
        while failure == nil {
            let block: Block
            switch blocks() {
            case .success(let next?): block = next
            case .success(nil):
                // A sparse member may end in a hole: the file is as long as its header says.
                if header.isSparse, let declared = header.declaredSize, declared > end {
                    failure =
                        hole(declared - end, hasher: hasher)
                        ?? (ftruncate(descriptor, off_t(declared)) == 0 ? nil : written(path, errno))
                    end = declared
                }
                return finish(descriptor, path: path, failure: failure, size: end, hasher: hasher)
            case .failure(let read): return finish(descriptor, path: path, failure: read, size: end, hasher: hasher)
            }
            guard block.offset >= end else {
                failure = .unreadable("the data of a member goes back to offset \(block.offset) after \(end)")
                break
            }
            if let over = hole(block.offset - end, hasher: hasher) ?? spend(Int64(block.bytes.count)) {
                failure = over
                break
            }
            hasher.update(block.bytes)
            failure = writeAll(descriptor, block.bytes, at: block.offset).map { written(path, $0) }
            end = block.offset + Int64(block.bytes.count)
        }
        return finish(descriptor, path: path, failure: failure, size: end, hasher: hasher)
    }

    /// Closes the file; a failed close (a write-back error the file system reports late) fails the member too.
    private func finish(
        _ descriptor: Int32, path: DestinationPath, failure: UnpackFailure.Rule?, size: Int64,
        hasher: StreamingHasher
    ) -> Result<WrittenFile, UnpackFailure.Rule> {
        let closed = close(descriptor) == 0 ? nil : written(path, errno)
        if let failure = failure ?? closed { return .failure(failure) }
        return .success(WrittenFile(size: size, digest: hasher.finalize()))
    }

    /// Counts `count` bytes against the limit; the failure once they would pass it.
    private func spend(_ count: Int64) -> UnpackFailure.Rule? {
        guard count <= bytesLeft else { return .tooManyBytes(limit: byteLimit) }
        bytesLeft -= count
        return nil
    }

    /// A hole of `count` bytes in a sparse member: counted, and hashed as the zeros it reads as (the file system
    /// leaves it unwritten).
    private func hole(_ count: Int64, hasher: StreamingHasher) -> UnpackFailure.Rule? {
        guard count > 0 else { return nil }
        if let over = spend(count) { return over }
        if zeros == nil {
            zeros = ReadBuffer.allocate(Self.zeroCount)
            if let zeros { _ = zeros.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        guard let zeros else { return .outOfMemory }
        var left = count
        while left > 0 {
            let step = Int(min(left, Int64(zeros.count)))
            hasher.update(UnsafeRawBufferPointer(rebasing: zeros[..<step]))
            left -= Int64(step)
        }
        return nil
    }

    private func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32? {
        var done = 0
        while done < bytes.count {
            let count = pwrite(
                descriptor, bytes.baseAddress.map { $0 + done }, bytes.count - done,
                off_t(offset) + off_t(done))
            if count < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += count
        }
        return nil
    }

    /// The folder `components` name in the tree, opened one component at a time from the tree's root, never
    /// through a symlink.
    private func folder(_ components: ArraySlice<String>) -> Result<DirectoryHandle, UnpackFailure.Rule> {
        if components.isEmpty { return .success(root) }
        let key = DestinationKey(components.joined(separator: "/"))
        if let known = recentFolders[key] { return .success(known) }
        var here = root
        for (depth, name) in components.enumerated() {
            switch here.subdirectory(name) {
            case .success(let next): here = next
            case .failure(let failure):
                let shown = components.prefix(depth + 1).joined(separator: "/")
                return .failure(.writeFailed(SystemError(errno: failure.errno, path: shown)))
            }
        }
        remember(here, as: components)
        return .success(here)
    }

    private func remember(_ folder: DirectoryHandle, as components: ArraySlice<String>) {
        if recentFolders.count >= Self.recentFolderLimit { recentFolders.removeAll(keepingCapacity: true) }
        recentFolders[DestinationKey(components.joined(separator: "/"))] = folder
    }

    /// A failed call on `path`, named as the tree knows it rather than by the staging folder's path.
    private func written(_ path: DestinationPath, _ failure: SystemError) -> UnpackFailure.Rule {
        written(path, failure.errno)
    }

    private func written(_ path: DestinationPath, _ code: Int32) -> UnpackFailure.Rule {
        .writeFailed(SystemError(errno: code, path: path.description))
    }
}
