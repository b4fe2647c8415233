import HaulDigest

/// A checksum list published beside a release's files (`SHA256SUMS`, `sha512sum.txt`), as `haul add --from-sums`
/// reads it: GNU `sha256sum`/`sha512sum` output (`HEX  NAME`, `HEX *NAME` for binary mode, a leading `\` when the
/// name is escaped) or the BSD form (`SHA256 (NAME) = HEX`). The algorithm is the BSD tag's, or the hex digest's
/// length (64: sha256, 96: sha384, 128: sha512). Blank lines are skipped; any other line that is not a checksum
/// is an error with its line number: a list read wrongly would pin the wrong files without a word.
package struct ChecksumList: Sendable {
    package struct Item: Sendable, Equatable {
        /// As the list names it, `./` dropped: a path relative to the list's folder.
        package var name: String
        package var digest: Digest
        /// The list's line, for messages.
        package var line: Int
    }

    package var items: [Item]

    package init(items: [Item]) { self.items = items }

    /// A release's list is kilobytes; 64 MiB holds half a million lines.
    package static let maximumBytes: Int64 = 64 << 20

    package static func parse(_ bytes: [UInt8], file: String) throws(ChecksumListError) -> ChecksumList {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ChecksumListError(file: file, line: nil, message: "the checksum list is not UTF-8 text")
        }
        var items: [Item] = []
        // "\r\n" is one Character: a list written on Windows splits on it as on "\n".
        for (index, line) in text.split(
            omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        )
        .enumerated() {
            guard !line.allSatisfy({ $0 == " " || $0 == "\t" }) else { continue }
            do throws(LineFailure) {
                var item: Item
                if let bsd = try bsdItem(line) { item = bsd } else { item = try gnuItem(line) }
                item.line = index + 1
                items.append(item)
            } catch {
                throw ChecksumListError(file: file, line: index + 1, message: error.message)
            }
        }
        guard !items.isEmpty else {
            throw ChecksumListError(file: file, line: nil, message: "the checksum list names no file")
        }
        return ChecksumList(items: items)
    }

    private struct LineFailure: Error {
        var message: String
        init(_ message: String) { self.message = message }
    }

    private static let expected = "expected \"HEX  NAME\" (sha256sum, sha512sum) or \"SHA256 (NAME) = HEX\" (BSD)"

    /// `SHA256 (name) = hex`; nil when the line does not start with a BSD tag.
    private static func bsdItem(_ line: Substring) throws(LineFailure) -> Item? {
        let tags: [(String, DigestAlgorithm)] = [("SHA256 (", .sha256), ("SHA384 (", .sha384), ("SHA512 (", .sha512)]
        guard let (tag, algorithm) = tags.first(where: { line.hasPrefix($0.0) }) else {
            if line.hasPrefix("SHA1 (") || line.hasPrefix("MD5 (") {
                throw LineFailure(
                    "a SHA-1 or MD5 checksum cannot pin a file (use the release's SHA-256 or SHA-512 list)")
            }
            return nil
        }
        guard let separator = line.ranges(of: ") = ").last else { throw LineFailure(expected) }
        let name = line[line.index(line.startIndex, offsetBy: tag.count)..<separator.lowerBound]
        return Item(
            name: try checkedName(name), digest: try digest(line[separator.upperBound...], algorithm: algorithm),
            line: 0)
    }

    /// `hex  name`, `hex *name`, or `\hex  name` with `\\` and `\n` escapes in the name.
    private static func gnuItem(_ line: Substring) throws(LineFailure) -> Item {
        var rest = line
        let escaped = rest.hasPrefix("\\")
        if escaped { rest = rest.dropFirst() }
        guard let space = rest.firstIndex(of: " ") else { throw LineFailure(expected) }
        let hex = rest[..<space]
        let algorithm: DigestAlgorithm
        switch hex.count {
        case 64: algorithm = .sha256
        case 96: algorithm = .sha384
        case 128: algorithm = .sha512
        case 32, 40:
            throw LineFailure("a SHA-1 or MD5 checksum cannot pin a file (use the release's SHA-256 or SHA-512 list)")
        default: throw LineFailure(expected)
        }
        let marker = rest[rest.index(after: space)...]
        guard let mode = marker.first, mode == " " || mode == "*" else { throw LineFailure(expected) }
        var name = String(marker.dropFirst())
        if escaped {
            guard !name.contains("\\n") else {
                throw LineFailure("a file name with a line break cannot be a destination")
            }
            name = name.replacing("\\\\", with: "\\")
        }
        return Item(name: try checkedName(Substring(name)), digest: try digest(hex, algorithm: algorithm), line: 0)
    }

    private static func digest(_ hex: Substring, algorithm: DigestAlgorithm) throws(LineFailure) -> Digest {
        guard hex.count == algorithm.byteCount * 2, let digest = Digest(algorithm: algorithm, hex: hex) else {
            throw LineFailure(
                "expected \(algorithm.byteCount * 2) hex digits of \(algorithm.rawValue), found \(Quoted.text(String(hex)))"
            )
        }
        return digest
    }

    private static func checkedName(_ name: Substring) throws(LineFailure) -> String {
        var name = name
        while name.hasPrefix("./") { name = name.dropFirst(2) }
        guard !name.isEmpty else { throw LineFailure("the line names no file") }
        return String(name)
    }
}

/// A checksum list that could not be read: where, and what is wrong.
package struct ChecksumListError: Error, Sendable, CustomStringConvertible {
    package var file: String
    package var line: Int?
    package var message: String

    package var description: String { "\(file)\(line.map { ":\($0)" } ?? ""): error: \(message)" }
}

extension ChecksumList {
    /// One pinned entry per item, in the list's order: its URL is the list's folder (the list's URL up to the last
    /// `/` of its path, as written, `${VAR}`s kept) followed by the item's name, percent-encoded; its destination
    /// is the name. An item whose name is not a destination the manifest would take (`../x`) is an error at its line,
    /// and so is a name for a destination an earlier line already named (one file cannot be two).
    package func entries(listURL: TemplatedString, file: String) throws(ChecksumListError) -> [PinnedEntry] {
        let template = listURL.template
        let pathEnd = template.firstIndex { $0 == "?" || $0 == "#" } ?? template.endIndex
        let folder = template[..<pathEnd].lastIndex(of: "/").map { template[...$0] } ?? template[..<pathEnd]
        var entries: [PinnedEntry] = []
        entries.reserveCapacity(items.count)
        var named: [DestinationKey: Item] = [:]
        named.reserveCapacity(items.count)
        for item in items {
            let destination: String
            do {
                destination = try PathRules.destination(item.name).normalized
            } catch {
                throw ChecksumListError(file: file, line: item.line, message: error.messages.joined(separator: "; "))
            }
            if let earlier = named.updateValue(item, forKey: DestinationKey(destination)) {
                throw ChecksumListError(
                    file: file, line: item.line,
                    message: earlier.name.hasSameBytes(as: item.name)
                        ? "\(Quoted.text(item.name)) is named twice, at lines \(earlier.line) and \(item.line)"
                        : "\(Quoted.text(item.name)) is the same destination as \(Quoted.text(earlier.name)) at line \(earlier.line)"
                )
            }
            entries.append(
                PinnedEntry(
                    url: folder + Self.percentEncoded(item.name), destination: destination,
                    digest: item.digest, size: nil))
        }
        return entries
    }

    /// Every byte but the unreserved ones (RFC 3986) and `/` as `%XX`: a name is never read as a query, a
    /// fragment or a `${VAR}`.
    static func percentEncoded(_ name: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
