/// haul follows redirects itself, hop by hop, instead of letting libcurl do it: libcurl would forward custom
/// headers (an `Authorization` from the manifest among them) to whatever host a redirect names.
struct RedirectPolicy {
    var maxRedirects: Int

    enum Decision: Equatable {
        /// Follow; `sendHeaders` says whether the source's headers may go to the new URL (same origin only).
        case follow(url: String, sendHeaders: Bool)
        case refuse(RedirectRefusal)
    }

    /// - Parameters:
    ///   - current: the URL that answered with a redirect
    ///   - target: the absolute URL it points to
    ///   - source: the URL the source's headers were written for
    ///   - visited: URLs already requested in this attempt (a repeat is a loop)
    func decide(current: String, target: String, source: String, visited: Set<String>) -> Decision {
        guard visited.count <= maxRedirects else { return .refuse(.tooMany(limit: maxRedirects)) }
        guard let from = URLOrigin(current), let to = URLOrigin(target) else {
            return .refuse(.unparsableTarget)
        }
        guard to.scheme == "http" || to.scheme == "https" else {
            return .refuse(.unsupportedScheme(ServerText.quoted(to.scheme)))
        }
        if from.scheme == "https" && to.scheme == "http" { return .refuse(.downgrade) }
        guard !to.host.isEmpty else { return .refuse(.noHost) }
        if visited.contains(target) { return .refuse(.loop) }
        return .follow(url: target, sendHeaders: URLOrigin(source) == to)
    }
}
