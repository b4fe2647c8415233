import HaulDigest

/// What `haul add` was asked to pin, checked against the rules the loader applies to a `files:` entry *before*
/// anything is fetched: a URL or destination the manifest would reject is a usage error, not a wasted download.
package struct EntryDraft: Sendable {
    /// As typed (the template) and as fetched (expanded). A `${VAR}` in the argument means what it means in a
    /// manifest, so the URL written is the URL `sync` will fetch and the pin matches it.
    package let url: TemplatedString
    /// Normalized the way the loader normalizes destinations (`a//./b` → `a/b`, and without the trailing `/` a
    /// folder may be written with), so duplicate checks compare like with like.
    package let destination: String

    /// `destination` nil: the URL's last path segment, percent-decoded (what `curl -O` would name the file); for
    /// an archive to unpack (`unpacks`), that name less the suffix that names its format (`sdk-1.2.tar.gz` →
    /// `sdk-1.2`). `unpacks`: `destination` names the folder the archive becomes, and may end with `/`.
    package init(
        url: String, destination: String?, environment: [String: String],
        unpacks: Bool = false
    ) throws(EntryDraftError) {
        let expanded: TemplatedString
        do {
            var budget = ExpansionBudget(remaining: ManifestLoader.maximumBytes)
            expanded = try EnvironmentExpansion.expand(url, environment: environment, budget: &budget)
            try URLRules.check(expanded)
        } catch {
            throw EntryDraftError(messages: error.messages)
        }
        let text: String
        if let destination {
            text = destination
        } else {
            let name = try Self.fileName(of: expanded)
            text = unpacks ? ArchiveFormat.stem(of: name) ?? name : name
        }
        do {
            self.destination = try PathRules.destination(text, folder: unpacks).normalized
        } catch {
            let hint = destination == nil ? " (derived from the URL; choose one with --dest)" : ""
            throw EntryDraftError(messages: error.messages.map { $0 + hint })
        }
        self.url = expanded
    }

    /// The entry with a stand-in digest and size (and, for an archive unpacked by `extract`, a stand-in tree), to
    /// check that a manifest can take it (and that its values read back exactly) before anything is downloaded.
    package func trialEntry(extract: ExtractRule? = nil) -> PinnedEntry {
        let standIn = Digest(algorithm: .sha256, bytes: [UInt8](repeating: 0, count: DigestAlgorithm.sha256.byteCount))
        return pinned(digest: standIn, size: 0, extract: extract.map { $0.pinning(tree: standIn) })
    }

    /// The entry to write once the bytes have been measured (or the digest given: the size may then be unknown);
    /// `extract` for an archive unpacked into `destination`.
    package func pinned(digest: Digest, size: Int64?, extract: ExtractRule? = nil) -> PinnedEntry {
        PinnedEntry(url: url.template, destination: destination, digest: digest, size: size, extract: extract)
    }

    /// The last segment of the URL's path, percent-decoded, as it will be fetched: `${MIRROR}/tool.tar.gz` names
    /// `tool.tar.gz`, and `https://h/${FILE}` the file FILE names (what the user expects to get, as `curl -O` would).
    /// Userinfo, query and fragment, where tokens live, are never part of it.
    static func fileName(of url: TemplatedString) throws(EntryDraftError) -> String {
        let shown = Quoted.text(url.description)
        let bytes = Array(url.expanded.utf8)
        // URLRules has checked the expanded text: it has a scheme and an authority.
        guard let schemeEnd = bytes.firstIndex(of: UInt8(ascii: ":")), bytes.count > schemeEnd + 2,
            bytes[schemeEnd + 1] == UInt8(ascii: "/"), bytes[schemeEnd + 2] == UInt8(ascii: "/")
        else {
            throw EntryDraftError("cannot take a file name from URL \(shown); choose a destination with --dest")
        }
        let afterAuthority = bytes[(schemeEnd + 3)...]
        let pathEnd = afterAuthority.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.endIndex
        let hostAndPath = bytes[(schemeEnd + 3)..<pathEnd]
        guard let lastSlash = hostAndPath.lastIndex(of: UInt8(ascii: "/")), lastSlash + 1 < pathEnd else {
            throw EntryDraftError(
                "URL \(shown) has no file name at the end of its path; choose a destination with --dest")
        }
        let segment = Array(bytes[(lastSlash + 1)..<pathEnd])
        let decoded = percentDecoded(segment)
        guard let name = String(validating: decoded, as: UTF8.self) else {
            throw EntryDraftError(
                "the file name in URL \(shown) is not UTF-8 once decoded; choose a destination with --dest")
        }
        // A decoded "/" would turn one segment into folders the URL never named; control characters make file
        // names that break shells and terminals.
        if decoded.contains(UInt8(ascii: "/")) || decoded.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
            throw EntryDraftError(
                "the file name in URL \(shown) decodes to \(Quoted.text(name)), which is not a "
                    + "plain file name; choose a destination with --dest")
        }
        return name
    }

    /// `%41` → `A`; a `%` not followed by two hex digits stays as it is. (A URL's file name, here and for the name
    /// a `from:` entry has in its list.)
    static func percentDecoded(_ bytes: [UInt8]) -> [UInt8] {
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }
}

extension DestinationPath {
    /// A destination typed on the command line, normalized as the loader normalizes a manifest's (`a//./b` → `a/b`,
    /// and a folder's `sdk/` → `sdk`), so that it compares with the manifest's own; nil when it is not one a manifest
    /// could hold.
    package static func commandLine(_ text: String) -> String? {
        (try? PathRules.destination(text).normalized) ?? (try? PathRules.destination(text, folder: true).normalized)
    }
}

/// A digest typed on the command line (`haul add --sha256 HEX`, `--sha512 HEX`, `--integrity SRI`), checked as the
/// manifest's key of the same name is, with the same messages. Of an integrity value listing several digests, the
/// first of its strongest algorithm is pinned.
package enum CommandLineDigest {
    /// `key`: the manifest key the option stands for (`sha256`, `sha512`, `integrity`).
    package static func parse(_ text: String, as key: String) throws(EntryDraftError) -> Digest {
        do throws(RuleFailure) {
            switch key {
            case "integrity": return try ChecksumRules.integrity(text).digest
            default:
                guard let algorithm = DigestAlgorithm(rawValue: key) else {
                    throw RuleFailure("unknown checksum key \(key)")
                }
                return try ChecksumRules.hexKey(text, algorithm: algorithm).digest
            }
        } catch {
            throw EntryDraftError(messages: error.messages.map { "--\(key): \($0)" })
        }
    }
}

/// Why an `EntryDraft` cannot be made: the messages the loader would give for the same values.
package struct EntryDraftError: Error, Sendable, CustomStringConvertible {
    package let messages: [String]
    init(_ message: String) { messages = [message] }
    init(messages: [String]) { self.messages = messages }
    package var description: String { messages.joined(separator: "; ") }
}

/// One complete, pinned entry: `url`, `dest`, the digest and `size`, and for an archive `extract:`, as `haul add`
/// writes it.
package struct PinnedEntry: Sendable, Hashable {
    /// Written as given (a `${VAR}` stays a reference).
    package let url: String
    package let destination: String
    package let digest: Digest
    /// nil: not known (pinned from a checksum list without downloading); the entry then has no `size`.
    package let size: Int64?
    /// An archive unpacked into `destination`: written as `extract: true` when every setting is the default,
    /// else as a mapping of the settings that are not (`extract: {tree: sha256-…}`). nil: a plain file.
    package let extract: ExtractRule?

    package init(url: String, destination: String, digest: Digest, size: Int64?, extract: ExtractRule? = nil) {
        self.url = url
        self.destination = destination
        self.digest = digest
        self.size = size
        self.extract = extract
    }

    /// A standalone sequence item, for `haul add --print`: paste it under `files:`.
    package var yamlSnippet: String {
        blockLines(dashColumn: 0, keyColumn: 2).joined(separator: "\n") + "\n"
    }

    /// Whether the loader read `entry` back as exactly this pin: the last guard before a manifest is replaced,
    /// catching any quoting that would change a value.
    package func matches(_ entry: FileEntry) -> Bool {
        entry.url.template == url && entry.destination.description == destination
            && entry.checksum?.digest == digest && entry.size == size && entry.extract == extract
    }

    // MARK: Rendering

    /// Keys in the order people read an entry: where from, where to, what it must be.
    private func fields(flow: Bool) -> [(key: String, value: String)] {
        let checksum: (key: String, value: String) =
            switch digest.algorithm {
            case .sha256, .sha384, .sha512: (digest.algorithm.rawValue, digest.hex)
            case .sha1, .md5: (FileKey.checksum.rawValue, "\(digest.algorithm.rawValue):\(digest.hex)")
            }
        return [
            (FileKey.url.rawValue, YAMLScalarText.render(url, flow: flow)),
            (FileKey.dest.rawValue, YAMLScalarText.render(destination, flow: flow)),
            checksum,
        ] + (size.map { [(FileKey.size.rawValue, String($0))] } ?? [])
    }

    /// The settings of `extract` that are not the defaults, in `ExtractKey` order; empty for `extract: true`.
    private func extractFields(_ rule: ExtractRule) -> [(key: String, value: String)] {
        // Inside `[…]`, a pattern is a flow scalar whatever the entry's style.
        func patterns(_ list: [String]) -> String {
            "[" + list.map { YAMLScalarText.render($0, flow: true) }.joined(separator: ", ") + "]"
        }
        var fields: [(key: String, value: String)] = []
        if let format = rule.format {
            fields.append((ExtractKey.format.rawValue, YAMLScalarText.render(format.rawValue, flow: true)))
        }
        if rule.strip != 0 { fields.append((ExtractKey.strip.rawValue, String(rule.strip))) }
        if !rule.include.isEmpty { fields.append((ExtractKey.include.rawValue, patterns(rule.include))) }
        if !rule.exclude.isEmpty { fields.append((ExtractKey.exclude.rawValue, patterns(rule.exclude))) }
        if let tree = rule.tree {
            fields.append((ExtractKey.tree.rawValue, "\(tree.algorithm.rawValue)-\(tree.base64)"))
        }
        if let bytes = rule.maxUnpackedBytes { fields.append((ExtractKey.maxUnpacked.rawValue, String(bytes))) }
        return fields
    }

    /// The entry as block-style lines: the first starts with `-` at `dashColumn`, keys start at `keyColumn`; the
    /// settings of `extract:` two columns deeper.
    func blockLines(dashColumn: Int, keyColumn: Int) -> [String] {
        let keyIndent = String(repeating: " ", count: keyColumn)
        let first =
            String(repeating: " ", count: dashColumn) + "-"
            + String(repeating: " ", count: max(1, keyColumn - dashColumn - 1))
        var lines = fields(flow: false).enumerated().map { index, field in
            (index == 0 ? first : keyIndent) + field.key + ": " + field.value
        }
        if let extract {
            let settings = extractFields(extract)
            let key = keyIndent + FileKey.extract.rawValue + ":"
            lines.append(settings.isEmpty ? key + " true" : key)
            lines += settings.map { keyIndent + "  " + $0.key + ": " + $0.value }
        }
        return lines
    }

    /// `{url: …, dest: …, sha256: …, size: …}`, for manifests written in flow style; an archive's settings as a
    /// mapping inside it (`extract: {tree: sha256-…}`).
    var flowMapping: String {
        var fields = fields(flow: true)
        if let extract {
            let settings = extractFields(extract)
            fields.append((FileKey.extract.rawValue, settings.isEmpty ? "true" : Self.flow(settings)))
        }
        return Self.flow(fields)
    }

    private static func flow(_ fields: [(key: String, value: String)]) -> String {
        "{" + fields.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
    }
}

/// Writes a string as a YAML scalar that reads back as exactly that string: plain when that is unambiguous,
/// double-quoted with escapes otherwise.
enum YAMLScalarText {
    static func render(_ text: String, flow: Bool) -> String {
        needsQuotes(text, flow: flow) ? doubleQuoted(text) : text
    }

    /// Conservative: quoting a value that did not need it costs two characters; failing to quote one that did
    /// changes what the manifest says.
    static func needsQuotes(_ text: String, flow: Bool) -> Bool {
        guard let first = text.unicodeScalars.first, let last = text.unicodeScalars.last else { return true }
        // Indicators that start something other than a plain scalar (or might, depending on what follows).
        if "-?:,[]{}#&*!|>'\"%@` \t".unicodeScalars.contains(first) { return true }
        if last == " " || last == ":" { return true }
        if text.contains(": ") || text.contains("#") { return true }
        // In flow context `,[]{}` end a plain scalar, and some readers (PyYAML) refuse any `:` there.
        if flow && text.unicodeScalars.contains(where: { ",[]{}:".unicodeScalars.contains($0) }) { return true }
        if text.unicodeScalars.contains(where: { !isPlainPrintable($0) }) { return true }
        return looksLikeNonString(text)
    }

    /// Values YAML 1.1 or 1.2 readers would take as null, a boolean or a number (`yes`, `~`, `1e3`, `.inf`):
    /// haul reads them as text, other tools reading the manifest would not.
    private static func looksLikeNonString(_ text: String) -> Bool {
        let words: Set<String> = ["~", "null", "true", "false", "yes", "no", "on", "off", "y", "n"]
        if words.contains(text.lowercased()) { return true }
        var rest = Substring(text)
        if rest.first == "+" || rest.first == "-" { rest = rest.dropFirst() }
        guard let head = rest.first else { return false }
        if head.isASCII && head.isNumber { return true }
        if head == "." {
            let afterDot = rest.dropFirst()
            if let digit = afterDot.first, digit.isASCII, digit.isNumber { return true }
            return ["inf", "nan"].contains(afterDot.lowercased())
        }
        return false
    }

    /// Printable and not a line break by YAML's definition (which counts NEL, LS and PS as breaks), and not a bidi
    /// control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): YAML allows those raw, but in the manifest
    /// they would reorder what an editor or `git diff` shows (`bidi-\u{202E}txt.exe` reads `bidi-exe.txt`). What
    /// is not plain printable is written as an escape.
    private static func isPlainPrintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x20...0x7e: true
        case 0xa0...0x2027, 0x202a...0xd7ff, 0xe000...0xfefe, 0xff00...0xfffd, 0x10000...0x10ffff:
            scalar.value < 0x61c || !scalar.properties.isBidiControl
        default: false
        }
    }

    static func doubleQuoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\0": out += "\\0"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\u{85}": out += "\\N"
            case "\u{2028}": out += "\\L"
            case "\u{2029}": out += "\\P"
            default:
                if scalar.value == 0x20 || isPlainPrintable(scalar) {
                    out.unicodeScalars.append(scalar)
                } else if scalar.value <= 0xff {
                    out += "\\x" + hex(scalar.value, digits: 2)
                } else {
                    out += "\\u" + hex(scalar.value, digits: 4)
                }
            }
        }
        return out + "\""
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

/// Whether a size can stand beside a digest in one entry. A digest says whether the file is empty: `size: 0`
/// beside the digest of non-empty content (a server announcing `Content-Length: 0` to a HEAD request), or a
/// positive size beside the digest of empty content, is an entry no file can satisfy, and every sync would fail
/// it. `haul add` writes neither.
package enum PinnedSize {
    /// nil when a file of `size` bytes can have `digest`; otherwise why not, for a message.
    package static func contradiction(_ size: Int64, digest: Digest) -> String? {
        let shown = "\(digest.algorithm.rawValue) \(digest.hex.prefix(12))…"
        switch (size == 0, digest.isOfEmptyContent) {
        case (true, false): return "0 bytes, but \(shown) is not the digest of empty content"
        case (false, true): return "\(size) bytes, but \(shown) is the digest of empty content"
        default: return nil
        }
    }
}
