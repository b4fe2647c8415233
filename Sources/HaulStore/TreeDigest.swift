import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem

/// A tree's digest: Nix's NAR hash, the SHA-256 of the tree serialized as a Nix archive, so that a pinned
/// `tree: sha256-…` is the value `nix hash path DIR` prints for the same tree. It covers names, contents, the
/// executable bit and symlink targets, and nothing else (no times, owners or other permission bits).
///
/// The archive is hashed as it is produced, never held: memory is one read buffer however large the files. The
/// tree is read through descriptors, never through a symlink.
package enum TreeDigest {
    /// The NAR hash (SHA-256) of the tree `folder` holds (the folder itself is the NAR's root directory). A tree
    /// holds only regular files, folders and symlinks: anything else fails, naming it, as does any read.
    package static func of(folder: DirectoryHandle, shownAs path: String) -> Result<Digest, StoreError> {
        guard let hasher = StreamingHasher(.sha256), let buffer = ReadBuffer.allocate(FileDigester.chunkSize) else {
            return .failure(StoreError(operation: .hash, path: path, errno: ENOMEM))
        }
        defer { ReadBuffer.free(buffer) }
        var archive = NixArchive(hasher: hasher, buffer: buffer)
        archive.string("nix-archive-1")
        if let failure = archive.folder(folder, shownAs: path) { return .failure(failure) }
        archive.flush()
        return .success(hasher.finalize())
    }
}

/// The Nix archive format (Dolstra's thesis, §5.2.1; nix's `archive.cc`), written into a hasher:
///
///     nar     = str("nix-archive-1") node
///     node    = str("(") str("type") (regular | directory | symlink) str(")")
///     regular = str("regular") [str("executable") str("")] str("contents") str(contents)
///     symlink = str("symlink") str("target") str(target)
///     directory = str("directory") { str("entry") str("(") str("name") str(name) str("node") node str(")") }
///
/// `str(s)` is `s`'s length as 8 bytes little-endian, then `s`, then zeros to a multiple of 8 bytes. Entries come in
/// the byte order of their names. A file is executable when its owner may execute it (`S_IXUSR`), as Nix reads it.
private struct NixArchive {
    let hasher: StreamingHasher
    let buffer: UnsafeMutableRawBufferPointer
    /// Tokens not yet hashed: one libcrypto call per few kilobytes of them rather than three per token.
    private var pending: [UInt8] = []

    init(hasher: StreamingHasher, buffer: UnsafeMutableRawBufferPointer) {
        self.hasher = hasher
        self.buffer = buffer
        pending.reserveCapacity(8192)
    }

    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            length(bytes.count)
            pending.append(contentsOf: bytes)
            padding(after: bytes.count)
        }
        if pending.count >= 8192 { flush() }
    }

    mutating func flush() {
        hasher.update(pending)
        pending.removeAll(keepingCapacity: true)
    }

    private mutating func length(_ count: Int) {
        withUnsafeBytes(of: UInt64(count).littleEndian) { pending.append(contentsOf: $0) }
    }

    private mutating func padding(after count: Int) {
        pending.append(contentsOf: repeatElement(0, count: (8 - count % 8) % 8))
    }

    /// A folder's node: its entries, each named and followed by its own node.
    mutating func folder(_ folder: DirectoryHandle, shownAs shown: String) -> StoreError? {
        let names: [String]
        switch TreeFolder.sortedNames(in: folder, shownAs: shown) {
        case .success(let listed): names = listed
        case .failure(let failure): return failure
        }
        string("(")
        string("type")
        string("directory")
        for name in names {
            string("entry")
            string("(")
            string("name")
            string(name)
            string("node")
            if let failure = node(name, in: folder, shownAs: TreeFolder.join(shown, name)) { return failure }
            string(")")
        }
        string(")")
        return nil
    }

    private mutating func node(_ name: String, in folder: DirectoryHandle, shownAs shown: String) -> StoreError? {
        let info: stat
        switch folder.status(of: name) {
        case .success(let found): info = found
        case .failure(let failure): return StoreError(operation: .inspect, path: shown, errno: failure.errno)
        }
        switch FileKind(info) {
        case .regular:
            return file(name, in: folder, shownAs: shown)
        case .directory:
            switch TreeFolder.open(name, in: folder, seen: info, shownAs: shown) {
            case .success(let child): return self.folder(child, shownAs: shown)
            case .failure(let failure): return failure
            }
        case .symlink:
            switch TreeFolder.linkTarget(name, in: folder, shownAs: shown) {
            case .success(let target):
                for token in ["(", "type", "symlink", "target", target, ")"] { string(token) }
                return nil
            case .failure(let failure):
                return failure
            }
        case let other:
            return StoreError(operation: .hash, path: shown, errno: EINVAL, problem: .notInATree(other))
        }
    }

    /// A regular file's node: its contents streamed through the buffer, the length and the executable bit taken
    /// from the descriptor they are read from.
    private mutating func file(_ name: String, in folder: DirectoryHandle, shownAs shown: String) -> StoreError? {
        let descriptor: Int32
        switch folder.openRegularFileForReading(name) {
        case .success(let opened): descriptor = opened
        case .failure(let failure):
            return StoreError(operation: .open, path: shown, errno: failure.errno, problem: failure.problem)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return StoreError(operation: .inspect, path: shown, errno: errno) }
        let size = Int64(info.st_size)
        string("(")
        string("type")
        string("regular")
        if info.st_mode & S_IXUSR != 0 {
            string("executable")
            string("")
        }
        string("contents")
        length(Int(size))
        flush()
        if size > Int64(buffer.count) { _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL) }
        var total: Int64 = 0
        while true {
            let count = read(descriptor, buffer.baseAddress, buffer.count)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                return StoreError(operation: .read, path: shown, errno: errno)
            }
            total += Int64(count)
            guard total <= size else { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
        guard total == size else {
            return StoreError(operation: .read, path: shown, errno: 0, problem: .changedWhileRead)
        }
        padding(after: Int(size % 8))
        string(")")
        return nil
    }
}
