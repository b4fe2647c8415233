import Glibc
import HaulDigest
import HaulEngine
import HaulFailures
import HaulFileSystem
import HaulManifest
import HaulPlanner
import HaulSignature
import HaulStore

/// The step before observing, for a manifest with `lists:`: every signed checksum list its entries name (`from:`)
/// is fetched, conditionally (and not at all while the last verified copy is fresh), its signature is checked
/// against the list's trusted keys before a line of it is read, and its digests pin those entries for this run.
/// A list that cannot be fetched or verified pins nothing: its entries are refused, and left as they are.
///
/// A newer list always wins, and an older one is refused when haul can tell it is older: a minisign signature's
/// trusted comment carries the signing time (`timestamp:`), and a list signed before the last verified one is a
/// replay. Lists signed another way carry no time haul can trust, and the server's copy is taken as it comes.
package enum SignedLists {
    /// What one list gave this run.
    package struct Outcome: Sendable {
        package let name: String
        package let url: String
        /// Where the list is declared in the manifest.
        package let location: SourceLocation
        package let result: Result<Verified, ListFailure>

        init(_ source: SignedListSource, _ result: Result<Verified, ListFailure>) {
            name = source.name
            url = source.url.description
            location = source.location
            self.result = result
        }
    }

    package struct Verified: Sendable {
        package let list: VerifiedList
        package let signatureURL: String?
        /// The server was asked (false: the verified copy was still fresh).
        package let requested: Bool
        /// Its content differs from the last verified copy's (false for the first copy).
        package let changed: Bool
    }

    package enum ListFailure: Error, Sendable {
        /// The list, or its signature at `url`, could not be fetched.
        case fetch(url: String, PinFailure)
        /// `signature: auto`, and none of these answered.
        case noSignature(tried: [String])
        /// A key named in `keys:` cannot be read, or is not a key.
        case key(KeyFailure)
        case refused(ListRefusal, signatureURL: String?)
        /// The verified list is not a checksum list.
        case unreadable(ChecksumListError)
        /// Signed before the last verified copy (minisign's `timestamp:`): a replay of an older list.
        case older(signedAt: Int, lastVerified: Int)
        /// No request allowed (`verify`), and no verified copy kept from an earlier sync.
        case notKept
    }

    /// The manifest pinned from its lists, and what each list gave.
    package struct Pins: Sendable {
        package var manifest: Manifest
        package var outcomes: [Outcome] = []
        /// Entries whose digest the list changed since its last verified copy.
        package var changed: Set<DestinationPath> = []
        /// The verified copies to keep for the next run (`save`).
        fileprivate var copies: [(source: SignedListSource, copy: ListCache.Copy)] = []

        /// Nothing pinned yet.
        package init(manifest: Manifest) { self.manifest = manifest }

        /// The lists that pinned nothing this run.
        package var unverified: Set<String> {
            Set(outcomes.compactMap { if case .failure = $0.result { $0.name } else { nil } })
        }

        /// Keeps each verified copy in `.haul/lists`, for the next run's conditional request. Not for `plan` or a
        /// dry run, which change nothing; a copy that cannot be written costs the next run a request.
        package func save(beside observation: Observation) {
            if let area = observation.area { save(in: area) }
        }

        package func save(in area: PrivateArea) {
            for (source, copy) in copies {
                _ = ListCache.write(copy, name: source.name, url: source.url.expanded, in: area)
            }
        }
    }

    /// `manifest` with its `from:` entries pinned from their lists. `area`: root's private folder, where the last
    /// verified copies are; `offline`: no request at all, the copies alone (`verify`).
    package static func pin(
        _ manifest: Manifest, options: SyncOptions, area: PrivateArea?, offline: Bool = false,
        cancellation: Cancellation? = nil
    ) -> Pins {
        let used = Set(manifest.files.compactMap { $0.listPin?.list })
        var pins = Pins(manifest: manifest)
        guard !used.isEmpty else { return pins }
        let now = options.wallClock()
        for source in manifest.lists where used.contains(source.name) {
            let cached = area.flatMap { ListCache.read(name: source.name, url: source.url.expanded, in: $0) }
            let result = resolve(
                source, cached: cached, options: options, now: now, offline: offline, cancellation: cancellation
            )
            .flatMap { fetched -> Result<(Fetched, ChecksumList), ListFailure> in
                do throws(ChecksumListError) {
                    return .success(
                        (fetched, try ChecksumList.parse(fetched.verified.list.text, file: source.url.description)))
                } catch {
                    return .failure(.unreadable(error))
                }
            }
            switch result {
            case .success(let (fetched, list)):
                let (verified, copy) = (fetched.verified, fetched.copy)
                let digests = Self.digests(list)
                let previous = fetched.previous.flatMap {
                    try? ChecksumList.parse($0.text, file: source.url.description)
                }
                .map(Self.digests)
                for index in pins.manifest.files.indices where pins.manifest.files[index].listPin?.list == source.name {
                    guard let name = pins.manifest.files[index].listPin?.name, let digest = digests[name] else {
                        continue
                    }
                    pins.manifest.files[index].checksum = Checksum(digest: digest, notation: .hexKey)
                    if let previous, previous[name] != digest {
                        pins.changed.insert(pins.manifest.files[index].destination)
                    }
                }
                if verified.requested { pins.copies.append((source, copy)) }
                pins.outcomes.append(Outcome(source, .success(verified)))
            case .failure(let failure):
                pins.outcomes.append(Outcome(source, .failure(failure)))
            }
        }
        return pins
    }

    /// A list's digests by name (the first line of a name, as `add --from-sums` reads it).
    private static func digests(_ list: ChecksumList) -> [String: Digest] {
        Dictionary(list.items.map { ($0.name, $0.digest) }, uniquingKeysWith: { first, _ in first })
    }

    private struct Fetched {
        var verified: Verified
        var copy: ListCache.Copy
        /// The last verified copy, as it checks out now, when a new list replaces it (nil when it no longer does: it
        /// is not trusted then): what the new one changed, and whether the new one is older.
        var previous: VerifiedList?
    }

    /// The list as verified now, from the server or, while it is fresh or the server confirms it, from the copy.
    private static func resolve(
        _ source: SignedListSource, cached: ListCache.Copy?, options: SyncOptions, now: Double, offline: Bool,
        cancellation: Cancellation?
    ) -> Result<Fetched, ListFailure> {
        let keys: [TrustedKey]
        switch trustedKeys(source) {
        case .success(let loaded): keys = loaded
        case .failure(let failure): return .failure(failure)
        }
        if let cached, offline || isFresh(cached, source, now: now) {
            let kept = verify(cached, keys: keys, now: now, requested: false, changed: false)
            // A fresh copy the keys no longer accept (a key retired, the manifest's keys changed) is asked for anew.
            if offline || (try? kept.get()) != nil { return kept }
        }
        guard !offline else { return .failure(.notKept) }
        let refetch: Pinner.Refetch
        do {
            var listOptions = options
            listOptions.maxFileSize = min(options.maxFileSize, ChecksumList.maximumBytes)
            let validators = cached.flatMap { HTTPValidators(etag: $0.etag, lastModified: $0.lastModified) }
            refetch = try Pinner.fetch(
                source.url, ifChangedSince: validators, options: listOptions, cancellation: cancellation)
        } catch {
            return .failure(.fetch(url: source.url.description, error))
        }
        switch refetch {
        case .notModified(let freshFor):
            guard var copy = cached else {
                return .failure(.fetch(url: source.url.description, .unfinished(source.url.description)))
            }
            copy.checkedAt = now
            copy.freshUntil = freshFor.map { now + $0 }
            return verify(copy, keys: keys, now: now, requested: true, changed: false)
        case .fetched(let bytes, let validators, let freshFor):
            let signature: (bytes: [UInt8]?, url: String?)
            switch fetchSignature(source, list: bytes, options: options, cancellation: cancellation) {
            case .success(let found): signature = found
            case .failure(let failure): return .failure(failure)
            }
            let copy = ListCache.Copy(
                list: bytes, signature: signature.bytes, signatureURL: signature.url,
                etag: validators?.etag.flatMap(storable), lastModified: validators?.lastModified.flatMap(storable),
                checkedAt: now, freshUntil: freshFor.map { now + $0 })
            // Retirement does not matter for the old copy: only its digests and its signing time are read.
            let previous = cached.flatMap { cached in
                cached.list == bytes
                    ? nil
                    : try? ListVerification.verify(
                        list: cached.list, signature: cached.signature, keys: keys, now: -.infinity
                    ).get()
            }
            var result = verify(
                copy, keys: keys, now: now, requested: true, changed: cached.map { $0.list != bytes } ?? false)
            if case .success(let fetched) = result, let signedAt = signingTime(fetched.verified.list),
                let before = previous.flatMap(signingTime), signedAt < before
            {
                return .failure(.older(signedAt: signedAt, lastVerified: before))
            }
            if case .success(var fetched) = result {
                fetched.previous = previous
                result = .success(fetched)
            }
            return result
        }
    }

    /// Within the list's `refresh:` after the server last confirmed it, or else what the server said.
    private static func isFresh(_ copy: ListCache.Copy, _ source: SignedListSource, now: Double) -> Bool {
        guard copy.checkedAt <= now + Planner.clockSkewTolerance else { return false }
        guard let until = source.refresh.map({ copy.checkedAt + $0.value }) ?? copy.freshUntil else { return false }
        return until > now
    }

    private static func verify(
        _ copy: ListCache.Copy, keys: [TrustedKey], now: Double, requested: Bool, changed: Bool
    ) -> Result<Fetched, ListFailure> {
        ListVerification.verify(list: copy.list, signature: copy.signature, keys: keys, now: now)
            .mapError { .refused($0, signatureURL: copy.signatureURL) }
            .map { list in
                Fetched(
                    verified: Verified(
                        list: list, signatureURL: copy.signatureURL, requested: requested, changed: changed),
                    copy: copy)
            }
    }

    /// minisign's signing time, from its trusted comment (`timestamp:1732870000 file:SHA256SUMS`).
    private static func signingTime(_ list: VerifiedList) -> Int? {
        list.trustedComment?.split(separator: " ").first { $0.hasPrefix("timestamp:") }
            .flatMap { Int($0.dropFirst(10)) }
    }

    /// The signature: none for a clear-signed list, the one `signature:` names, or the first of `signatureSuffixes`
    /// beside the list that the server has (a 404 or 410 moves to the next).
    private static func fetchSignature(
        _ source: SignedListSource, list: [UInt8], options: SyncOptions, cancellation: Cancellation?
    ) -> Result<(bytes: [UInt8]?, url: String?), ListFailure> {
        let candidates: [TemplatedString]
        switch source.signature {
        case .clearSigned:
            return .success((nil, nil))
        case .url(let url):
            candidates = [url]
        case .auto:
            if SignatureFormat.isClearSigned(list) { return .success((nil, nil)) }
            candidates = ListVerification.signatureSuffixes.map { suffix in
                TemplatedString(
                    template: source.url.template + suffix, expanded: source.url.expanded + suffix,
                    environmentValues: source.url.environmentValues)
            }
        }
        do {
            switch try ListVerification.fetchSignature(
                candidates, probing: candidates.count > 1, options: options, cancellation: cancellation)
            {
            case .found(let url, let bytes): return .success((bytes, url))
            case .noneFound(let tried): return .failure(.noSignature(tried: tried))
            }
        } catch {
            return .failure(.fetch(url: candidates.map(\.description).joined(separator: ", "), error))
        }
    }

    /// The list's keys: inline ones as written, files read (an OpenPGP keyring stays a path for its verifier).
    static func trustedKeys(_ source: SignedListSource) -> Result<[TrustedKey], ListFailure> {
        var keys: [TrustedKey] = []
        for listKey in source.keys {
            switch ListVerification.trustedKey(listKey.key, retiredAfter: listKey.retiredAfter) {
            case .success(let key): keys.append(key)
            case .failure(let failure): return .failure(.key(failure))
            }
        }
        return .success(keys)
    }

    /// A header value fit for the cache file's `key\tvalue` lines.
    private static func storable(_ value: String) -> String? {
        value.utf8.contains { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\t") || $0 == 13 } ? nil : value
    }
}
