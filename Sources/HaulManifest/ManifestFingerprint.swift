import CLibYAML
import HaulDigest

/// A manifest as read, before validation, and what else its reading depends on.
package struct ManifestInput: Sendable {
    /// The manifest's file, which each pass reads again from its start; or its bytes, when it has no file of its own
    /// (standard input, a descriptor's name) or a caller built the text.
    enum Content: Sendable {
        case file(ManifestFile)
        case bytes([UInt8])
    }

    let content: Content
    /// As messages name it.
    package let fileName: String
    /// The absolute folder `root` is relative to.
    package let directory: String
    /// The file's absolute path, lexically normalized; nil for standard input or a descriptor's name (`/dev/fd/63`),
    /// which a later run cannot read again.
    package let path: String?
    /// `--root`, resolved: replaces the manifest's `root`.
    package let overridingRoot: String?

    /// Text already read: standard input, or a caller's.
    package init(bytes: [UInt8], fileName: String, directory: String, path: String?, overridingRoot: String?) {
        self.init(
            content: .bytes(bytes), fileName: fileName, directory: directory, path: path, overridingRoot: overridingRoot
        )
    }

    init(content: Content, fileName: String, directory: String, path: String?, overridingRoot: String?) {
        self.content = content
        self.fileName = fileName
        self.directory = directory
        self.path = path
        self.overridingRoot = overridingRoot
    }

    /// The text's size in bytes (for a file, as it was when opened).
    package var size: Int {
        switch content {
        case .file(let file): file.size
        case .bytes(let bytes): bytes.count
        }
    }

    /// One pass over the text, for libyaml. `hashing`: a file's pass hashes what it reads (`ManifestFile.Reading`).
    func source(hashing: Bool = false) -> YAMLSource {
        switch content {
        case .file(let file): .file(file.reading(hashing: hashing))
        case .bytes(let bytes): .bytes(bytes)
        }
    }

    /// SHA-256 of the text, read for it (the settled check's pass: a run that validates hashes the text its
    /// validation reads instead); nil without a `path` (no later run reads such input again), or when the file
    /// cannot be read to its end.
    var bytesDigest: Digest? {
        guard path != nil else { return nil }
        switch content {
        case .file(let file): return file.reading(hashing: true).digest()
        case .bytes(let bytes): return StreamingHasher.digest(bytes, algorithm: .sha256)
        }
    }
}

/// Everything validating a manifest depends on, as one SHA-256: its bytes, its path and folder, `--root`, the
/// names of the `-H` headers, and the values of the environment variables its `${VAR}`s name. Validation is a
/// function of these alone, so two reads with the same fingerprint give the same verdict and the same model: a
/// run that finds the fingerprint a settled run recorded (`SettledSnapshot`) need not validate again to know the
/// manifest is valid and what it lists.
package struct ManifestFingerprint: Sendable, Hashable {
    /// The manifest file's absolute path: names the manifest across edits.
    package let path: String
    package let digest: Digest

    /// `variables`: the names validation consulted (`Manifest.environmentNames`); nil when the input has no file
    /// of its own to be read again.
    /// `bytesDigest`: the digest of the text validated, when the validating pass hashed it as it read.
    package static func of(
        _ input: ManifestInput, bytesDigest validated: Digest? = nil, variables: [String],
        environment: [String: String], commandLineHeaders: Set<String>
    ) -> ManifestFingerprint? {
        guard let path = input.path, let bytesDigest = validated ?? input.bytesDigest,
            let hasher = StreamingHasher(.sha256)
        else { return nil }
        // Fields are length-prefixed, so that no two different inputs write the same stream.
        func field(_ text: String) {
            hasher.update(Array("\(text.utf8.count):".utf8))
            hasher.update(Array(text.utf8))
        }
        field("haul manifest fingerprint 1")
        field(path)
        field(input.fileName)
        field(input.directory)
        field(input.overridingRoot.map { "=" + $0 } ?? "")
        for name in commandLineHeaders.sorted() { field("H:" + name) }
        for name in variables {
            field("$" + name)
            field(environment[name].map { "=" + $0 } ?? "")
        }
        field(bytesDigest.hex)
        return ManifestFingerprint(path: path, digest: hasher.finalize())
    }

    /// The folder `root` would resolve to, found without validating: `--root`, else a top-level `root:` written
    /// before `files:` (reading stops at `files:`), else the manifest's folder. nil when `root:` cannot be
    /// expanded. A guess, never a verdict: a settled snapshot found in that folder's `.haul` is believed only when
    /// it names the same root and the same fingerprint, which a validation of the same input resolved to.
    package static func declaredRoot(_ input: ManifestInput, environment: [String: String]) -> String? {
        if let overridingRoot = input.overridingRoot { return overridingRoot }
        let directory = PathRules.normalizeAbsolute(input.directory)
        guard case .some(.some(let template)) = YAMLEventParser.parse(input.source(), rootBeforeFiles) else {
            return directory
        }
        var budget = ExpansionBudget(remaining: ManifestLoader.maximumBytes)
        guard let text = try? EnvironmentExpansion.expand(template, environment: environment, budget: &budget).expanded,
            !text.isEmpty, !text.utf8.contains(0)
        else { return nil }
        return PathRules.resolve(text, against: directory)
    }

    /// The text of a top-level `root:` scalar met before `files:`; nil when there is none (or the YAML ends, or
    /// breaks, first).
    private static func rootBeforeFiles(_ parser: inout YAMLEventParser) -> String? {
        // Stream, document, then the top-level mapping.
        for expected in [YAML_STREAM_START_EVENT, YAML_DOCUMENT_START_EVENT, YAML_MAPPING_START_EVENT] {
            guard parser.next()?.type == expected else { return nil }
        }
        while let key = parser.next(), key.type == YAML_SCALAR_EVENT {
            let name = scalarText(key)
            if name == "files" { return nil }
            guard let value = parser.next() else { return nil }
            if name == "root" { return value.type == YAML_SCALAR_EVENT ? scalarText(value) : nil }
            guard skip(value, &parser) else { return nil }
        }
        return nil
    }

    /// Skips the rest of the node `first` starts; false at a syntax error.
    private static func skip(_ first: yaml_event_t, _ parser: inout YAMLEventParser) -> Bool {
        var depth = first.type == YAML_SEQUENCE_START_EVENT || first.type == YAML_MAPPING_START_EVENT ? 1 : 0
        while depth > 0 {
            guard let event = parser.next() else { return false }
            switch event.type {
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT: depth += 1
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT: depth -= 1
            default: break
            }
        }
        return true
    }

    private static func scalarText(_ event: yaml_event_t) -> String {
        let scalar = event.data.scalar
        return String(
            decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.value == nil ? 0 : scalar.length),
            as: UTF8.self)
    }
}
