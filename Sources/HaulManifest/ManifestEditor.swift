import CLibYAML
import HaulDigest

/// Appends entries to a manifest's text without disturbing anything else in it: comments, blank lines, key
/// order, quoting and indentation stay byte for byte, and the new entries copy the indentation (and, for
/// one-line `{…}` entries, the flow style) of the entry before them.
///
/// The manifest is never re-serialized: a YAML round trip through a tree would drop every comment. Instead the
/// editor reads libyaml's events for their marks (where each node starts and ends), decides where the new text
/// goes, and splices bytes. It is pure (bytes in, bytes out) so that every layout can be tested without a file
/// system; the caller reloads the result with `ManifestLoader` before writing it anywhere.
package enum ManifestEditor {
    /// `entries` after the last entry of `files:`, in that order, in one splice: the text is scanned once and
    /// copied once however many entries a checksum list brings. `original` nil: there is no manifest yet, and a
    /// minimal valid one is made around them. `comment`: a line written as a YAML comment just above the new
    /// entries, in the column of their `-` (where they come from); its line breaks and other control characters
    /// become `?`. Entries added inside a flow sequence (`files: [{…}]`) get no comment: a flow's lines are not the
    /// entries' own.
    package static func appending(
        _ entries: [PinnedEntry], to original: [UInt8]?,
        fileName: String, comment: String? = nil
    ) throws(ManifestEditError) -> ManifestEdit {
        let positions = try positionsByDestination(entries, fileName: fileName)
        let comment = comment.map(commentText)
        guard let original else {
            return ManifestEdit(
                bytes: Array(newManifest(with: entries, lineBreak: "\n", comment: comment).utf8), firstIndex: 0,
                sameURL: entries.map { _ in [] })
        }
        let source = try SourceText(original, fileName: fileName)
        let layout = try ManifestLayout.scan(source, fileName: fileName)

        // One pass over the manifest's entries, each looked up among the new ones: never a pass per new entry.
        var positionsByURL: [String: [Int]] = [:]
        for (position, entry) in entries.enumerated() { positionsByURL[entry.url, default: []].append(position) }
        var sameURL = entries.map { _ in [ListedEntry]() }
        for listed in layout.entries {
            if let (text, mark) = listed.destination, let normalized = try? PathRules.destination(text).normalized,
                let position = positions[DestinationKey(normalized)]
            {
                throw ManifestEditError(
                    reason: .destinationTaken(index: listed.index),
                    diagnostic: Diagnostic(
                        severity: .error, file: fileName, location: mark.location,
                        keyPath: "files[\(listed.index)].dest",
                        message:
                            "\(Quoted.text(entries[position].destination)) is already the destination of files[\(listed.index)]"
                    ))
            }
            if let (url, mark) = listed.url, let same = positionsByURL[url] {
                let found = ListedEntry(
                    index: listed.index, destination: listed.destination?.text, location: mark.location)
                for position in same { sameURL[position].append(found) }
            }
        }

        var splice = Splice(source: source)
        try plan(entries, layout: layout, source: source, fileName: fileName, comment: comment, into: &splice)
        return ManifestEdit(bytes: splice.apply(), firstIndex: layout.fileCount, sameURL: sameURL)
    }

    /// Where each new entry's destination is among them; two new entries for one destination are refused (the
    /// loader would refuse the second), and neither is written.
    private static func positionsByDestination(
        _ entries: [PinnedEntry],
        fileName: String
    ) throws(ManifestEditError) -> [DestinationKey: Int] {
        var positions: [DestinationKey: Int] = [:]
        positions.reserveCapacity(entries.count)
        for (position, entry) in entries.enumerated() {
            if let first = positions.updateValue(position, forKey: DestinationKey(entry.destination)) {
                throw ManifestEditError(
                    reason: .destinationRepeated(first: first, second: position),
                    diagnostic: Diagnostic(
                        severity: .error, file: fileName, location: nil, keyPath: nil,
                        message: "\(Quoted.text(entry.destination)) is the destination of two of the new entries "
                            + "(number \(first + 1) and number \(position + 1))"))
            }
        }
        return positions
    }

    /// `files[index]` pinned anew (`haul add --update`): its checksum value becomes `digest`, written in the entry's
    /// own notation (`sha256: hex`, `checksum: algorithm:hex`, `integrity: algorithm-base64`), and its size `size`.
    /// A key the entry lacks is added after its last line, at its keys' column (inside the braces of a `{…}`
    /// entry). `tree`: the archive entry's `extract: tree:` becomes it (`extract: true` becomes
    /// `extract: {tree: sha256-…}`; settings without a tree get one after their last). Every other byte stays as it
    /// was.
    package static func repinning(
        _ index: Int, digest: Digest, size: Int64?, tree: Digest? = nil, in original: [UInt8],
        fileName: String
    ) throws(ManifestEditError) -> [UInt8] {
        let source = try SourceText(original, fileName: fileName)
        let layout = try ManifestLayout.scan(source, fileName: fileName)
        guard layout.entries.indices.contains(index), let item = layout.entries[index].item,
            item.isBlockMapping || item.isFlowMapping
        else {
            throw ManifestEditError(
                reason: .notEditable,
                diagnostic: Diagnostic(
                    severity: .error, file: fileName, location: nil, keyPath: "files[\(index)]",
                    message: "cannot find the entry's keys to edit"))
        }
        let listed = layout.entries[index]
        var splice = Splice(source: source)
        var added: [(key: String, value: String)] = []
        if let checksum = listed.checksum {
            let value =
                switch checksum.key {
                case FileKey.checksum.rawValue: "\(digest.algorithm.rawValue):\(digest.hex)"
                case FileKey.integrity.rawValue: "\(digest.algorithm.rawValue)-\(Base64.encode(digest.bytes))"
                default: digest.hex
                }
            let key =
                checksum.key == FileKey.checksum.rawValue || checksum.key == FileKey.integrity.rawValue
                || checksum.key == digest.algorithm.rawValue
            guard key else {
                throw ManifestEditError(
                    reason: .notEditable,
                    diagnostic: Diagnostic(
                        severity: .error, file: fileName, location: checksum.value.start.location,
                        keyPath: "files[\(index)].\(checksum.key)",
                        message: "a \(digest.algorithm.rawValue) digest cannot be written under \(checksum.key)"))
            }
            splice.replace(source.range(of: checksum.value), with: value)
        } else {
            added.append((digest.algorithm.rawValue, digest.hex))
        }
        if let size {
            if let span = listed.size {
                splice.replace(source.range(of: span), with: String(size))
            } else {
                added.append((FileKey.size.rawValue, String(size)))
            }
        }
        // Before the keys added below: at the entry's end, a tree line must come first, inside `extract:`.
        if let tree { try repinTree(tree, of: listed, source: source, fileName: fileName, into: &splice) }
        if !added.isEmpty {
            if item.isFlowMapping {
                // Just inside the closing brace.
                splice.insert(
                    at: source.offset(of: item.contentEnd) - 1, added.map { ", \($0.key): \($0.value)" }.joined())
            } else {
                let point = source.insertionPoint(after: item.contentEnd, keepingCommentsDeeperThan: item.start.column)
                splice.insertLines(
                    at: point, added.map { String(repeating: " ", count: item.start.column) + "\($0.key): \($0.value)" }
                )
            }
        }
        return splice.apply()
    }

    /// The splice that writes `tree` as the entry's `extract: tree:`.
    private static func repinTree(
        _ tree: Digest, of listed: ManifestLayout.Listed, source: SourceText, fileName: String,
        into splice: inout Splice
    ) throws(ManifestEditError) {
        let key = ExtractKey.tree.rawValue, value = tree.subresourceIntegrity
        switch listed.extract {
        case .scalar(let span)?:
            splice.replace(source.range(of: span), with: "{\(key): \(value)}")
        case .settings(let settings)? where settings.tree != nil:
            if let span = settings.tree { splice.replace(source.range(of: span), with: value) }
        case .settings(let settings)? where settings.mapping.isFlowMapping:
            splice.insert(
                at: source.offset(of: settings.mapping.contentEnd) - 1,
                (settings.pairs == 0 ? "" : ", ") + "\(key): \(value)")
        case .settings(let settings)?:
            let column = settings.mapping.start.column
            let point = source.insertionPoint(after: settings.mapping.contentEnd, keepingCommentsDeeperThan: column)
            splice.insertLines(at: point, [String(repeating: " ", count: column) + "\(key): \(value)"])
        case nil:
            throw ManifestEditError(
                reason: .notEditable,
                diagnostic: Diagnostic(
                    severity: .error, file: fileName, location: listed.item?.start.location,
                    keyPath: "files[\(listed.index)]",
                    message: "the entry has no extract: to pin a tree in"))
        }
    }

    /// The smallest manifest the loader accepts, holding `entries` (below `comment`, when there is one).
    static func newManifest(with entries: [PinnedEntry], lineBreak: String, comment: String? = nil) -> String {
        ([
            "\(TopLevelKey.version.rawValue): \(Manifest.supportedVersions[Manifest.supportedVersions.count - 1])",
            "\(TopLevelKey.files.rawValue):",
        ] + blockLines(entries, dashColumn: 2, keyColumn: 4, comment: comment))
        .map { $0 + lineBreak }.joined()
    }

    /// Every entry as block-style lines, one after the other, below `comment` (a `# ` line in the dash's column).
    private static func blockLines(
        _ entries: [PinnedEntry], dashColumn: Int, keyColumn: Int, comment: String? = nil
    ) -> [String] {
        commentLines(comment, column: dashColumn)
            + entries.flatMap { $0.blockLines(dashColumn: dashColumn, keyColumn: keyColumn) }
    }

    private static func commentLines(_ comment: String?, column: Int) -> [String] {
        comment.map { [String(repeating: " ", count: column) + "# " + $0] } ?? []
    }

    /// One line a YAML comment can hold: every character that libyaml takes as a line break (NEL, LS and PS
    /// among them) or that a terminal would act on becomes `?`.
    static func commentText(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028
                        || scalar.value == 0x2029 || scalar.value == 0xfeff
                        ? "?" : scalar
                }))
    }

    /// Every entry as a `{…}`, separated by `separator`.
    private static func flowMappings(_ entries: [PinnedEntry], separator: String = ", ") -> String {
        entries.map(\.flowMapping).joined(separator: separator)
    }

    /// Decides the splice for each layout the manifest can have.
    private static func plan(
        _ entries: [PinnedEntry], layout: ManifestLayout, source: SourceText, fileName: String, comment: String?,
        into splice: inout Splice
    ) throws(ManifestEditError) {
        func notEditable(_ message: String, at mark: Mark?, keyPath: String?) -> ManifestEditError {
            ManifestEditError(
                reason: .notEditable,
                diagnostic: Diagnostic(
                    severity: .error, file: fileName, location: mark?.location, keyPath: keyPath, message: message))
        }

        let root: (flow: Bool, start: Mark, end: Mark, pairs: Int)
        switch layout.root {
        case .empty:
            // Only comments (or nothing): the manifest starts after them.
            splice.insertLines(
                at: source.bytes.count, newManifest(with: entries, lineBreak: source.lineBreak, comment: comment))
            return
        case .other(let found, let mark):
            throw notEditable("expected a mapping at the top level, found \(found)", at: mark, keyPath: nil)
        case .mapping(let flow, let start, let end, let pairs):
            root = (flow, start, end, pairs)
        }
        let filesKey = TopLevelKey.files.rawValue
        // Nested block entries: two columns deeper than the top-level keys, as in haul's documentation.
        let dashColumn = root.start.column + 2

        switch layout.files {
        case .other(let found, let mark):
            throw notEditable("expected a sequence, found \(found)", at: mark, keyPath: filesKey)

        case .absent where root.flow:
            let text = "\(filesKey): [\(flowMappings(entries))]"
            if let last = layout.rootContentEnd, root.pairs > 0 {
                splice.insert(at: source.offset(of: last), ", " + text)
            } else {
                splice.insert(at: source.offset(of: root.end) - 1, text)  // just inside the `}`
            }

        case .absent:
            let point = source.insertionPoint(
                after: layout.rootContentEnd ?? root.start,
                keepingCommentsDeeperThan: root.start.column)
            let keyLine = String(repeating: " ", count: root.start.column) + filesKey + ":"
            splice.insertLines(
                at: point,
                [keyLine] + blockLines(entries, dashColumn: dashColumn, keyColumn: dashColumn + 2, comment: comment))

        case .null(let keyEnd, let start, let end):
            let hasText = end.index > start.index
            if root.flow {
                if hasText {
                    splice.replace(
                        source.offset(of: start)..<source.offset(of: end), with: "[\(flowMappings(entries))]")
                } else if let colon = source.offset(ofNext: UInt8(ascii: ":"), from: source.offset(of: keyEnd)) {
                    splice.insert(at: colon + 1, " [\(flowMappings(entries))]")
                } else {
                    throw notEditable("expected a sequence after \"\(filesKey)\"", at: keyEnd, keyPath: filesKey)
                }
                return
            }
            var lineEnd = source.offset(of: keyEnd)
            if hasText {
                // `files: ~` becomes `files:`; the block sequence goes on the lines below.
                let range = source.withLeadingBlanks(source.offset(of: start)..<source.offset(of: end))
                splice.replace(range, with: "")
                lineEnd = range.upperBound
            }
            splice.insertLines(
                at: source.nextLineStart(from: lineEnd),
                blockLines(entries, dashColumn: dashColumn, keyColumn: dashColumn + 2, comment: comment))

        case .sequence(let sequence):
            if sequence.flow {
                try planFlowSequence(
                    entries, sequence, rootIsFlow: root.flow, dashColumn: dashColumn, source: source,
                    comment: comment, into: &splice)
                return
            }
            guard let last = sequence.last else {
                throw notEditable("cannot find the end of \"\(filesKey)\"", at: sequence.start, keyPath: filesKey)
            }
            let point = source.insertionPoint(after: last.contentEnd, keepingCommentsDeeperThan: sequence.start.column)
            let lines: [String]
            if last.isFlowMapping && last.start.line == last.contentEnd.line {
                let pad = String(repeating: " ", count: max(1, last.start.column - sequence.start.column - 1))
                let dash = String(repeating: " ", count: sequence.start.column) + "-" + pad
                lines =
                    commentLines(comment, column: sequence.start.column) + entries.map { dash + $0.flowMapping }
            } else {
                let keyColumn = last.isBlockMapping ? last.start.column : sequence.start.column + 2
                lines = blockLines(
                    entries, dashColumn: sequence.start.column, keyColumn: keyColumn, comment: comment)
            }
            splice.insertLines(at: point, lines)
        }
    }

    private static func planFlowSequence(
        _ entries: [PinnedEntry], _ sequence: ManifestLayout.Sequence, rootIsFlow: Bool,
        dashColumn: Int, source: SourceText, comment: String?, into splice: inout Splice
    ) throws(ManifestEditError) {
        guard let last = sequence.last else {
            let closing = source.offset(of: sequence.end) - 1
            if rootIsFlow {
                splice.insert(at: closing, flowMappings(entries))
            } else {
                // `files: []` under a block mapping becomes a block sequence: the form every later entry extends.
                let range = source.withLeadingBlanks(source.offset(of: sequence.start)..<(closing + 1))
                splice.replace(range, with: "")
                splice.insertLines(
                    at: source.nextLineStart(from: range.upperBound),
                    blockLines(entries, dashColumn: dashColumn, keyColumn: dashColumn + 2, comment: comment))
            }
            return
        }
        // One item per line stays one item per line; items side by side stay side by side.
        let previousLine = sequence.beforeLastEnd?.line ?? sequence.start.line
        let separator =
            last.start.line > previousLine
            ? "," + source.lineBreak + String(repeating: " ", count: last.start.column)
            : ", "
        splice.insert(at: source.offset(of: last.contentEnd), separator + flowMappings(entries, separator: separator))
    }
}

/// The edited manifest.
package struct ManifestEdit: Sendable {
    package let bytes: [UInt8]
    /// The first new entry's position in `files:` (`files[firstIndex]`); the others follow it in order.
    package let firstIndex: Int
    /// For each new entry, in order, the entries already fetching the same URL: legal (one file in two places),
    /// worth a warning.
    package let sameURL: [[ListedEntry]]
}

/// An entry already in the manifest, as the editor saw it.
package struct ListedEntry: Sendable, Hashable {
    package let index: Int
    package let destination: String?
    /// Where its `url` value is.
    package let location: SourceLocation
}

/// Why a manifest's text cannot take the entry, as a compiler-style diagnostic pointing into the file.
package struct ManifestEditError: Error, Sendable, CustomStringConvertible {
    package enum Reason: Sendable, Hashable {
        /// The destination already belongs to `files[index]`.
        case destinationTaken(index: Int)
        /// Two of the new entries (their positions among them) have one destination.
        case destinationRepeated(first: Int, second: Int)
        /// The text is not something the editor can extend: not YAML, not UTF-8, not a mapping at the top level,
        /// or `files` holds something other than a sequence.
        case notEditable
    }

    package let reason: Reason
    package let diagnostic: Diagnostic

    package var description: String { diagnostic.description }
}

// MARK: - Positions

/// A libyaml mark: 0-based line and column, and `index`, the position counted in characters (Unicode scalars,
/// a CRLF counting two) from the start of the text after any byte order mark.
struct Mark {
    var index: Int
    var line: Int
    var column: Int

    init(_ mark: yaml_mark_t) {
        index = Int(mark.index)
        line = Int(mark.line)
        column = Int(mark.column)
    }

    var location: SourceLocation { SourceLocation(line: line + 1, column: column + 1) }
}

/// The manifest's bytes with the questions the editor asks of them.
struct SourceText {
    let bytes: [UInt8]
    /// Where libyaml's character count starts: after a UTF-8 byte order mark.
    let start: Int
    /// The file's own line ending, used for every line the editor adds.
    let lineBreak: String

    init(_ bytes: [UInt8], fileName: String) throws(ManifestEditError) {
        self.bytes = bytes
        start = bytes.starts(with: [0xef, 0xbb, 0xbf]) ? 3 : 0
        // libyaml also reads UTF-16, but text spliced into it would be UTF-8: refuse rather than corrupt.
        guard String(validating: bytes[start...], as: UTF8.self) != nil else {
            throw ManifestEditError(
                reason: .notEditable,
                diagnostic: Diagnostic(
                    severity: .error, file: fileName, location: nil, keyPath: nil,
                    message: "the manifest is not UTF-8 text; haul edits only UTF-8 manifests"))
        }
        let firstBreak = bytes.firstIndex { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }
        lineBreak =
            firstBreak.map {
                bytes[$0] == UInt8(ascii: "\r") && $0 + 1 < bytes.count
                    && bytes[$0 + 1] == UInt8(ascii: "\n")
            } == true ? "\r\n" : "\n"
    }

    /// The byte offset of a mark. Linear, but the editor converts a handful of marks per edit.
    func offset(of mark: Mark) -> Int {
        var offset = start
        var remaining = mark.index
        while remaining > 0 && offset < bytes.count {
            offset += 1
            while offset < bytes.count && bytes[offset] & 0xc0 == 0x80 { offset += 1 }
            remaining -= 1
        }
        return offset
    }

    private func isBreak(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }
    private func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }

    /// The start of the line after the one holding `offset` (the end of the text if there is none).
    func nextLineStart(from offset: Int) -> Int {
        var index = offset
        while index < bytes.count && !isBreak(bytes[index]) { index += 1 }
        guard index < bytes.count else { return index }
        if bytes[index] == UInt8(ascii: "\r"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") {
            return index + 2
        }
        return index + 1
    }

    private func lineStart(of offset: Int) -> Int {
        var index = offset
        while index > start && !isBreak(bytes[index - 1]) { index -= 1 }
        return index
    }

    /// Where text goes after a node whose content ends at `end`: at the start of the next line, after any
    /// comment lines indented deeper than `column` that follow without a blank line (they annotate the node:
    /// a commented-out key, a note about the last value). Comments at `column` or shallower, or after a blank
    /// line, belong to what follows and stay after the new text.
    func insertionPoint(after end: Mark, keepingCommentsDeeperThan column: Int) -> Int {
        let offset = offset(of: end)
        let lineStart = lineStart(of: offset)
        // A block scalar's end mark can sit on a later line, past the blanks it swallowed; that line has not
        // been written on yet.
        var point = bytes[lineStart..<offset].allSatisfy(isBlank) ? lineStart : nextLineStart(from: offset)
        while point < bytes.count {
            var index = point
            while index < bytes.count && isBlank(bytes[index]) { index += 1 }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "#"), index - point > column else { break }
            point = nextLineStart(from: index)
        }
        return point
    }

    /// The bytes that hold `value`'s text, which a new value replaces. A block scalar (`sha256: >-` with the hex on
    /// the next line) keeps its indicator and its line breaks: only its content line is replaced, so whatever
    /// follows the value (a key added after it) still starts on a line of its own.
    func range(of value: ManifestLayout.Value) -> Range<Int> {
        let start = offset(of: value.start), end = offset(of: value.end)
        guard value.isBlockScalar else { return start..<end }
        var line = nextLineStart(from: start)
        while line < end {
            var content = line
            while content < end && isBlank(bytes[content]) { content += 1 }
            var contentEnd = content
            while contentEnd < end && !isBreak(bytes[contentEnd]) { contentEnd += 1 }
            if contentEnd > content { return content..<contentEnd }
            line = nextLineStart(from: contentEnd)
        }
        // No content line: the value goes where the indicator is.
        var indicatorEnd = start
        while indicatorEnd < bytes.count && !isBlank(bytes[indicatorEnd]) && !isBreak(bytes[indicatorEnd]) {
            indicatorEnd += 1
        }
        return start..<indicatorEnd
    }

    /// `range` extended back over the spaces and tabs before it, so that removing a value leaves no trailing blanks.
    func withLeadingBlanks(_ range: Range<Int>) -> Range<Int> {
        var lower = range.lowerBound
        while lower > start && isBlank(bytes[lower - 1]) { lower -= 1 }
        return lower..<range.upperBound
    }

    /// The next `byte` at or after `offset`, skipping only blanks.
    func offset(ofNext byte: UInt8, from offset: Int) -> Int? {
        var index = offset
        while index < bytes.count && isBlank(bytes[index]) { index += 1 }
        return index < bytes.count && bytes[index] == byte ? index : nil
    }
}

/// Replacements on the original bytes, applied together so that each offset refers to the original text.
struct Splice {
    let source: SourceText
    private var edits: [(range: Range<Int>, text: [UInt8])] = []

    init(source: SourceText) { self.source = source }

    mutating func replace(_ range: Range<Int>, with text: String) { edits.append((range, Array(text.utf8))) }

    mutating func insert(at offset: Int, _ text: String) { replace(offset..<offset, with: text) }

    /// Whole lines at a line start (or at the very end, after ending an unterminated last line).
    mutating func insertLines(at offset: Int, _ lines: [String]) {
        insertLines(at: offset, lines.map { $0 + source.lineBreak }.joined())
    }

    mutating func insertLines(at offset: Int, _ text: String) {
        let needsBreak =
            offset > source.start
            && source.bytes[offset - 1] != UInt8(ascii: "\n") && source.bytes[offset - 1] != UInt8(ascii: "\r")
        insert(at: offset, (needsBreak ? source.lineBreak : "") + text)
    }

    func apply() -> [UInt8] {
        var bytes = source.bytes
        // Back to front, so that earlier offsets stay valid; at one offset, later edits come after earlier ones.
        for edit in edits.enumerated().sorted(by: {
            ($0.element.range.lowerBound, $0.offset) > ($1.element.range.lowerBound, $1.offset)
        }) {
            bytes.replaceSubrange(edit.element.range, with: edit.element.text)
        }
        return bytes
    }
}

// MARK: - Layout

/// What the editor needs to know about a manifest's structure, read from libyaml's events: where the top-level
/// mapping and `files:` start and end, where the last entry's content ends, and each entry's `url` and `dest`.
struct ManifestLayout {
    enum Root {
        /// No document, or an empty one: only comments and blank lines.
        case empty
        case mapping(flow: Bool, start: Mark, end: Mark, pairs: Int)
        /// Not a mapping; `found` as messages say it ("a sequence").
        case other(found: String, at: Mark)
    }

    struct Item {
        var start: Mark
        /// After the item's last scalar or closing bracket: block collections "end" where the next token starts,
        /// which may be several comment lines later.
        var contentEnd: Mark
        var isFlowMapping: Bool
        var isBlockMapping: Bool
    }

    struct Sequence {
        var flow: Bool
        var start: Mark
        var end: Mark
        var last: Item?
        /// The content end of the item before `last`, if any.
        var beforeLastEnd: Mark?
    }

    enum Files {
        case absent
        /// `files:`, `files: ~` or `files: null`: `keyEnd` is where the key ends.
        case null(keyEnd: Mark, start: Mark, end: Mark)
        case sequence(Sequence)
        case other(found: String, at: Mark)
    }

    /// A scalar value the editor may rewrite in place.
    struct Value {
        var start: Mark
        /// For a block scalar (`>-`, `|`), after the line break that ends its content, or later.
        var end: Mark
        var isBlockScalar: Bool
    }

    struct Listed {
        var index: Int
        var url: (text: String, mark: Mark)?
        var destination: (text: String, mark: Mark)?
        /// The checksum key (`sha256`, `checksum`, `integrity`, …) and its value.
        var checksum: (key: String, value: Value)?
        /// The `size` value.
        var size: Value?
        /// The `extract` value.
        var extract: Extract?
        /// The entry itself.
        var item: Item?
    }

    /// An entry's `extract:`: a scalar (`true`) or its settings.
    enum Extract {
        case scalar(Value)
        case settings(ExtractSettings)
    }

    struct ExtractSettings {
        /// The mapping: its start is its first key's, its content end its last value's (or its closing brace).
        var mapping: Item
        var pairs = 0
        /// The `tree` value, when pinned.
        var tree: Value?
    }

    var root = Root.empty
    /// The end of the last content inside the top-level mapping.
    var rootContentEnd: Mark?
    var files = Files.absent
    var fileCount = 0
    var entries: [Listed] = []

    static func scan(_ source: SourceText, fileName: String) throws(ManifestEditError) -> ManifestLayout {
        var builder = LayoutBuilder()
        guard !source.bytes.isEmpty else { return builder.layout }  // empty text: nothing to scan
        let failure: Diagnostic? =
            YAMLEventParser.parse(.bytes(source.bytes)) { parser -> Diagnostic? in
                while !builder.finished {
                    guard let event = parser.next() else {
                        let error = parser.error
                        return Diagnostic(
                            severity: .error, file: fileName, location: error.location, keyPath: nil,
                            message: error.message)
                    }
                    builder.handle(event)
                }
                return nil
            }
            ?? Diagnostic(
                severity: .error, file: fileName, location: nil, keyPath: nil,
                message: "cannot parse YAML: out of memory")
        if let failure { throw ManifestEditError(reason: .notEditable, diagnostic: failure) }
        return builder.layout
    }
}

/// Follows the event stream with a stack of open collections, noting only what `ManifestLayout` holds.
private struct LayoutBuilder {
    enum Role { case root, files, item, extract, other }

    struct Frame {
        var role: Role
        var isMapping: Bool
        var isFlow: Bool
        var start: Mark
        var children = 0
        /// The key whose value comes next (mappings only).
        var key = Key.other
    }

    /// The only key names the layout cares about, recognized from the bytes without making a `String`.
    enum Key: Equatable {
        case files, url, dest, size, extract, tree, checksum(FileKey), other

        private static let checksumKeys: [FileKey] = [.sha256, .sha384, .sha512, .checksum, .integrity]

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            // Gated on the length: almost every scalar is a value far longer than any of these names.
            self =
                switch bytes.count {
                case 3 where bytes.elementsEqual(FileKey.url.rawValue.utf8): .url
                case 4 where bytes.elementsEqual(FileKey.dest.rawValue.utf8): .dest
                case 4 where bytes.elementsEqual(FileKey.size.rawValue.utf8): .size
                case 4 where bytes.elementsEqual(ExtractKey.tree.rawValue.utf8): .tree
                case 7 where bytes.elementsEqual(FileKey.extract.rawValue.utf8): .extract
                case 5 where bytes.elementsEqual(TopLevelKey.files.rawValue.utf8): .files
                case 6, 8, 9:
                    Self.checksumKeys.first { bytes.elementsEqual($0.rawValue.utf8) }.map { .checksum($0) } ?? .other
                default: .other
                }
        }
    }

    /// Plain scalars YAML reads as null.
    private static let nullSpellings: [[UInt8]] = ["", "~", "null", "Null", "NULL"].map { Array($0.utf8) }

    private(set) var layout = ManifestLayout()
    private(set) var finished = false
    private var frames: [Frame] = []
    private var documents = 0
    private var filesKeyEnd: Mark?
    private var filesSeen = false
    /// The item being read, if any.
    private var item: ManifestLayout.Item?
    private var listed = ManifestLayout.Listed(index: 0)
    private var sequenceLast: ManifestLayout.Item?
    private var sequenceBeforeLastEnd: Mark?
    /// The entry's `extract:` settings being read, if any.
    private var extractSettings: ManifestLayout.ExtractSettings?

    mutating func handle(_ event: yaml_event_t) {
        let start = Mark(event.start_mark), end = Mark(event.end_mark)
        switch event.type {
        case YAML_DOCUMENT_START_EVENT:
            documents += 1
            // Only the first document is a manifest; the loader reports any other.
            if documents > 1 { finished = true }
        case YAML_DOCUMENT_END_EVENT, YAML_STREAM_END_EVENT:
            finished = true
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let bytes = UnsafeBufferPointer(start: scalar.value, count: scalar.value == nil ? 0 : scalar.length)
            let isNull =
                scalar.tag == nil && scalar.style == YAML_PLAIN_SCALAR_STYLE && bytes.count <= 4
                && Self.nullSpellings.contains { $0.elementsEqual(bytes) }
            let isBlockScalar = scalar.style == YAML_LITERAL_SCALAR_STYLE || scalar.style == YAML_FOLDED_SCALAR_STYLE
            scalarNode(bytes, isNull: isNull, isBlockScalar: isBlockScalar, start: start, end: end)
        case YAML_ALIAS_EVENT:
            scalarNode(nil, isNull: false, isBlockScalar: false, start: start, end: end)
        case YAML_SEQUENCE_START_EVENT:
            openCollection(
                isMapping: false, isFlow: event.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE, start: start)
        case YAML_MAPPING_START_EVENT:
            openCollection(
                isMapping: true, isFlow: event.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE, start: start)
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            closeCollection(end: end)
        default:
            break
        }
    }

    /// Where the node starting now sits, with the bookkeeping its parent needs; `key` names it if it is a key.
    /// `parent`: the role of the collection it is in.
    private mutating func begin(key: Key) -> (role: Role, valueOf: Key, parentIsEntry: Bool, parent: Role?) {
        guard let parentIndex = frames.indices.last else { return (.root, .other, false, nil) }
        let isKey = frames[parentIndex].isMapping && frames[parentIndex].children % 2 == 0
        frames[parentIndex].children += 1
        let parent = frames[parentIndex]
        if isKey {
            frames[parentIndex].key = key
            return (.other, .other, parent.role == .item, parent.role)
        }
        let valueOf = parent.isMapping ? parent.key : .other
        switch parent.role {
        case .root where parent.isMapping && valueOf == .files && !filesSeen:
            filesSeen = true
            return (.files, .other, false, parent.role)
        case .files:
            return (.item, .other, false, parent.role)
        default:
            return (.other, valueOf, parent.role == .item, parent.role)
        }
    }

    /// `bytes` nil for an alias. Text is made only for the few scalars kept: a manifest has hundreds of thousands.
    private mutating func scalarNode(
        _ bytes: UnsafeBufferPointer<UInt8>?, isNull: Bool, isBlockScalar: Bool,
        start: Mark, end: Mark
    ) {
        let key = bytes.map(Key.init) ?? .other
        let isRootKey =
            frames.count == 1 && frames[0].role == .root && frames[0].isMapping && frames[0].children % 2 == 0
        if isRootKey && key == .files && filesKeyEnd == nil { filesKeyEnd = end }
        let place = begin(key: key)
        switch place.role {
        case .root:
            // An empty document reads as one empty scalar.
            layout.root =
                isNull && end.index == start.index ? .empty : .other(found: isNull ? "null" : "a scalar", at: start)
            finished = true
            return
        case .files:
            if isNull, let keyEnd = filesKeyEnd {
                layout.files = .null(keyEnd: keyEnd, start: start, end: end)
            } else {
                let found =
                    bytes.map { isNull ? "null" : Quoted.text(String(decoding: $0, as: UTF8.self)) } ?? "an alias"
                layout.files = .other(found: found, at: start)
            }
        case .item:
            startItem(at: start, isFlowMapping: false, isBlockMapping: false)
        case .other, .extract:
            if place.parentIsEntry, let bytes {
                switch place.valueOf {
                case .dest: listed.destination = (String(decoding: bytes, as: UTF8.self), start)
                case .url: listed.url = (String(decoding: bytes, as: UTF8.self), start)
                case .size: listed.size = ManifestLayout.Value(start: start, end: end, isBlockScalar: isBlockScalar)
                case .checksum(let key):
                    listed.checksum = (
                        key.rawValue, ManifestLayout.Value(start: start, end: end, isBlockScalar: isBlockScalar)
                    )
                case .extract:
                    listed.extract = .scalar(ManifestLayout.Value(start: start, end: end, isBlockScalar: isBlockScalar))
                case .files, .tree, .other: break
                }
            } else if place.parent == .extract, place.valueOf == .tree {
                extractSettings?.tree = ManifestLayout.Value(start: start, end: end, isBlockScalar: isBlockScalar)
            }
        }
        noteContent(end: end)
        if place.role == .item { finishItem() }
    }

    private mutating func openCollection(isMapping: Bool, isFlow: Bool, start: Mark) {
        let place = begin(key: .other)
        var role = place.role
        switch role {
        case .root where !isMapping:
            layout.root = .other(found: "a sequence", at: start)
            finished = true
            return
        case .files where isMapping:
            layout.files = .other(found: "a mapping", at: start)
            role = .other
        case .item:
            startItem(at: start, isFlowMapping: isMapping && isFlow, isBlockMapping: isMapping && !isFlow)
        case .other where place.parentIsEntry && place.valueOf == .extract && isMapping:
            role = .extract
            extractSettings = ManifestLayout.ExtractSettings(
                mapping: ManifestLayout.Item(
                    start: start, contentEnd: start, isFlowMapping: isFlow, isBlockMapping: !isFlow))
        default:
            break
        }
        frames.append(Frame(role: role, isMapping: isMapping, isFlow: isFlow, start: start))
    }

    private mutating func closeCollection(end: Mark) {
        guard let frame = frames.popLast() else { return }
        // A block collection's end event sits where the next token starts; only a bracket ends content.
        if frame.isFlow { noteContent(end: end) }
        switch frame.role {
        case .item:
            finishItem()
        case .files:
            layout.files = .sequence(
                ManifestLayout.Sequence(
                    flow: frame.isFlow, start: frame.start, end: end,
                    last: sequenceLast, beforeLastEnd: sequenceBeforeLastEnd))
        case .root:
            layout.root = .mapping(flow: frame.isFlow, start: frame.start, end: end, pairs: frame.children / 2)
            finished = true
        case .extract:
            if var settings = extractSettings {
                settings.mapping.contentEnd = item?.contentEnd ?? frame.start
                settings.pairs = frame.children / 2
                listed.extract = .settings(settings)
            }
            extractSettings = nil
        case .other:
            break
        }
    }

    private mutating func noteContent(end: Mark) {
        if !frames.isEmpty { layout.rootContentEnd = end }
        item?.contentEnd = end
    }

    private mutating func startItem(at start: Mark, isFlowMapping: Bool, isBlockMapping: Bool) {
        item = ManifestLayout.Item(
            start: start, contentEnd: start, isFlowMapping: isFlowMapping,
            isBlockMapping: isBlockMapping)
        listed = ManifestLayout.Listed(index: layout.fileCount)
    }

    private mutating func finishItem() {
        guard let finished = item else { return }
        sequenceBeforeLastEnd = sequenceLast?.contentEnd
        sequenceLast = finished
        item = nil
        listed.item = finished
        layout.entries.append(listed)
        layout.fileCount += 1
    }
}
