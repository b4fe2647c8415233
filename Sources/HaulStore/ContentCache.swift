import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest
import Synchronization

/// A content-addressed store of verified files, shared by many roots, manifests and processes (`--cache DIR`,
/// `HAUL_CACHE`): a CI runner restores it, and pinned entries are put in place from it without a request.
///
/// Layout:
///
///     DIR/sha256/ab/abcdef…   an entry: the file whose SHA-256 is abcdef… (algorithm / first two hex digits /
///                             the whole digest in lowercase hex); also sha384/, sha512/
///     DIR/tmp/<unique>        insertions in progress, renamed to their digest path once complete
///     DIR/haul-cache          the marker: this folder is a cache (`Recognition`)
///
/// **Only a cache is touched.** A folder is a cache when it holds the marker, which a sync writes when it makes
/// the cache (or first uses an empty folder, or one an older haul made without a marker, which holds nothing but
/// the names above). Anything else (a home folder, `/`, given by mistake) is refused before anything is read or
/// removed, and even in a cache `collect` removes only names of the forms the cache makes.
///
/// **The cache is untrusted.** Whoever restored it may have restored anything: every entry read is hashed as it
/// is copied (or, after a reflink, read back and hashed), and only a copy whose digest (and size) match is used.
/// An entry that does not match is removed. So no lock guards it: many processes read, insert and collect at
/// once, and the worst a race can do is make one of them download a file again.
///
/// **No entry is ever visible torn**: an insertion writes `tmp/<unique>` completely and then `rename(2)`s it to
/// its digest path, so a reader sees the old entry, no entry or the whole new one. Two processes inserting the
/// same digest both rename; either result is right. Entries are not fsynced: a crash may leave one empty or
/// short, and the next reader's digest check removes it.
///
/// **Never a hard link**: an entry is a copy (a reflink where the file system can share blocks, whose writes then
/// stay private) of the verified staged file, so a user editing a synced file can never alter the cache, nor the
/// cache a synced file.
///
/// SHA-1 and MD5 entries are neither read nor written: collisions are practical for them, and a shared store
/// that anyone restoring it can fill must not trust a digest an attacker can match with other bytes.
///
/// Entries are least-recently-used by mtime: every hit sets it to now, and `collect` removes the oldest first.
package final class ContentCache: Sendable {
    /// The cache folder as given (for messages and reports).
    package let path: String
    private let directory: DirectoryHandle
    /// `sha256/ab` → its folder, opened once per run (two `openat` per hit saved 100,000 times): slot
    /// `algorithm index × 256 + first digest byte`, so a lookup builds no string. At most `heldFolderLimit` are held
    /// (`held` counts them); past that, a folder is opened for its use and closed after.
    private let folders = Mutex<(table: [DirectoryHandle?], held: Int)>(
        (Array(repeating: nil, count: 256 * DigestAlgorithm.allCases.count), 0))
    /// The cache's share of the run's descriptors (`DescriptorBudget`).
    private let heldFolderLimit: Int
    /// As many folders as a cache has (of the algorithms it holds).
    package static let allFolders = 256 * algorithms.count
    /// Cleared the first time the file systems refuse a reflink: the rest of the run copies without asking again.
    private let reflinks = Atomic<Bool>(true)
    /// Makes `tmp/` names unique across processes (pid and a random number) and within one (a counter): see
    /// `insertionName`.
    private let uniquePrefix: String
    private let counter = Atomic<Int>(0)

    /// The folder name of insertions in progress.
    package static let temporaryFolder = "tmp"
    /// A `tmp/` file older than this is left from a crashed or killed insertion: `collect` removes it.
    package static let staleTemporarySeconds: Int = 3600

    /// A hit renews an entry's mtime only when it is older than this.
    package static let touchGranularitySeconds = 3600

    /// Algorithms whose entries the cache holds (see the type's comment on weak ones).
    package static let algorithms: [DigestAlgorithm] = DigestAlgorithm.allCases.filter { !$0.isWeak }

    package static func holds(_ algorithm: DigestAlgorithm) -> Bool { !algorithm.isWeak }

    private init(path: String, directory: DirectoryHandle, heldFolderLimit: Int) {
        self.path = path
        self.directory = directory
        self.heldFolderLimit = heldFolderLimit
        uniquePrefix = String(getpid(), radix: 16) + "-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    /// Why a folder could not be opened as a cache.
    package enum OpenFailure: Error, Sendable, Equatable {
        /// The folder does not exist (only when not creating it).
        case missing(path: String)
        /// The folder exists and is not a cache (see `Recognition`): nothing in it is touched.
        case notACache(path: String, stranger: String)
        /// It could not be made, opened or listed.
        case failed(StoreError)
    }

    /// Opens the cache at `path`. The path is the user's to choose: symlinks along it are followed; inside it
    /// nothing is. With `create`, a missing folder is made (with its parents), and a folder that is a cache by its
    /// layout alone (empty, or an older haul's) gets the marker; without, nothing is written. A folder that is not a
    /// cache is refused either way. `holdingFolders`: how many `sha256/ab` folders it may keep open for the run.
    package static func open(
        _ path: String, create: Bool, holdingFolders: Int = allFolders
    ) -> Result<ContentCache, OpenFailure> {
        if create {
            // Each missing component made in turn (`mkdir -p`): EEXIST is success, another process may race us.
            var prefix = path.hasPrefix("/") ? "/" : ""
            for component in path.split(separator: "/") {
                prefix += component
                if prefix.withCString({ mkdir($0, 0o755) }) != 0, errno != EEXIST {
                    return .failure(.failed(StoreError(operation: .createDirectory, path: prefix, errno: errno)))
                }
                prefix += "/"
            }
        }
        let directory: DirectoryHandle
        switch DirectoryHandle.open(path) {
        case .success(let handle): directory = handle
        case .failure(let failure) where failure.errno == ENOENT: return .failure(.missing(path: path))
        case .failure(let failure):
            return .failure(.failed(StoreError(operation: .openCache, path: path, errno: failure.errno)))
        }
        if !hasMarker(directory) {
            guard let names = directory.names() else {
                return .failure(
                    .failed(StoreError(operation: .listCache, path: path, errno: errno == 0 ? EIO : errno)))
            }
            switch Recognition.of(names: names) {
            case .stranger(let name): return .failure(.notACache(path: path, stranger: name))
            case .layout:
                // A cache that cannot be marked (read-only, full) is used all the same: its layout says what it is.
                if create { writeMarker(in: directory) }
            }
        }
        return .success(ContentCache(path: path, directory: directory, heldFolderLimit: holdingFolders))
    }

    /// The marker's name, in the cache folder.
    package static let markerName = "haul-cache"
    /// Its first line, which is what is checked; the rest says what the folder is to whoever finds it.
    private static let markerFirstLine = "haul content cache"
    private static let markerText =
        markerFirstLine + "\n"
        + "This folder is a content cache of haul (sync --cache): files by digest under sha256/, sha384/ and sha512/,\n"
        + "insertions in progress under tmp/. haul cache gc removes only names of those forms, and only in a folder\n"
        + "that holds this file.\n"

    /// What a folder without the marker is, by its names.
    package enum Recognition: Equatable, Sendable {
        /// Nothing but what a cache holds (the algorithm folders, `tmp`, the marker, a file system's `lost+found`),
        /// or nothing at all: an older haul's cache, or a new one.
        case layout
        /// `name` is not something a cache holds: the folder is not one.
        case stranger(String)

        package static func of(names: [String]) -> Recognition {
            for name in names.sorted() where !ContentCache.layoutNames.contains(name) { return .stranger(name) }
            return .layout
        }
    }

    /// Every name a cache folder may hold.
    private static let layoutNames: Set<String> = Set(DigestAlgorithm.allCases.map(\.rawValue))
        .union([temporaryFolder, markerName, "lost+found"])

    /// Whether `directory` holds the marker: a regular file whose first line is `markerFirstLine`.
    private static func hasMarker(_ directory: DirectoryHandle) -> Bool {
        guard case .success(let descriptor) = directory.openRegularFileForReading(markerName) else { return false }
        defer { close(descriptor) }
        let wanted = markerFirstLine.utf8.count + 1
        var bytes = [UInt8](repeating: 0, count: wanted)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, wanted, 0) }
        return count == wanted && bytes.elementsEqual((markerFirstLine + "\n").utf8)
    }

    /// Writes the marker unless it is there (`O_EXCL`: another process may be writing it at this moment, and a
    /// reader that finds it short still knows the folder by its layout). Best effort.
    private static func writeMarker(in directory: DirectoryHandle) {
        guard
            case .success(let descriptor) = directory.openFile(
                markerName, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644)
        else { return }
        let text = Array(markerText.utf8)
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        if written != text.count { directory.remove(markerName) }
    }

    /// The folder `haul cache …` uses when not told: `$HAUL_CACHE`, else `$XDG_CACHE_HOME/haul`, else
    /// `$HOME/.cache/haul` (the XDG base directory rule); nil when none of them is set.
    package static func defaultDirectory(environment: [String: String]) -> String? {
        if let cache = environment["HAUL_CACHE"], !cache.isEmpty { return cache }
        return BaseDirectory.cache.path("haul", environment: environment)
    }

    /// `sha256/ab/abcdef…`, relative to the cache folder.
    package static func relativePath(of digest: Digest) -> String {
        let hex = digest.hex
        return "\(digest.algorithm.rawValue)/\(hex.prefix(2))/\(hex)"
    }

    // MARK: - Reading

    /// What came of putting a cached copy of a digest in a staging folder.
    package enum Hit: Sendable {
        /// The staged file holds exactly the bytes of the digest, `size` of them; `hasMode`: it has the mode asked
        /// for exactly (else 0600 or narrower, for the committer to set).
        case copied(size: Int64, hasMode: Bool)
        /// Nothing under that digest (or an algorithm the cache does not hold).
        case missing
        /// An entry was there but its bytes were not the digest's (or of the wrong size): it was removed, or
        /// could not be.
        case corrupt(CorruptEntry)
        /// The entry at `path` is larger than `limit`, the most the entry may take when it pins no size: not
        /// copied (and not removed: it may be right, for a run allowed more).
        case tooLarge(path: String, limit: Int64)
        /// The entry could not be read or the staged file written (the error says which); nothing staged.
        case unusable(StoreError)
    }

    /// Whether an entry exists under `digest` (only looked at, not verified: for `haul plan`).
    package func contains(_ digest: Digest) -> Bool {
        guard Self.holds(digest.algorithm), let folder = folder(of: digest, create: false) else { return false }
        guard case .success(let info) = folder.status(of: digest.hex) else { return false }
        return info.st_mode & S_IFMT == S_IFREG
    }

    /// `contains` of each of `digests`, in order. A folder asked about for many digests is listed once instead of
    /// looked up name by name (`listingPays`). Why: before a sync fills 100,000 files from a cache, this look (the
    /// plan says how many come from it) took 0.20 s of the 2.8 s run name by name, 0.11 s listed (tmpfs).
    package func containing(_ digests: [Digest]) -> [Bool] {
        var found = [Bool](repeating: false, count: digests.count)
        var bySlot: [Int: [Int]] = [:]
        for (index, digest) in digests.enumerated() where Self.holds(digest.algorithm) {
            bySlot[Self.slot(of: digest), default: []].append(index)
        }
        for indices in bySlot.values {
            guard let folder = folder(of: digests[indices[0]], create: false) else { continue }
            let algorithm = digests[indices[0]].algorithm
            guard let listing = Self.listing(folder, of: algorithm, worthFor: indices.count) else {
                for index in indices { found[index] = contains(digests[index]) }
                continue
            }
            for index in indices {
                let digest = digests[index]
                found[index] = listing.regular.contains(digest) || listing.unknown.contains(digest) && contains(digest)
            }
        }
        return found
    }

    /// Whether listing a folder of `folderBytes` (its `st_size`) costs less than `lookups` lookups of single names.
    /// A listed name costs about a quarter of an `lstat`. The folder's entries are estimated as its size over 20
    /// bytes: exact on tmpfs, above the truth on ext4 and btrfs, so an error lists too seldom, never too often.
    package static func listingPays(folderBytes: Int, lookups: Int) -> Bool {
        folderBytes / 20 <= lookups * 4
    }

    /// The entries of `algorithm` in its `folder`, split by what the listing says of their type, when listing it
    /// pays for `lookups` (and it can be listed); else nil. Only names the cache makes count (lowercase hex).
    private static func listing(
        _ folder: DirectoryHandle, of algorithm: DigestAlgorithm, worthFor lookups: Int
    )
        -> (regular: Set<Digest>, unknown: Set<Digest>)?
    {
        var info = stat()
        guard fstat(folder.descriptor, &info) == 0, listingPays(folderBytes: Int(info.st_size), lookups: lookups) else {
            return nil
        }
        var regular = Set<Digest>(minimumCapacity: lookups), unknown = Set<Digest>()
        let failure = folder.forEachEntry { name, type in
            guard type == UInt8(DT_REG) || type == UInt8(DT_UNKNOWN),
                !name.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }),
                let digest = Digest(algorithm: algorithm, hexUTF8: name)
            else { return }
            if type == UInt8(DT_REG) { regular.insert(digest) } else { unknown.insert(digest) }
        }
        return failure == nil ? (regular, unknown) : nil
    }

    /// Copies the entry of `digest` as the new file `name` in `target` (created with `mode` when given, as
    /// `DirectoryHandle.createFile` makes it under `umask`; else 0600, for the committer to set),
    /// verifying it on the way: a reflink where the file systems can share blocks (then the copy is read back
    /// and hashed: the cache is untrusted), else a copy hashed as it is read, one pass (read a chunk, hash it,
    /// write it). `size`: the size the manifest pins, if any; without one, `maxSize` (`--max-file-size`) is the
    /// most copied, as it is the most downloaded: a larger entry is not copied at all (judged by its size before a
    /// byte is read). `buffer`: the caller's, reused from file to file.
    /// `startsWriteback`: a copy is written to disk as it is made (`WritebackHint`), for a commit that flushes.
    /// On anything but `.copied`, nothing is left in `target`. A hit sets the entry's mtime to now (what
    /// `collect` evicts by).
    package func copyVerified(
        _ digest: Digest, size expectedSize: Int64?, maxSize: Int64 = .max, to target: DirectoryHandle,
        name: String, mode: UInt32? = nil, umask: UInt32? = nil, buffer: UnsafeMutableRawBufferPointer,
        startsWriteback: Bool = false
    ) -> Hit {
        guard Self.holds(digest.algorithm), let folder = folder(of: digest, create: false) else { return .missing }
        let hex = digest.hex
        let input: Int32
        switch folder.openFile(hex, flags: O_RDONLY | O_NONBLOCK) {
        case .success(let opened): input = opened
        case .failure(let failure):
            if failure.errno == ENOENT { return .missing }
            return .unusable(
                StoreError(operation: .openCacheEntry, path: displayPath(of: digest), errno: failure.errno))
        }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else {
            return .unusable(StoreError(operation: .inspectCacheEntry, path: displayPath(of: digest), errno: errno))
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return removeCorrupt(digest, in: folder, found: .notARegularFile(FileKind(info)))
        }
        if let expectedSize, Int64(info.st_size) != expectedSize {
            return removeCorrupt(digest, in: folder, found: .size(Int64(info.st_size), pinned: expectedSize))
        }
        if expectedSize == nil, Int64(info.st_size) > maxSize {
            return .tooLarge(path: displayPath(of: digest), limit: maxSize)
        }
        let output: Int32, hasMode: Bool
        switch target.createFile(name, mode: mode, umask: umask) {
        case .success(let created): (output, hasMode) = created
        case .failure(let failure):
            return .unusable(StoreError(operation: .create, path: failure.path, errno: failure.errno))
        }
        let copied = copyHashing(
            from: input, to: output, size: Int64(info.st_size), algorithm: digest.algorithm, buffer: buffer,
            startsWriteback: startsWriteback)
        let closed = close(output) == 0 ? nil : errno
        switch copied {
        case .failure(let failure):
            target.remove(name)
            return .unusable(
                StoreError(
                    operation: failure.writing ? .write : .readCacheEntry,
                    path: failure.writing ? target.displayPath(of: name) : displayPath(of: digest),
                    errno: failure.errno))
        case .success(let (count, actual)):
            if let closed {
                target.remove(name)
                return .unusable(StoreError(operation: .write, path: target.displayPath(of: name), errno: closed))
            }
            guard count == Int64(info.st_size), actual == digest else {
                target.remove(name)
                let found: CorruptEntry.Found =
                    count == Int64(info.st_size) ? .digest(actual) : .shortRead(count, of: Int64(info.st_size))
                return removeCorrupt(digest, in: folder, found: found)
            }
            // Least recently used is what `collect` evicts: a hit makes the entry young again, unless it already
            // is (used within the hour: a finer order is worth nothing to eviction, and skipping the write saves a
            // syscall and an inode update per hit when many roots fill at once). A read-only cache cannot be
            // touched; it is still used.
            if ContentCache.now().tv_sec - info.st_mtim.tv_sec > Self.touchGranularitySeconds {
                _ = futimens(input, nil)
            }
            return .copied(size: count, hasMode: hasMode)
        }
    }

    private struct CopyFailure: Error {
        let errno: Int32
        /// The write (or the reflink) failed, not the read of the entry.
        let writing: Bool
    }

    /// `size` bytes of `input` into `output` (both at offset 0), and their digest: by reflink and a read back
    /// where the file systems allow, else read → hash → write.
    private func copyHashing(
        from input: Int32, to output: Int32, size: Int64, algorithm: DigestAlgorithm,
        buffer: UnsafeMutableRawBufferPointer, startsWriteback: Bool
    ) -> Result<(Int64, Digest), CopyFailure> {
        guard let hasher = StreamingHasher(algorithm) else {
            return .failure(CopyFailure(errno: ENOMEM, writing: false))
        }
        if size > 0, reflinks.load(ordering: .relaxed) {
            guard let code = KernelCopy.reflink(input, to: output) else {
                // The clone is what will be committed: it is what is read and hashed (the entry may change under us).
                var cloned = stat()
                guard fstat(output, &cloned) == 0 else { return .failure(CopyFailure(errno: errno, writing: true)) }
                return hashAll(output, size: Int64(cloned.st_size), hasher: hasher, buffer: buffer).map {
                    ($0, hasher.finalize())
                }
            }
            guard KernelCopy.meansNoReflinks(code) else { return .failure(CopyFailure(errno: code, writing: true)) }
            reflinks.store(false, ordering: .relaxed)
        }
        if size > Int64(buffer.count) { _ = posix_fadvise(input, 0, 0, POSIX_FADV_SEQUENTIAL) }
        var total: Int64 = 0
        var writeback = startsWriteback ? WritebackHint() : nil
        // Only the size seen at open is copied: an entry growing meanwhile is not followed; one shrinking stops short
        // (and fails the digest).
        while total < size {
            let wanted = Int(min(Int64(buffer.count), size - total))
            let count = read(input, buffer.baseAddress, wanted)
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(CopyFailure(errno: errno, writing: false))
            }
            if count == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<count])
            hasher.update(chunk)
            var written = 0
            while written < count {
                let result = write(output, chunk.baseAddress.map { $0 + written }, count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    return .failure(CopyFailure(errno: errno, writing: true))
                }
                written += result
            }
            total += Int64(count)
            writeback?.written(upTo: total, of: output)
        }
        return .success((total, hasher.finalize()))
    }

    /// Reads `size` bytes of `descriptor` from offset 0 into `hasher`; the count read.
    private func hashAll(
        _ descriptor: Int32, size: Int64, hasher: StreamingHasher,
        buffer: UnsafeMutableRawBufferPointer
    ) -> Result<Int64, CopyFailure> {
        var total: Int64 = 0
        while total < size {
            let count = pread(descriptor, buffer.baseAddress, Int(min(Int64(buffer.count), size - total)), off_t(total))
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(CopyFailure(errno: errno, writing: false))
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            total += Int64(count)
        }
        return .success(total)
    }

    private func removeCorrupt(_ digest: Digest, in folder: DirectoryHandle, found: CorruptEntry.Found) -> Hit {
        .corrupt(CorruptEntry(path: displayPath(of: digest), found: found, removal: folder.remove(digest.hex)))
    }

    // MARK: - Inserting

    /// Makes the verified file `name` in `source` the entry of `digest` by renaming it: for a cache that only hands
    /// files on (`haul add` keeps its downloads in one, for a sync to place), on the same file system as `source`.
    /// nil on success.
    package func adopt(_ digest: Digest, from source: DirectoryHandle, name: String) -> StoreError? {
        switch reach(digest, create: true) {
        case .success(let folder):
            guard let failure = source.rename(name, to: digest.hex, in: folder) else { return nil }
            return StoreError(operation: .move, path: failure.path, errno: failure.errno)
        case .failure(let failure):
            return StoreError(operation: .createDirectory, path: failure.path, errno: failure.errno)
        }
    }

    /// Adds a copy of the verified file `name` in `source` as the entry of `digest`, atomically (see the type's
    /// comment): a reflink where the file systems can, else the kernel copies the bytes (`sendfile`). Never a
    /// hard link. An entry already there with the right size is only touched. nil on success, else why not
    /// (ENOSPC, EROFS, EACCES …), with nothing left behind in `tmp/` but on a crash.
    package func insert(_ digest: Digest, size: Int64, from source: DirectoryHandle, name: String) -> StoreError? {
        guard Self.holds(digest.algorithm) else { return nil }
        let hex = digest.hex
        if let folder = folder(of: digest, create: false), case .success(let info) = folder.status(of: hex),
            info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == size
        {
            _ = hex.withCString { utimensat(folder.descriptor, $0, nil, AT_SYMLINK_NOFOLLOW) }
            return nil
        }
        let temporary: DirectoryHandle
        switch directory.subdirectory(Self.temporaryFolder, creatingWithMode: 0o755) {
        case .success(let folder): temporary = folder
        case .failure(let failure):
            return StoreError(operation: .createDirectory, path: failure.path, errno: failure.errno)
        }
        let input: Int32
        switch source.openFile(name, flags: O_RDONLY) {
        case .success(let opened): input = opened
        case .failure(let failure): return StoreError(operation: .open, path: failure.path, errno: failure.errno)
        }
        defer { close(input) }
        let unique = Self.insertionName(
            prefix: uniquePrefix, counter: counter.wrappingAdd(1, ordering: .relaxed).oldValue)
        let output: Int32
        switch temporary.openFile(unique, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o644) {
        case .success(let opened): output = opened
        case .failure(let failure): return StoreError(operation: .create, path: failure.path, errno: failure.errno)
        }
        var failure = clone(from: input, to: output, size: size)
        if close(output) != 0, failure == nil { failure = errno }
        if let failure {
            temporary.remove(unique)
            return StoreError(operation: .write, path: temporary.displayPath(of: unique), errno: failure)
        }
        let folder: DirectoryHandle
        switch reach(digest, create: true) {
        case .success(let reached): folder = reached
        case .failure(let failure):
            temporary.remove(unique)
            return StoreError(operation: .createDirectory, path: failure.path, errno: failure.errno)
        }
        if let renamed = temporary.rename(unique, to: hex, in: folder) {
            temporary.remove(unique)
            return StoreError(operation: .renameInto, path: renamed.path, errno: renamed.errno)
        }
        return nil
    }

    /// `tmp/<pid>-<random>-<counter>.tmp`, each part in lowercase hex: the one form of name an insertion in
    /// progress has, and so the only one `collect` removes from `tmp/`.
    private static func insertionName(prefix: String, counter: Int) -> String {
        "\(prefix)-\(String(counter, radix: 16)).tmp"
    }

    /// Whether `name` has the form `insertionName` makes.
    package static func isInsertionName(_ name: String) -> Bool {
        guard name.hasSuffix(".tmp") else { return false }
        let parts = name.dropLast(4).split(separator: "-", omittingEmptySubsequences: false)
        return parts.count == 3 && parts.allSatisfy { !$0.isEmpty && $0.utf8.count <= 16 && isHex($0) }
    }

    /// `size` bytes of `input` into the empty `output`: a reflink, else `sendfile`; the errno of a failure.
    private func clone(from input: Int32, to output: Int32, size: Int64) -> Int32? {
        if size > 0, reflinks.load(ordering: .relaxed) {
            guard let code = KernelCopy.reflink(input, to: output) else { return nil }
            guard KernelCopy.meansNoReflinks(code) else { return code }
            reflinks.store(false, ordering: .relaxed)
        }
        // (EIO when the staged file shrank: not the bytes that were verified.)
        return KernelCopy.send(input, to: output, size: size)
    }

    // MARK: - Folders

    /// `sha256/ab` for `digest`, held open for the rest of the run; made when `create`. nil when missing or not a
    /// plain directory (a symlink there is refused: a removal must never reach outside the cache).
    private func folder(of digest: Digest, create: Bool) -> DirectoryHandle? {
        try? reach(digest, create: create).get()
    }

    private func reach(_ digest: Digest, create: Bool) -> Result<DirectoryHandle, SystemError> {
        let key = Self.slot(of: digest)
        if let held = folders.withLock({ $0.table[key] }) { return .success(held) }
        let algorithm = digest.algorithm.rawValue
        let prefix = String(digest.hex.prefix(2))
        let mode: mode_t? = create ? 0o755 : nil
        return directory.subdirectory(algorithm, creatingWithMode: mode)
            .flatMap { $0.subdirectory(prefix, creatingWithMode: mode) }
            .map { folder in
                folders.withLock { folders in
                    if let held = folders.table[key] { return held }
                    guard folders.held < heldFolderLimit else { return folder }
                    folders.table[key] = folder
                    folders.held += 1
                    return folder
                }
            }
    }

    /// The index of the folder of `digest` in `folders.table`.
    private static func slot(of digest: Digest) -> Int {
        let first = digest.withUnsafeBytes { Int($0.first ?? 0) }
        return (DigestAlgorithm.allCases.firstIndex(of: digest.algorithm) ?? 0) * 256 + first
    }

    private func displayPath(of digest: Digest) -> String {
        (path.hasSuffix("/") ? path : path + "/") + Self.relativePath(of: digest)
    }

    // MARK: - Info and garbage collection

    /// One entry of the cache, as `info` and `collect` see it.
    package struct Entry: Sendable, Equatable {
        /// `sha256/ab/abcdef…`
        package var relativePath: String
        package var size: Int64
        /// mtime, in seconds and nanoseconds: the last hit or insertion.
        package var modified: timespec

        package static func == (a: Entry, b: Entry) -> Bool {
            a.relativePath == b.relativePath && a.size == b.size && a.modified.tv_sec == b.modified.tv_sec
                && a.modified.tv_nsec == b.modified.tv_nsec
        }
    }

    /// Every entry: the regular files under `<algorithm>/<two hex digits>/` named by a digest of that algorithm
    /// whose first two digits are the folder's. Anything else there is not the cache's and is left alone.
    package func entries() -> [Entry] {
        var found: [Entry] = []
        for algorithm in Self.algorithms {
            guard case .success(let top) = directory.subdirectory(algorithm.rawValue) else { continue }
            for prefix in top.names() ?? [] where prefix.utf8.count == 2 && Self.isHex(prefix) {
                guard case .success(let folder) = top.subdirectory(prefix) else { continue }
                for name in folder.names() ?? []
                where name.utf8.count == 2 * algorithm.byteCount && name.hasPrefix(prefix)
                    && Self.isHex(name)
                {
                    guard case .success(let info) = folder.status(of: name), info.st_mode & S_IFMT == S_IFREG else {
                        continue
                    }
                    found.append(
                        Entry(
                            relativePath: "\(algorithm.rawValue)/\(prefix)/\(name)", size: Int64(info.st_size),
                            modified: info.st_mtim))
                }
            }
        }
        return found
    }

    private static func isHex(_ text: some StringProtocol) -> Bool {
        text.utf8.allSatisfy {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
        }
    }

    /// What `collect` did.
    package struct Collection: Sendable {
        /// Oldest first.
        package var removed: [Entry] = []
        /// Entries that should have gone but could not be removed (a read-only cache), with why.
        package var failed: [(Entry, SystemError)] = []
        /// Insertions in `tmp/` older than an hour that were removed.
        package var staleTemporaries: [String] = []
        /// What the cache holds afterwards.
        package var remainingCount = 0
        package var remainingBytes: Int64 = 0
    }

    /// Removes least recently used entries (oldest mtime first; ties by name, so the order is stable) until the
    /// entries total at most `maxBytes`, and every insertion in `tmp/` older than an hour (one that crashed; a live
    /// one is seconds old). Only names of the forms the cache makes are removed (`entries`, `isInsertionName`):
    /// anything else, whatever its age, is not the cache's. Other processes may be using the cache meanwhile: an
    /// entry removed under a reader was already open (the reader keeps its copy) or is simply missing (it is
    /// downloaded).
    package func collect(maxBytes: Int64, now: timespec = ContentCache.now()) -> Collection {
        var result = Collection()
        if case .success(let temporary) = directory.subdirectory(Self.temporaryFolder) {
            for name in temporary.names() ?? [] where Self.isInsertionName(name) {
                guard case .success(let info) = temporary.status(of: name), info.st_mode & S_IFMT == S_IFREG,
                    now.tv_sec - info.st_mtim.tv_sec > Self.staleTemporarySeconds
                else { continue }
                if temporary.remove(name) == nil { result.staleTemporaries.append(name) }
            }
        }
        let all = entries().sorted {
            ($0.modified.tv_sec, $0.modified.tv_nsec, $0.relativePath) < (
                $1.modified.tv_sec, $1.modified.tv_nsec, $1.relativePath
            )
        }
        var total = all.reduce(Int64(0)) { $0 + $1.size }
        var kept = all.count
        for entry in all where total > maxBytes {
            let parts = entry.relativePath.split(separator: "/").map(String.init)
            guard parts.count == 3 else { continue }
            let removal: SystemError? =
                switch directory.subdirectory(parts[0]).flatMap({ $0.subdirectory(parts[1]) }) {
                case .success(let folder): folder.remove(parts[2])
                case .failure(let failure): failure
                }
            if let removal {
                result.failed.append((entry, removal))
            } else {
                result.removed.append(entry)
                total -= entry.size
                kept -= 1
            }
        }
        result.remainingCount = kept
        result.remainingBytes = total
        return result
    }

    package static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }
}

/// A cache entry whose bytes are not its digest's, as a cache hit found it: what was there instead, and whether it
/// could be removed.
package struct CorruptEntry: Sendable, Equatable {
    package enum Found: Sendable, Equatable {
        case notARegularFile(FileKind)
        /// Its size is not the one the manifest pins.
        case size(Int64, pinned: Int64)
        case digest(Digest)
        /// Fewer bytes read than its size said.
        case shortRead(Int64, of: Int64)
    }

    package let path: String
    package let found: Found
    /// nil: it was removed; else why it could not be.
    package let removal: SystemError?

    package init(path: String, found: Found, removal: SystemError?) {
        self.path = path
        self.found = found
        self.removal = removal
    }
}
