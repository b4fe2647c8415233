import Synchronization

/// In-memory files served the way nginx serves a directory, because haul's resume and revalidation logic is
/// only as good as the validator semantics it is tested against:
/// - strong ETag `"<size hex>-<content hash hex>"`, so equal content means equal ETag across `set` calls;
/// - Last-Modified from a private clock that ticks one second per `set`, so every write is distinguishable
///   (real mtimes collide within a second) and values are reproducible;
/// - single `bytes=a-b` / `bytes=a-` / `bytes=-n` ranges → 206 with Content-Range; unsatisfiable → 416 with
///   `Content-Range: bytes */size`; syntactically invalid or multi-range headers are ignored (full 200);
/// - If-Range honoured only for an exact strong ETag or exact Last-Modified match, else the full 200;
/// - If-None-Match (weak comparison, `*`) and, when absent, If-Modified-Since (exact match, nginx's default
///   `if_modified_since exact`) → 304; If-Match that fails → 412;
/// - HEAD gets GET's headers (the server drops the body); other methods → 405; unknown paths → 404.
///
/// Paths are matched against `RecordedRequest.path` as sent, without percent-decoding.
public final class StaticFiles: Sendable {
    struct Entry: Sendable {
        let bytes: [UInt8]
        let etag: String
        let lastModified: String
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        /// 2023-11-14T22:13:20Z; an arbitrary fixed start keeps headers identical from run to run.
        var clock = 1_700_000_000
    }

    private let table = Mutex(Table())

    public init(_ files: [String: [UInt8]] = [:]) {
        for path in files.keys.sorted() {
            if let bytes = files[path] { set(path, bytes) }
        }
    }

    public func set(_ path: String, _ bytes: [UInt8]) {
        let etag = Self.etag(for: bytes)
        table.withLock { table in
            table.clock += 1
            table.entries[path] = Entry(bytes: bytes, etag: etag, lastModified: httpDate(table.clock))
        }
    }

    public func remove(_ path: String) {
        table.withLock { _ = $0.entries.removeValue(forKey: path) }
    }

    /// The ETag the server will send for `path`, so tests can build matching or stale validators.
    public func etag(_ path: String) -> String? { table.withLock { $0.entries[path]?.etag } }

    public func lastModified(_ path: String) -> String? { table.withLock { $0.entries[path]?.lastModified } }

    public func contents(_ path: String) -> [UInt8]? { table.withLock { $0.entries[path]?.bytes } }

    public func respond(to request: RecordedRequest) -> ServerResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return .status(405, headers: [("Allow", "GET, HEAD")])
        }
        guard let entry = table.withLock({ $0.entries[request.path] }) else { return .notFound }
        let validators = [("ETag", entry.etag), ("Last-Modified", entry.lastModified)]

        if let ifMatch = request.header("If-Match"), !Self.listMatches(ifMatch, entry.etag, weak: false) {
            return .status(412, headers: validators)
        }
        if let ifNoneMatch = request.header("If-None-Match") {
            if Self.listMatches(ifNoneMatch, entry.etag, weak: true) { return .status(304, headers: validators) }
        } else if let ifModifiedSince = request.header("If-Modified-Since"), ifModifiedSince == entry.lastModified {
            return .status(304, headers: validators)
        }

        let size = entry.bytes.count
        var headers = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes")] + validators
        if let range = request.header("Range"), Self.ifRangeAllows(request.header("If-Range"), entry) {
            switch Self.parseRange(range, size: size) {
            case .satisfiable(let first, let last):
                headers.append(("Content-Range", "bytes \(first)-\(last)/\(size)"))
                return ServerResponse(status: 206, headers: headers, body: Array(entry.bytes[first...last]))
            case .unsatisfiable:
                return .status(416, headers: validators + [("Content-Range", "bytes */\(size)")])
            case .ignored:
                break
            }
        }
        return ServerResponse(status: 200, headers: headers, body: entry.bytes)
    }

    // MARK: Validators

    private static func ifRangeAllows(_ ifRange: String?, _ entry: Entry) -> Bool {
        guard let ifRange = ifRange?.trimmingSpaces() else { return true }
        if ifRange.hasPrefix("\"") { return ifRange == entry.etag }
        // A weak ETag can never satisfy If-Range; anything else is taken as a date, compared exactly.
        return !ifRange.hasPrefix("W/") && ifRange == entry.lastModified
    }

    private static func listMatches(_ list: String, _ etag: String, weak: Bool) -> Bool {
        for candidate in list.split(separator: ",").map({ String($0).trimmingSpaces() }) {
            if candidate == "*" { return true }
            if weak {
                if stripWeak(candidate) == stripWeak(etag) { return true }
            } else if !candidate.hasPrefix("W/") && candidate == etag {
                return true
            }
        }
        return false
    }

    private static func stripWeak(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : tag[...]
    }

    /// An FNV-1a-style hash over 8-byte words: not cryptographic, but any change of bytes changes the tag in
    /// practice, and word steps keep debug builds fast enough for thousands of files.
    static func etag(for bytes: [UInt8]) -> String {
        let prime: UInt64 = 0x0000_0100_0000_01b3
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        bytes.withUnsafeBytes { raw in
            var words = raw.count / 8
            if let base = raw.baseAddress, Int(bitPattern: base) % MemoryLayout<UInt64>.alignment == 0 {
                base.withMemoryRebound(to: UInt64.self, capacity: words) { pointer in
                    for word in UnsafeBufferPointer(start: pointer, count: words) {
                        hash = (hash ^ word) &* prime
                    }
                }
            } else {
                words = 0
            }
            for byte in raw[(words * 8)...] {
                hash = (hash ^ UInt64(byte)) &* prime
            }
        }
        return "\"\(String(bytes.count, radix: 16))-\(String(hash, radix: 16))\""
    }

    // MARK: Ranges

    enum RangeResult: Equatable {
        case satisfiable(first: Int, last: Int)
        case unsatisfiable
        case ignored
    }

    static func parseRange(_ header: String, size: Int) -> RangeResult {
        let value = header.trimmingSpaces()
        guard value.lowercased().hasPrefix("bytes=") else { return .ignored }
        let spec = value.dropFirst("bytes=".count).trimmingSpaces()
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .ignored }
        let firstText = spec[..<dash]
        let lastText = spec[spec.index(after: dash)...]
        guard firstText.allSatisfy(\.isASCIIDigit), lastText.allSatisfy(\.isASCIIDigit) else { return .ignored }
        if firstText.isEmpty {
            guard !lastText.isEmpty else { return .ignored }
            guard let suffix = Int(lastText) else {
                return size > 0 ? .satisfiable(first: 0, last: size - 1) : .unsatisfiable
            }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .satisfiable(first: max(0, size - suffix), last: size - 1)
        }
        guard let first = Int(firstText) else { return .unsatisfiable }
        var last = size - 1
        if !lastText.isEmpty {
            if let value = Int(lastText) {
                guard value >= first else { return .ignored }
                last = min(value, size - 1)
            }
        }
        guard first < size else { return .unsatisfiable }
        return .satisfiable(first: first, last: last)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        var slice = self[...]
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
