import ArgumentParser
import Haul
import HaulManifest

/// `--config`: haul's config file, which holds URL rewrites (mirrors, pull-through proxies; see `RewriteConfig`).
struct ConfigOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: ArgumentHelp(
        "haul's config file (URL rewrites). Default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config.yaml or "
            + "~/.config/haul/config.yaml when it exists.", valueName: "file"))
    var config: String?

    /// The config's rewrites. A config that cannot be read or is invalid is printed, every problem with its line
    /// and column, and the command exits 64 before the manifest is read or anything is touched.
    func rewrites() throws -> URLRewriter {
        guard let location = ConfigLocation.resolve(option: config, environment: Environment.current) else { return .none }
        do {
            return URLRewriter(try RewriteConfig.load(location))
        } catch {
            Output.errors(error.lines.map { TerminalText($0) })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
    }
}

/// `--netrc`: logins and passwords per host from the user's `.netrc` (see `Netrc`).
struct NetrcOptions: ParsableArguments {
    @Flag(name: .customLong("netrc"), help: ArgumentHelp(
        "Log in to each host with the login and password that $NETRC (else ~/.netrc) lists for it, to that host only "
            + "(as the manifest's netrc: true)."))
    var netrc = false

    /// The file's credentials when `--netrc` or the manifest asks for them; nil otherwise. A file that cannot be
    /// read (NETRC naming a missing one) or understood is printed with its line and column, and the command exits 64
    /// before any request.
    func credentials(manifestWants: Bool) throws -> Netrc? {
        guard netrc || manifestWants else { return nil }
        do {
            return try Netrc.load(environment: Environment.current)
        } catch {
            Output.errors([TerminalText(error.description)])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
    }
}
