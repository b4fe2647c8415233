import HaulDigest

/// Turns a YAML document into a `Manifest`, reporting every problem rather than stopping at the first: a user
/// fixing a 500-entry manifest wants the whole list in one run.
struct ManifestValidator: YAMLEntrySink {
    /// 1 PiB: far above any real file, low enough that totals over 100,000 entries cannot overflow.
    static let maximumSize: Int64 = 1 << 50

    typealias NodeID = YAMLDocument.NodeID

    /// Where a key lives, so key paths (`files[2].sha256`) are built only when a message needs one.
    enum Scope {
        case topLevel, defaults
        case file(Int)
        /// A mirror written as a mapping, `{url: …, headers: …}`: entry, then mirror.
        case mirror(Int, Int)
        /// An entry's `extract:` written as a mapping.
        case extract(Int)
        /// An entry's `from:` written as a mapping.
        case from(Int)
        /// One list under `lists:`, by name.
        case list(String)
        /// A list's key written as a mapping, `{key: …, retired: …}`: list, then position in `keys:`.
        case listKey(String, Int)

        func path(_ key: String) -> String {
            switch self {
            case .topLevel: key
            case .defaults: "defaults." + key
            case .file(let index): "files[\(index)].\(key)"
            case .mirror(let index, let position): "files[\(index)].mirrors[\(position)].\(key)"
            case .extract(let index): "files[\(index)].extract.\(key)"
            case .from(let index): "files[\(index)].from.\(key)"
            case .list(let name): "lists.\(name).\(key)"
            case .listKey(let name, let position): "lists.\(name).keys[\(position)].\(key)"
            }
        }

        /// The key path of the mapping itself.
        var mappingPath: String? {
            switch self {
            case .topLevel: nil
            case .defaults: "defaults"
            case .file(let index): "files[\(index)]"
            case .mirror(let index, let position): "files[\(index)].mirrors[\(position)]"
            case .extract(let index): "files[\(index)].extract"
            case .from(let index): "files[\(index)].from"
            case .list(let name): "lists.\(name)"
            case .listKey(let name, let position): "lists.\(name).keys[\(position)]"
            }
        }
    }

    /// `defaults:` after validation; nil fields fall back to `BuiltInDefaults`.
    struct Defaults {
        var retries: Int?
        var timeout: Seconds?
        var mode: FileMode?
        var headers: [HeaderField] = []
        var retryOn: [Int]?
    }

    /// Which settings an entry made itself. Entries are validated before `defaults:` may have been read (it can
    /// come later in the file), so they start from the built-in values and defaults fill in the rest at the end.
    struct ExplicitSettings: OptionSet {
        let rawValue: UInt8
        static let mode = ExplicitSettings(rawValue: 1)
        static let retries = ExplicitSettings(rawValue: 2)
        static let timeout = ExplicitSettings(rawValue: 4)
        static let retryOn = ExplicitSettings(rawValue: 8)
    }

    /// The document being looked at: the whole top level in `validate`, or the arena holding one streamed entry
    /// in `consume` (released right after, so the reader can keep appending without copying).
    private var document = YAMLDocument()
    private let environment: [String: String]
    private let manifestDirectory: String
    private let fileName: String
    /// Top-level and `defaults:` findings.
    private(set) var diagnostics: DiagnosticCollector
    /// Findings inside `files:` items, kept apart: they are dropped if the file turns out to be unreadable as a
    /// whole (syntax error, unsupported version).
    private(set) var entryDiagnostics: DiagnosticCollector
    private var entries: [FileEntry] = []
    /// Parallel to `entries`.
    private var explicitSettings: [ExplicitSettings] = []
    private var registry = DestinationRegistry()

    /// What `${VAR}` expansions may still add to the manifest's size.
    private var expansionBudget: ExpansionBudget
    /// Canonical names of the `-H` headers: the command line's value is sent instead of the manifest's, so a manifest
    /// value of that name whose variable is unset is dropped rather than an error.
    private let commandLineHeaders: Set<String>
    /// The variables a `${VAR}` named, set or not: with the manifest's bytes, all that validation read of the
    /// environment (`ManifestFingerprint`).
    private var consultedVariables: Set<String> = []
    /// Told each streamed batch's entries that are valid on their own (see `EarlyEntries`); nil once it declines.
    var early: EarlyEntries.Handler?
    /// Each `from:` of `files:`, checked against `lists:` once the whole top level is read (either may come first).
    private var listReferences: [(list: String, location: SourceLocation, keyPath: String)] = []

    /// `expectedEntries` is a capacity hint: growing arrays and tables of 100,000 entries step by step costs
    /// more than reserving virtual memory that may go unused. `expansionBudget`: the bytes expansions may add.
    init(
        fileName: String, manifestDirectory: String, environment: [String: String], expectedEntries: Int = 0,
        expansionBudget: Int = ManifestLoader.maximumBytes, commandLineHeaders: Set<String> = []
    ) {
        self.fileName = fileName
        self.commandLineHeaders = commandLineHeaders
        self.manifestDirectory = manifestDirectory
        self.environment = environment
        self.expansionBudget = ExpansionBudget(remaining: expansionBudget)
        self.diagnostics = DiagnosticCollector(file: fileName)
        self.entryDiagnostics = DiagnosticCollector(file: fileName)
        entries.reserveCapacity(expectedEntries)
        explicitSettings.reserveCapacity(expectedEntries)
        registry = DestinationRegistry(expectedCount: expectedEntries)
    }

    /// Adds the reader's findings (anchors, tags, …) to the top-level ones.
    mutating func absorb(_ readerDiagnostics: DiagnosticCollector) {
        diagnostics.append(contentsOf: readerDiagnostics)
    }

    /// Every finding (the first in file order, and how many more).
    var allFindings: DiagnosticCollector {
        var all = diagnostics
        all.append(contentsOf: entryDiagnostics)
        return all
    }

    // MARK: Top level

    /// Checks the top level of `document` (whose `files:` items have been streamed to `consume`, or are still in
    /// it) and builds the manifest; nil when any error was reported.
    mutating func validate(_ document: YAMLDocument) -> Manifest? {
        self.document = document
        guard let rootID = document.root else { return nil }
        guard document.kind(of: rootID) == .mapping else {
            report(expected: "a mapping at the top level", rootID, path: nil)
            return nil
        }
        // The version decides how everything else reads: for an unsupported one, other complaints (unknown keys,
        // entries) would be noise, so it is checked first. A missing or malformed one is just another error and
        // the rest is checked as the current version.
        guard let version = version(of: rootID) else {
            entryDiagnostics = DiagnosticCollector(file: fileName)
            return nil
        }
        let pairs = keyedPairs(of: rootID, scope: .topLevel, as: TopLevelKey.self)

        var root = PathRules.normalizeAbsolute(manifestDirectory)
        var prune = false
        var netrc = false
        var defaults = Defaults()
        var filesUsed = false
        var lists: [SignedListSource] = []
        var declaredLists: [(name: String, location: SourceLocation)] = []
        for (key, _, value) in pairs {
            switch key {
            case .version, .schema:
                break
            case .root:
                if let resolved = resolveRoot(value) { root = resolved }
            case .prune:
                if let flag = boolean(value, path: key.rawValue) { prune = flag }
            case .netrc:
                if let flag = boolean(value, path: key.rawValue) { netrc = flag }
            case .defaults:
                defaults = parseDefaults(value)
            case .files:
                filesUsed = parseFiles(value)
            case .lists:
                (lists, declaredLists) = parseLists(value)
            }
        }
        if !pairs.contains(where: { $0.key == .files }) {
            diagnostics.error(
                "missing required key \"files\" (use \"files: []\" for none)",
                at: document.location(of: rootID))
        }
        if !filesUsed {
            // Streamed items belonged to a `files:` that turned out not to count (e.g. a duplicate key).
            entryDiagnostics = DiagnosticCollector(file: fileName)
            entries = []
            listReferences = []
        }
        checkListReferences(declared: declaredLists, valid: lists)
        guard !diagnostics.hasErrors, !entryDiagnostics.hasErrors else { return nil }
        applyDefaults(defaults)
        let warnings = allFindings
        var manifest = Manifest(
            sourcePath: fileName, version: version, root: root, prune: prune, files: entries,
            warnings: warnings.inFileOrder, omittedWarnings: warnings.omittedCount)
        manifest.netrc = netrc
        manifest.lists = lists
        manifest.environmentNames = consultedVariables.sorted()
        return manifest
    }

    /// Every expansion goes through here, so that the variables it consults are known.
    private mutating func expand(_ template: String) throws(RuleFailure) -> TemplatedString {
        if EnvironmentExpansion.containsReference(template) {
            consultedVariables.formUnion(EnvironmentExpansion.referencedNames(in: template))
        }
        return try EnvironmentExpansion.expand(template, environment: environment, budget: &expansionBudget)
    }

    /// In place: copying 100,000 entries into new values costs more than validating them.
    private mutating func applyDefaults(_ defaults: Defaults) {
        guard
            defaults.mode != nil || defaults.retries != nil || defaults.timeout != nil || !defaults.headers.isEmpty
                || defaults.retryOn != nil
        else {
            return
        }
        for index in entries.indices {
            let explicit = explicitSettings[index]
            if let mode = defaults.mode, !explicit.contains(.mode) { entries[index].mode = mode }
            if let retries = defaults.retries, !explicit.contains(.retries) { entries[index].retries = retries }
            if let timeout = defaults.timeout, !explicit.contains(.timeout) { entries[index].timeout = timeout }
            if let retryOn = defaults.retryOn, !explicit.contains(.retryOn) { entries[index].retryOn = retryOn }
            entries[index].defaultHeaders = defaults.headers
        }
    }

    /// Nil only for a well-formed but unsupported version.
    private mutating func version(of rootID: NodeID) -> Int? {
        let assumed = Manifest.supportedVersions[Manifest.supportedVersions.count - 1]
        let pairs = document.pairs(of: rootID)
        let key = TopLevelKey.version.rawValue
        let versionPair = pairs.first { document.kind(of: $0.key) == .scalar && document.text(of: $0.key) == key }
        guard let (_, value) = versionPair else {
            diagnostics.error(
                "missing required key \"version\" (this haul reads version \(supportedList))",
                at: document.location(of: rootID))
            return assumed
        }
        guard let number = integer(value, path: key, expected: "an integer") else { return assumed }
        guard let version = Int(exactly: number), Manifest.supportedVersions.contains(version) else {
            diagnostics.error(
                "unsupported manifest version \(number) (this haul reads version \(supportedList))",
                at: document.location(of: value), keyPath: key)
            return nil
        }
        return version
    }

    private var supportedList: String { Manifest.supportedVersions.map(String.init).joined(separator: ", ") }

    /// `${VAR}` expanded (a folder is shown in messages: unlike a URL's, its value is not treated as a secret).
    private mutating func resolveRoot(_ id: NodeID) -> String? {
        guard let template = text(id, path: "root", expected: "a folder path") else { return nil }
        do throws(RuleFailure) {
            let text = try expand(template).expanded
            if text.isEmpty { throw RuleFailure("expected a folder path, found an empty string") }
            if text.utf8.contains(0) { throw RuleFailure("root must not contain a NUL character") }
            return PathRules.resolve(text, against: manifestDirectory)
        } catch {
            for message in error.messages { diagnostics.error(message, at: document.location(of: id), keyPath: "root") }
            return nil
        }
    }

    // MARK: defaults

    private mutating func parseDefaults(_ id: NodeID) -> Defaults {
        var defaults = Defaults()
        guard requireKind(.mapping, id, path: "defaults") else { return defaults }
        for (key, _, value) in keyedPairs(of: id, scope: .defaults, as: DefaultsKey.self) {
            switch key {
            case .retries: defaults.retries = retries(value, path: Scope.defaults.path(key.rawValue))
            case .timeout: defaults.timeout = duration(value, path: Scope.defaults.path(key.rawValue))
            case .mode: defaults.mode = mode(value, path: Scope.defaults.path(key.rawValue))
            case .headers: defaults.headers = headers(value, scope: .defaults)
            case .retryOn: defaults.retryOn = httpStatuses(value, path: Scope.defaults.path(key.rawValue))
            }
        }
        return defaults
    }

    // MARK: files

    /// Whether `id` is the `files:` whose items are (or now become) the drafts.
    private mutating func parseFiles(_ id: NodeID) -> Bool {
        guard requireKind(.sequence, id, path: "files") else { return false }
        if let streamed = document.streamedFiles, streamed.sequence == id { return true }
        // Not streamed (the reader streams only the first top-level `files:`): validate the items now.
        entries = []
        explicitSettings = []
        entryDiagnostics = DiagnosticCollector(file: fileName)
        registry = DestinationRegistry()
        listReferences = []
        let whole = document
        for (index, item) in whole.childIDs(of: id).enumerated() {
            consume(item: item, index: index, in: whole)
        }
        self.document = whole
        return true
    }

    /// Validates `files:` items as the reader streams them.
    mutating func consume(items: [YAMLItem], in document: YAMLDocument) {
        let first = entries.count
        for item in items { consume(item: item.node, index: item.index, in: document) }
        // A copy, not a slice: a slice alive on another thread would make the next append copy every entry.
        if let early, entries.count > first, !early(Array(entries[first...])) { self.early = nil }
    }

    /// Validates one `files:` item (from the reader's stream, or from `parseFiles`).
    mutating func consume(item id: NodeID, index: Int, in document: YAMLDocument) {
        let previous = self.document
        self.document = document
        defer { self.document = previous }
        // Entry findings go to their own collector; swap it in so the shared helpers can report normally.
        swap(&diagnostics, &entryDiagnostics)
        defer { swap(&diagnostics, &entryDiagnostics) }
        if let (entry, explicit) = parseEntry(id, index: index) {
            entries.append(entry)
            explicitSettings.append(explicit)
        }
    }

    private mutating func parseEntry(_ id: NodeID, index: Int) -> (FileEntry, ExplicitSettings)? {
        let scope = Scope.file(index)
        guard requireKind(.mapping, id, path: "files[\(index)]") else { return nil }
        let errorsBefore = diagnostics.errorCount
        let location = document.location(of: id)

        var url: TemplatedString?, checksum: Checksum?, size: Int64?
        var mirrors: [TemplatedString] = [], mirrorHeaders: [[HeaderField]] = [], headers: [HeaderField] = []
        var mirrorCertificates: [CertificateFiles?] = []
        var mode: FileMode?, retries: Int?, timeout: Seconds?, refresh: Seconds?, retryOn: [Int]?
        var certificate: String?, certificateKey: (path: String, node: NodeID)?, sawCertificate = false
        var sawURL = false
        var firstChecksumKey: (key: FileKey, line: Int)?
        // Read after the other keys: whether `dest` names a file or a folder, and whether `mode` applies, depend on
        // `extract`, which may come later in the entry.
        var destinationNode: NodeID?, modeKeyNode: NodeID?
        var extract: (unpacks: Bool, rule: ExtractRule?) = (false, nil)
        // Read after the other keys too: the name in the list defaults to the one at the end of `url`.
        var fromNodes: (key: NodeID, value: NodeID)?

        for (key, keyNode, value) in keyedPairs(of: id, scope: scope, as: FileKey.self) {
            switch key {
            case .url:
                sawURL = true
                url = sourceURL(value, path: scope.path(key.rawValue))
            case .mirrors:
                (mirrors, mirrorHeaders, mirrorCertificates) = parseMirrors(value, scope: scope)
            case .dest:
                destinationNode = value
            case .sha256, .sha384, .sha512, .checksum, .integrity:
                if let first = firstChecksumKey {
                    diagnostics.error(
                        "conflicts with \(first.key.rawValue) (line \(first.line)): give at most one of "
                            + "sha256, sha384, sha512, checksum or integrity",
                        at: document.location(of: keyNode), keyPath: scope.path(key.rawValue))
                    continue
                }
                firstChecksumKey = (key, document.location(of: keyNode).line)
                checksum = parseChecksum(key, value, path: scope.path(key.rawValue))
            case .size:
                if document.kind(of: value) == .scalar, document.form(of: value) == .plain,
                    ScalarRules.isHugeNaturalNumber(document.text(of: value))
                {
                    diagnostics.error(
                        "\(document.text(of: value)) bytes is more than haul accepts for one file (1 PiB)",
                        at: document.location(of: value), keyPath: scope.path(key.rawValue))
                    continue
                }
                size = integer(
                    value, path: scope.path(key.rawValue), expected: "a size in bytes (an integer of 0 or more)",
                    range: 0...Int64.max)
                if let bytes = size, bytes > Self.maximumSize {
                    diagnostics.error(
                        "\(bytes) bytes is more than haul accepts for one file (1 PiB)",
                        at: document.location(of: value), keyPath: scope.path(key.rawValue))
                    size = nil
                }
            case .mode:
                modeKeyNode = keyNode
                mode = self.mode(value, path: scope.path(key.rawValue))
            case .retries:
                retries = self.retries(value, path: scope.path(key.rawValue))
            case .timeout:
                timeout = duration(value, path: scope.path(key.rawValue))
            case .retryOn:
                retryOn = httpStatuses(value, path: scope.path(key.rawValue))
            case .cert:
                sawCertificate = true
                certificate = readableFile(value, path: scope.path(key.rawValue))
            case .key:
                if let path = readableFile(value, path: scope.path(key.rawValue)) { certificateKey = (path, keyNode) }
            case .refresh:
                refresh = duration(value, path: scope.path(key.rawValue))
            case .headers:
                headers = self.headers(value, scope: scope)
            case .extract:
                extract = parseExtract(value, index: index)
            case .from:
                fromNodes = (keyNode, value)
            }
        }
        if !sawURL { diagnostics.error("missing required key \"url\"", at: location, keyPath: scope.mappingPath) }
        if let certificateKey, !sawCertificate {
            diagnostics.error(
                "a key needs its certificate: give cert as well", at: document.location(of: certificateKey.node),
                keyPath: scope.path(FileKey.key.rawValue))
        }
        var destination: DestinationPath?
        if let destinationNode {
            destination = parseDestination(
                destinationNode, index: index, path: scope.path(FileKey.dest.rawValue),
                unpacks: extract.unpacks)
        } else {
            diagnostics.error("missing required key \"dest\"", at: location, keyPath: scope.mappingPath)
        }
        if extract.unpacks, let modeKeyNode {
            diagnostics.error(
                "cannot be set for an entry with extract (each member of the archive keeps its own "
                    + "executable bit)",
                at: document.location(of: modeKeyNode), keyPath: scope.path(FileKey.mode.rawValue))
        }

        var listPin: ListPin?
        if let fromNodes {
            if let first = firstChecksumKey {
                diagnostics.error(
                    "conflicts with \(first.key.rawValue) (line \(first.line)): an entry that takes its digest from a "
                        + "list pins none of its own", at: document.location(of: fromNodes.key),
                    keyPath: scope.path(FileKey.from.rawValue))
            }
            listPin = parseListPin(fromNodes.value, index: index, url: url)
        }

        guard diagnostics.errorCount == errorsBefore, let url, let destination else { return nil }
        var explicit = ExplicitSettings()
        if mode != nil { explicit.insert(.mode) }
        if retries != nil { explicit.insert(.retries) }
        if timeout != nil { explicit.insert(.timeout) }
        if retryOn != nil { explicit.insert(.retryOn) }
        var entry = FileEntry(
            index: index, url: url, mirrors: mirrors, destination: destination, checksum: checksum,
            size: size, mode: mode ?? BuiltInDefaults.mode, retries: retries ?? BuiltInDefaults.retries,
            timeout: timeout ?? BuiltInDefaults.timeout, headers: headers, location: location)
        entry.refresh = refresh
        entry.retryOn = retryOn ?? []
        entry.clientCertificate = certificate.map { CertificateFiles(certificate: $0, key: certificateKey?.path) }
        entry.extract = extract.rule
        entry.listPin = listPin
        if mirrorHeaders.contains(where: { !$0.isEmpty }) { entry.mirrorHeaders = mirrorHeaders }
        if mirrorCertificates.contains(where: { $0 != nil }) { entry.mirrorCertificates = mirrorCertificates }
        return (entry, explicit)
    }

    // MARK: lists

    /// `lists:`: a mapping of names to lists. Returns the valid lists, and every name declared (valid or not), so that
    /// `from:` is checked against what the manifest means to declare.
    private mutating func parseLists(
        _ id: NodeID
    ) -> (lists: [SignedListSource], declared: [(name: String, location: SourceLocation)]) {
        guard requireKind(.mapping, id, path: TopLevelKey.lists.rawValue) else { return ([], []) }
        var lists: [SignedListSource] = []
        var declared: [(name: String, location: SourceLocation)] = []
        for (keyID, valueID) in document.pairs(of: id) {
            guard let name = keyName(keyID, mappingPath: TopLevelKey.lists.rawValue) else { continue }
            let location = document.location(of: keyID)
            if let earlier = declared.first(where: { $0.name == name }) {
                diagnostics.error(
                    "duplicate key \(Quoted.text(name)) (first on line \(earlier.location.line))", at: location,
                    keyPath: Scope.list(name).mappingPath)
                continue
            }
            declared.append((name, location))
            let problem =
                if name.isEmpty {
                    "a list's name must not be empty"
                } else if name.utf8.contains(UInt8(ascii: "/")) {
                    "a list's name must not contain \"/\", found \(Quoted.text(name))"
                } else if name.unicodeScalars.contains(where: UnsafeScalar.contains) {
                    "a list's name must not contain control characters, found \(Quoted.text(name))"
                } else {
                    nil as String?
                }
            if let problem {
                diagnostics.error(problem, at: location, keyPath: TopLevelKey.lists.rawValue)
                continue
            }
            if let list = parseList(valueID, name: name, location: location) { lists.append(list) }
        }
        return (lists, declared)
    }

    /// One list: `url` and `keys` required, `signature` and `refresh` optional.
    private mutating func parseList(_ id: NodeID, name: String, location: SourceLocation) -> SignedListSource? {
        let scope = Scope.list(name)
        guard requireKind(.mapping, id, path: "lists.\(name)") else { return nil }
        let errorsBefore = diagnostics.errorCount
        var url: TemplatedString?, signature = SignedListSource.Signature.auto, keys: [ListKey] = []
        var refresh: Seconds?, sawURL = false, sawKeys = false
        for (key, _, value) in keyedPairs(of: id, scope: scope, as: ListKeyName.self) {
            let path = scope.path(key.rawValue)
            switch key {
            case .url:
                sawURL = true
                url = sourceURL(value, path: path)
            case .signature:
                signature = listSignature(value, path: path) ?? .auto
            case .keys:
                sawKeys = true
                keys = listKeys(value, list: name)
            case .refresh:
                refresh = duration(value, path: path)
            }
        }
        if !sawURL { diagnostics.error("missing required key \"url\"", at: location, keyPath: scope.mappingPath) }
        if !sawKeys {
            diagnostics.error(
                "missing required key \"keys\" (the keys the list's signature may be made by)", at: location,
                keyPath: scope.mappingPath)
        }
        guard diagnostics.errorCount == errorsBefore, let url else { return nil }
        return SignedListSource(
            name: name, url: url, signature: signature, keys: keys, refresh: refresh, location: location)
    }

    /// `auto`, `clearsigned`, or the signature's URL.
    private mutating func listSignature(
        _ id: NodeID, path: @autoclosure () -> String
    ) -> SignedListSource.Signature? {
        let expected = "auto, clearsigned or the signature's URL"
        guard let text = text(id, path: path(), expected: expected) else { return nil }
        switch text {
        case "auto": return .auto
        case "clearsigned": return .clearSigned
        default:
            // A word that is no URL: a misspelt `auto` or `clearsigned` more likely than a URL's mistake.
            guard text.contains("://") || text.hasPrefix("${") else {
                let suggestion = KeySuggestion.closest(to: text, among: ["auto", "clearsigned"])
                diagnostics.error(
                    "expected \(expected), found \(Quoted.text(text))"
                        + (suggestion.map { "; did you mean \(Quoted.text($0))?" } ?? ""),
                    at: document.location(of: id), keyPath: path())
                return nil
            }
            return sourceURL(id, path: path()).map { .url($0) }
        }
    }

    /// `keys:`: one or more, each a key, a key file's path, or `{key: …, retired: YYYY-MM-DD}`.
    private mutating func listKeys(_ id: NodeID, list: String) -> [ListKey] {
        let path = Scope.list(list).path(ListKeyName.keys.rawValue)
        guard document.kind(of: id) == .sequence else {
            report(expected: "a list of keys (each a key, a key file's path or {key: …, retired: …})", id, path: path)
            return []
        }
        let items = document.childIDs(of: id)
        if items.isEmpty {
            diagnostics.error(
                "expected at least one key the list's signature may be made by", at: document.location(of: id),
                keyPath: path)
        }
        var keys: [ListKey] = []
        for (position, item) in items.enumerated() {
            guard document.kind(of: item) == .mapping else {
                if let key = listKey(
                    item, path: "\(path)[\(position)]", expected: "a key, a key file's path or a mapping")
                {
                    keys.append(key)
                }
                continue
            }
            let scope = Scope.listKey(list, position)
            var keyNode: NodeID?, retiredAfter: Double?
            for (key, _, value) in keyedPairs(of: item, scope: scope, as: ListKeyEntryKey.self) {
                switch key {
                case .key:
                    keyNode = value
                case .retired:
                    retiredAfter = checked(
                        value, path: scope.path(key.rawValue), expected: "a date as YYYY-MM-DD",
                        SignedListRules.retirementDate)
                }
            }
            guard let keyNode else {
                diagnostics.error(
                    "missing required key \"key\"", at: document.location(of: item), keyPath: scope.mappingPath)
                continue
            }
            if var key = listKey(
                keyNode, path: scope.path(ListKeyEntryKey.key.rawValue), expected: "a key or a key file's path")
            {
                key.retiredAfter = retiredAfter
                keys.append(key)
            }
        }
        return keys
    }

    private mutating func listKey(_ id: NodeID, path: @autoclosure () -> String, expected: String) -> ListKey? {
        let directory = manifestDirectory
        return checked(id, path: path(), expected: expected) { text throws(RuleFailure) in
            try SignedListRules.key(text, manifestDirectory: directory)
        }
    }

    /// An entry's `from:`: a list's name, or `{list: …, name: …}`. Without a name, the file's name in the list is the
    /// last segment of `url`'s path. Whether the list exists is checked once `lists:` is read.
    private mutating func parseListPin(_ id: NodeID, index: Int, url: TemplatedString?) -> ListPin? {
        let path = Scope.file(index).path(FileKey.from.rawValue)
        var listNode: NodeID?, name: String?
        if document.kind(of: id) == .mapping {
            let scope = Scope.from(index)
            let errorsBefore = diagnostics.errorCount
            for (key, _, value) in keyedPairs(of: id, scope: scope, as: ListPinKey.self) {
                switch key {
                case .list:
                    listNode = value
                case .name:
                    guard let text = text(value, path: scope.path(key.rawValue), expected: "a file's name in the list")
                    else { continue }
                    guard !text.isEmpty else {
                        diagnostics.error(
                            "expected a file's name in the list, found an empty string",
                            at: document.location(of: value), keyPath: scope.path(key.rawValue))
                        continue
                    }
                    name = text
                }
            }
            if listNode == nil {
                diagnostics.error(
                    "missing required key \"list\"", at: document.location(of: id), keyPath: scope.mappingPath)
            }
            guard diagnostics.errorCount == errorsBefore else { return nil }
        } else if document.kind(of: id) == .scalar, document.form(of: id) != .null {
            listNode = id
        } else {
            report(expected: "a list's name, or a mapping of list and name", id, path: path)
            return nil
        }
        guard let listNode else { return nil }
        let listPath = listNode == id ? path : Scope.from(index).path(ListPinKey.list.rawValue)
        guard let list = text(listNode, path: listPath, expected: "a list's name") else { return nil }
        let location = document.location(of: listNode)
        guard !list.isEmpty else {
            diagnostics.error("expected a list's name, found an empty string", at: location, keyPath: listPath)
            return nil
        }
        listReferences.append((list, location, listPath))
        if let name { return ListPin(list: list, name: name) }
        // Without a valid url, its own error says so.
        guard let url else { return nil }
        guard let derived = SignedListRules.fileName(inURL: url.expanded) else {
            diagnostics.error(
                "the URL \(Quoted.text(url.description)) ends in no file name: give the file's name in the list, as "
                    + "from: {list: \(list), name: …}", at: location, keyPath: listPath)
            return nil
        }
        return ListPin(list: list, name: derived)
    }

    /// Every `from:` names a declared list (an error otherwise), and every list is named by some `from:` (a warning
    /// otherwise: its signature would be checked for nothing).
    private mutating func checkListReferences(
        declared: [(name: String, location: SourceLocation)], valid: [SignedListSource]
    ) {
        let names = declared.map(\.name)
        var used: Set<String> = []
        for reference in listReferences {
            guard !names.contains(reference.list) else {
                used.insert(reference.list)
                continue
            }
            var message = "no list named \(Quoted.text(reference.list))"
            if let suggestion = KeySuggestion.closest(to: reference.list, among: names) {
                message += "; did you mean \(Quoted.text(suggestion))?"
            } else if names.isEmpty {
                message += " (the manifest has no lists:)"
            } else {
                message += " (lists: has \(Quoted.firstFew(names) { Quoted.text($0) }))"
            }
            entryDiagnostics.error(message, at: reference.location, keyPath: reference.keyPath)
        }
        // Only valid lists: an invalid one has its own errors.
        for list in valid where !used.contains(list.name) {
            diagnostics.warning(
                "no entry takes its digests from this list (from: \(list.name))", at: list.location,
                keyPath: Scope.list(list.name).mappingPath)
        }
    }

    // MARK: extract

    /// `extract: true`, `false`, or a mapping of `ExtractKey`s. `unpacks` says whether the entry asks for
    /// unpacking at all (anything but `false`, mistakes included), so that `dest` and `mode` are judged as the
    /// entry means them; `rule` is nil for `false` and for a mistake.
    private mutating func parseExtract(_ id: NodeID, index: Int) -> (unpacks: Bool, rule: ExtractRule?) {
        let scope = Scope.extract(index)
        if document.kind(of: id) == .scalar, document.form(of: id) == .plain,
            let flag = ScalarRules.boolean(document.text(of: id))
        {
            return flag ? (true, ExtractRule()) : (false, nil)
        }
        guard document.kind(of: id) == .mapping else {
            let names = ExtractKey.names
            report(
                expected: "true, false or a mapping of " + names.dropLast().joined(separator: ", ") + " and "
                    + names[names.count - 1], id, path: Scope.file(index).path(FileKey.extract.rawValue))
            return (true, nil)
        }
        let errorsBefore = diagnostics.errorCount
        var format: ArchiveFormat?, strip = 0, include: [String] = [], exclude: [String] = [], tree: Digest?
        var maxUnpacked: Int64?
        for (key, _, value) in keyedPairs(of: id, scope: scope, as: ExtractKey.self) {
            let path = scope.path(key.rawValue)
            switch key {
            case .format:
                format = archiveFormat(value, path: path)
            case .strip:
                strip =
                    integer(
                        value, path: path,
                        expected: "a whole number of leading folders to drop, from 0 to "
                            + "\(DestinationPath.maximumBytes)", range: 0...Int64(DestinationPath.maximumBytes)
                    )
                    .map { Int($0) } ?? 0
            case .include:
                include = patterns(value, path: path)
            case .exclude:
                exclude = patterns(value, path: path)
            case .tree:
                tree = checked(value, path: path, expected: "a digest", ChecksumRules.treeDigest)
            case .maxUnpacked:
                maxUnpacked = checked(value, path: path, expected: "a size in bytes") { text throws(RuleFailure) in
                    do throws(RuleFailure) {
                        return try ByteSizeText.parse(text)
                    } catch {
                        throw RuleFailure(messages: error.messages.map { "\($0), found \(Quoted.text(text))" })
                    }
                }
            }
        }
        guard diagnostics.errorCount == errorsBefore else { return (true, nil) }
        return (
            true,
            ExtractRule(
                format: format, strip: strip, include: include, exclude: exclude, tree: tree,
                maxUnpackedBytes: maxUnpacked)
        )
    }

    private mutating func archiveFormat(_ id: NodeID, path: @autoclosure () -> String) -> ArchiveFormat? {
        let names = ArchiveFormat.allCases.map(\.rawValue)
        let list = names.dropLast().joined(separator: ", ") + " or " + names[names.count - 1]
        return checked(id, path: path(), expected: "an archive format (\(list))") { text throws(RuleFailure) in
            if let format = ArchiveFormat(rawValue: text) { return format }
            // A file name's spelling of a format (`tgz`, `TAR.GZ`) names the one meant.
            if let meant = ArchiveFormat.named(by: "." + text) {
                throw RuleFailure(
                    "unknown archive format \(Quoted.text(text)); did you mean \(Quoted.text(meant.rawValue))?")
            }
            throw RuleFailure("unknown archive format \(Quoted.text(text)) (expected \(list))")
        }
    }

    /// One pattern, or a list of them, each a valid `PathGlob`; a mistake is reported at the pattern itself.
    private mutating func patterns(_ id: NodeID, path: @autoclosure () -> String) -> [String] {
        let expected = "a pattern or a list of patterns"
        if document.kind(of: id) == .scalar, document.form(of: id) != .null {
            return pattern(id, path: path(), expected: expected).map { [$0] } ?? []
        }
        guard document.kind(of: id) == .sequence else {
            report(expected: expected, id, path: path())
            return []
        }
        var found: [String] = []
        for (position, item) in document.childIDs(of: id).enumerated() {
            if let text = pattern(item, path: "\(path())[\(position)]", expected: "a pattern") { found.append(text) }
        }
        return found
    }

    private mutating func pattern(_ id: NodeID, path: @autoclosure () -> String, expected: String) -> String? {
        checked(id, path: path(), expected: expected) { text throws(RuleFailure) in
            do {
                _ = try PathGlob(text)
                return text
            } catch {
                throw RuleFailure("\(Quoted.text(text)) is not a valid pattern: \(error)")
            }
        }
    }

    private mutating func sourceURL(_ id: NodeID, path: @autoclosure () -> String) -> TemplatedString? {
        guard let template = text(id, path: path(), expected: "a URL") else { return nil }
        let location = document.location(of: id)
        do {
            let url = try expand(template)
            try URLRules.check(url)
            return url
        } catch {
            let keyPath = path()
            for message in error.messages { diagnostics.error(message, at: location, keyPath: keyPath) }
            return nil
        }
    }

    /// Each mirror is a URL, or `{url: …, headers: {…}}` for one that needs headers of its own (a token): those go
    /// to that mirror alone, as the entry's go to its `url` alone.
    private mutating func parseMirrors(
        _ id: NodeID, scope: Scope
    )
        -> (urls: [TemplatedString], headers: [[HeaderField]], certificates: [CertificateFiles?])
    {
        guard requireKind(.sequence, id, path: scope.path("mirrors")) else { return ([], [], []) }
        var urls: [TemplatedString] = []
        var headers: [[HeaderField]] = []
        var certificates: [CertificateFiles?] = []
        for (position, item) in document.childIDs(of: id).enumerated() {
            guard document.kind(of: item) == .mapping, case .file(let index) = scope else {
                if let url = sourceURL(item, path: scope.path("mirrors[\(position)]")) {
                    urls.append(url)
                    headers.append([])
                    certificates.append(nil)
                }
                continue
            }
            let mirror = Scope.mirror(index, position)
            var url: TemplatedString?, fields: [HeaderField] = [], sawURL = false
            var certificate: String?, sawCertificate = false, certificateKey: (path: String, node: NodeID)?
            for (keyID, valueID) in document.pairs(of: item) {
                guard let name = keyName(keyID, mappingPath: mirror.mappingPath) else { continue }
                switch name {
                case "url":
                    sawURL = true
                    url = sourceURL(valueID, path: mirror.path("url"))
                case "headers":
                    fields = self.headers(valueID, scope: mirror)
                case "cert":
                    sawCertificate = true
                    certificate = readableFile(valueID, path: mirror.path("cert"))
                case "key":
                    if let path = readableFile(valueID, path: mirror.path("key")) { certificateKey = (path, keyID) }
                default:
                    diagnostics.error(
                        "unknown key \(Quoted.text(name)) (a mirror has url, headers, cert and key)",
                        at: document.location(of: keyID), keyPath: mirror.path(name))
                }
            }
            if !sawURL {
                diagnostics.error(
                    "missing required key \"url\"", at: document.location(of: item), keyPath: mirror.mappingPath)
            }
            if let certificateKey, !sawCertificate {
                diagnostics.error(
                    "a key needs its certificate: give cert as well", at: document.location(of: certificateKey.node),
                    keyPath: mirror.path("key"))
            }
            if let url {
                urls.append(url)
                headers.append(fields)
                certificates.append(certificate.map { CertificateFiles(certificate: $0, key: certificateKey?.path) })
            }
        }
        return (urls, headers, certificates)
    }

    /// `unpacks`: the entry unpacks an archive, so `dest` names a folder.
    private mutating func parseDestination(
        _ id: NodeID, index: Int, path: @autoclosure () -> String,
        unpacks: Bool
    ) -> DestinationPath? {
        guard let text = text(id, path: path(), expected: unpacks ? "a folder path" : "a file path") else { return nil }
        let location = document.location(of: id)
        do {
            let (destination, normalized) = try PathRules.destination(text, folder: unpacks)
            if let conflict = registry.claim(normalized, index: index, line: location.line, unpacks: unpacks) {
                diagnostics.error(conflict, at: location, keyPath: path())
                return nil
            }
            return destination
        } catch {
            for message in error.messages { diagnostics.error(message, at: location, keyPath: path()) }
            return nil
        }
    }

    private mutating func parseChecksum(_ key: FileKey, _ id: NodeID, path: @autoclosure () -> String) -> Checksum? {
        guard let text = text(id, path: path(), expected: "a digest") else { return nil }
        let location = document.location(of: id)
        do {
            let checksum: Checksum
            switch key {
            case .sha256: checksum = try ChecksumRules.hexKey(text, algorithm: .sha256)
            case .sha384: checksum = try ChecksumRules.hexKey(text, algorithm: .sha384)
            case .sha512: checksum = try ChecksumRules.hexKey(text, algorithm: .sha512)
            case .integrity: checksum = try ChecksumRules.integrity(text)
            default: checksum = try ChecksumRules.prefixed(text)
            }
            if checksum.algorithm.isWeak {
                diagnostics.warning(
                    "\(checksum.algorithm.rawValue) is a weak digest algorithm (collisions are practical); "
                        + "prefer sha256", at: location, keyPath: path())
            }
            return checksum
        } catch {
            for message in error.messages { diagnostics.error(message, at: location, keyPath: path()) }
            return nil
        }
    }

    // MARK: headers

    private mutating func headers(_ id: NodeID, scope: Scope) -> [HeaderField] {
        guard requireKind(.mapping, id, path: scope.path("headers")) else { return [] }
        var fields: [HeaderField] = []
        // Canonical name → as first written, and where.
        var seen: [String: (name: String, line: Int)] = [:]
        for (keyID, valueID) in document.pairs(of: id) {
            guard let name = keyName(keyID, mappingPath: scope.path("headers")) else { continue }
            let keyLocation = document.location(of: keyID)
            guard HeaderRules.isToken(name) else {
                diagnostics.error(
                    "invalid header name \(Quoted.text(name)) (a header name is an RFC 7230 token: "
                        + "letters, digits and !#$%&'*+-.^_`|~)", at: keyLocation, keyPath: scope.path("headers"))
                continue
            }
            let canonical = HeaderRules.canonicalName(name)
            if HeaderRules.ownedByHaul.contains(canonical) {
                diagnostics.error(
                    "header \(Quoted.text(name)) is set by haul itself (it decides ranges, encodings, "
                        + "validators and framing so that the bytes hashed are the bytes stored)",
                    at: keyLocation, keyPath: scope.path("headers." + name))
                continue
            }
            if let earlier = seen[canonical] {
                let message =
                    earlier.name == name
                    ? "duplicate key \(Quoted.text(name)) (first on line \(earlier.line))"
                    : "duplicate header \(Quoted.text(name)) "
                        + "(also set as \(Quoted.text(earlier.name)) on line \(earlier.line))"
                diagnostics.error(message, at: keyLocation, keyPath: scope.path("headers." + name))
                continue
            }
            seen[canonical] = (name, keyLocation.line)
            if let value = headerValue(
                valueID, name: name, givenOnCommandLine: commandLineHeaders.contains(canonical),
                path: scope.path("headers." + name))
            {
                fields.append(HeaderField(name: name, value: value))
            }
        }
        return fields
    }

    /// `givenOnCommandLine`: `-H` gives this header, so a value whose variable is unset is dropped, not an error (it
    /// would never be sent); otherwise the error names `-H` as the other way to give the header.
    private mutating func headerValue(
        _ id: NodeID, name: String, givenOnCommandLine: Bool,
        path: @autoclosure () -> String
    ) -> TemplatedString? {
        guard let template = text(id, path: path(), expected: "a string") else { return nil }
        let location = document.location(of: id)
        if HeaderRules.hasForbiddenValueByte(template) {
            diagnostics.error("header value must not contain CR, LF or NUL", at: location, keyPath: path())
            return nil
        }
        let value: TemplatedString
        do {
            value = try expand(template)
        } catch {
            for message in error.messages {
                let unset = message.hasSuffix(" is not set")
                if unset && givenOnCommandLine { continue }
                let hint = unset ? " (set it, or give the header on the command line: -H '\(name): …')" : ""
                diagnostics.error(message + hint, at: location, keyPath: path())
            }
            return nil
        }
        guard HeaderRules.hasForbiddenValueByte(value.expanded) else { return value }
        guard !givenOnCommandLine else { return nil }
        // Blame the variable by name; its value may be a secret.
        for name in EnvironmentExpansion.referencedNames(in: template)
        where HeaderRules.hasForbiddenValueByte(environment[name] ?? "") {
            diagnostics.error(
                "environment variable \(name) holds CR, LF or NUL, which a header value cannot contain",
                at: location, keyPath: path())
        }
        return nil
    }

    // MARK: Typed scalars

    private mutating func retries(_ id: NodeID, path: @autoclosure () -> String) -> Int? {
        integer(id, path: path(), expected: "an integer from 0 to 100", range: 0...100).map { Int($0) }
    }

    /// A file haul hands to libcurl by name (a client certificate, its key), relative to the manifest's folder, read
    /// now: libcurl would find out only at the first handshake, naming no file.
    private mutating func readableFile(_ id: NodeID, path: @autoclosure () -> String) -> String? {
        guard let text = text(id, path: path(), expected: "a file path"), !text.isEmpty else {
            if document.kind(of: id) == .scalar {
                diagnostics.error(
                    "expected a file path, found an empty string", at: document.location(of: id), keyPath: path())
            }
            return nil
        }
        let resolved = PathRules.resolve(text, against: manifestDirectory)
        if let problem = ReadableFile.problem(resolved) {
            diagnostics.error(
                "cannot read \(Quoted.text(resolved)): \(problem)", at: document.location(of: id), keyPath: path())
            return nil
        }
        return resolved
    }

    private mutating func httpStatuses(_ id: NodeID, path: @autoclosure () -> String) -> [Int]? {
        checked(id, path: path(), expected: "HTTP statuses such as 429,503 or 500-504", ScalarRules.httpStatuses)
    }

    private mutating func duration(_ id: NodeID, path: @autoclosure () -> String) -> Seconds? {
        checked(id, path: path(), expected: "a duration", ScalarRules.duration)
    }

    private mutating func mode(_ id: NodeID, path: @autoclosure () -> String) -> FileMode? {
        checked(id, path: path(), expected: "octal permission bits such as \"0644\"", ScalarRules.mode)
    }

    /// A scalar's text through `rule`, each of its failures reported at the node.
    private mutating func checked<Value>(
        _ id: NodeID, path: @autoclosure () -> String, expected: String,
        _ rule: (String) throws(RuleFailure) -> Value
    ) -> Value? {
        guard let text = text(id, path: path(), expected: expected) else { return nil }
        do {
            return try rule(text)
        } catch {
            for message in error.messages { diagnostics.error(message, at: document.location(of: id), keyPath: path()) }
            return nil
        }
    }

    private mutating func boolean(_ id: NodeID, path: @autoclosure () -> String) -> Bool? {
        if document.kind(of: id) == .scalar, document.form(of: id) == .plain,
            let value = ScalarRules.boolean(document.text(of: id))
        {
            return value
        }
        report(expected: "true or false", id, path: path())
        return nil
    }

    /// A plain (unquoted) decimal integer within `range`.
    private mutating func integer(
        _ id: NodeID, path: @autoclosure () -> String, expected: String,
        range: ClosedRange<Int64> = Int64.min...Int64.max
    ) -> Int64? {
        if document.kind(of: id) == .scalar, document.form(of: id) == .plain,
            let value = ScalarRules.integer(document.text(of: id)), range.contains(value)
        {
            return value
        }
        report(expected: expected, id, path: path())
        return nil
    }

    /// The text of a non-null scalar; plain scalars count as text too (`dest: 2024` is the file "2024").
    private mutating func text(_ id: NodeID, path: @autoclosure () -> String, expected: String) -> String? {
        if document.kind(of: id) == .scalar, document.form(of: id) != .null { return document.text(of: id) }
        report(expected: expected, id, path: path())
        return nil
    }

    /// "expected …, found …" at the node; silent for aliases, which the reader already reported.
    private mutating func report(expected: String, _ id: NodeID, path: @autoclosure () -> String?) {
        guard document.kind(of: id) != .alias else { return }
        diagnostics.error(
            "expected \(expected), found \(document.describe(id))", at: document.location(of: id),
            keyPath: path())
    }

    /// Reports a wrong node kind (aliases were reported when read) and says whether `id` has `kind`.
    private mutating func requireKind(_ kind: YAMLDocument.Kind, _ id: NodeID, path: @autoclosure () -> String) -> Bool
    {
        if document.kind(of: id) == kind { return true }
        report(expected: kind == .mapping ? "a mapping" : "a sequence", id, path: path())
        return false
    }

    // MARK: Keys

    /// A mapping key's text; keys must be non-null scalars.
    private mutating func keyName(_ id: NodeID, mappingPath: @autoclosure () -> String?) -> String? {
        if document.kind(of: id) == .scalar, document.form(of: id) != .null { return document.text(of: id) }
        report(expected: "a key name", id, path: mappingPath())
        return nil
    }

    /// The known keys of a mapping in file order, after reporting unknown and repeated ones.
    private mutating func keyedPairs<Key: ManifestKey>(
        of id: NodeID, scope: Scope,
        as _: Key.Type
    ) -> [(key: Key, keyNode: NodeID, value: NodeID)] {
        var result: [(key: Key, keyNode: NodeID, value: NodeID)] = []
        result.reserveCapacity(document.childCount(of: id) / 2)
        let children = document.childIDs(of: id)
        var index = children.startIndex
        while index + 1 < children.endIndex {
            let keyID = children[index], valueID = children[index + 1]
            index += 2
            guard let name = keyName(keyID, mappingPath: scope.mappingPath) else { continue }
            let location = document.location(of: keyID)
            guard let key = Key.named(name) else {
                // A key with control characters would break the one-line key path, and a long one would fill the
                // screen; the message quotes it safely and shortened.
                let printable =
                    name.utf8.count <= Quoted.limit
                    && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }
                diagnostics.error(
                    unknownKeyMessage(name, known: Key.names, scope: scope), at: location,
                    keyPath: printable ? scope.path(name) : scope.mappingPath)
                continue
            }
            if let earlier = result.first(where: { $0.key == key }) {
                let firstLine = document.location(of: earlier.keyNode).line
                diagnostics.error(
                    "duplicate key \(Quoted.text(name)) (first on line \(firstLine))", at: location,
                    keyPath: scope.path(name))
                continue
            }
            result.append((key, keyID, valueID))
        }
        return result
    }

    private func unknownKeyMessage(_ name: String, known: [String], scope: Scope) -> String {
        let base = "unknown key \(Quoted.text(name))"
        if let suggestion = KeySuggestion.closest(to: name, among: known) {
            return base + "; did you mean \(Quoted.text(suggestion))?"
        }
        if case .defaults = scope, FileKey.named(name) != nil {
            return base + "; defaults can set only retries, timeout, retry_on, mode and headers"
        }
        return base
    }
}
