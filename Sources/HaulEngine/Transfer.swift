import CCurl
import Glibc
import HaulDigest

/// The state of one request while it is in the engine: which source and hop it is on, the temporary file it
/// writes, and the running hash. Confined to the engine's thread; libcurl's callbacks reach it through an
/// unretained pointer that the engine's table keeps alive.
final class Transfer {
    let request: TransferRequest
    let temporaryPath: String
    let easy: EasyHandle
    private let descriptor: Int32

    /// Index into `request.sources`.
    private(set) var sourceIndex = 0
    /// Retries already made for the current source.
    private(set) var retriesUsed = 0
    /// The URL requested by the current hop and whether the source's headers go with it.
    private(set) var currentURL: String
    private(set) var sendsHeaders = true
    private(set) var visited: Set<String> = []
    /// Every failed attempt, for the final error.
    var failures: [AttemptFailure] = []
    /// Monotonic time at which a scheduled retry may start.
    var retryAt: Double = 0

    // Per attempt.
    private var hasher: StreamingHasher
    /// Set for large bodies: the hash trails the writer on another core instead of running in the callback.
    private(set) var trailingHasher: TrailingHasher?
    private var trailingWake: Int64 = 0
    private(set) var bytesWritten: Int64 = 0
    private var statusChecked = false
    /// True while the body of a non-2xx answer is read and thrown away.
    private var discarding = false
    private var discardedBytes = 0
    /// Set when the write callback aborts the transfer, so that libcurl's generic write error is not what the
    /// user sees.
    var abortReason: FailureReason?
    /// The headers of the current response that haul acts on.
    private(set) var responseHeaders = ResponseHeaders()
    private var lastProgressAt: Double = 0
    private let reportsProgress: Bool
    private let report: (TransferEvent) -> Void

    init(request: TransferRequest, temporaryPath: String, descriptor: Int32, easy: EasyHandle,
         reportsProgress: Bool, report: @escaping (TransferEvent) -> Void) {
        self.request = request
        self.temporaryPath = temporaryPath
        self.descriptor = descriptor
        self.easy = easy
        self.reportsProgress = reportsProgress
        self.report = report
        self.currentURL = request.sources[0].url
        self.hasher = StreamingHasher(request.hashAlgorithm)
    }

    var source: TransferSource { request.sources[sourceIndex] }
    var hasAnotherSource: Bool { sourceIndex + 1 < request.sources.count }
    var canRetry: Bool { retriesUsed < request.retries }

    /// Starts over from byte 0 for a new attempt (same or next source, or a redirect hop).
    private func restartBody() {
        responseHeaders = ResponseHeaders()
        hasher = StreamingHasher(request.hashAlgorithm)
        trailingHasher = nil
        trailingWake = 0
        bytesWritten = 0
        statusChecked = false
        discarding = false
        discardedBytes = 0
        abortReason = nil
        _ = ftruncate(descriptor, 0)
    }

    func beginRetry() {
        retriesUsed += 1
        currentURL = source.url
        sendsHeaders = true
        visited = []
        restartBody()
    }

    func beginNextSource() {
        sourceIndex += 1
        retriesUsed = 0
        currentURL = source.url
        sendsHeaders = true
        visited = []
        restartBody()
    }

    func beginRedirect(to url: String, sendHeaders: Bool) {
        visited.insert(currentURL)
        currentURL = url
        sendsHeaders = sendHeaders
        restartBody()
    }

    func recordVisit() { visited.insert(currentURL) }

    /// The digest of exactly the bytes written, for bodies hashed in the callback.
    func finishInlineHash() -> Digest { hasher.finalize() }

    /// Bodies at least this long (by Content-Length or pinned size) are hashed by a `TrailingHasher`: below it,
    /// handing work to another thread costs more than hashing in place.
    static let trailingHashThreshold: Int64 = 8 << 20

    func closeFile() { close(descriptor) }

    /// The write path: every body byte goes through here once, into the file and the hash together.
    /// Returning fewer bytes than offered makes libcurl abort the transfer.
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        if bytes.isEmpty { return 0 }
        if !statusChecked {
            statusChecked = true
            let status = easy.responseCode
            if !(200..<300).contains(status) {
                discarding = true
            } else if let limit = request.expectedSize, easy.contentLength > limit {
                abortReason = .tooLarge(limit: limit)
                return 0
            } else if max(easy.contentLength, request.expectedSize ?? -1) >= Self.trailingHashThreshold {
                trailingHasher = TrailingHasher(path: temporaryPath, algorithm: request.hashAlgorithm)
            }
        }
        if discarding {
            // Redirect and error bodies are read so the connection can be reused, but only a little of them.
            discardedBytes += bytes.count
            return discardedBytes > 1 << 16 ? 0 : bytes.count
        }
        if let limit = request.expectedSize, bytesWritten + Int64(bytes.count) > limit {
            abortReason = .tooLarge(limit: limit)
            return 0
        }
        guard let base = bytes.baseAddress else { return 0 }
        var offset = 0
        while offset < bytes.count {
            let written = pwrite(descriptor, base + offset, bytes.count - offset, off_t(bytesWritten) + off_t(offset))
            if written < 0 {
                if errno == EINTR { continue }
                abortReason = .local(operation: "write", path: temporaryPath, errno: errno)
                return 0
            }
            offset += written
        }
        bytesWritten += Int64(bytes.count)
        if let trailingHasher {
            trailingHasher.written(upTo: bytesWritten, lastWake: &trailingWake)
        } else {
            hasher.update(bytes)
        }
        if reportsProgress { reportProgress(chunk: bytes.count) }
        return bytes.count
    }

    /// One header line of the response (libcurl calls this for the status line too).
    func receiveHeader(_ line: UnsafeRawBufferPointer) -> Int {
        responseHeaders.consume(line)
        return line.count
    }

    private func reportProgress(chunk: Int) {
        let now = MonotonicClock.seconds()
        guard now - lastProgressAt >= 0.1 else { return }
        lastProgressAt = now
        let expected = easy.contentLength
        report(.progress(TransferProgress(bytesWritten: chunk, totalBytesWritten: bytesWritten,
                                          totalBytesExpected: expected >= 0 ? expected : request.expectedSize)))
    }
}

enum MonotonicClock {
    static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

/// The response headers haul acts on, parsed as they arrive. A status line starts a new response.
struct ResponseHeaders {
    var retryAfter: RetryAfter?
    var etag: String?
    var lastModified: String?
    var contentRange: String?

    mutating func consume(_ line: UnsafeRawBufferPointer) {
        let text = String(decoding: line, as: UTF8.self)
        if text.hasPrefix("HTTP/") {
            self = ResponseHeaders()
            return
        }
        guard let colon = text.firstIndex(of: ":") else { return }
        let value = String(text[text.index(after: colon)...]).trimmingWhitespace
        switch text[..<colon].lowercased() {
        case "retry-after": retryAfter = RetryAfter(headerValue: value)
        case "etag": etag = value
        case "last-modified": lastModified = value
        case "content-range": contentRange = value
        default: break
        }
    }
}

/// libcurl's header callback.
let transferHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
}

/// libcurl's write callback: a C function, so it finds its `Transfer` through the user pointer.
let transferWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count))
}
