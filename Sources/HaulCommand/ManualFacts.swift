import Haul

/// What haul's exit statuses and environment variables mean, said once: `haul --help` prints these lists, and the
/// manual page (`scripts/manpage.py`, from `--experimental-dump-help`) turns the same two blocks into its EXIT STATUS
/// and ENVIRONMENT sections, so the two cannot disagree. Tests check that every `ExitStatus` and every variable the
/// sources read is listed.
enum ManualFacts {
    /// A term and what it means, one line of help each.
    struct Item {
        let term: String
        let meaning: String
    }

    static let exitStatuses: [Item] = [
        Item(
            term: "\(ExitStatus.success.rawValue)", meaning: "everything is in its desired state (plan: nothing to do)"),
        Item(
            term: "\(ExitStatus.entryFailed.rawValue)", meaning: "an entry failed, or is in place but not yet durable"),
        Item(term: "\(ExitStatus.changesPending.rawValue)", meaning: "plan found changes (a revalidation included)"),
        Item(
            term: "\(ExitStatus.invalidManifest.rawValue)",
            meaning: "the manifest is invalid or refused; nothing touched"),
        Item(term: "\(ExitStatus.rootBusy.rawValue)", meaning: "another haul is syncing the same root (see --wait)"),
        Item(
            term: "\(ExitStatus.unsafePrivateFolder.rawValue)",
            meaning: "root's .haul holds a symlink or a wrong kind of file"),
        Item(
            term: "\(ExitStatus.usage.rawValue)",
            meaning: "usage error, or a bad --config, --ca-file, cache folder, setting or ulimit"),
        Item(
            term: "\(ExitStatus.outputFailed.rawValue)",
            meaning: "standard output could not be written (disk full, I/O error)"),
        Item(term: "130, 143", meaning: "interrupted (SIGINT, SIGTERM); finished files stay"),
    ]

    static let environment: [Item] = [
        Item(term: "HAUL_CA_FILE", meaning: "CA bundle (PEM) to trust instead of the system's"),
        Item(term: "CURL_CA_BUNDLE", meaning: "the same, when HAUL_CA_FILE is unset"),
        Item(term: "SSL_CERT_FILE", meaning: "the same, when neither is set"),
        Item(term: "HAUL_CACHE", meaning: "content cache folder for sync (as --cache)"),
        Item(term: "HAUL_CONFIG", meaning: "config file of URL rewrites (as --config)"),
        Item(term: "HAUL_DURABILITY", meaning: "full (default) or none (as --durability)"),
        Item(term: "HAUL_SHARD", meaning: "K/N: only shard K of N (as --shard)"),
        Item(term: "NETRC", meaning: "the .netrc file --netrc reads (default ~/.netrc)"),
        Item(term: "XDG_CONFIG_HOME", meaning: "default config: $XDG_CONFIG_HOME/haul/config.yaml"),
        Item(term: "XDG_CACHE_HOME", meaning: "default cache for `haul cache`: $XDG_CACHE_HOME/haul"),
        Item(term: "HOME", meaning: "~/.config/haul and ~/.cache/haul when XDG_* is unset"),
        Item(term: "http_proxy, …", meaning: "https_proxy, all_proxy, no_proxy: proxies, as curl"),
        Item(term: "TMPDIR", meaning: "where haul add keeps its downloads until they are in place (default /tmp)"),
        Item(term: "PATH", meaning: "where add --trusted-key finds sqv, gpgv (absolute only)"),
        Item(term: "NO_COLOR", meaning: "when set, no colour"),
        Item(term: "CI", meaning: "when set, no colour and plain progress (no bar)"),
        Item(term: "TERM", meaning: "dumb: no colour; dumb or unset: no progress bar"),
        Item(term: "GITHUB_ACTIONS", meaning: "true: GitHub annotations (see --annotations)"),
        Item(term: "GITHUB_STEP_SUMMARY", meaning: "the file the run's summary table is appended to"),
        Item(term: "GITHUB_WORKSPACE", meaning: "annotations name the manifest from this folder"),
    ]

    /// A titled block of `items`, the terms aligned, as `--help` prints it (one item a line, within 80 columns).
    static func block(_ title: String, _ items: [Item]) -> String {
        let width = items.map(\.term.count).max() ?? 0
        return
            ([title + ":"]
            + items.map { item in
                "  " + item.term + String(repeating: " ", count: width - item.term.count + 2) + item.meaning
            }).joined(separator: "\n")
    }
}
