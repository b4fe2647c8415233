/// The XDG base directory rule, for the folders haul finds without being told (its config, its content cache):
/// `$XDG_…_HOME` when it is an absolute path (the spec ignores a relative one), else the conventional folder under
/// `$HOME`; nil when neither is set. Empty values count as unset.
package enum BaseDirectory: String, Sendable {
    case config = "XDG_CONFIG_HOME"
    case cache = "XDG_CACHE_HOME"

    /// Where the folder is under `$HOME` when its variable is not set.
    private var underHome: String {
        switch self {
        case .config: ".config"
        case .cache: ".cache"
        }
    }

    /// haul's folder `name` in this base directory, e.g. `~/.cache/haul`.
    package func path(_ name: String, environment: [String: String]) -> String? {
        if let base = environment[rawValue], base.hasPrefix("/") { return base + "/" + name }
        if let home = environment["HOME"], !home.isEmpty { return home + "/" + underHome + "/" + name }
        return nil
    }
}
