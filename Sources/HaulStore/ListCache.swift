import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem

/// The last verified copy of each signed checksum list (`lists:`), in `<root>/.haul/lists`: the list, its signature,
/// and what its server said of it. The next sync asks the server conditionally (or, while the copy is fresh, not at
/// all), `verify` reads the pins without a request, and a plan tells which entries the list changed since. One file
/// per list, named by a digest of the list's name and URL, replaced whole by a rename: a copy is the one verified,
/// or the one before.
///
/// What is read back is checked again before it is used: the file is in a folder anyone who can write `.haul` can
/// write, so it is trusted for nothing but saving a request.
package enum ListCache {
    package struct Copy: Sendable, Equatable {
        package var list: [UInt8]
        /// nil: the list is signed inside itself (clear-signed).
        package var signature: [UInt8]?
        /// Where the signature was found (`auto` tries several), so that the next run asks there first.
        package var signatureURL: String?
        package var etag: String?
        package var lastModified: String?
        /// When the server last confirmed this copy, and until when it said it stays fresh (seconds since the epoch).
        package var checkedAt: Double
        package var freshUntil: Double?

        package init(
            list: [UInt8], signature: [UInt8]?, signatureURL: String?, etag: String?, lastModified: String?,
            checkedAt: Double, freshUntil: Double?
        ) {
            self.list = list
            self.signature = signature
            self.signatureURL = signatureURL
            self.etag = etag
            self.lastModified = lastModified
            self.checkedAt = checkedAt
            self.freshUntil = freshUntil
        }
    }

    /// A list is kilobytes, its signature less: anything larger is not a copy haul wrote.
    static let maximumBytes = 128 << 20

    private static let firstLine = "haul-list\t1"

    /// The file's name for the list `name` at `url`: a list moved to another URL starts afresh.
    static func fileName(name: String, url: String) -> String {
        StreamingHasher.digest(Array("\(name)\n\(url)".utf8), algorithm: .sha256).hex
    }

    package static func read(name: String, url: String, in area: PrivateArea) -> Copy? {
        guard case .success(let folder) = area.folder.subdirectory(PrivateArea.Member.lists.rawValue),
            case .bytes(let bytes, _) = PrivateFile.read(
                fileName(name: name, url: url), in: folder, limit: maximumBytes)
        else { return nil }
        return parse(bytes)
    }

    /// Not flushed: a copy lost to a crash costs one request, and one cut short is read as none.
    package static func write(_ copy: Copy, name: String, url: String, in area: PrivateArea) -> StoreError? {
        let folder: DirectoryHandle
        do { folder = try area.privateFolder(.lists) } catch { return error }
        let target = fileName(name: name, url: url)
        let temporary = "\(target).\(getpid()).new"
        let descriptor: Int32
        switch folder.openFile(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return StoreError(operation: .write, path: failure.path, errno: failure.errno)
        }
        let code = PrivateFile.write(serialized(copy), to: descriptor)
        close(descriptor)
        if let code {
            _ = folder.remove(temporary)
            return StoreError(operation: .write, path: folder.displayPath(of: temporary), errno: code)
        }
        if let failure = folder.rename(temporary, to: target) {
            _ = folder.remove(temporary)
            return StoreError(operation: .rename, path: failure.path, errno: failure.errno)
        }
        return nil
    }

    /// Header lines (`key\tvalue`, an empty value for none), then the list's and the signature's bytes, each after
    /// a line giving its length (`-1`: no signature).
    static func serialized(_ copy: Copy) -> [UInt8] {
        var header = firstLine + "\n"
        header += "signature-url\t\(copy.signatureURL ?? "")\n"
        header += "etag\t\(copy.etag ?? "")\n"
        header += "last-modified\t\(copy.lastModified ?? "")\n"
        header += "checked-at\t\(copy.checkedAt)\n"
        header += "fresh-until\t\(copy.freshUntil.map { "\($0)" } ?? "")\n"
        header += "list\t\(copy.list.count)\n"
        var out = Array(header.utf8) + copy.list
        out += Array("\nsignature\t\(copy.signature?.count ?? -1)\n".utf8)
        out += copy.signature ?? []
        return out
    }

    static func parse(_ bytes: [UInt8]) -> Copy? {
        var position = 0
        func line() -> String? {
            guard let end = bytes[position...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            defer { position = end + 1 }
            return String(decoding: bytes[position..<end], as: UTF8.self)
        }
        func field(_ key: String) -> String? {
            guard let text = line(), text.hasPrefix(key + "\t") else { return nil }
            return String(text.dropFirst(key.count + 1))
        }
        func counted(_ key: String) -> [UInt8]?? {
            guard let count = field(key).flatMap(Int.init), count >= -1 else { return nil }
            if count == -1 { return .some(nil) }
            guard bytes.count - position >= count else { return nil }
            defer { position += count }
            return .some(Array(bytes[position..<position + count]))
        }
        guard line() == firstLine, let signatureURL = field("signature-url"), let etag = field("etag"),
            let lastModified = field("last-modified"), let checkedAt = field("checked-at").flatMap(Double.init),
            let freshUntil = field("fresh-until"), case .some(.some(let list)) = counted("list"),
            position < bytes.count, bytes[position] == UInt8(ascii: "\n")
        else { return nil }
        position += 1
        guard case .some(let signature) = counted("signature"), position == bytes.count else { return nil }
        return Copy(
            list: list, signature: signature, signatureURL: signatureURL.isEmpty ? nil : signatureURL,
            etag: etag.isEmpty ? nil : etag, lastModified: lastModified.isEmpty ? nil : lastModified,
            checkedAt: checkedAt, freshUntil: freshUntil.isEmpty ? nil : Double(freshUntil))
    }
}
