/// Lexical path handling for `root` and `dest`. Nothing here touches the file system: the manifest is validated
/// before anything exists on disk, and symlinks are the store's business.
package enum PathRules {
    /// Collapses `//`, `.` and `..` in an absolute path; `..` at `/` stays at `/`: `/a/./b/../c` → `/a/c`.
    package static func normalizeAbsolute(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// `relative` against `base`, unless `relative` is already absolute.
    static func resolve(_ relative: String, against base: String) -> String {
        normalizeAbsolute(relative.hasPrefix("/") ? relative : base + "/" + relative)
    }

    /// The private folder haul keeps under root (state, partial downloads); no destination may live there.
    static let privateFolder = ".haul"

    /// A destination with every rule applied, or the reason it is unusable. Accepts exactly what
    /// `DestinationPath(_:)` accepts, minus trailing slashes, `${`, and paths inside `.haul`.
    /// `normalized` is the path as `DestinationPath.description` spells it, without rebuilding it when `text`
    /// already is in that form (the common case).
    ///
    /// `folder`: the destination names a folder (an entry with `extract:`), which may be written with a trailing
    /// `/`; the path kept has none.
    static func destination(
        _ text: String,
        folder: Bool = false
    ) throws(RuleFailure) -> (path: DestinationPath, normalized: String) {
        var shown: String { Quoted.text(text) }
        // Components are cut at the byte "/" for every path, ASCII or not, exactly as the kernel will cut them.
        let scan = text.withUTF8Buffer(scanDestination)
        if scan.isEmpty { throw RuleFailure("expected a file path relative to root, found an empty string") }
        if scan.hasNUL { throw RuleFailure("destination must not contain a NUL character") }
        if scan.isAbsolute { throw RuleFailure("destination \(shown) is absolute; destinations are relative to root") }
        if scan.hasReference { throw RuleFailure(EnvironmentExpansion.notExpandedHere) }
        if scan.hasDotDot {
            throw RuleFailure("destination \(shown) contains \"..\"; destinations must stay inside root")
        }
        if let name = scan.longestComponent, name.count > DestinationPath.maximumNameBytes {
            let component = text.withUTF8Buffer {
                String(decoding: UnsafeBufferPointer(rebasing: $0[name]), as: UTF8.self)
            }
            throw RuleFailure(
                "\(Quoted.text(component)) in destination is \(name.count) bytes long; a file or folder name "
                    + "has at most \(DestinationPath.maximumNameBytes) bytes")
        }
        if scan.normalizedLength > DestinationPath.maximumBytes {
            throw RuleFailure(
                "destination \(shown) is \(scan.normalizedLength) bytes long; a destination has at most "
                    + "\(DestinationPath.maximumBytes) bytes")
        }

        guard let first = scan.components.first else {
            throw RuleFailure("destination \(shown) names root itself, not a \(folder ? "folder under it" : "file")")
        }
        if scan.hasTrailingSlash && !folder {
            throw RuleFailure(
                "destination \(shown) ends with \"/\"; a destination names a file (a folder only with extract:)")
        }
        let firstName = text.withUTF8Buffer {
            String(decoding: UnsafeBufferPointer(rebasing: $0[first]), as: UTF8.self)
        }
        if firstName == privateFolder {
            throw RuleFailure(
                scan.components.count == 1
                    ? "\".haul\" is haul's private folder under root"
                    : "\(shown) is inside \".haul\", haul's private folder under root")
        }
        if firstName.utf8.count == privateFolder.utf8.count, firstName.lowercased() == privateFolder {
            throw RuleFailure(
                "\(shown) is inside \(Quoted.text(firstName)), which on a case-insensitive file system is "
                    + "\".haul\", haul's private folder under root")
        }
        let isNormalized = scan.isNormalized && !scan.hasTrailingSlash
        let normalized =
            isNormalized
            ? text
            : text.withUTF8Buffer { bytes in
                scan.components.map { String(decoding: UnsafeBufferPointer(rebasing: bytes[$0]), as: UTF8.self) }
                    .joined(separator: "/")
            }
        return (DestinationPath(normalized: normalized), normalized)
    }

    /// One pass over a destination's bytes collecting everything the rules ask about.
    private struct DestinationScan {
        var isEmpty = true, isAbsolute = false, hasTrailingSlash = false, hasNUL = false, hasReference = false
        var hasDotDot = false
        /// False when splitting drops something (`//`, `.`), i.e. the text differs from the normalized path.
        var isNormalized = true
        /// Byte ranges of the kept components.
        var components: [Range<Int>] = []
        /// Bytes of the path as `DestinationPath.description` spells it.
        var normalizedLength = 0
        /// The first of the longest components.
        var longestComponent: Range<Int>?
    }

    private static func scanDestination(_ bytes: UnsafeBufferPointer<UInt8>) -> DestinationScan {
        var result = DestinationScan()
        result.components.reserveCapacity(8)
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        result.isEmpty = bytes.isEmpty
        result.isAbsolute = bytes.first == slash
        result.hasTrailingSlash = bytes.last == slash
        var start = 0
        var previous: UInt8 = 0
        for index in 0...bytes.count {
            let byte = index < bytes.count ? bytes[index] : slash
            if byte == 0 { result.hasNUL = true }
            if previous == UInt8(ascii: "$") && byte == UInt8(ascii: "{") { result.hasReference = true }
            previous = byte
            guard byte == slash else { continue }
            let length = index - start
            if length == 0 || (length == 1 && bytes[start] == dot) {
                if index < bytes.count || length == 1 { result.isNormalized = false }
            } else if length == 2 && bytes[start] == dot && bytes[start + 1] == dot {
                result.hasDotDot = true
            } else {
                result.components.append(start..<index)
                result.normalizedLength += length + (result.components.count > 1 ? 1 : 0)
                if length > result.longestComponent?.count ?? 0 { result.longestComponent = start..<index }
            }
            start = index + 1
        }
        return result
    }
}

extension EnvironmentExpansion {
    static let notExpandedHere =
        "\"${\" is not allowed here: environment variables expand only in root, url, mirrors and header values"
}
