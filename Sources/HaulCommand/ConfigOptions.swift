import ArgumentParser
import Haul
import HaulEngine
import HaulManifest

/// `--config`: haul's config file, which holds URL rewrites (mirrors, pull-through proxies; see `RewriteConfig`).
struct ConfigOptions: ParsableArguments {
    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "haul's config file (URL rewrites). Default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config.yaml or "
                + "~/.config/haul/config.yaml when it exists.", valueName: "file"), completion: .file())
    var config: String?

    /// The config's rewrites. A config that cannot be read or is invalid is printed, every problem with its line
    /// and column, and the command exits 64 before the manifest is read or anything is touched.
    func rewrites() throws -> URLRewriter {
        guard let location = ConfigLocation.resolve(option: config, environment: Environment.current) else {
            return .none
        }
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
    @Flag(
        name: .customLong("netrc"),
        help: ArgumentHelp(
            "(sync, add) Log in to each host with the login and password that $NETRC (else ~/.netrc) lists for it, to that host only "
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

/// What every request carries, and how it is retried, from the command line: over the manifest's own values, as
/// curl's options are over a config file's.
struct RequestOptions: ParsableArguments {
    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp(
            "(sync, add) 'Name: value': a header for each entry's url, over the manifest's of the same name (whose ${VAR} may "
                + "then be unset); like defaults.headers, never sent to a mirror or across a redirect to another origin. May be "
                + "given more than once.",
            valueName: "header"))
    var headers: [String] = []

    @Option(
        name: [.customShort("A"), .customLong("user-agent")],
        help: ArgumentHelp(
            "(sync, add) The User-Agent of every request (default: haul/VERSION).", valueName: "text"))
    var userAgent: String?

    @Option(
        help: ArgumentHelp(
            "(sync, add) Retries after the first attempt, per URL (0-100), over the manifest's retries.",
            valueName: "n"),
        transform: OptionValueError.wholeNumber(from: 0...100))
    var retries: Int?

    @Option(
        help: ArgumentHelp(
            "(sync, add) Stall window (e.g. 30s, 2m): an attempt that makes no progress for this long fails; over "
                + "the manifest's timeout.", valueName: "duration"),
        transform: RunDuration.init(parsing:))
    var timeout: RunDuration?

    @Option(
        name: .customLong("limit-rate"),
        help: ArgumentHelp(
            "(sync, add) Bytes per second for the whole run, all transfers together (e.g. 500K, 2.5M; K = 1024).",
            valueName: "rate"),
        transform: ByteSize.init(parsing:))
    var limitRate: ByteSize?

    @Option(
        help: ArgumentHelp(
            "(sync, add) Send every request through this proxy (http://[user:pass@]host:port), instead of the one "
                + "https_proxy, http_proxy or all_proxy names; \"\" for none.", valueName: "url"))
    var proxy: String?

    @Option(
        help: ArgumentHelp(
            "(sync, add) Hosts reached without the proxy, comma-separated (a name covers its subdomains; * for all), "
                + "instead of no_proxy.", valueName: "hosts"))
    var noproxy: String?

    @Option(
        name: .customLong("connect-timeout"),
        help: ArgumentHelp(
            "(sync, add) Time to connect (name lookup, TCP, TLS handshake) before an attempt fails (e.g. 5, 10s); the "
                + "transfer after that is bound by --timeout. (default: the stall window)", valueName: "duration"),
        transform: RunDuration.init(parsing:))
    var connectTimeout: RunDuration?

    @Option(
        name: .customLong("retry-on-http"),
        help: ArgumentHelp(
            "(sync, add) HTTP statuses to retry with backoff besides 408, 429 and 5xx (e.g. 403,404 or 400-404), with "
                + "each entry's retry_on.",
            valueName: "codes"), transform: HTTPStatusList.init(parsing:))
    var retryOnHTTP: HTTPStatusList?

    @Option(
        help: ArgumentHelp(
            "(sync, add) A client certificate (PEM) for servers that ask for one (mutual TLS); its key in it or in --key. "
                + "An entry's cert: wins for its url.",
            valueName: "file"))
    var cert: String?

    @Option(help: ArgumentHelp("(sync, add) The private key (PEM) of --cert's certificate.", valueName: "file"))
    var key: String?

    func validate() throws {
        if key != nil, cert == nil { throw ValidationError("--key needs --cert: the key of which certificate?") }
        for (what, option, path) in [("client certificate", "--cert", cert), ("private key", "--key", key)] {
            guard let path, let problem = ReadableFile.problem(path) else { continue }
            Output.errors([
                "error: \(what) \(String(reflecting: path)) (from \(option)) cannot be used: \(problem); "
                    + "give a readable PEM file"
            ])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        if let userAgent, userAgent.utf8.contains(where: { $0 == 0x0d || $0 == 0x0a || $0 == 0 }) {
            throw ValidationError("--user-agent must be one line")
        }
        _ = try commandLineHeaders()
    }

    /// The `-H` headers, parsed; a malformed one is a usage error naming it.
    func commandLineHeaders() throws -> [HeaderField] {
        do {
            return try headers.map { text throws(HeaderLineError) in try HeaderRules.commandLineHeader(text) }
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The names of the `-H` headers, which stand in for the manifest's of the same name when the manifest is read
    /// (one whose `${VAR}` is unset is then no error). Validated with the other options already: a malformed `-H`
    /// never reaches this.
    var standInHeaderNames: Set<String> {
        Set((try? commandLineHeaders())?.map(\.name) ?? [])
    }

    func apply(to options: inout SyncOptions) throws {
        options.commandLineHeaders = try commandLineHeaders()
        options.userAgent = userAgent
        options.retries = retries
        options.stallTimeout = timeout?.seconds
        options.maxBytesPerSecond = limitRate?.bytes
        options.connection = ConnectionSettings(
            proxy: proxy, noProxy: noproxy, connectTimeout: connectTimeout?.seconds,
            clientCertificate: cert.map { ClientCertificate(certificate: $0, key: key) })
        options.transientStatuses = retryOnHTTP?.statuses ?? []
    }
}

/// `--retry-on-http 403,404` or `400-404`: HTTP statuses (100-599), one by one or as ranges, read as the manifest's
/// `retry_on:` is.
struct HTTPStatusList {
    var statuses: Set<Int>

    /// The argument parser prints what is thrown after "The value '…' is invalid for '--retry-on-http <codes>': ".
    init(parsing argument: String) throws(OptionValueError) {
        do {
            statuses = Set(try ScalarRules.httpStatuses(argument))
        } catch {
            throw OptionValueError(error.description)
        }
    }
}
