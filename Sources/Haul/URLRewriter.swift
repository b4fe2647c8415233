import HaulEngine
import HaulManifest

/// The config's URL rewrites (`RewriteConfig`), applied to an entry's URLs when its transfer request is made:
/// only entries being fetched pay for them, so a no-op of 100,000 entries costs nothing more.
///
/// Each URL of an entry (`url`, then each mirror) is rewritten on its own by the first rule that matches it, in
/// place. The originals of rules with `fallback: original` follow all of them, in the same order. The headers a
/// manifest scopes to `url`'s origin go to `url`'s rewrite only when its rule says `headers: forward` or the
/// rewrite keeps that origin; `url` itself, as a fallback, gets them as it always does; mirrors never do.
package struct URLRewriter: Sendable {
    package let rules: [RewriteRule]

    package init(_ config: RewriteConfig = .empty) {
        rules = config.rules
    }

    package init(rules: [RewriteRule]) {
        self.rules = rules
    }

    package static let none = URLRewriter()

    package var isEmpty: Bool { rules.isEmpty }

    /// One place an entry's file is fetched from.
    package struct Source: Sendable, Equatable {
        /// What goes to the network (environment values expanded). Never print it.
        package var url: String
        /// What messages show: the manifest's template, or the rewrite of it, with userinfo and values from the
        /// environment hidden.
        package var displayURL: String
        /// Index in the entry's `sources` of the URL this one is, or was rewritten from.
        package var original: Int
        /// The original URL's display form, when this source is a rewrite of it.
        package var rewrittenFrom: String?
        /// Whether the manifest's headers go with this source.
        package var sendsHeaders: Bool
        /// Text that must never be shown (values from the environment in the URL, a rule's userinfo).
        package var secrets: [String]
    }

    /// The entry's sources in the order they are tried, rewritten.
    package func sources(of entry: FileEntry) -> [Source] { sources(of: entry.sources) }

    /// `urls` (a primary URL, then its mirrors) as sources, rewritten.
    package func sources(of urls: [TemplatedString]) -> [Source] {
        var sources: [Source] = []
        sources.reserveCapacity(urls.count)
        var fallbacks: [Source] = []
        for (index, url) in urls.enumerated() {
            let asWritten = Source(
                url: url.expanded, displayURL: url.description, original: index, rewrittenFrom: nil,
                sendsHeaders: index == 0, secrets: url.environmentValues)
            guard let (rule, rewritten) = rewrite(url.expanded), rewritten != url.expanded else {
                sources.append(asWritten)
                continue
            }
            sources.append(
                Source(
                    url: rewritten, displayURL: Self.display(rewritten, by: rule, of: url), original: index,
                    rewrittenFrom: url.description,
                    sendsHeaders: index == 0 && (rule.forwardsHeaders || Self.sameOrigin(rewritten, url.expanded)),
                    secrets: url.environmentValues + rule.secrets))
            if rule.fallsBackToOriginal { fallbacks.append(asWritten) }
        }
        for fallback in fallbacks where !sources.contains(where: { $0.url == fallback.url }) {
            sources.append(fallback)
        }
        return sources
    }

    /// The URL of `sources(of: entry)[index]`, nil when there is no such source.
    package func url(of entry: FileEntry, source index: Int) -> String? {
        if rules.isEmpty { return entry.sources.indices.contains(index) ? entry.sources[index].expanded : nil }
        let sources = sources(of: entry)
        return sources.indices.contains(index) ? sources[index].url : nil
    }

    /// The first rule matching `url` and what it makes of it.
    package func rewrite(_ url: String) -> (rule: RewriteRule, url: String)? {
        for rule in rules {
            if let rewritten = rule.rewrite(url) { return (rule, rewritten) }
        }
        return nil
    }

    /// Same scheme, host and port, as libcurl parses them: headers may stay with such a rewrite.
    static func sameOrigin(_ a: String, _ b: String) -> Bool {
        guard let first = URLOrigin(a), let second = URLOrigin(b) else { return false }
        return first == second
    }

    /// A rewritten URL as messages may show it. A prefix rule applied to the template when the template itself
    /// starts with the prefix (`${VAR}`s then stay as written); otherwise every value from the environment is
    /// replaced by `***`. Userinfo is redacted either way.
    static func display(_ rewritten: String, by rule: RewriteRule, of original: TemplatedString) -> String {
        guard !original.environmentValues.isEmpty else { return Redaction.redactingUserinfo(rewritten) }
        if case .prefix(let prefix) = rule.pattern, original.template.utf8.starts(with: prefix.utf8) {
            let rest = String(decoding: original.template.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
            return Redaction.redactingUserinfo(rule.replacement.text + rest)
        }
        var scrubbed = rewritten
        // Longest first: a value that contains another is hidden whole.
        for secret in original.environmentValues.sorted(by: { $0.utf8.count > $1.utf8.count }) {
            scrubbed = scrubbed.replacing(secret, with: "***")
        }
        return Redaction.redactingUserinfo(scrubbed)
    }
}
