import HaulDigest
import HaulFileSystem

/// One place a file can be fetched from.
///
/// Printing one in any way (`description`, `debugDescription`, `dump`, a struct holding it) shows only
/// `displayURL`: the URL, headers and secrets it carries for the network never reach text by accident.
package struct TransferSource: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The URL handed to the network. May carry values from the environment: never print it.
    package var url: String
    /// What messages show for this source (the manifest's template, userinfo redacted).
    package var displayURL: String
    /// Sent only to this source's origin (scheme, host, port), never across origins on redirect.
    package var headers: [HTTPHeader]

    /// Text that must never appear in a message (values from the environment in `url` or `headers`): libcurl's
    /// own error text can name a host or echo a URL, and is scrubbed of these before it reaches a failure.
    package var secrets: [String]

    /// Validators of the copy on disk, when it came from this source: the request becomes conditional
    /// (`If-None-Match`, `If-Modified-Since`) and a 304 ends the transfer as `.notModified`, writing nothing.
    /// A validator describes one resource, so it is never sent to another source.
    package var conditional: HTTPValidators?
    /// Presented to this source's server when it asks for one (the manifest's `cert:`), over `--cert`.
    package var clientCertificate: ClientCertificate?

    package init(
        url: String, displayURL: String, headers: [HTTPHeader] = [], secrets: [String] = [],
        conditional: HTTPValidators? = nil
    ) {
        self.url = url
        self.displayURL = displayURL
        self.headers = headers
        self.secrets = secrets
        self.conditional = conditional
    }

    package var description: String { displayURL }
    package var debugDescription: String { displayURL }
    package var customMirror: Mirror { Mirror(self, children: ["displayURL": displayURL], displayStyle: .struct) }

    /// Names this source on disk without writing its URL (which may hold a token): a hash of the URL.
    package var key: String { Self.key(url) }

    package static func key(_ url: String) -> String { StreamingHasher.digest(Array(url.utf8), algorithm: .sha256).hex }
}

/// What a server said identifies the version it sent (`ETag`, `Last-Modified`), as it said it.
package struct HTTPValidators: Sendable, Hashable {
    package var etag: String?
    package var lastModified: String?

    package init?(etag: String?, lastModified: String?) {
        let etag = etag.flatMap { $0.isEmpty ? nil : $0 }
        let lastModified = lastModified.flatMap { $0.isEmpty ? nil : $0 }
        guard etag != nil || lastModified != nil else { return nil }
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Both when both are known: a server that ignores `If-None-Match` may still honour the date.
    var requestHeaders: [String] {
        (etag.map { ["If-None-Match: \($0)"] } ?? []) + (lastModified.map { ["If-Modified-Since: \($0)"] } ?? [])
    }
}

/// A header to send. Its value may come from the environment, so printing one shows only its name.
package struct HTTPHeader: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable
{
    package var name: String
    package var value: String
    package var description: String { "\(name): ***" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: ["name": name], displayStyle: .struct) }
    package init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A file to fetch: its sources in order of preference and what the bytes must turn out to be.
package struct TransferRequest: Sendable, Equatable {
    /// The caller's key for this transfer; events carry it back.
    package var id: Int
    /// `url` first, then mirrors. A source that fails (including a checksum mismatch) hands over to the next.
    package var sources: [TransferSource]
    /// Verified while the bytes stream in; nil for an unpinned file. It also names the file's partial.
    package var expectedDigest: Digest?
    /// Digests as good as `expectedDigest` (same algorithm): an integrity value may list several.
    package var alternativeDigests: [Digest] = []
    package var expectedSize: Int64?
    /// Retries of one source after its first attempt, for transient failures only.
    package var retries: Int
    /// HTTP statuses retried with backoff besides those that always are (408, 429, 5xx but 501 and 505):
    /// `--retry-on-http`, for a server that answers 403 or 404 while a file is being published.
    package var transientStatuses: Set<Int> = []
    /// An attempt that moves less than `EngineConfiguration.lowSpeedLimit` bytes/s over this window fails.
    package var stallTimeout: Double
    /// `stallTimeout` in whole seconds, at least one: what libcurl's connect timeout and low-speed window take, and
    /// how messages about them say it.
    var stallWindowSeconds: Int { max(1, Int(stallTimeout.rounded(.up))) }
    /// The permission bits the file will have in place: a fresh temporary file is created with them (in a
    /// private folder, so nobody reaches it meanwhile) and moving it into place needs no chmod. nil: 0600.
    package var fileMode: UInt32?
    /// Other requests of the run whose first source is this one's first source (same URL, same headers, same
    /// hash algorithm, none of them conditional): the bytes are fetched once, by this request, and judged for
    /// each sharer against its own digest and size. A sharer the bytes satisfy gets its own copy (a reflink where
    /// the file system can); one they do not satisfy goes on with its own remaining sources, on its own. Each
    /// sharer gets its own events, under its own `id`.
    package var sharers: [TransferRequest]
    /// Asks with HEAD: the answer's headers alone, whose Content-Length becomes `DownloadedFile.announcedLength`
    /// (`haul add --sha256` learns a size without downloading). The file delivered is empty.
    package var headOnly = false
    /// Also reads the body as it arrives, beside its hash (`BodyReader`); nil for a plain file. Not part of the
    /// request's equality: it is what the body is for, not what is asked.
    package var bodyReading: (any BodyReading)?

    package init(
        id: Int, sources: [TransferSource], expectedDigest: Digest?, expectedSize: Int64?,
        retries: Int, stallTimeout: Double, fileMode: UInt32? = nil, sharers: [TransferRequest] = []
    ) {
        self.id = id
        self.sources = sources
        self.expectedDigest = expectedDigest
        self.expectedSize = expectedSize
        self.retries = retries
        self.stallTimeout = stallTimeout
        self.fileMode = fileMode
        self.sharers = sharers
    }

    package static func == (a: TransferRequest, b: TransferRequest) -> Bool {
        a.id == b.id && a.sources == b.sources && a.expectedDigest == b.expectedDigest
            && a.alternativeDigests == b.alternativeDigests && a.expectedSize == b.expectedSize
            && a.retries == b.retries
            && a.transientStatuses == b.transientStatuses && a.stallTimeout == b.stallTimeout
            && a.fileMode == b.fileMode && a.sharers == b.sharers
            && a.headOnly == b.headOnly && a.unpinnedAlgorithm == b.unpinnedAlgorithm
            && (a.bodyReading == nil) == (b.bodyReading == nil)
    }

    /// Whether bytes hashing to `digest` are the pinned content (always, for an unpinned file).
    package func accepts(_ digest: Digest) -> Bool {
        guard let expectedDigest else { return true }
        return digest == expectedDigest || alternativeDigests.contains(digest)
    }

    /// What an unpinned file is hashed with, so that what was written can be recorded: SHA-256, unless the caller
    /// is about to pin the file with another (`haul add --update` of a `sha512:` entry).
    package var unpinnedAlgorithm = DigestAlgorithm.sha256

    package var hashAlgorithm: DigestAlgorithm { expectedDigest?.algorithm ?? unpinnedAlgorithm }
}

package struct EngineConfiguration: Sendable {
    /// Where in-flight bytes are written; must be on the same file system as the destinations.
    package var temporaryDirectory: DirectoryHandle
    /// Transfers running at once.
    package var maxConcurrentTransfers: Int
    /// Connections open to one host at once (HTTP/2 multiplexes many transfers over one).
    package var maxConnectionsPerHost: Int
    /// A CA bundle to verify TLS against instead of the system store (internal mirrors, tests).
    package var caFile: String?
    package var userAgent: String
    /// Redirect hops followed per attempt; one more is an error.
    package var maxRedirects: Int
    /// Bytes per second below which, averaged over a request's `stallTimeout`, an attempt fails.
    package var lowSpeedLimit: Int
    /// When to try the same source again. Injectable so that tests run in milliseconds.
    package var retryPolicy: RetryPolicy
    /// Where interrupted downloads of pinned files are kept to be resumed (same file system as the
    /// destinations); nil: they are not kept across runs.
    package var partialDirectory: DirectoryHandle?
    /// Largest body accepted for a file whose size the manifest does not pin.
    package var maxBodyBytes: Int64
    /// libcurl loops run side by side, each on its own thread with its own multi handle, taking requests from
    /// one queue. One loop is enough for large files; thousands of small ones keep a loop's thread busy with
    /// per-request work (headers, a file to create, callbacks), and a second core then makes them go faster.
    /// The limits above hold for the whole run: they are split between the loops (see `loopShares`).
    package var loops: Int
    /// Start writing large bodies to disk while they arrive (`WritebackHint`), for a caller that flushes each file
    /// before committing it: the flush then finds little left to write.
    package var startsWriteback: Bool
    /// `--limit-rate`: bytes per second for the whole run, all transfers together (`RateLimiter`); nil: no limit.
    package var maxBytesPerSecond: Int64?
    /// `--proxy`, `--noproxy`, `--connect-timeout`, `--cert`: how requests reach their servers.
    package var connection: ConnectionSettings

    package init(
        temporaryDirectory: DirectoryHandle, maxConcurrentTransfers: Int = EngineConfiguration.defaultConcurrency,
        maxConnectionsPerHost: Int = EngineConfiguration.defaultConnectionsPerHost, caFile: String? = nil,
        userAgent: String = "haul", maxRedirects: Int = 10, lowSpeedLimit: Int = 1024,
        retryPolicy: RetryPolicy = RetryPolicy(), partialDirectory: DirectoryHandle? = nil,
        maxBodyBytes: Int64 = EngineConfiguration.defaultMaxBodyBytes, loops: Int = 1, startsWriteback: Bool = false,
        maxBytesPerSecond: Int64? = nil, connection: ConnectionSettings = ConnectionSettings()
    ) {
        self.connection = connection
        self.temporaryDirectory = temporaryDirectory
        self.maxConcurrentTransfers = maxConcurrentTransfers
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.caFile = caFile
        self.userAgent = userAgent
        self.maxRedirects = maxRedirects
        // Under a rate limit the floor is at most half of each transfer's even share of it: a run limited to
        // 64 KiB/s over 128 transfers must not fail them for being slow.
        self.lowSpeedLimit =
            maxBytesPerSecond.map { min(lowSpeedLimit, max(1, Int($0 / Int64(2 * max(1, maxConcurrentTransfers))))) }
            ?? lowSpeedLimit
        self.retryPolicy = retryPolicy
        self.partialDirectory = partialDirectory
        self.maxBodyBytes = maxBodyBytes
        self.loops = loops
        self.startsWriteback = startsWriteback
        self.maxBytesPerSecond = maxBytesPerSecond
    }

    /// One loop's part of the limits.
    package struct LoopShare: Sendable, Equatable {
        package var transfers: Int
        package var connectionsPerHost: Int
    }

    /// The limits split between the loops as evenly as they divide, never more loops than either limit allows
    /// (a loop needs at least one transfer and one connection): the sums are exactly the configured limits.
    package var loopShares: [LoopShare] {
        let transfers = max(1, maxConcurrentTransfers)
        let perHost = max(1, maxConnectionsPerHost)
        let count = max(1, min(loops, transfers, perHost))
        return (0..<count).map { index in
            LoopShare(
                transfers: transfers / count + (index < transfers % count ? 1 : 0),
                connectionsPerHost: perHost / count + (index < perHost % count ? 1 : 0))
        }
    }

    /// Enough to hide per-request latency on small files without hammering one server.
    package static let defaultConcurrency = 16

    /// Enough parallelism over HTTP/1.1 to fill a link, few enough not to look like an attack to one mirror.
    package static let defaultConnectionsPerHost = 16

    /// 16 GiB: far above any asset a manifest would leave unsized, far below filling a CI disk by accident.
    package static let defaultMaxBodyBytes: Int64 = 16 << 30
}

/// Progress of one transfer, as URLSession reports it.
package struct TransferProgress: Sendable, Equatable {
    /// Written since the previous report of this attempt (reports are at most ten a second).
    package var bytesWritten: Int
    package var totalBytesWritten: Int64
    /// nil when the server did not announce a length.
    package var totalBytesExpected: Int64?
}

/// A verified file in the temporary directory. The caller owns it: move it into place or discard it.
package struct DownloadedFile: Sendable, Equatable {
    /// Where the file is, for messages and tests.
    package var temporaryPath: String
    /// The folder it lies in, held open, where its owner reaches it by `temporaryName`: a loop's own folder in the
    /// configuration's `temporaryDirectory` (see `TransferEngine.isLoopFolderName`). nil: `temporaryDirectory`
    /// itself (a copy from a content cache, or the state machine's value before the engine says where it lies).
    package var temporaryFolder: DirectoryHandle?
    package var temporaryName: String
    package var size: Int64
    package var digest: Digest
    /// The source that delivered these bytes.
    package var sourceDisplayURL: String
    /// Which of the request's sources delivered them (0: `url`).
    package var sourceIndex: Int
    /// What that source said identifies this version, for a later conditional request. Kept for unpinned files
    /// only: a pinned file is identified by its digest, and 100,000 of them need not carry two strings each.
    package var validators: HTTPValidators?
    /// The file already has the request's `fileMode`, exactly (a resumed partial does not: it was made 0600).
    package var hasFileMode = false
    /// The `Content-Encoding` the server applied although haul asked for none (shown safely): the file is stored
    /// as served (an unpinned file), so whoever shows the result should warn. nil for an unencoded body.
    package var contentEncoding: String?
    /// Put in place from a content cache (`--cache`), verified as it was copied: no request was made, and
    /// `sourceDisplayURL` names the cache folder rather than a source.
    package var fromCache = false
    /// For an unpinned file: how long after it arrived its server says it stays fresh (`Freshness`); nil: none.
    package var freshFor: Double?
    /// Who sent the bytes, after mirrors and redirects: the source's display form, or the URL it redirected to
    /// (see `RedirectedURL`); and the HTTP version of that answer ("1.1", "2"). Empty and nil from the cache.
    package var servedBy = ""
    package var httpVersion: String?
    /// The Content-Length the answer announced: for a HEAD request, the size a GET would bring.
    package var announcedLength: Int64?
    /// For an archive unpacked on the way in: what it became (set by whoever unpacked it; the engine does not).
    package var unpacked: UnpackSummary?
    /// The byte the final download started from when it went on from bytes kept by an earlier attempt or run; nil
    /// when it came whole (people ask why a large file arrived so fast, or so slow).
    package var resumedAt: Int64?

    /// The folder the file lies in, given the engine's `temporaryDirectory`.
    package func folder(in temporaryDirectory: DirectoryHandle) -> DirectoryHandle {
        temporaryFolder ?? temporaryDirectory
    }

    /// A file the sync staged without the engine: a verified copy from a content cache.
    /// `hasFileMode`: it was created with its entry's mode exactly.
    package static func fromCache(
        temporaryPath: String, temporaryName: String, size: Int64, digest: Digest,
        cachePath: String, hasFileMode: Bool = false
    ) -> DownloadedFile {
        var file = DownloadedFile(
            temporaryPath: temporaryPath, temporaryName: temporaryName, size: size, digest: digest,
            sourceDisplayURL: cachePath, sourceIndex: 0, fromCache: true)
        file.hasFileMode = hasFileMode
        return file
    }
}

/// What follows a failed attempt: which source is tried, and after how long.
package struct NextAttempt: Sendable, Equatable {
    /// The source tried next (display form) and its index in the request's sources.
    package var sourceDisplayURL: String
    package var sourceIndex: Int
    /// Seconds before the attempt starts; 0: at once.
    package var delay: Double
    /// Failed attempts at that source so far: 0 for its first attempt, n for its n-th retry (of `retries`).
    package var retry: Int
    package var retries: Int

    package init(sourceDisplayURL: String, sourceIndex: Int, delay: Double, retry: Int, retries: Int) {
        self.sourceDisplayURL = sourceDisplayURL
        self.sourceIndex = sourceIndex
        self.delay = delay
        self.retry = retry
        self.retries = retries
    }
}

package enum TransferEvent: Sendable {
    /// The first request of this transfer went out (a request queued behind `--jobs` has not started yet).
    case started(sourceDisplayURL: String)
    case progress(TransferProgress)
    /// An attempt failed; `next` says which source is tried next and when, nil when the engine gives up (a
    /// `.finished` failure follows). A transfer that waits holds no transfer slot meanwhile.
    case attemptFailed(AttemptFailure, next: NextAttempt?)
    case finished(Result<DownloadedFile, TransferFailure>)
    /// A source asked conditionally answered 304: the copy on disk is current and nothing was written; `freshFor`:
    /// how long the answer says it stays so (`Freshness`). Like `.finished`, it ends the transfer: every request
    /// ends with exactly one of the two.
    case notModified(sourceDisplayURL: String, freshFor: Double?)
}

/// Receives events on the engine's loop threads: the one that called `TransferEngine.run`, and with several
/// loops, others at the same time. Keep the work done here short: it holds up every transfer of that loop.
package protocol TransferDelegate: AnyObject, Sendable {
    func transfer(_ id: Int, didProduce event: TransferEvent)
}
