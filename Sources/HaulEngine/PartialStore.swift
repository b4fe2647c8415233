import Glibc
import HaulDigest
import HaulFileSystem

/// Interrupted downloads of pinned files, kept under haul's private area so that the next attempt (in this run
/// or the next) resumes instead of starting over.
///
/// A partial is named by the digest it must end up with, so it can only ever be completed into that content;
/// its `.meta` file says which URL the bytes came from (as a hash: URLs may carry secrets) and the validator that
/// guarantees a resumed request continues the same version of the file.
package struct PartialStore: Sendable {
    /// The partial folder, held open: partials and their metadata are reached by name in it.
    let folder: DirectoryHandle

    func file(for digest: Digest) -> StagedFile { StagedFile(folder: folder, name: Self.fileName(for: digest)) }

    /// The one spelling of a partial's name, shared with whoever sweeps the partial directory.
    package static func fileName(for digest: Digest) -> String { "\(digest.algorithm.rawValue)-\(digest.hex).part" }

    func metadata(forPartial partial: StagedFile) -> PartialMetadata? {
        guard case .success(let descriptor) = folder.openRegularFileForReading(partial.name + ".meta") else {
            return nil
        }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = read(descriptor, &bytes, bytes.count)
        guard count > 0 else { return nil }
        return PartialMetadata(encoded: String(decoding: bytes[..<count], as: UTF8.self))
    }

    /// Written next to the partial, atomically (temporary name, then rename), so a crash never leaves half of it.
    func save(_ metadata: PartialMetadata, forPartial partial: StagedFile) {
        let temporary = partial.name + ".meta.new"
        folder.remove(temporary)
        guard case .success(let descriptor) = folder.openFile(temporary, flags: O_WRONLY | O_CREAT | O_EXCL) else {
            return
        }
        let text = Array(metadata.encoded.utf8)
        let written = write(descriptor, text, text.count)
        close(descriptor)
        if written == text.count, folder.rename(temporary, to: partial.name + ".meta") == nil { return }
        folder.remove(temporary)
    }

    func removeMetadata(forPartial partial: StagedFile) { folder.remove(partial.name + ".meta") }
}

struct PartialMetadata: Equatable {
    var sourceKey: String
    var validator: ResumeValidator

    init(sourceKey: String, validator: ResumeValidator) {
        self.sourceKey = sourceKey
        self.validator = validator
    }

    var encoded: String {
        switch validator {
        case .etag(let tag): "source \(sourceKey)\netag \(tag)\n"
        case .lastModified(let date): "source \(sourceKey)\nlast-modified \(date)\n"
        }
    }

    init?(encoded: String) {
        var source: String?
        var validator: ResumeValidator?
        for line in encoded.split(separator: "\n") {
            guard let space = line.firstIndex(of: " ") else { continue }
            let value = String(line[line.index(after: space)...])
            switch line[..<space] {
            case "source": source = value
            case "etag": validator = .etag(value)
            case "last-modified": validator = .lastModified(value)
            default: continue
            }
        }
        guard let source, let validator else { return nil }
        self.init(sourceKey: source, validator: validator)
    }
}

/// What makes a resumed request safe: `If-Range` with it makes the server send the rest of *this* version, or
/// the whole new version (200) — never the rest of another version spliced onto ours.
enum ResumeValidator: Equatable {
    case etag(String)
    case lastModified(String)

    /// A strong ETag if there is one (weak ones are not allowed in If-Range), else Last-Modified.
    init?(_ headers: ResponseHeaders) {
        if let tag = headers.etag, !tag.hasPrefix("W/"), tag.hasPrefix("\"") {
            self = .etag(tag)
        } else if let date = headers.lastModified, !date.isEmpty {
            self = .lastModified(date)
        } else {
            return nil
        }
    }

    var ifRangeValue: String {
        switch self {
        case .etag(let tag): tag
        case .lastModified(let date): date
        }
    }
}

/// `Content-Range: bytes 100-199/200` → 100; nil for anything else (including `bytes */200`).
func contentRangeStart(_ value: String) -> Int64? {
    guard value.hasPrefix("bytes ") else { return nil }
    let range = value.dropFirst(6)
    guard let dash = range.firstIndex(of: "-") else { return nil }
    guard let start = Int64(range[..<dash]), start >= 0 else { return nil }
    return start
}
