import CLibArchive
import Glibc
import HaulFailures
import HaulFileSystem
import HaulManifest

/// Where libarchive's bytes come from: the body as it arrives, or a complete file libarchive may seek in.
///
/// A stream is read from local headers as the bytes come, which libarchive cannot do for everything:
/// - a 7z archive's index comes after its data: it can only be read from a file (`UnpackFailure.Rule.cannotStream`);
/// - a zip's central directory, which comes last, is never read: a streamed zip's members are regular files and
///   folders only, none executable (the Unix mode and the symlink type live in the central directory alone), and
///   a member the central directory leaves out is unpacked all the same; a member stored uncompressed with its
///   sizes after its data (Info-ZIP writes symlinks so to a pipe) may not be found to end. From a file, a zip is
///   read through its central directory, with modes and symlinks.
final class ArchiveInput {
    /// Each chunk is valid until the next call; nil at the end.
    private let next: (() -> UnsafeRawBufferPointer?)?
    private let file: Int32
    private let buffer: UnsafeMutableRawBufferPointer?
    private var offset: Int64 = 0
    /// A stream has ended (`next` returned nil).
    private(set) var isExhausted = false
    /// How many bytes libarchive has been given.
    private(set) var bytesRead: Int64 = 0

    var canSeek: Bool { next == nil }

    init(stream next: @escaping () -> UnsafeRawBufferPointer?) {
        self.next = next
        file = -1
        buffer = nil
    }

    /// The complete archive in `file`, read with `pread` (its offset is not moved); nil when there is no memory
    /// for the read buffer.
    init?(file: Int32) {
        guard let buffer = ReadBuffer.allocate(Self.chunk) else { return nil }
        next = nil
        self.file = file
        self.buffer = buffer
    }

    deinit { ReadBuffer.free(buffer) }

    private static let chunk = 1 << 20

    /// The input a libarchive callback was given as its client pointer.
    fileprivate static func of(_ client: UnsafeMutableRawPointer?) -> ArchiveInput? {
        client.map { Unmanaged<ArchiveInput>.fromOpaque($0).takeUnretainedValue() }
    }

    /// libarchive's read callback: the next bytes in `pointer`, their count, 0 at the end, -1 on an error.
    fileprivate func read(into pointer: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
        if let next {
            // `next` is not asked again once it has said the body ended.
            if isExhausted { return 0 }
            while true {
                // An empty chunk would read as the end to libarchive: ask again.
                guard let chunk = next() else {
                    isExhausted = true
                    return 0
                }
                if let base = chunk.baseAddress, chunk.count > 0 {
                    pointer.pointee = UnsafeRawPointer(base)
                    bytesRead += Int64(chunk.count)
                    return chunk.count
                }
            }
        }
        guard let buffer, let base = buffer.baseAddress else { return -1 }
        while true {
            let count = pread(file, base, buffer.count, off_t(offset))
            if count < 0 && errno == EINTR { continue }
            if count > 0 {
                offset += Int64(count)
                bytesRead += Int64(count)
            }
            pointer.pointee = UnsafeRawPointer(base)
            return count
        }
    }

    /// libarchive's seek callback (files only): the new offset, or -1.
    fileprivate func seek(to requested: Int64, whence: Int32) -> Int64 {
        let base: Int64
        switch whence {
        case SEEK_SET: base = 0
        case SEEK_CUR: base = offset
        case SEEK_END:
            var info = stat()
            guard fstat(file, &info) == 0 else { return -1 }
            base = Int64(info.st_size)
        default: return -1
        }
        let (target, overflow) = base.addingReportingOverflow(requested)
        guard !overflow, target >= 0 else { return -1 }
        offset = target
        return target
    }
}

/// libarchive's reading side (`archive_read_*`), typed: the formats an entry may name, headers as
/// `MemberHeader` values, data as blocks. Its disk writer is never used.
///
/// Formats are registered one by one, never with `archive_read_support_*_all`: that would also read mtree
/// (whose entries name files on this machine to read) and run external programs for filters libarchive lacks.
/// A filter libarchive was built without falls back to its external program (`gzip -d`, `zstd -d`, ...), as
/// `bsdtar` does.
final class ArchiveReader {
    struct Failure: Error {
        /// libarchive's reason; nil when it gave none.
        let message: String?
        let errno: Int32

        /// No format registered recognizes the bytes (or, for a named format, the compression is not its own).
        var isUnrecognizedFormat: Bool { errno == Self.fileFormat }

        /// libarchive's `ARCHIVE_ERRNO_FILE_FORMAT`, which its public header leaves out: EFTYPE where the system
        /// has one, else (Linux) EILSEQ.
        static let fileFormat = EILSEQ
    }

    private let archive: OpaquePointer
    let input: ArchiveInput
    let format: ArchiveFormat?

    /// nil when libarchive has no memory for its state.
    init?(format: ArchiveFormat?, input: ArchiveInput) {
        guard let archive = archive_read_new() else { return nil }
        self.archive = archive
        self.input = input
        self.format = format
        let zip = {
            input.canSeek
                ? archive_read_support_format_zip_seekable(archive)
                : archive_read_support_format_zip_streamable(archive)
        }
        let registrations: [Int32] =
            switch format {
            case .tar: [archive_read_support_format_tar(archive)]
            case .tarGzip: [archive_read_support_filter_gzip(archive), archive_read_support_format_tar(archive)]
            case .tarBzip2: [archive_read_support_filter_bzip2(archive), archive_read_support_format_tar(archive)]
            case .tarXz: [archive_read_support_filter_xz(archive), archive_read_support_format_tar(archive)]
            case .tarZstd: [archive_read_support_filter_zstd(archive), archive_read_support_format_tar(archive)]
            case .zip: [zip()]
            case .sevenZip: [archive_read_support_format_7zip(archive)]
            case nil:
                [
                    archive_read_support_filter_gzip(archive), archive_read_support_filter_bzip2(archive),
                    archive_read_support_filter_xz(archive), archive_read_support_filter_zstd(archive),
                    archive_read_support_format_tar(archive), archive_read_support_format_7zip(archive), zip(),
                ]
            }
        // ARCHIVE_WARN: the filter runs as an external program.
        guard registrations.allSatisfy({ $0 >= ARCHIVE_WARN }) else { return nil }
    }

    deinit { archive_read_free(archive) }

    /// Reads enough to recognize the format (and, for a named one, checks its compression).
    func open() -> Result<Void, Failure> {
        // C functions: each finds its `ArchiveInput` through the client pointer.
        if input.canSeek {
            let status = archive_read_set_seek_callback(archive) { _, client, offset, whence in
                ArchiveInput.of(client)?.seek(to: offset, whence: whence) ?? -1
            }
            guard status == ARCHIVE_OK else { return .failure(failure()) }
        }
        let client = Unmanaged.passUnretained(input).toOpaque()
        let status = archive_read_open(
            archive, client, nil,
            { _, client, buffer in
                guard let input = ArchiveInput.of(client), let buffer else { return -1 }
                return la_ssize_t(input.read(into: buffer))
            }, nil)
        guard status == ARCHIVE_OK else { return .failure(failure()) }
        if let format, let mismatch = compressionMismatch(for: format) {
            return .failure(Failure(message: mismatch, errno: Failure.fileFormat))
        }
        return .success(())
    }

    /// The next member's header; nil at the archive's end.
    func nextHeader() -> Result<MemberHeader?, Failure> {
        var entry: OpaquePointer?
        let status = archive_read_next_header(archive, &entry)
        if status == ARCHIVE_EOF { return .success(nil) }
        // ARCHIVE_WARN: something beside the name and type was dropped (an attribute, an owner's name).
        guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else { return .failure(failure()) }
        guard let name = archive_entry_pathname(entry) else {
            return .failure(Failure(message: "a member's name cannot be read", errno: 0))
        }
        let kind: MemberHeader.Kind
        if let target = archive_entry_hardlink(entry) {
            kind = .hardLink(target: Self.bytes(target))
        } else {
            let type = archive_entry_filetype(entry)
            switch type {
            case S_IFREG: kind = .file
            case S_IFDIR: kind = .directory
            case S_IFLNK: kind = .symlink(target: archive_entry_symlink(entry).map(Self.bytes) ?? [])
            default: kind = .special(FileKind(mode: type))
            }
        }
        return .success(
            MemberHeader(
                name: Self.bytes(name), kind: kind, permissions: UInt32(archive_entry_perm(entry)),
                declaredSize: archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : nil,
                isSparse: archive_entry_sparse_count(entry) > 0))
    }

    /// The current member's next block of data, where it goes in the file (a sparse member skips its holes); nil
    /// after its last. The bytes are valid until the next call.
    func nextBlock() -> Result<(offset: Int64, bytes: UnsafeRawBufferPointer)?, Failure> {
        var pointer: UnsafeRawPointer?
        var count = 0
        var offset: la_int64_t = 0
        let status = archive_read_data_block(archive, &pointer, &count, &offset)
        if status == ARCHIVE_EOF { return .success(nil) }
        // ARCHIVE_WARN here is damaged data (a zip member's CRC): a failure like any other.
        guard status == ARCHIVE_OK else { return .failure(failure()) }
        return .success((offset, UnsafeRawBufferPointer(start: pointer, count: count)))
    }

    /// After the end: a tar archive that ended where a header should have been, without tar's end-of-archive
    /// blocks, which libarchive takes as a clean end. Every tar writer writes them, so it was cut at a member's
    /// boundary. (libarchive notes where it looked for a header; at the blocks it consumes them, at a bare end
    /// it consumes nothing.)
    var endsWithoutTarTrailer: Bool {
        archive_format(archive) & ARCHIVE_FORMAT_BASE_MASK == ARCHIVE_FORMAT_TAR
            && archive_filter_bytes(archive, 0) <= archive_read_header_position(archive)
    }

    /// The format libarchive found is 7z (which cannot be read without seeking).
    var foundSevenZip: Bool { archive_format(archive) & ARCHIVE_FORMAT_BASE_MASK == ARCHIVE_FORMAT_7ZIP }

    /// Why the compression libarchive found is not `format`'s, or nil. libarchive reads uncompressed bytes through
    /// whatever filters are registered, and may stack one filter twice: the filters found must be exactly
    /// `format`'s (`archive_filter_count` counts the final "none" too).
    private func compressionMismatch(for format: ArchiveFormat) -> String? {
        let expected: Int32? =
            switch format {
            case .tarGzip: ARCHIVE_FILTER_GZIP
            case .tarBzip2: ARCHIVE_FILTER_BZIP2
            case .tarXz: ARCHIVE_FILTER_XZ
            case .tarZstd: ARCHIVE_FILTER_ZSTD
            case .tar, .zip, .sevenZip: nil
            }
        let count = archive_filter_count(archive)
        let found = count > 1 ? archive_filter_code(archive, 0) : nil
        if count == (expected == nil ? 1 : 2), found == expected { return nil }
        guard count > 1 else { return "not compressed" }
        let names = (0..<count - 1).map { archive_filter_name(archive, $0).map { String(cString: $0) } ?? "?" }
        return "compressed with " + names.joined(separator: " inside ")
    }

    private func failure() -> Failure {
        Failure(message: archive_error_string(archive).map { String(cString: $0) }, errno: archive_errno(archive))
    }

    /// Runs `body` with this thread's locale set to C.UTF-8 (`uselocale`, this thread only): libarchive converts
    /// names to the thread's character set, and under the "C" locale cannot convert a zip or 7z name that is not
    /// ASCII. Under C.UTF-8, names a format stores as bytes (GNU tar, ustar) arrive as they are; names it stores as
    /// Unicode (pax, zip, 7z) arrive in NFC, which libarchive converts them to (as `bsdtar` does): two spellings of
    /// one name there are one path.
    static func withUTF8Names<T>(_ body: () -> T) -> T {
        guard let utf8 = haul_utf8_ctype_locale() else { return body() }
        let previous = uselocale(utf8)
        defer {
            uselocale(previous)
            freelocale(utf8)
        }
        return body()
    }

    private static func bytes(_ text: UnsafePointer<CChar>) -> [UInt8] {
        Array(UnsafeRawBufferPointer(start: text, count: strlen(text)))
    }
}
