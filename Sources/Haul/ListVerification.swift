import Glibc
import HaulEngine
import HaulFailures
import HaulManifest
import HaulSignature
import HaulStore

/// A checksum list's signature, checked before a digest of the list is read: the signature fetched beside the list,
/// the trusted keys read (`trustedKey`), and `ListSignature.verify` run with the OpenPGP verifier's files written to
/// a private temporary folder. `haul add --from-sums … --key` uses it; a sync of a manifest's `lists:` can too.
package enum ListVerification {
    /// What `--signature auto` appends to the list's URL, in the order tried.
    package static let signatureSuffixes = [".minisig", ".sig", ".asc", ".gpg"]

    /// The most haul reads of a signature file: one is hundreds of bytes, a rotation's several a few kilobytes.
    package static let maximumSignatureBytes: Int64 = 1 << 20

    /// The most haul reads of a key file to learn its kind: minisign and SSH keys are one or two short lines, so a
    /// larger file can only be an OpenPGP keyring, which the verifier reads itself.
    static let keyProbeBytes = 1 << 16

    /// `list` checked against `signature` (nil: `list` is clear-signed) by every key of its format in `keys`. `now`:
    /// seconds since the epoch, for retired keys. `searchPath`: where the OpenPGP verifier is looked for (`PATH`'s
    /// absolute folders when nil).
    package static func verify(
        list: [UInt8], signature: [UInt8]?, keys: [TrustedKey], now: Double, searchPath: String? = nil
    ) -> Result<VerifiedList, ListRefusal> {
        ListSignature.verify(list: list, signature: signature, keys: keys, now: now) { list, signature, keyring in
            checkOpenPGP(list: list, signature: signature, keyring: keyring, searchPath: searchPath)
        }
    }

    /// The time now, in seconds since the epoch.
    package static var now: Double {
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        return Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
    }

    /// The system's verifier run on the list and its signature, written to a private folder made for them and
    /// removed after; the text it vouches for: the whole list for a detached signature, for a clear-signed one only
    /// what the verifier output as signed. A folder or file that cannot be made is a verifier that could not be run,
    /// naming the path.
    static func checkOpenPGP(
        list: [UInt8], signature: [UInt8]?, keyring: String, searchPath: String?
    ) -> Result<[UInt8], OpenPGPFailure> {
        // Found before anything is written: a missing verifier costs no file.
        guard let verifier = OpenPGPVerifier.find(clearSigned: signature == nil, searchPath: searchPath) else {
            return .failure(.verifierMissing)
        }
        let folder: ScratchDirectory
        do {
            folder = try ScratchDirectory.make(prefix: "haul-verify")
        } catch {
            return .failure(.couldNotRun(path: error.path, errno: error.errno))
        }
        defer { folder.remove() }
        if let failure = write(list, as: "list", in: folder) { return .failure(failure) }
        guard let signature else {
            return verifier.verifyClearSigned(messageFile: folder.path + "/list", keyringFile: keyring)
                .map { $0.signedText ?? [] }
        }
        if let failure = write(signature, as: "list.sig", in: folder) { return .failure(failure) }
        return verifier.verifyDetached(
            signatureFile: folder.path + "/list.sig", dataFile: folder.path + "/list", keyringFile: keyring
        ).map { _ in list }
    }

    private static func write(_ bytes: [UInt8], as name: String, in folder: ScratchDirectory) -> OpenPGPFailure? {
        let descriptor: Int32
        switch folder.folder.createFile(name, mode: nil, umask: nil) {
        case .success(let created): descriptor = created.descriptor
        case .failure(let failure): return .couldNotRun(path: failure.path, errno: failure.errno)
        }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                return .couldNotRun(path: folder.folder.displayPath(of: name), errno: written == 0 ? EIO : errno)
            }
            offset += written
        }
        return nil
    }

    // MARK: Keys

    /// A `--key`: an inline minisign/signify key (`RW…`) or SSH public key line, or else the path of a key file
    /// (relative to the current folder): a minisign or signify `.pub`, an SSH `.pub`, or an OpenPGP keyring (binary
    /// or armored), left at its path for the verifier. `retiredAfter`: the key's last moment, if it has one.
    package static func trustedKey(_ argument: String, retiredAfter: Double? = nil) -> Result<TrustedKey, KeyFailure> {
        if let inline = TrustedKey.inline(argument) {
            return inline.map { TrustedKey(material: $0, retiredAfter: retiredAfter, name: argument) }
                .mapError { .malformed(key: argument, $0) }
        }
        let bytes: [UInt8]?
        switch probe(argument) {
        case .success(let read): bytes = read
        case .failure(let failure): return .failure(failure)
        }
        // Too large for a minisign or SSH key: a keyring.
        guard let bytes else {
            return .success(
                TrustedKey(material: .openPGPKeyring(path: argument), retiredAfter: retiredAfter, name: argument))
        }
        return TrustedKey.file(bytes, path: argument)
            .map { TrustedKey(material: $0, retiredAfter: retiredAfter, name: argument) }
            .mapError { .malformed(key: argument, $0) }
    }

    /// The key file's bytes, or nil when it holds more than `keyProbeBytes`. Opened without blocking, so that a
    /// FIFO named as a key cannot hang the run, and refused unless it is a regular file.
    private static func probe(_ path: String) -> Result<[UInt8]?, KeyFailure> {
        var descriptor: Int32
        repeat { descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) } while descriptor < 0 && errno == EINTR
        guard descriptor >= 0 else {
            let code = errno
            return .failure(
                code == ENOENT || code == ENOTDIR ? .missing(path: path) : .unreadable(path: path, errno: code))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return .failure(.unreadable(path: path, errno: errno)) }
        guard info.st_mode & S_IFMT == S_IFREG else { return .failure(.notARegularFile(path: path)) }
        switch BoundedRead.all(descriptor, limit: keyProbeBytes, sizeHint: Int(info.st_size)) {
        case .success(let bytes): return .success(bytes)
        case .failure(.tooLarge): return .success(nil)
        case .failure(.system(let code)): return .failure(.unreadable(path: path, errno: code))
        }
    }

    // MARK: Fetching the signature

    /// The signature of a list: the one URL given, or (`probing`) the first of `candidates` the server has, a 404
    /// or 410 moving on to the next; any other failure throws. `.noneFound` when every candidate was absent.
    package static func fetchSignature(
        _ candidates: [TemplatedString], probing: Bool, options: SyncOptions, cancellation: Cancellation?,
        attemptFailed: @escaping @Sendable (AttemptFailure, NextAttempt?) -> Void = { _, _ in }
    ) throws(PinFailure) -> SignatureFetch {
        var options = options
        options.maxFileSize = min(options.maxFileSize, maximumSignatureBytes)
        for url in candidates {
            do {
                let bytes = try Pinner.fetch(
                    url, options: options, cancellation: cancellation, attemptFailed: attemptFailed)
                return .found(url: url.description, bytes: bytes)
            } catch .transfer(let failure)
                where probing && !failure.lastFailurePerSource.isEmpty
                && failure.lastFailurePerSource.allSatisfy({ isAbsent($0.reason) })
            {
                continue
            }
        }
        return .noneFound(tried: candidates.map(\.description))
    }

    private static func isAbsent(_ reason: FailureReason) -> Bool {
        if case .httpStatus(let status) = reason { return status == 404 || status == 410 }
        return false
    }
}

/// What looking for a list's signature found.
package enum SignatureFetch: Sendable, Hashable {
    /// The signature's bytes, and the URL that served them.
    case found(url: String, bytes: [UInt8])
    /// No URL tried had one (each answered 404 or 410): the URLs, in the order tried.
    case noneFound(tried: [String])
}

/// Why a `--key` is not a key haul can trust.
package enum KeyFailure: Error, Sendable, Hashable {
    /// No file at the path (and the text is not an inline key).
    case missing(path: String)
    /// The file could not be opened or read: the errno.
    case unreadable(path: String, errno: Int32)
    /// A folder, a FIFO, a device: not a key file.
    case notARegularFile(path: String)
    /// The key (inline, or a minisign or SSH key file) is not one of its format.
    case malformed(key: String, SignatureFailure)
}
