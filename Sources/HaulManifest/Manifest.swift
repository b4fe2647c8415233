import HaulDigest

/// A validated manifest: what the user wants on disk. Everything here has been checked; a `Manifest` value
/// cannot hold an absolute destination, a path escaping `root`, an unknown key or an unresolved `${VAR}`.
package struct Manifest: Sendable {
    /// The file the manifest was read from, as the user named it (used in messages).
    package var sourcePath: String
    package var version: Int
    /// Absolute, lexically normalized directory under which every destination lives.
    package var root: String
    package var prune: Bool
    /// Credentials for each source's host come from the user's `.netrc` (`netrc: true`; also `--netrc`).
    package var netrc = false
    package var files: [FileEntry]
    /// Non-fatal findings (weak digest algorithms, …), reported but not blocking; the first 50 in file order.
    package var warnings: [Diagnostic]
    /// Warnings found beyond those in `warnings`.
    package var omittedWarnings: Int
    /// Set when this is one shard's part of the manifest (`restricted(to:)`).
    package var shardScope: ShardScope?
    /// The environment variables the manifest's `${VAR}`s name, sorted: what validation read of the environment.
    package var environmentNames: [String] = []
    /// What validation depended on, as one digest (`ManifestFingerprint`); nil for a manifest read from standard
    /// input, which no later run can be sure to read again.
    package var fingerprint: ManifestFingerprint?

    package init(
        sourcePath: String, version: Int, root: String, prune: Bool, files: [FileEntry], warnings: [Diagnostic],
        omittedWarnings: Int = 0
    ) {
        self.sourcePath = sourcePath
        self.version = version
        self.root = root
        self.prune = prune
        self.files = files
        self.warnings = warnings
        self.omittedWarnings = omittedWarnings
    }

    /// The warnings as printed, one line each, then how many more there were.
    package var warningLines: [String] { Diagnostic.lines(warnings, omitted: omittedWarnings) }

    /// `lists:`: the signed checksum lists entries take their digests from, by name.
    package var lists: [SignedListSource] = []

    /// Manifest format versions this build of haul reads.
    package static let supportedVersions: [Int] = [1]
}

/// Entries of a manifest still being read, each valid on its own, handed out as the reader streams them: a sync of a
/// large manifest starts downloads for them before the manifest as a whole is known to be valid (`HeadStart`).
/// Nothing here is final: `defaults:` are not applied yet, and a later entry may clash with one of these.
/// The handler returns whether it wants more.
package enum EarlyEntries {
    package typealias Handler = ([FileEntry]) -> Bool
}

/// One `files:` entry with the `defaults:` already applied.
package struct FileEntry: Sendable {
    /// Position in `files:` (0-based), as in `files[3]` of messages.
    package var index: Int
    package var url: TemplatedString
    /// Tried in order after `url` fails.
    package var mirrors: [TemplatedString]
    /// Headers of each mirror written as `{url: …, headers: …}`, sent to that mirror alone: one list per mirror,
    /// or empty when no mirror has any (the usual case).
    package var mirrorHeaders: [[HeaderField]] {
        get { rare.values.mirrorHeaders }
        set { rare.values.mirrorHeaders = newValue }
    }
    package var destination: DestinationPath
    /// nil: the entry is unpinned (fetched when missing; refreshed later by revalidation).
    package var checksum: Checksum?
    package var size: Int64?
    /// Permission bits applied before the file becomes visible.
    package var mode: FileMode
    /// Retries after the first attempt, per URL.
    package var retries: Int
    /// Stall window: no progress for this long fails the attempt.
    package var timeout: Seconds
    /// `retry_on:`: HTTP statuses retried with backoff besides those that always are (a server that answers 404
    /// while a release is being published).
    package var retryOn: [Int] {
        get { rare.values.retryOn }
        set { rare.values.retryOn = newValue }
    }
    /// `cert:` and `key:`: a client certificate for the origin of `url` (mutual TLS), as absolute paths; like the
    /// entry's headers, never presented to a mirror. nil: none, or `--cert`'s.
    package var clientCertificate: CertificateFiles? {
        get { rare.values.clientCertificate }
        set { rare.values.clientCertificate = newValue }
    }
    /// A mirror's own `cert:`/`key:`, by position in `mirrors` (empty when no mirror has one).
    package var mirrorCertificates: [CertificateFiles?] {
        get { rare.values.mirrorCertificates }
        set { rare.values.mirrorCertificates = newValue }
    }
    /// For an unpinned entry: once its server has confirmed the copy, no request for this long (instead of the
    /// freshness the server grants with `Cache-Control: max-age` or `Expires`). nil: the server's.
    package var refresh: Seconds? {
        get { rare.values.refresh }
        set { rare.values.refresh = newValue }
    }
    /// `from:`: the digest is the one a signed checksum list (`lists:`) gives for this name, read at each sync
    /// once the list's signature checks out. `checksum` is nil in the manifest, and set by the sync from the list.
    package var listPin: ListPin? {
        get { rare.values.listPin }
        set { rare.values.listPin = newValue }
    }
    /// Sent only to the origin of `url` (not to mirrors, not across origins on redirect): the entry's own, over
    /// those of `defaults:` with the same name.
    ///
    /// Merged when read rather than stored merged: `defaults:` headers are one array shared by every entry, so a
    /// manifest with many default headers and many entries with headers of their own does not hold their product.
    package var headers: [HeaderField] {
        get { HeaderRules.merge(defaults: defaultHeaders, entry: ownHeaders) }
        set {
            ownHeaders = newValue
            defaultHeaders = []
        }
    }
    private var ownHeaders: [HeaderField]
    var defaultHeaders: [HeaderField] = []
    /// Where the entry starts in the manifest file.
    package var location: SourceLocation
    /// `extract:`: `destination` names a folder that becomes the archive's contents; nil for a plain file.
    /// Stored here, not with the rare settings: it is one reference wide, and loops over every entry ask for it.
    package var extract: ExtractRule?
    private var rare = RareSettings()

    package init(
        index: Int, url: TemplatedString, mirrors: [TemplatedString], destination: DestinationPath,
        checksum: Checksum?, size: Int64?, mode: FileMode, retries: Int, timeout: Seconds,
        headers: [HeaderField], location: SourceLocation
    ) {
        self.index = index
        self.url = url
        self.mirrors = mirrors
        self.destination = destination
        self.checksum = checksum
        self.size = size
        self.mode = mode
        self.retries = retries
        self.timeout = timeout
        self.ownHeaders = headers
        self.location = location
    }

    /// `url` followed by `mirrors`: the order in which sources are tried.
    package var sources: [TemplatedString] { [url] + mirrors }

    /// Whether what the entry puts on disk is pinned: its bytes (`checksum`) or, for an archive, the tree it
    /// unpacks to (`extract: {tree: …}`).
    package var isPinned: Bool { checksum != nil || extract?.tree != nil }
}

/// A client certificate and its private key (nil: in the certificate's file), as PEM files haul hands to libcurl.
package struct CertificateFiles: Sendable, Hashable {
    package var certificate: String
    package var key: String?

    package init(certificate: String, key: String?) {
        self.certificate = certificate
        self.key = key
    }
}

/// Built-in values for keys that neither the entry nor `defaults:` sets.
package enum BuiltInDefaults {
    package static let retries = 3
    package static let timeout = Seconds(30)
    package static let mode = FileMode(0o644)
}

/// A duration in whole or fractional seconds (`60s`, `5m`, `1.5s`, `250ms`, or a bare number of seconds).
package struct Seconds: Sendable, Hashable, Comparable {
    package var value: Double
    package init(_ value: Double) { self.value = value }
    package static func < (a: Seconds, b: Seconds) -> Bool { a.value < b.value }

    /// A duration written as a manifest's `timeout` is (`90s`, `10m`, `1h`, `250ms`, bare seconds), from 1 ms to
    /// 24 h; nil for anything else. For the command line's durations, so that both read alike.
    /// A duration as a manifest's `timeout` is written, or why `text` is not one.
    package init(duration text: String) throws(RuleFailure) {
        self = try ScalarRules.duration(text)
    }
}

/// The settings of an entry that most entries leave unset, held behind one reference that is nil when all are:
/// inline, they made each entry 64 bytes larger (`FileEntry` is 208 bytes with them here), 64 MB of a
/// million-entry manifest's model that nearly every manifest leaves empty.
private struct RareSettings: Sendable {
    struct Values: Sendable {
        var mirrorHeaders: [[HeaderField]] = []
        var retryOn: [Int] = []
        var clientCertificate: CertificateFiles?
        var mirrorCertificates: [CertificateFiles?] = []
        var refresh: Seconds?
        var listPin: ListPin?

        var areDefaults: Bool {
            mirrorHeaders.isEmpty && retryOn.isEmpty && clientCertificate == nil && mirrorCertificates.isEmpty
                && refresh == nil && listPin == nil
        }
    }

    private final class Box: Sendable {
        let values: Values
        init(_ values: Values) { self.values = values }
    }

    /// nil while every value is its default; replaced whole on a change, so copies of an entry never share a change.
    private var box: Box?

    var values: Values {
        get { box?.values ?? Values() }
        set { box = newValue.areDefaults ? nil : Box(newValue) }
    }
}

/// Where an entry's digest comes from when a signed list gives it (`from:`).
package struct ListPin: Sendable, Hashable {
    /// The list's name under `lists:`.
    package var list: String
    /// The file's name in the list: the entry's own (`from: {list: L, name: N}`), or the last segment of its URL's
    /// path.
    package var name: String

    package init(list: String, name: String) {
        self.list = list
        self.name = name
    }
}

/// A checksum list trusted for its signature (`lists:`): the entries that name it take their digests from it at each
/// sync, and only once its signature checks out against one of `keys`. A list whose signature fails leaves every
/// such entry as it is.
package struct SignedListSource: Sendable, Hashable {
    package enum Signature: Sendable, Hashable {
        /// Beside the list: the first of its URL with `.minisig`, `.sig`, `.asc` or `.gpg` that the server has.
        case auto
        case url(TemplatedString)
        /// The list is signed inside itself (`gpg --clearsign`); only the signed text is read.
        case clearSigned
    }

    /// Its key under `lists:`.
    package var name: String
    package var url: TemplatedString
    package var signature: Signature
    package var keys: [ListKey]
    /// How long a copy the server confirmed stays fresh without asking again (as an entry's `refresh:`); nil: as
    /// long as the server says.
    package var refresh: Seconds?
    package var location: SourceLocation

    package init(
        name: String, url: TemplatedString, signature: Signature, keys: [ListKey], refresh: Seconds? = nil,
        location: SourceLocation
    ) {
        self.name = name
        self.url = url
        self.signature = signature
        self.keys = keys
        self.refresh = refresh
        self.location = location
    }
}

/// A key a signed list is trusted for.
package struct ListKey: Sendable, Hashable {
    /// An inline key (`RW…`, or an SSH public key line), or the absolute path of a key file (a minisign, signify or
    /// SSH public key, or an OpenPGP keyring), resolved against the manifest's folder.
    package var key: String
    package var isFile: Bool
    /// `retired: YYYY-MM-DD`: the key is trusted until the end of that day (UTC), and refused after it; seconds
    /// since the epoch.
    package var retiredAfter: Double?

    package init(key: String, isFile: Bool, retiredAfter: Double? = nil) {
        self.key = key
        self.isFile = isFile
        self.retiredAfter = retiredAfter
    }
}

/// POSIX permission bits (0...0o7777).
package struct FileMode: Sendable, Hashable, CustomStringConvertible {
    package var bits: UInt32
    package init(_ bits: UInt32) { self.bits = bits }
    /// Four-digit octal, as written in manifests: `0644`.
    package var description: String {
        let octal = String(bits, radix: 8)
        return String(repeating: "0", count: max(0, 4 - octal.count)) + octal
    }
}

package struct HeaderField: Sendable, Hashable {
    package var name: String
    package var value: TemplatedString
    package init(name: String, value: TemplatedString) {
        self.name = name
        self.value = value
    }
}

/// A destination relative to `root`: non-empty components, none `.` or `..`, no NUL, never absolute.
///
/// Only the normalized text is kept; components, the file name and the parent folder are cut from it when asked
/// for. An array of component strings per path held more memory than the path's own text (about 130 bytes an
/// entry, a seventh of a million-entry plan's memory), and the walks that use them need one folder at a time.
package struct DestinationPath: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The normalized path, `a/b/c`: it keys the state cache and every message.
    package let description: String
    /// haul's own folder under root, where no destination may be.
    package static let privateFolder = PathRules.privateFolder
    /// Linux's limits (`PATH_MAX` less its NUL, `NAME_MAX`): a longer destination could never be created, and
    /// refusing it when the manifest is read also bounds what every later step does per path.
    package static let maximumBytes = 4095
    package static let maximumNameBytes = 255

    /// Validates and normalizes (`a//b/./c` → `a/b/c`); nil for an absolute path, `..`, an empty path, NUL, or
    /// one over `maximumBytes` or with a name over `maximumNameBytes`.
    ///
    /// Splits on the byte `/`, as the kernel does. Splitting on Characters would let a combining mark glue
    /// itself to a slash (`link/\u{301}x` is one Character-level component) and hide a parent from the
    /// symlink checks.
    package init?(_ text: String) {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        guard !text.isEmpty, text.utf8.first != slash, !text.utf8.contains(0) else { return nil }
        var parts: [Substring.UTF8View] = []
        for part in text.utf8.split(separator: slash, omittingEmptySubsequences: true) {
            if part.elementsEqual([dot]) { continue }
            if part.elementsEqual([dot, dot]) || part.count > Self.maximumNameBytes { return nil }
            parts.append(part)
        }
        let length = parts.reduce(parts.count - 1, { $0 + $1.count })
        guard !parts.isEmpty, length <= Self.maximumBytes else { return nil }
        // Normalizing only drops bytes: a path as long as its parts joined is already normal (as nearly every one
        // is), and is kept rather than joined again.
        self.description =
            length == text.utf8.count
            ? text : parts.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
    }

    /// For text already normalized and checked (by `PathRules`, or cut from a valid path).
    init(normalized: String) {
        self.description = normalized
    }

    /// Identity is the UTF-8 bytes, as the kernel names files: `String`'s `==` is Unicode canonical equivalence,
    /// which would make "caf\u{e9}" and "cafe\u{301}", two files on Linux, one path.
    package static func == (a: DestinationPath, b: DestinationPath) -> Bool {
        a.description.hasSameBytes(as: b.description)
    }
    package func hash(into hasher: inout Hasher) { description.hashBytes(into: &hasher) }
    /// Byte order, consistent with `==` (String's `<` would order canonically equivalent paths as equal).
    package static func < (a: DestinationPath, b: DestinationPath) -> Bool { a.description.bytesPrecede(b.description) }

    /// The offset of the last `/` in `description`'s UTF-8; nil for a name directly under root.
    private var lastSlash: String.Index? {
        guard let offset = description.withUTF8Buffer({ $0.lastIndex(of: UInt8(ascii: "/")) }) else { return nil }
        return description.utf8.index(description.utf8.startIndex, offsetBy: offset)
    }

    // The parts below are cut on the UTF-8 view: a `/` may begin or end a Character (`/\u{301}` is one), and a
    // cut by Characters would move the mark to the wrong side.

    /// The last component.
    package var fileName: String {
        guard let slash = lastSlash else { return description }
        return String(Substring(description.utf8[description.utf8.index(after: slash)...]))
    }

    /// The folder the path is in, `a/b` for `a/b/c`; empty for a name directly under root.
    package var parent: Substring {
        Substring(description.utf8[..<(lastSlash ?? description.utf8.startIndex)])
    }

    /// The first component: `a` for `a/b/c`.
    package var firstComponent: Substring {
        let utf8 = description.utf8
        guard let offset = description.withUTF8Buffer({ $0.firstIndex(of: UInt8(ascii: "/")) }) else {
            return description[...]
        }
        return Substring(utf8[..<utf8.index(utf8.startIndex, offsetBy: offset)])
    }

    /// Every component.
    package var components: [String] { Self.components(of: description) }

    /// The components of a normalized path or of part of one (a `parent`), cut at the byte `/`.
    package static func components(of path: some StringProtocol) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    package var parentComponents: ArraySlice<String> { components.dropLast() }

    /// The folders above the path, nearest first: `a/b`, then `a`, for `a/b/c`.
    package var ancestors: [DestinationPath] {
        var folders: [DestinationPath] = []
        var folder = parent
        while !folder.isEmpty {
            let path = DestinationPath(normalized: String(folder))
            folders.append(path)
            folder = path.parent
        }
        return folders
    }
}

/// A pinned digest and the notation the manifest used, so that messages show digests the way the user wrote them.
package struct Checksum: Sendable, Hashable {
    package enum Notation: Sendable, Hashable {
        /// `sha256: <hex>` (also `sha384:`, `sha512:` keys)
        case hexKey
        /// `checksum: sha512:<hex>`
        case prefixedHex
        /// `integrity: sha384-<base64>` (Subresource Integrity)
        case subresourceIntegrity
    }

    /// The digest content must have; the first of `accepted`.
    package var digest: Digest
    package var notation: Notation
    /// Further digests that are as good (same algorithm): an `integrity` value may list several tokens of its
    /// strongest algorithm, any of which the content may match (Subresource Integrity). Usually empty.
    package var alternatives: [Digest]

    package init(digest: Digest, notation: Notation, alternatives: [Digest] = []) {
        self.digest = digest
        self.notation = notation
        self.alternatives = alternatives
    }

    package var algorithm: DigestAlgorithm { digest.algorithm }

    /// Every digest that satisfies this checksum.
    package var accepted: [Digest] { [digest] + alternatives }

    /// Whether content with `digest` satisfies this checksum.
    package func accepts(_ other: Digest) -> Bool { other == digest || alternatives.contains(other) }

    /// Renders any digest of the same algorithm in this checksum's notation.
    package func render(_ other: Digest) -> String {
        switch notation {
        case .hexKey: other.hex
        case .prefixedHex: "\(other.algorithm.rawValue):\(other.hex)"
        case .subresourceIntegrity: other.subresourceIntegrity
        }
    }

    /// The expected digest in the manifest's notation.
    package var rendered: String { render(digest) }
}

/// A string from the manifest that may contain `${VAR}` references.
///
/// Values read from the environment are secrets until proven otherwise: `description` (and so every message
/// built by interpolation) shows the template as written, with URL userinfo redacted. Only code that hands the
/// value to the network asks for `expanded`, by name.
///
/// `debugDescription` and reflection (`dump`, `"\(entry)"` of a struct that holds one) show the same redacted
/// template, so no way of printing a manifest value reveals what the environment supplied.
package struct TemplatedString: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// As written in the manifest, e.g. `Bearer ${ASSETS_TOKEN}`.
    package let template: String
    /// With every `${VAR}` replaced by its value. Do not print.
    package let expanded: String

    /// The values substituted for `${VAR}`s, so that text produced by others (a libcurl error message naming
    /// the host it could not reach) can be scrubbed of them before it is shown.
    package let environmentValues: [String]

    package init(template: String, expanded: String, environmentValues: [String] = []) {
        self.template = template
        self.expanded = expanded
        self.environmentValues = environmentValues
    }

    /// A literal with no references.
    package init(literal: String) {
        self.template = literal
        self.expanded = literal
        self.environmentValues = []
    }

    package var referencesEnvironment: Bool { template != expanded }

    /// Identity is the template and what it expands to; `environmentValues` follows from them.
    package static func == (a: TemplatedString, b: TemplatedString) -> Bool {
        a.template == b.template && a.expanded == b.expanded
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(template)
        hasher.combine(expanded)
    }

    /// Safe to print: the template, with any `user:password@` in a URL replaced by `***@`.
    package var description: String { Redaction.redactingUserinfo(template) }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: ["template": description], displayStyle: .struct) }
}

package enum Redaction {
    /// `https://user:pw@host/x` → `https://***@host/x`; other text is returned unchanged.
    ///
    /// On UTF-8 bytes: every delimiter is ASCII, so cutting at them never splits a character, and a URL is
    /// displayed for each of 100,000 transfers.
    package static func redactingUserinfo(_ text: String) -> String {
        let utf8 = text.utf8
        guard utf8.contains(UInt8(ascii: "@")) else { return text }
        let bytes = Array(utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
            bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else { return text }
        let authorityStart = colon + 3
        var authorityEnd = authorityStart
        while authorityEnd < bytes.count, bytes[authorityEnd] != UInt8(ascii: "/"),
            bytes[authorityEnd] != UInt8(ascii: "?"),
            bytes[authorityEnd] != UInt8(ascii: "#")
        {
            authorityEnd += 1
        }
        guard let at = bytes[authorityStart..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return text }
        return String(decoding: bytes[..<authorityStart], as: UTF8.self) + "***"
            + String(decoding: bytes[at...], as: UTF8.self)
    }
}

/// 1-based line and column (columns count characters), as compilers print them.
package struct SourceLocation: Sendable, Hashable, Comparable {
    package var line: Int
    package var column: Int
    package init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    package static func < (a: SourceLocation, b: SourceLocation) -> Bool { (a.line, a.column) < (b.line, b.column) }
}

/// One finding about a manifest, printed compiler-style:
/// `haul.yaml:14:13: error: files[2].sha256: expected 64 hex digits, found 63`.
package struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    package enum Severity: String, Sendable, Hashable { case error, warning }

    package var severity: Severity
    package var file: String
    package var location: SourceLocation?
    /// Key path of the offending value (`files[2].sha256`), when there is one.
    package var keyPath: String?
    package var message: String

    package init(severity: Severity, file: String, location: SourceLocation?, keyPath: String?, message: String) {
        self.severity = severity
        self.file = file
        self.location = location
        self.keyPath = keyPath
        self.message = message
    }

    package var description: String {
        var out = file
        if let location { out += ":\(location.line):\(location.column)" }
        out += ": \(severity.rawValue): "
        if let keyPath { out += "\(keyPath): " }
        return out + message
    }

    /// `diagnostics` one per line, then `… and N more` when `omitted` is not zero.
    package static func lines(_ diagnostics: [Diagnostic], omitted: Int) -> [String] {
        diagnostics.map(\.description) + (omitted > 0 ? ["… and \(omitted) more"] : [])
    }
}

/// Every error found in a file haul reads, a manifest or a config file, compiler-style and in file order (the first
/// 50 of them, with how many more). Thrown only when at least one has severity `.error`.
package struct DiagnosticsError: Error, Sendable, CustomStringConvertible {
    package var diagnostics: [Diagnostic]
    /// Findings beyond those in `diagnostics`, counted but not kept.
    package var omitted: Int
    package init(diagnostics: [Diagnostic], omitted: Int = 0) {
        self.diagnostics = diagnostics
        self.omitted = omitted
    }

    /// One error about the file as a whole (it cannot be read, it is too large), at no place in it.
    init(file: String, message: String) {
        self.init(diagnostics: [Diagnostic(severity: .error, file: file, location: nil, keyPath: nil, message: message)]
        )
    }

    /// As printed: one line per diagnostic, then how many more there were.
    package var lines: [String] { Diagnostic.lines(diagnostics, omitted: omitted) }
    package var description: String { lines.joined(separator: "\n") }
}
