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
    /// What the server says of how long the response stays fresh (see `Freshness`); raw, several fields joined.
    var cacheControl: String?
    var expires: String?
    var date: String?
    var age: String?
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
        case invalid(ProtocolViolation)
    }

    /// The body length the response announced, when it announced a believable one.
    var contentLength: Int64? {
        guard !hasTransferEncoding, case .value(let value) = length else { return nil }
        return value
    }

    /// How many seconds from its arrival the response stays fresh, as its server says; nil: not at all.
    var freshness: Double? { Freshness.lifetime(cacheControl: cacheControl, expires: expires, date: date, age: age) }

    /// Runs for every header line of every response: names haul ignores cost a few byte compares, no allocation.
    mutating func consume(_ line: UnsafeRawBufferPointer) {
        if line.starts(with: Self.statusPrefix) {
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
        case .cacheControl: cacheControl = cacheControl.map { $0 + ", " + value } ?? value
        case .expires: expires = value
        case .date: date = value
        case .age: age = value
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
            length = .invalid(.conflictingContentLength(earlier, value))
        default:
            length = .value(value)
        }
    }

    /// One `Content-Length` field (which may itself be a list, `5, 5`): every value must be digits, fit in 63
    /// bits, and equal every other value seen.
    private mutating func addContentLength(_ field: String) {
        for element in field.split(separator: ",", omittingEmptySubsequences: false) {
            if case .invalid = length { return }
            let text = String(element).trimmingWhitespace
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                length = .invalid(.malformedContentLength(ServerText.quoted(field)))
                return
            }
            guard let value = Int64(text) else {
                length = .invalid(.contentLengthTooLarge(ServerText.quoted(text)))
                return
            }
            addContentLength(value)
        }
    }

    /// `HTTP/1.1 200 OK` → 200; -1 when the code is not three digits.
    private static func statusCode(_ line: UnsafeRawBufferPointer) -> Int {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return -1 }
        var code = 0
        var index = space + 1
        while index < line.count, line[index] == UInt8(ascii: " ") { index += 1 }
        let first = index
        while index < line.count, line[index] >= UInt8(ascii: "0"), line[index] <= UInt8(ascii: "9"), index - first < 4
        {
            code = code * 10 + Int(line[index] - UInt8(ascii: "0"))
            index += 1
        }
        return index - first == 3 ? code : -1
    }

    /// Named by the field's name in lower case.
    private enum Field: String, CaseIterable {
        case etag, location, retryAfter = "retry-after", lastModified = "last-modified", contentRange = "content-range"
        case contentLength = "content-length", transferEncoding = "transfer-encoding", contentEncoding =
            "content-encoding"
        case cacheControl = "cache-control", expires, date, age
    }

    private static let fields: [(name: [UInt8], field: Field)] = Field.allCases.map { (Array($0.rawValue.utf8), $0) }
    private static let statusPrefix: [UInt8] = Array("HTTP/".utf8)

    private static func field(named name: UnsafeRawBufferPointer) -> Field? {
        fields.first { $0.name.count == name.count && zip(name, $0.name).allSatisfy { $0 | 0x20 == $1 } }?.field
    }
}

/// Whether a response can be believed, judged from its headers alone: as its header block ends, before any body
/// byte, and as its first body byte arrives, before it is written.
extension ResponseHeaders {
    /// A response's header block larger than this is not a response haul believes. Below libcurl's own limit
    /// where it has one (300 KiB since the CVE-2023-38039 fix, which Debian's 7.88 carries; unpatched 7.88 has
    /// none, only 100 KiB per line), so that the same answer fails the same way whichever libcurl runs.
    static let maxHeaderBytes = 256 << 10

    /// Why the response is not believed now that a line of `lineLength` bytes is in (nil: read on): its size at every
    /// line, the rest when the block ends (the blank line). Interim (1xx) answers are followed by the real one.
    func refusal(afterLineOf lineLength: Int, resumeOffset: Int64, bodyLimit: Int64) -> FailureReason? {
        if headerBytes > Self.maxHeaderBytes {
            return .protocolViolation(.headersTooLarge(kibibytes: Self.maxHeaderBytes >> 10))
        }
        guard lineLength <= 2, !(100..<200).contains(status) else { return nil }
        guard (200...599).contains(status) else { return .protocolViolation(.statusOutOfRange(status)) }
        guard (200..<300).contains(status) else { return nil }
        // RFC 9112 6.3: a Content-Length that is malformed, or several that disagree, make the framing unknowable.
        switch length {
        case .invalid(let why): return .protocolViolation(why)
        case .absent: return nil
        case .value(let value):
            // An announced length above the limit fails before any body byte. A 206 ends where its range says;
            // whether that range is acceptable is judged with the first body byte.
            let start = status == 206 ? contentRange.flatMap(contentRangeStart) ?? resumeOffset : 0
            let (end, overflow) = max(0, start).addingReportingOverflow(value)
            return overflow || end > bodyLimit ? .tooLarge(limit: bodyLimit) : nil
        }
    }

    /// Where a 2xx body starts in the file, or why it cannot go there. `resumeOffset`: where the request's `Range`
    /// began, nil when it asked for the whole body. A 200 to a resume is the whole body, from byte 0.
    func bodyStart(resumeOffset: Int64?, bodyLimit: Int64) throws(FailureReason) -> Int64 {
        var start: Int64 = 0
        if let resumeOffset, status == 206 {
            guard let begins = contentRange.flatMap(contentRangeStart), begins == resumeOffset else {
                throw .resumeRejected(askedFrom: resumeOffset, contentRange: contentRange.map { ServerText.quoted($0) })
            }
            start = resumeOffset
        } else if status == 206 {
            throw .protocolViolation(.unaskedPartialContent)
        }
        if let length = contentLength, start.addingReportingOverflow(length).overflow || start + length > bodyLimit {
            throw .tooLarge(limit: bodyLimit)
        }
        return start
    }
}
