/// A pattern of `extract:`'s `include:` and `exclude:`, matched against an archive member's path after `strip`
/// (`/`-separated, no leading `/`).
///
/// Syntax, per component (the text between two `/`):
/// - `*`: any run of characters, none of them `/` (a leading `.` included, as in `.gitignore`);
/// - `?`: one character, not `/`;
/// - `[abc]`, `[a-z]`, `[!x]` or `[^x]`: one character of the set (or not of it), never `/`; a `]` first in the
///   set, or a `-` first or last, stands for itself;
/// - `\`: the next character as itself (`\*`, `\[`);
/// - `**` as a whole component: any number of components, none included (`**/*.so`, `lib/**`, `a/**/b`).
///   Elsewhere (`a**b`) it is refused rather than guessed at.
///
/// Where a pattern applies (as `.gitignore` decides, tar's `--anchored` for patterns with a `/`):
/// - with a `/` (other than a trailing one), it is anchored at the top of the tree: `bin/*` matches `bin/tool`,
///   not `sdk/bin/tool`; a leading `/` anchors a single name (`/README` is the top-level one only);
/// - without one, it matches a name at any depth: `*.so` is `**/*.so`;
/// - a pattern that matches a folder matches everything inside it: `docs` excludes `docs/api/index.html`;
/// - a trailing `/` matches folders only: `build/` matches what is inside a folder `build`, and the folder itself,
///   but not a file named `build`.
///
/// Characters are Unicode scalars compared exactly (no case folding, no normalization), as the kernel names files.
/// A match costs at most (pattern length × path length) steps, whatever the pattern: a `*` that fails to match is
/// never retried from an earlier one (`*a*a*a*…b` against `aaaa…` stays quadratic at worst, never exponential).
package struct PathGlob: Sendable, Hashable, CustomStringConvertible {
    /// The pattern as written.
    package let pattern: String
    /// What matches a member by the rules above: the pattern's components, with a `**` before them for a pattern
    /// that applies at any depth, and one after them for what lies inside a matching folder.
    private let segments: [Segment]
    /// For a trailing `/`: the pattern's own components, which a folder member must match itself (`segments` then
    /// asks for at least one component inside the folder). nil without one.
    private let folderSegments: [Segment]?

    /// The longest pattern accepted, in bytes: a member path has at most 4095, and a pattern much longer than any
    /// path it could match is a mistake that would only make every member's test slower.
    package static let maximumBytes = 4096

    package init(_ pattern: String) throws(PathGlobError) {
        self.pattern = pattern
        var parser = Parser(pattern)
        let parsed = try parser.parse()
        let own = (parsed.anchored ? [] : [Segment.anyComponents]) + parsed.segments
        if parsed.foldersOnly {
            segments = own + [.name([.anyRun]), .anyComponents]
            folderSegments = own
        } else {
            segments = own + [.anyComponents]
            folderSegments = nil
        }
    }

    package var description: String { pattern }

    /// Whether the member at `path` (after `strip`; `isFolder`: a folder member) is matched: the pattern matches the
    /// path itself, or one of the folders it lies in.
    package func matches(_ path: String, isFolder: Bool = false) -> Bool {
        matches(components: Self.components(of: path), isFolder: isFolder)
    }

    /// `path` cut into the components `matches(components:isFolder:)` takes.
    static func components(of path: String) -> [[Unicode.Scalar]] {
        path.split(separator: "/", omittingEmptySubsequences: true).map { Array($0.unicodeScalars) }
    }

    func matches(components: [[Unicode.Scalar]], isFolder: Bool) -> Bool {
        if Self.match(segments, components) { return true }
        guard isFolder, let folderSegments else { return false }
        return Self.match(folderSegments, components)
    }

    package static func == (a: PathGlob, b: PathGlob) -> Bool { a.pattern == b.pattern }
    package func hash(into hasher: inout Hasher) { hasher.combine(pattern) }

    // MARK: Matching

    /// One component of a pattern.
    fileprivate enum Segment: Sendable {
        /// `**`: zero or more whole components.
        case anyComponents
        /// One component, matched by these tokens.
        case name([Token])
    }

    fileprivate enum Token: Sendable {
        case scalar(Unicode.Scalar)
        /// `?`
        case anyScalar
        /// `*`
        case anyRun
        /// `[...]`: `ranges` inclusive; `negated` for `[!...]`/`[^...]`.
        case set(ranges: [ClosedRange<Unicode.Scalar>], negated: Bool)

        func accepts(_ scalar: Unicode.Scalar) -> Bool {
            switch self {
            case .scalar(let expected): scalar == expected
            case .anyScalar: true
            case .anyRun: true
            case .set(let ranges, let negated): ranges.contains { $0.contains(scalar) } != negated
            }
        }
    }

    /// The classic wildcard walk with one resumption point, used at both levels: components against segments
    /// (where `**` is the star) and characters against tokens (where `*` is). When an element after a star fails,
    /// the walk resumes just after that star with one more item consumed by it; an earlier star is never revisited,
    /// since the later star can absorb whatever the earlier one would give up. So a walk is at most
    /// (pattern elements × items) steps.
    private static func wildcardWalk<Element, Item>(
        _ pattern: [Element], _ items: [Item], isStar: (Element) -> Bool,
        matchesOne: (Element, Item) -> Bool
    ) -> Bool {
        var p = 0, i = 0
        var resume: (pattern: Int, item: Int)?
        while i < items.count {
            if p < pattern.count, isStar(pattern[p]) {
                p += 1
                resume = (p, i)
            } else if p < pattern.count, matchesOne(pattern[p], items[i]) {
                p += 1
                i += 1
            } else if let star = resume {
                resume = (star.pattern, star.item + 1)
                p = star.pattern
                i = star.item + 1
            } else {
                return false
            }
        }
        while p < pattern.count, isStar(pattern[p]) { p += 1 }
        return p == pattern.count
    }

    private static func match(_ segments: [Segment], _ components: [[Unicode.Scalar]]) -> Bool {
        wildcardWalk(
            segments, components, isStar: { if case .anyComponents = $0 { true } else { false } },
            matchesOne: { segment, component in
                guard case .name(let tokens) = segment else { return false }
                return matchName(tokens, component)
            })
    }

    private static func matchName(_ tokens: [Token], _ name: [Unicode.Scalar]) -> Bool {
        wildcardWalk(
            tokens, name, isStar: { if case .anyRun = $0 { true } else { false } },
            matchesOne: { $0.accepts($1) })
    }

    // MARK: Parsing

    private struct Parser {
        let text: String
        let scalars: [Unicode.Scalar]
        var position = 0

        init(_ text: String) {
            self.text = text
            self.scalars = Array(text.unicodeScalars)
        }

        mutating func parse() throws(PathGlobError) -> (segments: [Segment], anchored: Bool, foldersOnly: Bool) {
            guard !scalars.isEmpty else { throw error("it is empty") }
            guard text.utf8.count <= PathGlob.maximumBytes else {
                throw error("it is \(text.utf8.count) bytes long; a pattern has at most \(PathGlob.maximumBytes)")
            }
            if let nul = scalars.firstIndex(of: "\0") { throw error("it contains a NUL character", at: nul) }
            let leadingSlash = scalars[0] == "/"
            let trailingSlash = scalars.count > 1 && scalars[scalars.count - 1] == "/" && !isEscaped(scalars.count - 1)
            if leadingSlash { position = 1 }
            let end = trailingSlash ? scalars.count - 1 : scalars.count
            guard position < end else { throw error("it names no file or folder") }

            var segments: [Segment] = []
            var sawInnerSlash = false
            while true {
                segments.append(try segment(until: end))
                guard position < end else { break }
                // At a `/`: another component follows.
                sawInnerSlash = true
                position += 1
            }
            return (segments, leadingSlash || sawInnerSlash, trailingSlash)
        }

        /// Whether the scalar at `index` follows an odd number of `\`s.
        private func isEscaped(_ index: Int) -> Bool {
            var backslashes = 0
            var before = index - 1
            while before >= 0 && scalars[before] == "\\" {
                backslashes += 1
                before -= 1
            }
            return backslashes % 2 == 1
        }

        /// One component, from `position` up to the next unescaped `/` or `end`.
        private mutating func segment(until end: Int) throws(PathGlobError) -> Segment {
            let start = position
            var tokens: [Token] = []
            while position < end && scalars[position] != "/" {
                let scalar = scalars[position]
                switch scalar {
                case "*":
                    if position + 1 < end && scalars[position + 1] == "*" {
                        let wholeComponent = position == start && (position + 2 == end || scalars[position + 2] == "/")
                        guard wholeComponent else {
                            throw error(
                                "\"**\" stands for any folders only as a whole component (as in \"**/x\", \"a/**\", "
                                    + "\"a/**/b\"); within a name, use \"*\"", at: position)
                        }
                        position += 2
                        return .anyComponents
                    }
                    // `**` is handled above, so a run of stars here is a single one.
                    tokens.append(.anyRun)
                    position += 1
                case "?":
                    tokens.append(.anyScalar)
                    position += 1
                case "[":
                    tokens.append(try set(end: end))
                case "\\":
                    tokens.append(.scalar(try escaped()))
                default:
                    tokens.append(.scalar(scalar))
                    position += 1
                }
            }
            if position == start { throw error("it has an empty component (\"//\")", at: start) }
            if tokens.count == 1, case .scalar(".") = tokens[0] {
                throw error("\".\" as a component matches nothing: a member's path has none", at: start)
            }
            if tokens.count == 2, case .scalar(".") = tokens[0], case .scalar(".") = tokens[1] {
                throw error("\"..\" as a component matches nothing: a member's path has none", at: start)
            }
            return .name(tokens)
        }

        /// `[...]` from the `[` at `position`; `position` ends after the `]`.
        private mutating func set(end: Int) throws(PathGlobError) -> Token {
            let open = position
            position += 1
            var negated = false
            if position < end, scalars[position] == "!" || scalars[position] == "^" {
                negated = true
                position += 1
            }
            var ranges: [ClosedRange<Unicode.Scalar>] = []
            var first = true
            while true {
                guard position < end, scalars[position] != "/" else {
                    throw error("\"[\" is not closed by \"]\" (write \"\\[\" for the character itself)", at: open)
                }
                if scalars[position] == "]" && !first { break }
                first = false
                let low = try setMember()
                if position + 1 < end, scalars[position] == "-", scalars[position + 1] != "]" {
                    let dash = position
                    position += 1
                    guard position < end, scalars[position] != "/" else { continue }
                    let high = try setMember()
                    guard low <= high else {
                        throw error(
                            "the range \(Quoted.text("\(low)-\(high)")) is reversed (write "
                                + "\(Quoted.text("\(high)-\(low)")))", at: dash)
                    }
                    ranges.append(low...high)
                } else {
                    ranges.append(low...low)
                }
            }
            position += 1
            return .set(ranges: ranges, negated: negated)
        }

        /// One character of a set, `\`-escaped or not.
        private mutating func setMember() throws(PathGlobError) -> Unicode.Scalar {
            if scalars[position] == "\\" { return try escaped() }
            position += 1
            return scalars[position - 1]
        }

        /// The character after the `\` at `position`; `position` ends after it.
        private mutating func escaped() throws(PathGlobError) -> Unicode.Scalar {
            guard position + 1 < scalars.count else {
                throw error("it ends with \"\\\", which escapes nothing", at: position)
            }
            guard scalars[position + 1] != "/" else {
                throw error("\"/\" cannot be escaped: it always separates folders", at: position)
            }
            position += 2
            return scalars[position - 1]
        }

        private func error(_ message: String, at index: Int? = nil) -> PathGlobError {
            PathGlobError(message: message, position: index.map { $0 + 1 })
        }
    }
}

/// Why a pattern is not a `PathGlob`: the message, and the character (1-based) it is about, if one.
package struct PathGlobError: Error, Sendable, Hashable, CustomStringConvertible {
    package let message: String
    package let position: Int?

    /// The message, then the position when there is one: `it has an empty component ("//") (at character 3)`.
    package var description: String {
        guard let position else { return message }
        return "\(message) (at character \(position))"
    }
}

/// Which members of an archive an `ExtractRule` keeps: those any `include` pattern matches (all when there is
/// none), less those any `exclude` pattern matches. A folder a kept member lies in is made whether or not the
/// folder itself is kept.
package struct MemberSelection: Sendable {
    package let include: [PathGlob]
    package let exclude: [PathGlob]

    package init(include: [PathGlob], exclude: [PathGlob]) {
        self.include = include
        self.exclude = exclude
    }

    /// The rule's patterns, compiled; the loader has checked them, so this throws only for a rule made in code.
    package init(_ rule: ExtractRule) throws(PathGlobError) {
        var include: [PathGlob] = [], exclude: [PathGlob] = []
        for pattern in rule.include { include.append(try PathGlob(pattern)) }
        for pattern in rule.exclude { exclude.append(try PathGlob(pattern)) }
        self.init(include: include, exclude: exclude)
    }

    /// Whether every member is kept (no pattern at all): the unpacker can skip the tests.
    package var keepsEverything: Bool { include.isEmpty && exclude.isEmpty }

    package func keeps(_ path: String, isFolder: Bool = false) -> Bool {
        if keepsEverything { return true }
        let components = PathGlob.components(of: path)
        return (include.isEmpty || include.contains { $0.matches(components: components, isFolder: isFolder) })
            && !exclude.contains { $0.matches(components: components, isFolder: isFolder) }
    }
}
