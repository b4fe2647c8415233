import HaulDigest
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HaulFileSystem

/// Entry point for reading manifests: bytes → YAML events → validated `Manifest`, or every problem at once.
package enum ManifestLoader {
    /// The largest manifest haul reads, `${VAR}` expansions included: 25 times the 100,000-entry manifests haul is
    /// measured on, and a bound on what a hostile one (or `/dev/zero`) can make it read and hold.
    package static let maximumBytes = 256 << 20
    static let maximumSizeText = "256 MiB"

    /// The path that means standard input.
    static let standardInputPath = "-"
    /// How messages name standard input.
    package static let standardInputName = "<stdin>"

    /// Reads and validates. `path` as the user gave it (used in messages); relative paths resolve against the
    /// process cwd; `-` reads standard input.
    ///
    /// `root` is relative to the manifest's folder. A manifest that has none (standard input, a pipe such as
    /// `<(…)`, anything else that is not a regular file, or a name for a descriptor such as `/dev/stdin` even when
    /// the shell redirected a file there) takes the current directory instead: the lexical folder of `/dev/fd/63`
    /// is no place to write files. `root` (the command line's `--root`) replaces the manifest's, and is relative to
    /// the current directory, as any path on a command line.
    ///
    /// `commandLineHeaders`: the names of the `-H` headers, which stand in for the manifest's of the same name: one
    /// of those whose `${VAR}` is unset is no error, since its value would never be sent.
    package static func load(
        path: String, environment: [String: String], root: String? = nil,
        commandLineHeaders: Set<String> = []
    ) throws(DiagnosticsError) -> Manifest {
        try load(read(path: path, root: root), environment: environment, commandLineHeaders: commandLineHeaders)
    }

    /// The manifest and where it came from, not yet validated: a run that settled this manifest before
    /// looks no further (`ManifestFingerprint`); `load(_:environment:commandLineHeaders:)` validates them.
    package static func read(path: String, root: String? = nil) throws(DiagnosticsError) -> ManifestInput {
        let isStandardInput = path == standardInputPath
        let fileName = isStandardInput ? standardInputName : path
        let failure = { (message: String) in DiagnosticsError(file: fileName, message: message) }
        if let root, root.isEmpty || root.utf8.contains(0) { throw failure("--root: expected a folder path") }
        do throws(ReadFailure) {
            let source = try ManifestSource.read(isStandardInput ? nil : path)
            let overridingRoot = try root.map { root throws(ReadFailure) in
                PathRules.resolve(root, against: root.hasPrefix("/") ? "/" : try currentDirectory())
            }
            return ManifestInput(
                content: source.content, fileName: fileName, directory: source.directory,
                path: source.ownPath, overridingRoot: overridingRoot)
        } catch {
            throw failure(error.message)
        }
    }

    /// Validates what `read` read. With `fingerprinting`, a manifest read from its own file gets its `fingerprint`
    /// (what a sync records a settled snapshot under; a command that records none need not hash the bytes).
    /// `early`: told the entries as they are read (`EarlyEntries`), on this thread.
    package static func load(
        _ input: ManifestInput, environment: [String: String], commandLineHeaders: Set<String> = [],
        fingerprinting: Bool = true, early: EarlyEntries.Handler? = nil
    ) throws(DiagnosticsError) -> Manifest {
        // The pass that validates hashes what it reads: the fingerprint is that of the text validated.
        let source = input.source(hashing: fingerprinting)
        var manifest = try parse(
            source, size: input.size, fileName: input.fileName, manifestDirectory: input.directory,
            environment: environment, pipelined: input.size >= ReadingPipeline.minimumBytes,
            commandLineHeaders: commandLineHeaders, early: early)
        if let overridingRoot = input.overridingRoot { manifest.root = overridingRoot }
        if fingerprinting {
            let validated: Digest? = if case .file(let reading) = source { reading.digest() } else { nil }
            manifest.fingerprint = ManifestFingerprint.of(
                input, bytesDigest: validated, variables: manifest.environmentNames,
                environment: environment, commandLineHeaders: commandLineHeaders)
        }
        return manifest
    }

    /// Same from bytes; `manifestDirectory` is the absolute folder `root` is relative to.
    package static func parse(
        bytes: [UInt8], fileName: String, manifestDirectory: String,
        environment: [String: String], commandLineHeaders: Set<String> = []
    ) throws(DiagnosticsError) -> Manifest {
        try parse(
            bytes: bytes, fileName: fileName, manifestDirectory: manifestDirectory, environment: environment,
            pipelined: bytes.count >= ReadingPipeline.minimumBytes, commandLineHeaders: commandLineHeaders)
    }

    /// `pipelined`: libyaml on a second thread (see `ReadingPipeline`); tests choose, to compare both ways.
    static func parse(
        bytes: [UInt8], fileName: String, manifestDirectory: String, environment: [String: String],
        pipelined: Bool, commandLineHeaders: Set<String> = [],
        early: EarlyEntries.Handler? = nil
    ) throws(DiagnosticsError) -> Manifest {
        try parse(
            .bytes(bytes), size: bytes.count, fileName: fileName, manifestDirectory: manifestDirectory,
            environment: environment, pipelined: pipelined, commandLineHeaders: commandLineHeaders, early: early)
    }

    /// `size`: the text's size in bytes (a file's, as it was opened), which sizes the model's tables.
    private static func parse(
        _ source: YAMLSource, size: Int, fileName: String, manifestDirectory: String,
        environment: [String: String], pipelined: Bool, commandLineHeaders: Set<String>,
        early: EarlyEntries.Handler? = nil
    ) throws(DiagnosticsError) -> Manifest {
        guard size <= maximumBytes else { throw DiagnosticsError(file: fileName, message: tooLarge) }
        var directory = manifestDirectory
        if !directory.hasPrefix("/"), let cwd = try? currentDirectory() {
            directory = cwd + "/" + directory
        }
        // Entries run 100 to 300 bytes; overestimating only reserves address space.
        var validator = ManifestValidator(
            fileName: fileName, manifestDirectory: PathRules.normalizeAbsolute(directory),
            environment: environment, expectedEntries: size / 100,
            expansionBudget: maximumBytes - size,
            commandLineHeaders: Set(commandLineHeaders.map(HeaderRules.canonicalName)))
        validator.early = early
        var readerDiagnostics = DiagnosticCollector(file: fileName)
        // `files:` items are validated by `validator` while the reader streams them.
        let document =
            pipelined
            ? ReadingPipeline.read(source, fileName: fileName, diagnostics: &readerDiagnostics, validator: &validator)
            : YAMLReader.read(source, diagnostics: &readerDiagnostics, sink: &validator)
        guard let document else {
            // A syntax error (or no document at all): what the entries said about a half-read file is beside the point.
            throw DiagnosticsError(diagnostics: readerDiagnostics.inFileOrder, omitted: readerDiagnostics.omittedCount)
        }
        validator.absorb(readerDiagnostics)
        guard let manifest = validator.validate(document) else {
            let findings = validator.allFindings
            throw DiagnosticsError(diagnostics: findings.inFileOrder, omitted: findings.omittedCount)
        }
        return manifest
    }

    package static let tooLarge = "the manifest is larger than \(maximumSizeText), the most haul reads"

    // MARK: File system

    struct ReadFailure: Error {
        var message: String
    }

    /// A manifest and the folder its `root` is relative to.
    private struct ManifestSource {
        var content: ManifestInput.Content
        var directory: String
        /// The absolute path, lexically normalized, of a regular file named by its own name (not standard input or
        /// a descriptor's name): a later run reads the same file by the same name. Such a file is read as it is
        /// needed (`ManifestFile`); any other input is read whole at once, as it can be read only once.
        var ownPath: String?

        /// `path` nil: standard input.
        static func read(_ path: String?) throws(ReadFailure) -> ManifestSource {
            guard let path else {
                return ManifestSource(content: .bytes(try readAll(STDIN_FILENO)), directory: try currentDirectory())
            }
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw ReadFailure(message: "cannot read manifest: \(Errno(errno))") }
            var status = stat()
            let isRegular = fstat(descriptor, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
            let absolute: String
            do throws(ReadFailure) {
                if isRegular, status.st_size > maximumBytes { throw ReadFailure(message: tooLarge) }
                absolute = PathRules.normalizeAbsolute(path.hasPrefix("/") ? path : try currentDirectory() + "/" + path)
            } catch {
                close(descriptor)
                throw error
            }
            guard isRegular, !namesADescriptor(absolute) else {
                defer { close(descriptor) }
                let bytes = try readAll(descriptor, sizeHint: isRegular ? Int(status.st_size) : 0)
                return ManifestSource(content: .bytes(bytes), directory: try currentDirectory())
            }
            return ManifestSource(
                content: .file(ManifestFile(descriptor: descriptor, size: Int(status.st_size))),
                directory: parentDirectory(of: absolute), ownPath: absolute)
        }
    }

    /// `/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N` and the like: another name for an open descriptor, which
    /// leads to a regular file when the shell redirected one there, and whose folder is not the file's.
    static func namesADescriptor(_ absolute: String) -> Bool {
        let folder = parentDirectory(of: absolute)
        return absolute == "/dev/stdin" || folder == "/dev/fd"
            || (folder.hasPrefix("/proc/") && folder.hasSuffix("/fd"))
    }

    /// Whether `path` (as given on a command line) is no file's own name: `-` (standard input) or a name for an
    /// open descriptor. `haul add`, which replaces the manifest it reads, needs the file's own name.
    package static func isStandardInputOrDescriptor(_ path: String) -> Bool {
        if path == standardInputPath { return true }
        let absolute = path.hasPrefix("/") ? path : (try? currentDirectory()).map { $0 + "/" + path }
        return absolute.map { namesADescriptor(PathRules.normalizeAbsolute($0)) } ?? false
    }

    /// Lexical parent of an absolute path: the manifest's folder without resolving symlinks.
    static func parentDirectory(of absolutePath: String) -> String {
        let normalized = PathRules.normalizeAbsolute(absolutePath)
        guard let slash = normalized.lastIndex(of: "/"), slash != normalized.startIndex else { return "/" }
        return String(normalized[..<slash])
    }

    private static func currentDirectory() throws(ReadFailure) -> String {
        guard let buffer = getcwd(nil, 0) else {
            throw ReadFailure(message: "cannot determine the current directory: \(Errno(errno))")
        }
        defer { free(buffer) }
        return String(cString: buffer)
    }

    /// Everything up to end of file, or a failure as soon as there is more than `maximumBytes`.
    private static func readAll(_ descriptor: Int32, sizeHint: Int = 0) throws(ReadFailure) -> [UInt8] {
        switch BoundedRead.all(descriptor, limit: maximumBytes, sizeHint: sizeHint) {
        case .success(let bytes): return bytes
        case .failure(.tooLarge): throw ReadFailure(message: tooLarge)
        case .failure(.system(let code)): throw ReadFailure(message: "cannot read manifest: \(Errno(code))")
        }
    }

}
