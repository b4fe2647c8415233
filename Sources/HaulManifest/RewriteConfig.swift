#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HaulFileSystem

/// haul's config file: settings of a machine rather than of a manifest. Today it holds URL rewrites only,
/// which send a manifest's requests to a mirror or a pull-through proxy without editing the manifest:
///
/// ```yaml
/// rewrites:
///   - prefix: https://upstream.example/         # the URL starts with this text (bytes, case-sensitive)
///     to: https://cache.internal/upstream.example/
///     fallback: original    # optional: the original URL is tried last, after every other source
///     headers: forward      # optional: the manifest's headers for the upstream origin go to the new one too
///   - regex: '^https://github\.com/([^/]+)/(.*)$'   # must match the whole URL
///     to: 'https://mirror.internal/gh/$1/$2'
/// ```
///
/// Rules are tried in order and the first that matches rewrites the URL; each URL of an entry (`url`, each
/// mirror) is rewritten on its own. A `regex` is RE2's syntax without its Unicode classes (`LinearRegex`, matched
/// in time linear in the URL, whatever the pattern), matched against the whole (expanded) URL; its `to` may use `$1`…`$9` for the groups and `$$` for a `$`. A `prefix` rule's `to` is
/// literal text, followed by what came after the prefix. Every `to` must start with `http://` or `https://`:
/// nothing else can come out of a rewrite. Rewriting an `https` URL to `http` is allowed (the user chose it);
/// redirects still cannot downgrade.
///
/// Values only: reading the file is the one thing here that touches the system.
package struct RewriteConfig: Sendable {
    /// The file as the user named it, for messages; nil for no file.
    package var file: String?
    package var rules: [RewriteRule]

    package init(file: String? = nil, rules: [RewriteRule] = []) {
        self.file = file
        self.rules = rules
    }

    /// No file, or no rules in it.
    package static let empty = RewriteConfig()

    /// A config file is a few lines; anything much larger is a mistake (or `/dev/zero`).
    package static let maximumBytes = 1 << 20

    /// Keys of the file, and of one rule.
    static let topLevelKeys = ["rewrites"]
    static let ruleKeys = ["prefix", "regex", "to", "fallback", "headers"]

    /// Reads `location`'s file. A missing file is no config unless the user named it (`--config`, `HAUL_CONFIG`).
    package static func load(_ location: ConfigLocation) throws(DiagnosticsError) -> RewriteConfig {
        let bytes: [UInt8]
        switch readFile(location.path) {
        case .success(let read):
            bytes = read
        case .failure(let failure):
            if failure.isMissing, !location.required { return .empty }
            throw DiagnosticsError(file: location.path, message: failure.message)
        }
        return try parse(bytes: bytes, fileName: location.path)
    }

    /// Parses and checks every rule; on failure, every problem at once, each with its line and column.
    package static func parse(bytes: [UInt8], fileName: String) throws(DiagnosticsError) -> RewriteConfig {
        guard bytes.count <= maximumBytes else {
            throw DiagnosticsError(file: fileName, message: "the config file is larger than 1 MiB")
        }
        var diagnostics = DiagnosticCollector(file: fileName)
        var sink = IgnoringSink()
        guard let document = YAMLReader.read(.bytes(bytes), diagnostics: &diagnostics, sink: &sink) else {
            // Nothing but comments (or nothing at all): no rules.
            if diagnostics.errorCount == 1, diagnostics.inFileOrder.first?.message == YAMLReader.emptyDocumentMessage {
                return RewriteConfig(file: fileName)
            }
            throw DiagnosticsError(diagnostics: diagnostics.inFileOrder, omitted: diagnostics.omittedCount)
        }
        var reader = ConfigReader(document: document, diagnostics: diagnostics)
        let rules = reader.read()
        guard !reader.diagnostics.hasErrors else {
            throw DiagnosticsError(
                diagnostics: reader.diagnostics.inFileOrder, omitted: reader.diagnostics.omittedCount)
        }
        return RewriteConfig(file: fileName, rules: rules)
    }

    // MARK: Reading the file

    private struct ReadFailure: Error {
        var message: String
        var isMissing: Bool
    }

    private static func readFile(_ path: String) -> Result<[UInt8], ReadFailure> {
        BoundedRead.file(path, limit: maximumBytes).mapError { failure in
            switch failure {
            case .tooLarge: ReadFailure(message: "the config file is larger than 1 MiB", isMissing: false)
            case .system(let code):
                ReadFailure(message: "cannot read the config file: \(Errno(code))", isMissing: failure.isMissing)
            }
        }
    }
}

/// Where haul's config file is, and whether it must be there.
package struct ConfigLocation: Sendable, Equatable {
    package var path: String
    /// The user named it (`--config`, `HAUL_CONFIG`): a missing file is an error. The default file is read only
    /// if it exists.
    package var required: Bool

    package init(path: String, required: Bool) {
        self.path = path
        self.required = required
    }

    /// `--config`, else `HAUL_CONFIG`, else `$XDG_CONFIG_HOME/haul/config.yaml` (an absolute `XDG_CONFIG_HOME`
    /// only, as the XDG spec says), else `~/.config/haul/config.yaml`; nil when there is no home to look in.
    /// Empty values count as unset.
    package static func resolve(option: String?, environment: [String: String]) -> ConfigLocation? {
        if let option { return ConfigLocation(path: option, required: true) }
        if let named = environment["HAUL_CONFIG"], !named.isEmpty { return ConfigLocation(path: named, required: true) }
        return BaseDirectory.config.path("haul/config.yaml", environment: environment).map {
            ConfigLocation(path: $0, required: false)
        }
    }
}

/// One rule: what it matches, what the URL becomes, and how the original is treated.
package struct RewriteRule: Sendable {
    package enum Pattern: Sendable {
        /// The URL starts with this text (compared as bytes).
        case prefix(String)
        /// The whole URL matches.
        case regex(RewriteRegex)
    }

    package var pattern: Pattern
    package var replacement: RewriteReplacement
    /// `fallback: original`: the original URL is tried after every rewritten source.
    package var fallsBackToOriginal: Bool
    /// `headers: forward`: headers the manifest scopes to the original URL's origin go to the rewritten one too.
    package var forwardsHeaders: Bool
    /// Where the rule starts in the config file.
    package var location: SourceLocation
    /// Text of `to` that must not be shown (its userinfo), for scrubbing libcurl's messages.
    package var secrets: [String]

    package init(
        pattern: Pattern, replacement: RewriteReplacement, fallsBackToOriginal: Bool = false,
        forwardsHeaders: Bool = false, location: SourceLocation = SourceLocation(line: 1, column: 1)
    ) {
        self.pattern = pattern
        self.replacement = replacement
        self.fallsBackToOriginal = fallsBackToOriginal
        self.forwardsHeaders = forwardsHeaders
        self.location = location
        secrets = RewriteReplacement.userinfo(of: replacement.text).map { [$0] } ?? []
    }

    /// What `url` becomes under this rule, or nil when the rule does not match it.
    package func rewrite(_ url: String) -> String? {
        switch pattern {
        case .prefix(let prefix):
            guard url.utf8.starts(with: prefix.utf8) else { return nil }
            return replacement.text + String(decoding: url.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
        case .regex(let regex):
            guard let groups = regex.regex.wholeMatch(url) else { return nil }
            var result = ""
            for part in replacement.parts {
                switch part {
                case .literal(let text): result += text
                case .group(let index):
                    // A group that took no part in the match (`(a)?`) is empty.
                    if index < groups.count, let text = groups[index] { result += text }
                }
            }
            return result
        }
    }
}

/// A compiled `regex:` with the text it was compiled from.
package struct RewriteRegex: Sendable {
    package let regex: LinearRegex
    package let pattern: String
    /// Capturing groups in `pattern`.
    package var groupCount: Int { regex.groupCount }

    package init(_ pattern: String) throws(LinearRegexError) {
        regex = try LinearRegex(pattern)
        self.pattern = pattern
    }
}

/// A rule's `to`. For a regex rule, `$1`…`$9` stand for its groups and `$$` for a `$`; a prefix rule's `to`
/// is one literal.
package struct RewriteReplacement: Sendable, Equatable {
    package enum Part: Sendable, Equatable {
        case literal(String)
        case group(Int)
    }

    /// As written.
    package var text: String
    package var parts: [Part]

    /// A literal (a prefix rule's `to`).
    package init(literal text: String) {
        self.text = text
        parts = [.literal(text)]
    }

    /// Reads `$n` and `$$`; a `$` followed by anything else is an error.
    init(template text: String) throws(RuleFailure) {
        self.text = text
        parts = []
        var literal = ""
        var scalars = text.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            guard scalar == "$" else {
                literal.unicodeScalars.append(scalar)
                continue
            }
            switch scalars.next() {
            case "$":
                literal += "$"
            case let digit? where ("1"..."9").contains(digit):
                if !literal.isEmpty { parts.append(.literal(literal)) }
                literal = ""
                parts.append(.group(Int(digit.value - UnicodeScalar("0").value)))
            default:
                throw RuleFailure(
                    "\"$\" must be followed by a group number 1-9, or by another \"$\" for a literal \"$\"")
            }
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
    }

    /// The highest group number used, 0 for none.
    var highestGroup: Int {
        parts.reduce(0) { if case .group(let index) = $1 { max($0, index) } else { $0 } }
    }

    /// `user:password` of `https://user:password@host/…`, if there is one.
    static func userinfo(of url: String) -> String? {
        let bytes = Array(url.utf8)
        let separator = Array("://".utf8)
        guard let start = bytes.indices.first(where: { bytes[$0...].starts(with: separator) }) else { return nil }
        let rest = String(decoding: bytes[(start + 3)...], as: UTF8.self)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@") else { return nil }
        let userinfo = String(authority[..<at])
        return userinfo.isEmpty ? nil : userinfo
    }

    /// Whether the text starts with `http://` or `https://` (any case) and has something after it.
    var startsWithHTTPScheme: Bool {
        let lowered = text.prefix(8).lowercased()
        let scheme = lowered.hasPrefix("http://") ? 7 : lowered.hasPrefix("https://") ? 8 : 0
        return scheme > 0 && text.unicodeScalars.count > scheme
    }
}

// MARK: - The walk over the YAML

/// The config has no `files:`; should it say `files:` anyway, its items are dropped here and the key is reported.
private struct IgnoringSink: YAMLEntrySink {
    mutating func consume(items: [YAMLItem], in document: YAMLDocument) {}
}

private struct ConfigReader {
    let document: YAMLDocument
    var diagnostics: DiagnosticCollector

    mutating func read() -> [RewriteRule] {
        guard let root = document.root else { return [] }
        switch document.kind(of: root) {
        case .mapping: break
        case .scalar where document.form(of: root) == .null: return []
        default:
            diagnostics.error(
                "expected a mapping with \"rewrites\", found \(document.describe(root))",
                at: document.location(of: root))
            return []
        }
        var rules: [RewriteRule] = []
        var seen = Set<String>()
        for (key, value) in document.pairs(of: root) {
            guard let name = keyName(key, allowed: RewriteConfig.topLevelKeys, path: nil, seen: &seen) else { continue }
            if name == "rewrites" { rules = readRules(value) }
        }
        return rules
    }

    private mutating func readRules(_ node: YAMLDocument.NodeID) -> [RewriteRule] {
        switch document.kind(of: node) {
        case .sequence: break
        case .scalar where document.form(of: node) == .null: return []
        default:
            diagnostics.error(
                "expected a list of rules, found \(document.describe(node))", at: document.location(of: node),
                keyPath: "rewrites")
            return []
        }
        var rules: [RewriteRule] = []
        for (index, item) in document.childIDs(of: node).enumerated() {
            if let rule = readRule(item, path: "rewrites[\(index)]") { rules.append(rule) }
        }
        return rules
    }

    private mutating func readRule(_ node: YAMLDocument.NodeID, path: String) -> RewriteRule? {
        let location = document.location(of: node)
        guard document.kind(of: node) == .mapping else {
            diagnostics.error(
                "expected a mapping (prefix or regex, and to), found \(document.describe(node))",
                at: location, keyPath: path)
            return nil
        }
        var values: [String: (text: String, node: YAMLDocument.NodeID, key: YAMLDocument.NodeID)] = [:]
        var seen = Set<String>()
        var valid = true
        for (key, value) in document.pairs(of: node) {
            guard let name = keyName(key, allowed: RewriteConfig.ruleKeys, path: path, seen: &seen) else {
                valid = false
                continue
            }
            guard let text = scalarText(value, path: "\(path).\(name)") else {
                valid = false
                continue
            }
            values[name] = (text, value, key)
        }

        var pattern: RewriteRule.Pattern?
        switch (values["prefix"], values["regex"]) {
        case (let prefix?, let regex?):
            let second = document.location(of: prefix.key) < document.location(of: regex.key) ? regex : prefix
            diagnostics.error(
                "a rule has prefix or regex, not both", at: document.location(of: second.key), keyPath: path)
            valid = false
        case (let prefix?, nil):
            if prefix.text.isEmpty {
                diagnostics.error(
                    "expected the text a URL starts with, found an empty string",
                    at: document.location(of: prefix.node), keyPath: "\(path).prefix")
                valid = false
            } else {
                pattern = .prefix(prefix.text)
            }
        case (nil, let regex?):
            do {
                pattern = .regex(try RewriteRegex(regex.text))
            } catch {
                diagnostics.error(
                    "invalid regular expression \(Quoted.text(regex.text)): \(error)",
                    at: document.location(of: regex.node), keyPath: "\(path).regex")
                valid = false
            }
        case (nil, nil):
            if valid {
                diagnostics.error(
                    "a rule needs prefix (text a URL starts with) or regex (matching the whole URL)",
                    at: location, keyPath: path)
            }
            valid = false
        }

        var replacement: RewriteReplacement?
        if let to = values["to"] {
            let toPath = "\(path).to"
            let at = document.location(of: to.node)
            do {
                let made =
                    if case .regex = pattern {
                        try RewriteReplacement(template: to.text)
                    } else {
                        RewriteReplacement(literal: to.text)
                    }
                if !made.startsWithHTTPScheme {
                    diagnostics.error(
                        "expected an http:// or https:// URL, found \(Quoted.text(Redaction.redactingUserinfo(to.text))) "
                            + "(a rewrite must produce an http or https URL)", at: at, keyPath: toPath)
                    valid = false
                } else if URLRules.containsSpaceOrControl(to.text) {
                    diagnostics.error(
                        "URL \(Quoted.text(Redaction.redactingUserinfo(to.text))) contains a space or control "
                            + "character (every URL rewritten to it would be refused)", at: at, keyPath: toPath)
                    valid = false
                } else if case .regex(let regex)? = pattern, made.highestGroup > regex.groupCount {
                    diagnostics.error(
                        "$\(made.highestGroup) refers to a group the regex does not have (it has "
                            + "\(regex.groupCount))", at: at, keyPath: toPath)
                    valid = false
                } else {
                    replacement = made
                }
            } catch {
                diagnostics.error(error.messages.joined(separator: "; "), at: at, keyPath: toPath)
                valid = false
            }
        } else {
            diagnostics.error(
                "a rule needs to (the URL, or start of the URL, requests go to instead)", at: location,
                keyPath: path)
            valid = false
        }

        let fallback = choice(values["fallback"], path: "\(path).fallback", yes: "original", no: "none")
        let headers = choice(values["headers"], path: "\(path).headers", yes: "forward", no: "none")
        guard valid, let pattern, let replacement, let fallback, let headers else { return nil }
        return RewriteRule(
            pattern: pattern, replacement: replacement, fallsBackToOriginal: fallback,
            forwardsHeaders: headers, location: location)
    }

    /// `yes` → true, `no` or absent → false, anything else reported (nil).
    private mutating func choice(
        _ value: (text: String, node: YAMLDocument.NodeID, key: YAMLDocument.NodeID)?,
        path: String, yes: String, no: String
    ) -> Bool? {
        guard let value else { return false }
        if value.text == yes { return true }
        if value.text == no { return false }
        diagnostics.error(
            "expected \(yes) or \(no), found \(Quoted.text(value.text))", at: document.location(of: value.node),
            keyPath: path)
        return nil
    }

    /// The key's name if it is a known, first-seen string key; otherwise reported, nil.
    private mutating func keyName(
        _ key: YAMLDocument.NodeID, allowed: [String], path: String?,
        seen: inout Set<String>
    ) -> String? {
        guard document.kind(of: key) == .scalar, document.form(of: key) != .null else {
            diagnostics.error(
                "expected a key name, found \(document.describe(key))", at: document.location(of: key),
                keyPath: path)
            return nil
        }
        let name = document.text(of: key)
        guard allowed.contains(name) else {
            let suggestion =
                KeySuggestion.closest(to: name, among: allowed).map { " (did you mean \(Quoted.text($0))?)" } ?? ""
            diagnostics.error(
                "unknown key \(Quoted.text(name))\(suggestion); expected one of "
                    + allowed.joined(separator: ", "), at: document.location(of: key), keyPath: path)
            return nil
        }
        guard seen.insert(name).inserted else {
            diagnostics.error("duplicate key \(Quoted.text(name))", at: document.location(of: key), keyPath: path)
            return nil
        }
        return name
    }

    private mutating func scalarText(_ node: YAMLDocument.NodeID, path: String) -> String? {
        guard document.kind(of: node) == .scalar, document.form(of: node) != .null else {
            diagnostics.error(
                "expected text, found \(document.describe(node))", at: document.location(of: node), keyPath: path)
            return nil
        }
        return document.text(of: node)
    }
}
