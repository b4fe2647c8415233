import CCurl
import Glibc
import HaulDigest

/// The state of one request while it is in the engine: which source and hop it is on, the file it writes,
/// how much of it is already there (resume), and the running hash. Confined to one loop's thread; libcurl's
/// callbacks reach it through an unretained pointer that the loop's table keeps alive.
///
/// A transfer holds an easy handle and an open file only while an attempt runs: one that waits for a retry (or
/// for a slot) holds neither, so any number of them can wait without running out of descriptors.
final class Transfer {
    let request: TransferRequest
    /// Which source next, and when (see `SourceRotation`).
    var rotation: SourceRotation
    /// Requests fetched together with this one (`TransferRequest.sharers`) that the bytes have not served yet.
    var sharers: [Sharer]
    /// The most bytes an attempt accepts: the pinned size, else the run's limit for unsized files; for a group,
    /// the largest any member accepts (the bytes must arrive for each to judge them against its own).
    let bodyLimit: Int64

    // The file, set once by `adopt` (the transfer's first attempt) and kept for its whole life.
    /// A random name for unpinned files; for pinned ones, the partial named by the expected digest.
    private(set) var file: StagedFile?
    /// For messages.
    var temporaryPath: String { file?.path ?? "" }
    /// Whether bytes may be kept across attempts and runs (pinned files only: the digest judges the splice).
    private(set) var isResumable = false
    /// The file was created with the request's `fileMode`.
    private(set) var hasFileMode = false
    private var descriptor: Int32 = -1
    /// The handle of the attempt running in libcurl; nil while the transfer waits.
    var easy: EasyHandle?

    /// Index into `request.sources`.
    private(set) var sourceIndex: Int
    /// The URL requested by the current hop and whether the source's headers go with it.
    private(set) var currentURL: String
    private(set) var sendsHeaders = true
    private(set) var visited: Set<String> = []
    /// Every failed attempt, for the final error.
    var failures: [AttemptFailure]
    /// Monotonic time at which a transfer waiting for a retry may start again.
    var retryAt: Double = 0
    /// Hosts of the sources as `BadHosts` keys, computed the first time a bad host makes them matter.
    var hostKeys: [String]?

    // Resume state, kept across attempts at the same source.
    /// Bytes already in the file when the current attempt started; the attempt asks for the rest.
    private(set) var resumeOffset: Int64 = 0
    /// What the server said identifies the bytes we have (from the response, or the partial's metadata).
    private(set) var validator: ResumeValidator?
    /// The file holds bytes from an earlier attempt: a digest mismatch then earns one full refetch.
    private(set) var holdsResumedBytes = false
    private(set) var didFullRefetch = false

    // Per attempt.
    private var hasher: StreamingHasher
    /// Set for large or resumed bodies: the hash trails the writer on another core, reading the file from byte 0.
    private(set) var trailingHasher: TrailingHasher?
    private var trailingWake: Int64 = 0
    /// Body bytes of this attempt.
    private(set) var bytesWritten: Int64 = 0
    private var statusChecked = false
    /// True while the body of a non-2xx answer is read and thrown away.
    private(set) var discarding = false
    private var discardedBytes = 0
    /// Set when a callback aborts the transfer, so that libcurl's generic write error is not what the user sees.
    var abortReason: FailureReason?
    /// The errno of a socket(2) that failed for this attempt (see `transferOpenSocketCallback`); 0 when none did.
    var socketError: Int32 = 0
    /// A resume was answered with a range that is not the one asked for: the partial goes and the same source is
    /// asked at once for the whole body, as if it had answered 200 (no retry counted, no backoff).
    private(set) var restartsFromZero = false
    /// The headers of the current response that haul acts on.
    private(set) var responseHeaders = ResponseHeaders()
    /// Whether this attempt's body has begun, when progress was last reported, and what was written since.
    private var bodyStarted = false
    private var lastProgressAt: Double = 0
    private var unreportedBytes = 0
    /// When bytes last arrived (or the attempt began): the stall clock.
    private var lastActivityAt: Double = 0
    private let reportsProgress: Bool
    private let clock: LoopClock
    private let report: (TransferEvent) -> Void
    /// Where a resumable file's metadata goes, written as soon as a response is accepted (not only when the
    /// transfer gives up): a run killed mid-body (SIGKILL, OOM, power) still leaves a partial the next run resumes.
    private var partials: PartialStore? { isResumable ? partialStore : nil }
    private let partialStore: PartialStore?

    /// - Parameters:
    ///   - rotation: where the request stands (a sharer split off a group brings what the group already tried).
    ///   - sourceIndex: the source of the first attempt.
    init(request: TransferRequest, rotation: SourceRotation, failures: [AttemptFailure] = [], sourceIndex: Int,
         maxBodyBytes: Int64, partials: PartialStore?, reportsProgress: Bool, clock: LoopClock,
         report: @escaping (TransferEvent) -> Void) {
        self.clock = clock
        self.request = request
        self.rotation = rotation
        self.failures = failures
        self.sourceIndex = sourceIndex
        let own = request.expectedSize ?? maxBodyBytes
        bodyLimit = request.sharers.reduce(own) { max($0, $1.expectedSize ?? maxBodyBytes) }
        self.reportsProgress = reportsProgress
        self.report = report
        self.partialStore = partials
        self.currentURL = request.sources[sourceIndex].url
        self.hasher = StreamingHasher(request.hashAlgorithm)
        self.sharers = request.sharers.map { Sharer($0, leader: request) }
    }

    /// Takes the file the engine opened for the first attempt.
    func adopt(_ file: TemporaryFile) {
        self.file = file.staged
        descriptor = file.descriptor
        isResumable = file.isPartial
        hasFileMode = file.hasFileMode
        if let resume = file.resume {
            resumeOffset = resume.offset
            validator = resume.validator
            holdsResumedBytes = true
        }
    }

    var hasFile: Bool { file != nil }

    /// Opens the file again after a wait (`closeFile`); the errno on failure.
    func reopenFile() -> Int32? {
        guard descriptor < 0 else { return nil }
        guard let file else { return ENOENT }
        switch file.open(O_WRONLY) {
        case .success(let opened):
            descriptor = opened
            return nil
        case .failure(let failure):
            return failure.errno
        }
    }

    func closeFile() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    var source: TransferSource { request.sources[sourceIndex] }
    /// Everything in the file: resumed bytes plus this attempt's body.
    var totalBytes: Int64 { resumeOffset + bytesWritten }
    /// The current attempt asks for the rest of a partial.
    var requestsRange: Bool { resumeOffset > 0 && validator != nil }
    /// A partial that is already as long as the pinned size needs only its hash checked, not a request.
    var partialLooksComplete: Bool { requestsRange && request.expectedSize == resumeOffset }

    /// Per-attempt state back to "nothing received yet".
    private func resetAttempt() {
        responseHeaders = ResponseHeaders()
        hasher = StreamingHasher(request.hashAlgorithm)
        trailingHasher = nil
        trailingWake = 0
        bytesWritten = 0
        statusChecked = false
        discarding = false
        discardedBytes = 0
        abortReason = nil
        restartsFromZero = false
        bodyStarted = false
        unreportedBytes = 0
    }

    /// Drops every byte: the next attempt starts from 0.
    private func dropBytes() {
        resetAttempt()
        emptyFile()
    }

    /// The file and the hash back to zero bytes; the response being read stays as it is.
    private func emptyFile() {
        resumeOffset = 0
        holdsResumedBytes = false
        bytesWritten = 0
        hasher = StreamingHasher(request.hashAlgorithm)
        trailingHasher = nil
        trailingWake = 0
        // Old bytes past the new end would be committed without having been hashed.
        if descriptor >= 0 {
            if ftruncate(descriptor, 0) != 0 { abortReason = .local(operation: "truncate", path: temporaryPath, errno: errno) }
        } else if let file {
            switch file.open(O_WRONLY | O_TRUNC) {
            case .success(let opened): close(opened)
            case .failure(let failure): abortReason = .local(operation: "truncate", path: temporaryPath, errno: failure.errno)
            }
        }
    }

    /// The next attempt, at `source`. The same source resumes what arrived if the failure left bytes worth
    /// keeping and the server gave a validator that lets the next request ask for the rest safely; another
    /// source starts from byte 0 (a partial from one URL is never resumed from another).
    func prepareAttempt(at source: Int, keepingBytes: Bool) {
        if source == sourceIndex && keepingBytes && isResumable && validator != nil && totalBytes > 0 {
            let kept = totalBytes
            resetAttempt()
            resumeOffset = kept
            holdsResumedBytes = true
        } else {
            if source != sourceIndex { validator = nil }
            dropBytes()
        }
        sourceIndex = source
        restartAtSource()
    }

    /// After a digest mismatch on bytes that were partly resumed: throw them away and fetch once in full.
    func beginFullRefetch() {
        didFullRefetch = true
        validator = nil
        restartAtSource()
        dropBytes()
    }

    /// After a resume was answered with another range: the partial goes, and the same source is asked for all of
    /// it. Not a retry: the server answered, just not what a resume can use.
    func beginRestartFromZero() {
        validator = nil
        if let file { partials?.removeMetadata(forPartial: file) }
        restartAtSource()
        dropBytes()
    }

    private func restartAtSource() {
        currentURL = source.url
        sendsHeaders = true
        visited = []
    }

    /// Redirects are hops of one attempt: bytes already resumed stay, the new hop asks for the same range.
    func beginRedirect(to url: String, sendHeaders: Bool) {
        visited.insert(currentURL)
        currentURL = url
        sendsHeaders = sendHeaders
        resetAttempt()
    }

    /// Called as the attempt (or a redirect hop) goes to libcurl.
    func recordVisit() {
        visited.insert(currentURL)
        lastActivityAt = clock.now
    }

    /// libcurl's transfer-info callback runs at least once a second, even when nothing arrives: the place to
    /// notice that nothing has arrived for the whole stall window. Returns false to abort.
    func checkForStall() -> Bool {
        let idle = clock.now - lastActivityAt
        guard idle > request.stallTimeout else { return true }
        abortReason = .network(code: .operationTimedOut, message: "no data for \(Self.format(seconds: request.stallTimeout))")
        return false
    }

    private static func format(seconds: Double) -> String {
        seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// The digest of exactly the bytes written, for bodies hashed in the callback.
    func finishInlineHash() -> Digest { hasher.finalize() }

    /// Starts hashing the whole file from byte 0 on another thread (resumed or large bodies).
    func startTrailingHash() -> TrailingHasher? {
        if trailingHasher == nil, let file { trailingHasher = TrailingHasher(file: file, algorithm: request.hashAlgorithm) }
        return trailingHasher
    }

    /// The `Content-Encoding` of the response whose body is in the file, shown safely; nil when there is none.
    var servedEncoding: String? { responseHeaders.contentEncoding.map { ServerText.quoted($0) } }

    /// Bodies at least this long (by Content-Length or pinned size) are hashed by a `TrailingHasher`: below it,
    /// handing work to another thread costs more than hashing in place.
    static let trailingHashThreshold: Int64 = 8 << 20

    /// A response's header block larger than this is not a response haul believes. Below libcurl's own limit
    /// where it has one (300 KiB since the CVE-2023-38039 fix, which Debian's 7.88 carries; unpatched 7.88 has
    /// none, only 100 KiB per line), so that the same answer fails the same way whichever libcurl runs.
    static let maxHeaderBytes = 256 << 10

    /// Decides, on the first body byte, what this response is: a body to keep (whole, or the rest of a partial),
    /// or one to discard. Returns false to abort the transfer (`abortReason` says why).
    private func acceptResponse() -> Bool {
        let status = responseHeaders.status
        guard (200..<300).contains(status) else {
            discarding = true
            return true
        }
        let length = responseHeaders.contentLength ?? -1
        if requestsRange {
            if status == 206 {
                guard let start = responseHeaders.contentRange.flatMap(contentRangeStart), start == resumeOffset else {
                    let range = responseHeaders.contentRange.map { "Content-Range: \(ServerText.quoted($0))" } ?? "no Content-Range"
                    abortReason = .resumeRejected("asked for the bytes from \(resumeOffset), the server answered with \(range)")
                    restartsFromZero = true
                    return false
                }
            } else {
                // A 200 to a resume request is the whole body from byte 0: the partial is dropped.
                emptyFile()
            }
        } else if status == 206 {
            abortReason = .protocolViolation("partial content (206) that haul did not ask for")
            return false
        }
        if let fresh = ResumeValidator(responseHeaders) {
            // Before the first byte lands: the metadata never describes bytes it does not cover. A resume answered
            // with the validator already on disk has nothing new to write (a new source or a full refetch
            // clears `validator` first).
            if fresh != validator {
                if let file { partials?.save(PartialMetadata(sourceKey: source.key, validator: fresh), forPartial: file) }
            }
            validator = fresh
        } else if isResumable {
            // Bytes without a validator cannot be resumed safely; whatever metadata there was no longer applies.
            if let file { partials?.removeMetadata(forPartial: file) }
        }
        let limit = bodyLimit
        if length >= 0, resumeOffset.addingReportingOverflow(length).overflow || resumeOffset + length > limit {
            abortReason = .tooLarge(limit: limit)
            return false
        }
        if resumeOffset > 0 || max(length, request.expectedSize ?? -1) >= Self.trailingHashThreshold {
            _ = startTrailingHash()
        }
        return true
    }

    /// The write path: every body byte goes through here once, into the file and the hash together.
    /// Returning fewer bytes than offered makes libcurl abort the transfer.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if bytes.isEmpty { return 0 }
        if !statusChecked {
            statusChecked = true
            guard acceptResponse() else { return 0 }
        }
        if discarding {
            lastActivityAt = clock.now
            // Redirect and error bodies are read so the connection can be reused, but only a little of them.
            discardedBytes += bytes.count
            return discardedBytes > 1 << 16 ? 0 : bytes.count
        }
        let limit = bodyLimit
        if totalBytes + Int64(bytes.count) > limit {
            abortReason = .tooLarge(limit: limit)
            return 0
        }
        guard let base = bytes.baseAddress else { return 0 }
        var offset = 0
        while offset < bytes.count {
            let written = pwrite(descriptor, base + offset, bytes.count - offset, off_t(totalBytes) + off_t(offset))
            if written < 0 {
                if errno == EINTR { continue }
                abortReason = .local(operation: "write", path: temporaryPath, errno: errno)
                return 0
            }
            offset += written
        }
        bytesWritten += Int64(bytes.count)
        let now = clock.now
        lastActivityAt = now
        if let trailingHasher {
            trailingHasher.written(upTo: totalBytes, lastWake: &trailingWake)
        } else {
            hasher.update(bytes)
        }
        if reportsProgress { reportProgress(chunk: bytes.count, now: now) }
        return bytes.count
    }

    /// One header line of the response (libcurl calls this for the status line too). A response is believed only
    /// when it is consistent: its header block is judged when it ends, before any body byte is written.
    func receiveHeader(_ line: UnsafeRawBufferPointer) -> Int {
        lastActivityAt = clock.now
        responseHeaders.consume(line)
        if responseHeaders.headerBytes > Self.maxHeaderBytes {
            abortReason = .protocolViolation("response headers over \(Self.maxHeaderBytes >> 10) KiB")
            return 0
        }
        guard line.count <= 2 else { return line.count }
        // The blank line ends the block. Interim (1xx) answers are followed by the real one.
        let status = responseHeaders.status
        if (100..<200).contains(status) { return line.count }
        guard (200...599).contains(status) else {
            abortReason = .protocolViolation("status \(status) is outside 100-599")
            return 0
        }
        guard (200..<300).contains(status) else { return line.count }
        // RFC 9112 6.3: a Content-Length that is malformed, or several that disagree, make the framing unknowable.
        let length: Int64
        switch responseHeaders.length {
        case .invalid(let why):
            abortReason = .protocolViolation(why)
            return 0
        case .absent:
            return line.count
        case .value(let value):
            length = value
        }
        // An announced length above the limit fails before any body byte.
        let limit = bodyLimit
        // A 206 ends where its range says; whether that range is acceptable is judged with the first body byte.
        let start = status == 206 ? responseHeaders.contentRange.flatMap(contentRangeStart) ?? resumeOffset : 0
        let (end, overflow) = max(0, start).addingReportingOverflow(length)
        if overflow || end > limit {
            abortReason = .tooLarge(limit: limit)
            return 0
        }
        return line.count
    }

    /// At most every tenth of a second, and not before the body has been arriving for that long: a file that
    /// comes whole within it is told by its end alone (for 100,000 small files, a report each was most of what
    /// showing progress cost).
    private func reportProgress(chunk: Int, now: Double) {
        unreportedBytes += chunk
        if !bodyStarted {
            bodyStarted = true
            lastProgressAt = now
        }
        guard now - lastProgressAt >= 0.1 else { return }
        lastProgressAt = now
        let length = responseHeaders.contentLength
        report(.progress(TransferProgress(bytesWritten: unreportedBytes, totalBytesWritten: totalBytes,
                                          totalBytesExpected: length.map { resumeOffset + $0 } ?? request.expectedSize)))
        unreportedBytes = 0
    }
}

/// A request fetched together with a leader (`TransferRequest.sharers`) while the leader's bytes may still serve
/// it. It makes no request of its own; the leader's attempts at the sources both have count as its attempts, so
/// that if it has to go on alone, it does not ask a URL again that the group already exhausted.
struct Sharer {
    let request: TransferRequest
    /// For each of the leader's sources, the index of the same source in this request's list, if it has it.
    let sourceMap: [Int?]
    var rotation: SourceRotation
    var failures: [AttemptFailure] = []

    init(_ request: TransferRequest, leader: TransferRequest) {
        self.request = request
        sourceMap = leader.sources.map { leading in
            guard leading.conditional == nil else { return nil }
            return request.sources.firstIndex {
                $0.conditional == nil && $0.url == leading.url && $0.headers == leading.headers
            }
        }
        rotation = SourceRotation(sources: request.sources.count, retries: request.retries)
    }
}

/// The file a transfer writes, as the engine opened it.
struct TemporaryFile {
    var staged: StagedFile
    var descriptor: Int32
    /// Created with the request's `fileMode`, exactly.
    var hasFileMode = false
    /// Named by the expected digest under the partial directory; kept on failure for a later resume.
    var isPartial: Bool
    /// Bytes already there, and the validator to resume them with.
    var resume: (offset: Int64, validator: ResumeValidator)?
}

/// A loop's idea of now, read once per turn of the loop rather than by each of libcurl's callbacks (a dozen
/// per small transfer: headers, body, transfer info): every callback runs inside `perform`, right after the
/// loop has read the clock, and stall windows are counted in seconds. Confined to its loop's thread.
final class LoopClock {
    private(set) var now: Double = MonotonicClock.seconds()
    func tick() { now = MonotonicClock.seconds() }
}

/// Seconds on CLOCK_MONOTONIC: for durations, immune to wall-clock jumps.
package enum MonotonicClock {
    package static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// The response headers haul acts on, parsed as they arrive. A status line starts a new response.
struct ResponseHeaders {
    /// From the status line, read here rather than asked of libcurl afterwards, so that the header block can be
    /// judged as it ends, before any body byte; -1 until one is seen (or when it has no three-digit code).
    var status = -1
    /// Kept raw: parsed only when a retry needs it, not for every response of every hop.
    var retryAfterValue: String?
    var retryAfter: RetryAfter? { retryAfterValue.flatMap(RetryAfter.init(headerValue:)) }
    var etag: String?
    var lastModified: String?
    var contentRange: String?
    var location: String?
    /// Raw, as the server wrote it (shown only through `ServerText`); nil when absent or `identity`.
    var contentEncoding: String?
    /// Every `Content-Length` the response carried, reconciled (RFC 9112 6.3).
    var length = Length.absent
    /// With a Transfer-Encoding, the encoding frames the body and any Content-Length is ignored.
    var hasTransferEncoding = false
    /// Bytes of this response's header block so far, status line included.
    var headerBytes = 0

    enum Length: Equatable {
        case absent
        case value(Int64)
        /// Malformed, out of range, or several values that disagree: the body's end cannot be known.
        case invalid(String)
    }

    /// The body length the response announced, when it announced a believable one.
    var contentLength: Int64? {
        guard !hasTransferEncoding, case .value(let value) = length else { return nil }
        return value
    }

    /// Runs for every header line of every response: names haul ignores cost a few byte compares, no allocation.
    mutating func consume(_ line: UnsafeRawBufferPointer) {
        if Self.hasPrefix(line, Self.statusPrefix) {
            self = ResponseHeaders()
            status = Self.statusCode(line)
            headerBytes = line.count
            return
        }
        headerBytes += line.count
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
        guard let field = Self.field(named: name) else { return }
        let raw = UnsafeRawBufferPointer(rebasing: line[(colon + 1)...])
        // Every response has one: read from the bytes when it is the plain number it nearly always is.
        if field == .contentLength, let plain = Self.plainDecimal(raw) { return addContentLength(plain) }
        let value = String(decoding: raw, as: UTF8.self).trimmingWhitespace
        switch field {
        case .etag: etag = value
        case .location: location = value
        case .retryAfter: retryAfterValue = value
        case .lastModified: lastModified = value
        case .contentRange: contentRange = value
        case .contentLength: addContentLength(value)
        case .transferEncoding: hasTransferEncoding = true
        case .contentEncoding:
            guard !value.isEmpty, value.lowercased() != "identity" else { return }
            contentEncoding = contentEncoding.map { $0 + ", " + value } ?? value
        }
    }

    /// A field value that is one decimal number (at most 18 digits, so it fits) between optional spaces and the
    /// line's end; nil for anything else, which the careful reading handles.
    private static func plainDecimal(_ value: UnsafeRawBufferPointer) -> Int64? {
        var result: Int64 = 0
        var digits = 0
        var sawEnd = false
        for byte in value {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard !sawEnd, digits < 18 else { return nil }
                result = result * 10 + Int64(byte - UInt8(ascii: "0"))
                digits += 1
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"):
                if digits > 0 { sawEnd = true }
            default:
                return nil
            }
        }
        return digits > 0 ? result : nil
    }

    /// One plain `Content-Length` value: it must equal every other value seen.
    private mutating func addContentLength(_ value: Int64) {
        switch length {
        case .invalid: return
        case .value(let earlier) where earlier != value:
            length = .invalid("conflicting Content-Length values: \(earlier) and \(value)")
        default:
            length = .value(value)
        }
    }

    /// One `Content-Length` field (which may itself be a list, `5, 5`): every value must be digits, fit in 63
    /// bits, and equal every other value seen.
    private mutating func addContentLength(_ field: String) {
        if case .invalid = length { return }
        for element in field.split(separator: ",", omittingEmptySubsequences: false) {
            let text = String(element).trimmingWhitespace
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                length = .invalid("malformed Content-Length: \(ServerText.quoted(field))")
                return
            }
            guard let value = Int64(text) else {
                length = .invalid("Content-Length above 2^63-1: \(ServerText.quoted(text))")
                return
            }
            if case .value(let earlier) = length, earlier != value {
                length = .invalid("conflicting Content-Length values: \(earlier) and \(value)")
                return
            }
            length = .value(value)
        }
    }

    /// `HTTP/1.1 200 OK` → 200; -1 when the code is not three digits.
    private static func statusCode(_ line: UnsafeRawBufferPointer) -> Int {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return -1 }
        var code = 0
        var index = space + 1
        while index < line.count, line[index] == UInt8(ascii: " ") { index += 1 }
        let first = index
        while index < line.count, line[index] >= UInt8(ascii: "0"), line[index] <= UInt8(ascii: "9"), index - first < 4 {
            code = code * 10 + Int(line[index] - UInt8(ascii: "0"))
            index += 1
        }
        return index - first == 3 ? code : -1
    }

    private enum Field: CaseIterable {
        case etag, location, retryAfter, lastModified, contentRange, contentLength, transferEncoding, contentEncoding

        var lowercaseName: [UInt8] {
            switch self {
            case .etag: Array("etag".utf8)
            case .location: Array("location".utf8)
            case .retryAfter: Array("retry-after".utf8)
            case .lastModified: Array("last-modified".utf8)
            case .contentRange: Array("content-range".utf8)
            case .contentLength: Array("content-length".utf8)
            case .transferEncoding: Array("transfer-encoding".utf8)
            case .contentEncoding: Array("content-encoding".utf8)
            }
        }
    }

    private static let fields: [(name: [UInt8], field: Field)] = Field.allCases.map { ($0.lowercaseName, $0) }
    private static let statusPrefix: [UInt8] = Array("HTTP/".utf8)

    private static func field(named name: UnsafeRawBufferPointer) -> Field? {
        for candidate in fields where candidate.name.count == name.count {
            var equal = true
            for index in 0..<name.count where name[index] | 0x20 != candidate.name[index] {
                equal = false
                break
            }
            if equal { return candidate.field }
        }
        return nil
    }

    private static func hasPrefix(_ line: UnsafeRawBufferPointer, _ prefix: [UInt8]) -> Bool {
        guard line.count >= prefix.count else { return false }
        for index in 0..<prefix.count where line[index] != prefix[index] { return false }
        return true
    }
}

/// libcurl's open-socket callback: the socket libcurl would open, made here so that a socket(2) that fails for want
/// of descriptors (EMFILE, ENFILE) is known for what it is; libcurl 7.88 reports it as a failed connect, with no
/// errno, like a server that refuses.
let transferOpenSocketCallback: TransferCallbacks.OpenSocket = { context, _, address in
    guard let address else { return CURL_SOCKET_BAD }
    let opened = socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
    if opened < 0, let context { Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().socketError = errno }
    return opened
}

/// libcurl's transfer-info callback: only used to detect stalls.
let transferInfoCallback: TransferCallbacks.Progress = {
    context, _, _, _, _ in
    guard let context else { return 0 }
    return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().checkForStall() ? 0 : 1
}

/// libcurl's header callback.
let transferHeaderCallback: TransferCallbacks.Data = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
}

/// libcurl's write callback: a C function, so it finds its `Transfer` through the user pointer.
let transferWriteCallback: TransferCallbacks.Data = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count))
}
