import ArgumentParser
import Glibc
import Haul
import HaulStore

/// `--cache DIR` / `--no-cache` of `sync` and `plan`: which content cache a run uses, if any. Off unless asked
/// for, by the option or by `HAUL_CACHE` (what a CI job sets once for every step).
struct CacheOptions: ParsableArguments {
    @Option(
        name: .customLong("cache"),
        help: ArgumentHelp(
            "(sync, plan) Put pinned files in place from this content cache without a request, and add every verified pinned "
                + "download to it (or set HAUL_CACHE). The cache is untrusted: each file is verified as it is copied.",
            valueName: "dir"), completion: .directory)
    var cache: String?

    @Flag(name: .customLong("no-cache"), help: "(sync, plan) Use no content cache, even if HAUL_CACHE is set.")
    var noCache = false

    /// The cache this run uses: `--no-cache` wins, then `--cache`, then a non-empty `HAUL_CACHE`.
    func directory(environment: [String: String] = Environment.current) -> String? {
        guard !noCache else { return nil }
        if let cache, !cache.isEmpty { return cache }
        if let variable = environment["HAUL_CACHE"], !variable.isEmpty { return variable }
        return nil
    }
}

/// `haul cache info|gc`: looking after a content cache shared by many manifests and roots.
struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Inspect or trim the content cache that `sync --cache` uses.",
        discussion: """
            The cache folder holds verified files by digest: DIR/sha256/ab/abcdef… (algorithm, first two hex digits, \
            whole digest), DIR/tmp/ for insertions in progress, and the marker DIR/haul-cache that makes it a cache: \
            a folder holding anything else without that marker is refused (exit 64). Without --cache these commands \
            use $HAUL_CACHE, else $XDG_CACHE_HOME/haul, else ~/.cache/haul.
            Examples:
              haul cache info --cache /ci/cache/haul
              HAUL_CACHE=/ci/cache/haul haul cache gc --max-size 2G
            """,
        subcommands: [CacheInfoCommand.self, CacheGCCommand.self])
}

/// Where `haul cache …` looks: `--cache`, else the default directory (`ContentCache.defaultDirectory`).
struct CacheLocation: ParsableArguments {
    @Option(
        name: .customLong("cache"),
        help: ArgumentHelp(
            "The cache folder (default: $HAUL_CACHE, else $XDG_CACHE_HOME/haul, else ~/.cache/haul).", valueName: "dir"),
        completion: .directory)
    var cache: String?

    /// The folder, or exits 64 saying why there is none.
    func resolved() throws -> String {
        if let cache, !cache.isEmpty { return cache }
        guard let directory = ContentCache.defaultDirectory(environment: Environment.current) else {
            throw ValidationError("no cache folder: pass --cache DIR or set HAUL_CACHE (or HOME)")
        }
        return directory
    }

    /// The cache, or nil if its folder does not exist (an empty cache, for these commands). A folder that is not a
    /// cache (`ContentCache.Recognition`: `--cache ~` by mistake) is a usage error, exit 64, with nothing in it
    /// touched; any other failure to open it exits 1.
    func open() throws -> (path: String, cache: ContentCache?) {
        let path = try resolved()
        switch ContentCache.open(path, create: false) {
        case .success(let cache): return (path, cache)
        case .failure(.missing): return (path, nil)
        case .failure(let failure):
            if case .notACache = failure {
                Output.errors([TerminalText("error: \(StoreWording.sentence(failure)); nothing was read or removed")])
                throw ExitCode(ExitStatus.usage.rawValue)
            }
            Output.errors([TerminalText("error: \(StoreWording.sentence(failure))")])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }
}

struct CacheInfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info", abstract: "Print the cache folder, how many entries it holds and their total size.")

    @OptionGroup var location: CacheLocation

    @Flag(help: "One JSON object: {\"event\": \"cache\", \"directory\", \"entries\", \"bytes\"}.")
    var json = false

    func run() throws {
        let (path, cache) = try location.open()
        let entries = cache?.entries() ?? []
        let bytes = entries.reduce(Int64(0)) { $0 + $1.size }
        if json {
            Output.lines([
                TerminalText(
                    JSONValue.object([
                        ("event", .string("cache")), ("directory", .string(path)),
                        ("entries", .int(Int64(entries.count))),
                        ("bytes", .int(bytes)),
                    ]).encoded())
            ])
        } else {
            Output.lines([
                TerminalText("cache: \(path)\(cache == nil ? " (does not exist yet)" : "")"),
                TerminalText("entries: \(entries.count)"),
                TerminalText("size: \(ByteCount.format(bytes)) (\(bytes) bytes)"),
            ])
        }
    }
}

struct CacheGCCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Delete least recently used entries until the cache is at most --max-size.",
        discussion: """
            Entries are removed oldest first by mtime, which every hit renews; insertions in tmp/ older than an hour \
            (ones that crashed) are removed too. Only names of the forms the cache makes are touched. Safe while other \
            haul processes use the cache: one that finds an entry gone downloads the file.
            """)

    @OptionGroup var location: CacheLocation

    @Option(
        name: .customLong("max-size"),
        help: ArgumentHelp(
            "The most the entries may total (e.g. 500M, 2G).",
            valueName: "size"), transform: ByteSize.init(parsing:))
    var maxSize: ByteSize

    func run() throws {
        let (path, cache) = try location.open()
        guard let cache else {
            Output.lines([TerminalText("Nothing to remove: \(path) does not exist.")])
            return
        }
        let collection = cache.collect(maxBytes: maxSize.bytes)
        var lines = collection.staleTemporaries.map {
            TerminalText("removed \(ContentCache.temporaryFolder)/\($0) (stale)")
        }
        lines += collection.removed.map { TerminalText("removed \($0.relativePath) (\(ByteCount.format($0.size)))") }
        let freed = collection.removed.reduce(Int64(0)) { $0 + $1.size }
        let entries = collection.removed.count == 1 ? "entry" : "entries"
        let stale =
            collection.staleTemporaries.isEmpty ? "" : " and \(collection.staleTemporaries.count) stale temporary files"
        let remaining = "\(collection.remainingCount) (\(ByteCount.format(collection.remainingBytes)))"
        lines.append(
            TerminalText(
                "Removed \(collection.removed.count) \(entries) (\(ByteCount.format(freed)))\(stale); "
                    + "\(path) holds \(remaining), at most \(maxSize)."))
        Output.lines(lines)
        if !collection.failed.isEmpty {
            Output.errors(
                collection.failed.map {
                    TerminalText("error: cannot remove \($0.0.relativePath): \(StoreWording.reason($0.1))")
                })
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }
}
