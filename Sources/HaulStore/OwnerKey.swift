import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Proof that haul wrote a file: the first 16 bytes of an HMAC-SHA-256, under the root's key (`OwnerKey`), of
/// the file's destination, digest and manifest. Held as two words, not an array: 100,000 records carry one each.
package struct OwnerTag: Sendable, Hashable {
    private let words: (UInt64, UInt64)

    static let byteCount = 16

    init(_ code: Digest) {
        var words: (UInt64, UInt64) = (0, 0)
        code.withUnsafeBytes { bytes in
            withUnsafeMutableBytes(of: &words) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(Self.byteCount)))
            }
        }
        self.words = words
    }

    /// 32 hex digits, as the state writes them; nil for anything else.
    init?(hexUTF8 text: UnsafeBufferPointer<UInt8>) {
        guard text.count == 2 * Self.byteCount else { return nil }
        var words: (UInt64, UInt64) = (0, 0)
        guard withUnsafeMutableBytes(of: &words, { Hex.decode(text, into: $0) }) else { return nil }
        self.words = words
    }

    func appendHex(to out: inout [UInt8]) {
        withUnsafeBytes(of: words) { Hex.append($0, to: &out) }
    }

    package static func == (a: OwnerTag, b: OwnerTag) -> Bool { a.words == b.words }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
    }
}

/// `<root>/.haul/key`: 32 random bytes, made by the first sync of a root (mode 0600), under which every record of
/// a file haul writes carries an `OwnerTag`. Pruning deletes a file only on a record whose tag this key proves,
/// so a line added to the journal or the state by anyone who cannot read the key (a CI cache restored from
/// elsewhere, another program) names no file haul will delete. The key goes with the root (a moved root keeps
/// pruning); a root whose key is gone gets a new one, and what the old one proved is proven no more.
package struct OwnerKey: Sendable {
    private let authenticator: MessageAuthenticator

    static let fileName = PrivateArea.Member.key.rawValue
    static let byteCount = 32

    private init(_ key: [UInt8]) { authenticator = MessageAuthenticator(key: key) }

    /// The tag of a record saying that `manifestKey`'s manifest wrote `digest` at `destination`.
    package func tag(destination: String, digest: Digest, manifestKey: String) -> OwnerTag {
        var message = Array(Self.context.utf8)
        message.reserveCapacity(message.count + destination.utf8.count + manifestKey.utf8.count + 80)
        message += destination.utf8
        message.append(0)
        message += digest.algorithm.rawValue.utf8
        message.append(0)
        digest.withUnsafeBytes { message += $0 }
        message += manifestKey.utf8
        return OwnerTag(authenticator.code(message))
    }

    /// Whether `record` of `destination` carries the tag this key gives what it says: that its manifest wrote its
    /// content there.
    package func proves(_ record: StateRecord, at destination: DestinationKey) -> Bool {
        guard let origin = record.origin, let tag = record.ownerTag else { return false }
        return tag == self.tag(destination: destination.text, digest: record.digest, manifestKey: origin.manifestKey)
    }

    /// Separates these codes from any other use of the key. (Names hold no NUL; a digest's length is its
    /// algorithm's, so the fields cannot run into each other.)
    private static let context = "haul owner tag 1\u{0}"

    /// The root's key; nil when it has none, when the file is not one haul made (another size), or when it cannot
    /// be read: no record is proven then.
    package static func load(area: PrivateArea?) -> OwnerKey? {
        guard let area, case .success(let key) = read(in: area) else { return nil }
        return key
    }

    /// The key in `area`; nil when there is none or the file is not one haul made (another size), a failure when
    /// it is there but cannot be read (an I/O error, a permission).
    private static func read(in area: PrivateArea) -> Result<OwnerKey?, StoreError> {
        switch PrivateFile.read(fileName, in: area.folder, limit: byteCount) {
        case .bytes(let key, _): return .success(key.count == byteCount ? OwnerKey(key) : nil)
        case .missing, .tooLarge: return .success(nil)
        case .unreadable(let failure):
            return .failure(StoreError(operation: .read, path: failure.path, errno: failure.errno))
        }
    }

    /// The root's key, made first if it has none (or a file haul did not make is in its place). Made under the
    /// state's lock, so shards starting together make one key, and read back under it. A key that is there but
    /// cannot be read is a failure, never replaced: a new key would prove nothing the old one tagged, and one bad
    /// read would cost every file haul wrote its pruning.
    package static func loadOrCreate(area: PrivateArea, lock: RunLock?) -> Result<OwnerKey, StoreError> {
        if case .success(let key?) = read(in: area) { return .success(key) }
        let readOrCreate = { () -> Result<OwnerKey, StoreError> in
            read(in: area).flatMap { key in key.map { .success($0) } ?? create(in: area) }
        }
        guard let lock else { return readOrCreate() }
        return lock.withStateLock(exclusive: true, readOrCreate)
    }

    /// A new key, written to a temporary name, flushed and renamed into place: never half a key under its name.
    private static func create(in area: PrivateArea) -> Result<OwnerKey, StoreError> {
        let folder = area.folder
        let temporary = fileName + ".new"
        guard let key = MessageAuthenticator.randomKey(count: byteCount) else {
            return .failure(
                StoreError(
                    operation: .make, path: folder.displayPath(of: fileName), errno: EIO,
                    problem: .noRandomBytes))
        }
        if let failure = folder.remove(temporary), failure.errno != ENOENT {
            return .failure(StoreError(operation: .replace, path: failure.path, errno: failure.errno))
        }
        let descriptor: Int32
        switch folder.openFile(temporary, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600) {
        case .success(let opened): descriptor = opened
        case .failure(let failure):
            return .failure(StoreError(operation: .write, path: failure.path, errno: failure.errno))
        }
        let failed = PrivateFile.write(key, to: descriptor) ?? (fsync(descriptor) == 0 ? nil : errno)
        close(descriptor)
        if let failed {
            folder.remove(temporary)
            return .failure(StoreError(operation: .write, path: folder.displayPath(of: temporary), errno: failed))
        }
        if let failure = folder.rename(temporary, to: fileName) {
            folder.remove(temporary)
            return .failure(StoreError(operation: .renameInto, path: failure.path, errno: failure.errno))
        }
        // Not durable yet costs nothing to correctness: a key lost in a crash proves nothing it tagged, and those
        // files are kept rather than pruned.
        _ = folder.synchronize()
        return .success(OwnerKey(key))
    }
}
