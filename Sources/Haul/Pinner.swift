import Glibc
import HaulArchive
import HaulDigest
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulStore
import Synchronization

/// What one download of a URL turned out to be.
package struct Measurement: Sendable {
    package let digest: Digest
    package let size: Int64
    /// The URL as messages may show it (userinfo redacted).
    package let sourceDisplayURL: String
    /// The `Content-Encoding` the server applied unasked (shown safely): what was measured is the encoded body.
    package let contentEncoding: String?

    init(of file: DownloadedFile) {
        digest = file.digest
        size = file.size
        sourceDisplayURL = file.sourceDisplayURL
        contentEncoding = file.contentEncoding
    }
}

/// Why a URL could not be measured.
package enum PinFailure: Error, Sendable {
    /// The private temporary directory could not be made, or what was unpacked in it could not be read.
    case workspace(StoreError)
    /// The server did not deliver (every attempt is listed), or the run was interrupted.
    case transfer(TransferFailure)
    /// The engine stopped before it reported on the transfer (shown URL).
    case unfinished(String)
    /// The archive downloaded but does not unpack (the archive, the member and the rule it broke).
    case unpack(UnpackFailure)
}

/// Downloads a URL once to learn its digest and size, for `haul add`.
///
/// It goes through the same `TransferEngine` as `sync` (same TLS settings, redirect rules, retries and size
/// limit), so a URL that can be pinned is one `sync` can fetch. The bytes are written to a private temporary
/// directory outside any root: deleted afterwards, or kept (`KeptDownloads`) for a sync of the new entries to put in
/// place under the root's lock with an atomic commit.
package enum Pinner {
    /// `attemptFailed` hears about each failed attempt (and what comes next, nil when nothing does), on this thread.
    /// `keepingIn`: the verified file is kept there, for `KeptDownloads.place`, instead of being deleted.
    package static func measure(
        _ url: TemplatedString, options: SyncOptions, algorithm: DigestAlgorithm = .sha256,
        keepingIn kept: KeptDownloads? = nil, cancellation: Cancellation? = nil,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void = { _, _ in }
    )
        throws(PinFailure) -> Measurement
    {
        let measured = try download(
            url, options: options, into: kept?.folder, algorithm: algorithm, cancellation: cancellation,
            attemptFailed: attemptFailed
        ) { file, _ in
            (Measurement(of: file), kept?.keep(file))
        }
        if let failure = measured.1 { throw .workspace(failure) }
        return measured.0
    }

    /// The size a GET of `url` would bring, from a HEAD request's Content-Length: nil when the answer announces none,
    /// or when the server does not take HEAD (405, 501). Any other failure throws, as a download's would.
    package static func announcedSize(
        _ url: TemplatedString, options: SyncOptions, cancellation: Cancellation? = nil,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void = { _, _ in }
    )
        throws(PinFailure) -> Int64?
    {
        do {
            return try download(
                url, options: options, into: nil, headOnly: true, cancellation: cancellation,
                attemptFailed: attemptFailed
            ) { file, _ in file.announcedLength }
        } catch .transfer(let failure) where failure.lastFailurePerSource.allSatisfy({ Self.refusesHead($0.reason) }) {
            return nil
        }
    }

    private static func refusesHead(_ reason: FailureReason) -> Bool {
        if case .httpStatus(let status) = reason { return status == 405 || status == 501 }
        return false
    }

    /// The bytes of a small file (a checksum list): at most `options.maxFileSize` of them, which the engine
    /// enforces while they arrive.
    package static func fetch(
        _ url: TemplatedString, options: SyncOptions, cancellation: Cancellation? = nil,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void = { _, _ in }
    )
        throws(PinFailure) -> [UInt8]
    {
        let read = try download(
            url, options: options, into: nil, cancellation: cancellation, attemptFailed: attemptFailed
        ) { file, workspace in
            file.folder(in: workspace.folder).openFile(file.temporaryName, flags: O_RDONLY).flatMap { descriptor in
                defer { close(descriptor) }
                return BoundedRead.all(descriptor, limit: Int(options.maxFileSize)).mapError { failure in
                    SystemError(errno: failure.errno, path: file.temporaryPath)
                }
            }
        }
        switch read {
        case .success(let bytes): return bytes
        case .failure(let failure):
            throw .workspace(StoreError(operation: .read, path: failure.path, errno: failure.errno))
        }
    }

    /// A small file's bytes unless the server says the copy haul has (`validators`) is still current: what a
    /// signed list's fetch needs, each run.
    package static func fetch(
        _ url: TemplatedString, ifChangedSince validators: HTTPValidators?, options: SyncOptions,
        cancellation: Cancellation? = nil,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void = { _, _ in }
    ) throws(PinFailure) -> Refetch {
        let read = try download(
            url, options: options, into: nil, conditional: validators, cancellation: cancellation,
            attemptFailed: attemptFailed,
            notModified: { .success(.notModified(freshFor: $0)) }
        ) { file, workspace in
            file.folder(in: workspace.folder).openFile(file.temporaryName, flags: O_RDONLY).flatMap { descriptor in
                defer { close(descriptor) }
                return BoundedRead.all(descriptor, limit: Int(options.maxFileSize)).mapError { failure in
                    SystemError(errno: failure.errno, path: file.temporaryPath)
                }
            }.map { Refetch.fetched($0, validators: file.validators, freshFor: file.freshFor) }
        }
        switch read {
        case .success(let refetch): return refetch
        case .failure(let failure):
            throw .workspace(StoreError(operation: .read, path: failure.path, errno: failure.errno))
        }
    }

    /// What a conditional fetch gave.
    package enum Refetch: Sendable {
        /// The server confirmed the copy haul has; `freshFor`: for how long it says it stays current.
        case notModified(freshFor: Double?)
        case fetched([UInt8], validators: HTTPValidators?, freshFor: Double?)
    }

    /// One download into `folder`, or into a private folder that is removed afterwards; `use` sees the verified
    /// file first. `conditional`: the request asks only for a version other than that one, and a 304 answers
    /// `notModified` with how long the server says the copy stays fresh.
    static func download<Result>(
        _ url: TemplatedString, options: SyncOptions, into folder: ScratchDirectory?,
        algorithm: DigestAlgorithm = .sha256, headOnly: Bool = false, conditional: HTTPValidators? = nil,
        cancellation: Cancellation?,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void,
        notModified: (Double?) -> Result = { _ in preconditionFailure("a 304 to a request that was not conditional") },
        use: (DownloadedFile, ScratchDirectory) -> Result
    ) throws(PinFailure) -> Result {
        let workspace: ScratchDirectory
        if let folder {
            workspace = folder
        } else {
            do {
                workspace = try ScratchDirectory.make(prefix: "haul-add")
            } catch {
                throw .workspace(error)
            }
        }
        defer { if folder == nil { workspace.remove() } }
        let engine = TransferEngine(
            configuration: EngineConfiguration(
                temporaryDirectory: workspace.folder, maxConcurrentTransfers: 1, maxConnectionsPerHost: 1,
                caFile: options.caFile, userAgent: options.userAgent ?? HaulVersion.userAgent,
                maxBodyBytes: options.maxFileSize,
                maxBytesPerSecond: options.maxBytesPerSecond, connection: options.connection))
        var request = TransferRequest(
            id: 0,
            sources: options.rewrites.sources(of: [url]).map {
                let headers =
                    $0.sendsHeaders
                    ? options.commandLineHeaders.map { HTTPHeader(name: $0.name, value: $0.value.expanded) } : []
                return TransferSource(
                    url: $0.url, displayURL: $0.displayURL, headers: headers,
                    secrets: $0.secrets + headers.map(\.value).filter { !$0.isEmpty }
                )
                .authenticated(by: options.netrc)
            },
            expectedDigest: nil, expectedSize: nil,
            retries: options.retries ?? BuiltInDefaults.retries,
            stallTimeout: options.stallTimeout ?? BuiltInDefaults.timeout.value)
        request.headOnly = headOnly
        // Rewrites give the same file's other addresses: each may answer 304 for the copy haul has.
        if let conditional { for index in request.sources.indices { request.sources[index].conditional = conditional } }
        request.transientStatuses = options.transientStatuses
        request.unpinnedAlgorithm = algorithm
        let collector = Collector(attemptFailed: attemptFailed)
        engine.run([request], delegate: collector, cancellation: cancellation)
        if let freshFor = collector.notModifiedFreshFor { return notModified(freshFor) }
        switch collector.result {
        case .success(let file):
            return use(file, workspace)
        case .failure(let failure):
            throw .transfer(failure)
        case nil:
            // The engine reports every request; this is only reached if it stopped before starting one.
            throw .unfinished(url.description)
        }
    }

    /// Receives the engine's events for the one request.
    private final class Collector: TransferDelegate {
        private let outcome = Mutex<Result<DownloadedFile, TransferFailure>?>(nil)
        /// Set on a 304: the freshness it announced (nil inside: none).
        private let confirmed = Mutex<Double??>(nil)
        let attemptFailed: @Sendable (AttemptFailure, NextAttempt?) -> Void

        init(attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void) {
            self.attemptFailed = attemptFailed
        }

        var result: Result<DownloadedFile, TransferFailure>? { outcome.withLock { $0 } }
        var notModifiedFreshFor: Double?? { confirmed.withLock { $0 } }

        func transfer(_ id: Int, didProduce event: TransferEvent) {
            switch event {
            case .started, .progress: break
            case .attemptFailed(let failure, let next): attemptFailed(failure, next)
            case .finished(let result): outcome.withLock { $0 = result }
            case .notModified(_, let freshFor): confirmed.withLock { $0 = .some(freshFor) }
            }
        }
    }
}
