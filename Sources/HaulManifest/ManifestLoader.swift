#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Entry point for reading manifests: bytes → YAML events → validated `Manifest`, or every problem at once.
public enum ManifestLoader {
    /// Reads and validates. `path` as the user gave it (used in messages); relative paths resolve against the process cwd.
    ///
    /// `rootSeen` is called with root's absolute path as soon as it has been read, typically long before the
    /// entries have been, so a caller can start work under root meanwhile; it is a hint, not the result (a
    /// manifest that turns out invalid, or names root twice, still fails as a whole). `entryRead` is likewise
    /// told each valid entry as soon as it has been read.
    public static func load(path: String, environment: [String: String], rootSeen: ((String) -> Void)? = nil,
                            entryRead: ((FileEntry) -> Void)? = nil) throws(ManifestError) -> Manifest {
        let bytes: [UInt8]
        let absolute: String
        do {
            absolute = path.hasPrefix("/") ? path : try currentDirectory() + "/" + path
            bytes = try readFile(path)
        } catch {
            throw ManifestError(diagnostics: [
                Diagnostic(severity: .error, file: path, location: nil, keyPath: nil, message: error.message),
            ])
        }
        return try parse(bytes: bytes, fileName: path, manifestDirectory: parentDirectory(of: absolute),
                         environment: environment, rootSeen: rootSeen, entryRead: entryRead)
    }

    /// Same from bytes; `manifestDirectory` is the absolute folder `root` is relative to.
    public static func parse(bytes: [UInt8], fileName: String, manifestDirectory: String,
                             environment: [String: String], rootSeen: ((String) -> Void)? = nil,
                             entryRead: ((FileEntry) -> Void)? = nil) throws(ManifestError) -> Manifest {
        try parse(bytes: bytes, fileName: fileName, manifestDirectory: manifestDirectory, environment: environment,
                  rootSeen: rootSeen, entryRead: entryRead,
                  pipelined: bytes.count >= ReadingPipeline.minimumBytes)
    }

    /// `pipelined`: libyaml on a second thread (see `ReadingPipeline`); tests choose, to compare both ways.
    static func parse(bytes: [UInt8], fileName: String, manifestDirectory: String, environment: [String: String],
                      rootSeen: ((String) -> Void)?, entryRead: ((FileEntry) -> Void)?,
                      pipelined: Bool) throws(ManifestError) -> Manifest {
        var directory = manifestDirectory
        if !directory.hasPrefix("/"), let cwd = try? currentDirectory() {
            directory = cwd + "/" + directory
        }
        // Entries run 100 to 300 bytes; overestimating only reserves address space.
        var validator = ManifestValidator(fileName: fileName, manifestDirectory: PathRules.normalizeAbsolute(directory),
                                          environment: environment, expectedEntries: bytes.count / 100)
        validator.rootSeen = rootSeen
        validator.entryRead = entryRead
        var readerDiagnostics = DiagnosticCollector(file: fileName)
        // `files:` items are validated by `validator` while the reader streams them.
        let document = pipelined
            ? ReadingPipeline.read(bytes, fileName: fileName, diagnostics: &readerDiagnostics, validator: &validator)
            : YAMLReader.read(bytes, diagnostics: &readerDiagnostics, sink: &validator)
        guard let document else {
            // A syntax error (or no document at all): what the entries said about a half-read file is beside the point.
            throw ManifestError(diagnostics: readerDiagnostics.inFileOrder)
        }
        validator.absorb(readerDiagnostics)
        guard let manifest = validator.validate(document) else {
            throw ManifestError(diagnostics: validator.allDiagnostics)
        }
        return manifest
    }

    // MARK: File system

    struct ReadFailure: Error {
        var message: String
    }

    /// Lexical parent of an absolute path: the manifest's folder without resolving symlinks.
    static func parentDirectory(of absolutePath: String) -> String {
        let normalized = PathRules.normalizeAbsolute(absolutePath)
        guard let slash = normalized.lastIndex(of: "/"), slash != normalized.startIndex else { return "/" }
        return String(normalized[..<slash])
    }

    private static func currentDirectory() throws(ReadFailure) -> String {
        guard let buffer = getcwd(nil, 0) else {
            throw ReadFailure(message: "cannot determine the current directory: \(errorText(errno))")
        }
        defer { free(buffer) }
        return String(cString: buffer)
    }

    private static func readFile(_ path: String) throws(ReadFailure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ReadFailure(message: "cannot read manifest: \(errorText(errno))") }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var status = stat()
        if fstat(descriptor, &status) == 0, status.st_size > 0 { bytes.reserveCapacity(Int(status.st_size)) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadFailure(message: "cannot read manifest: \(errorText(errno))")
            }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    private static func errorText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}
