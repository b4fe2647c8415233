import CLibYAML

/// Receives the items of the top-level `files:` sequence a batch at a time, as soon as libyaml has finished them, so
/// that a 100,000-entry manifest never exists as a 100,000-entry tree: the reader discards a batch's nodes once the
/// sink has seen them.
protocol YAMLEntrySink {
    /// `items` are nodes of `document`, an arena holding this batch alone, in file order. The reader starts a new
    /// arena afterwards, without touching `document`'s storage: a sink may keep `document` (to hand it to another
    /// thread) at no extra cost.
    mutating func consume(items: [YAMLItem], in document: YAMLDocument)
}

/// One item of `files:`: its node and its position in the sequence.
struct YAMLItem: Sendable {
    var node: YAMLDocument.NodeID
    var index: Int
}

/// Turns manifest bytes into a `YAMLDocument` with libyaml's event API.
///
/// Anchors and aliases are rejected rather than expanded: nothing in a manifest needs them, and expanding them is
/// how a few hundred bytes become gigabytes (libyaml itself does not limit alias expansion).
struct YAMLReader {
    /// Everything but the streamed items.
    private var document = YAMLDocument()
    /// The streamed items not yet handed to the sink, in an arena of their own: the sink gets it whole and the
    /// reader starts afresh, so handing over costs nothing however large the rest of the document is.
    private var items = YAMLDocument()
    /// Open collections: node id (in the arena they belong to) and where their children start in `pending`.
    private var open: [(node: YAMLDocument.NodeID, pendingStart: Int)] = []
    /// Children of every open collection, innermost last; moved to `children` when a collection closes, so
    /// building the arena needs no per-collection allocation.
    private var pending: [YAMLDocument.NodeID] = []
    /// The `files:` sequence whose items go to the sink instead of the tree.
    private var streamed: YAMLDocument.NodeID?
    /// `open.count` while the streamed sequence is the innermost open collection, if it is open: nodes opened
    /// deeper belong to `items`.
    private var streamedDepth: Int?
    private var streamedCount = 0
    /// Finished items not yet handed to the sink.
    private var batch: [YAMLItem] = []
    /// Items per hand-over: one call per item was measurable, and a thread on the other end wants few wake-ups.
    static let batchSize = 256
    /// Collections nested deeper are refused: a manifest needs four levels, and libyaml's scanner slows down with
    /// depth (100,000 levels took 30 s).
    static let maximumDepth = 64
    /// Values one entry, or the rest of the document, may hold. An entry needs a few dozen; without a bound, 256 MiB
    /// of one-letter values (`[a,a,a,…]`) would take 40 bytes of arena each, 10 GB.
    static let maximumValues = 1_000_000
    /// Arena size at which finished items are handed over before a batch is full, so that many large entries do
    /// not pile up either.
    static let handOverNodes = 1 << 16
    /// `items.nodes.count` when the current item started.
    private var currentItemStart = 0

    /// What an input without a document (nothing, or comments only) is reported as; other readers of YAML (the
    /// config file) tell it apart by this text.
    static let emptyDocumentMessage = "the manifest is empty (expected a mapping with \"version\" and \"files\")"

    /// Nil when there is no document to validate (syntax error or empty input); the reason is in `diagnostics`.
    static func read<Sink: YAMLEntrySink>(
        _ source: YAMLSource, diagnostics: inout DiagnosticCollector,
        sink: inout Sink
    ) -> YAMLDocument? {
        var reader = YAMLReader()
        return reader.run(source, diagnostics: &diagnostics, sink: &sink)
    }

    private mutating func run<Sink: YAMLEntrySink>(
        _ source: YAMLSource, diagnostics: inout DiagnosticCollector,
        sink: inout Sink
    ) -> YAMLDocument? {
        let parsed = YAMLEventParser.parse(source) { parser in
            parseEvents(&parser, diagnostics: &diagnostics, sink: &sink)
        }
        guard let parsed else {
            diagnostics.error("cannot parse YAML: out of memory", at: nil)
            return nil
        }
        return parsed
    }

    private mutating func parseEvents<Sink: YAMLEntrySink>(
        _ parser: inout YAMLEventParser,
        diagnostics: inout DiagnosticCollector,
        sink: inout Sink
    ) -> YAMLDocument? {
        var documents = 0
        while true {
            guard let event = parser.next() else {
                let error = parser.error
                diagnostics.error(error.message, at: error.location)
                return nil
            }
            let location = YAMLEventParser.location(event.start_mark)
            switch event.type {
            case YAML_SCALAR_EVENT, YAML_ALIAS_EVENT, YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                guard hasRoomForNode(at: location, diagnostics: &diagnostics) else { return nil }
            default:
                break
            }

            switch event.type {
            case YAML_STREAM_END_EVENT:
                guard documents > 0, document.root != nil else {
                    diagnostics.error(Self.emptyDocumentMessage, at: SourceLocation(line: 1, column: 1))
                    return nil
                }
                return finished()
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 {
                    diagnostics.error("a manifest is a single YAML document; found a second one", at: location)
                    return document.root == nil ? nil : finished()
                }
            case YAML_SCALAR_EVENT:
                let scalar = event.data.scalar
                Self.checkProperties(anchor: scalar.anchor, tag: scalar.tag, at: location, diagnostics: &diagnostics)
                let bytes = UnsafeBufferPointer(start: scalar.value, count: scalar.value == nil ? 0 : scalar.length)
                let form = Self.scalarForm(bytes, style: scalar.style, tag: scalar.tag)
                let text = String(decoding: bytes, as: UTF8.self)
                let startsItem = isStreamedInnermost
                let id = add(YAMLDocument.Node(kind: .scalar, form: form, location: location, text: text))
                if startsItem { finishItem(id, sink: &sink) }
            case YAML_ALIAS_EVENT:
                let name = Self.string(event.data.alias.anchor)
                diagnostics.error(
                    "alias \"*\(name)\" is not supported: haul manifests do not use anchors or aliases",
                    at: location)
                let startsItem = isStreamedInnermost
                let id = add(YAMLDocument.Node(kind: .alias, form: .plain, location: location))
                if startsItem { finishItem(id, sink: &sink) }
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                let isSequence = event.type == YAML_SEQUENCE_START_EVENT
                let properties =
                    isSequence
                    ? (event.data.sequence_start.anchor, event.data.sequence_start.tag)
                    : (event.data.mapping_start.anchor, event.data.mapping_start.tag)
                Self.checkProperties(anchor: properties.0, tag: properties.1, at: location, diagnostics: &diagnostics)
                guard open.count < Self.maximumDepth else {
                    diagnostics.error(
                        "collections nested more than \(Self.maximumDepth) deep (a manifest needs 4 levels)",
                        at: location)
                    return nil
                }
                let isFiles = isSequence && streamed == nil && isValueOfRootFilesKey()
                let id = openCollection(isSequence ? .sequence : .mapping, at: location)
                if isFiles {
                    streamed = id
                    streamedDepth = open.count
                }
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                // The streamed sequence's last items go to the sink before it closes.
                if isStreamedInnermost { handOverBatch(to: &sink) }
                if let id = closeCollection(), isStreamedInnermost { finishItem(id, sink: &sink) }
            default:
                break
            }
        }
    }

    private func finished() -> YAMLDocument {
        var result = document
        result.streamedFiles = streamed.map { (sequence: $0, count: streamedCount) }
        return result
    }

    // MARK: Streaming `files:` items

    /// Whether the sequence about to open is the value of the top-level key `files`.
    private func isValueOfRootFilesKey() -> Bool {
        guard open.count == 1, let root = open.first, document.kind(of: root.node) == .mapping,
            (pending.count - root.pendingStart) % 2 == 1, let key = pending.last
        else { return false }
        return document.kind(of: key) == .scalar && document.form(of: key) != .null
            && document.text(of: key) == TopLevelKey.files.rawValue
    }

    /// Whether the streamed sequence is the innermost open collection, so that the next node is one of its items.
    private var isStreamedInnermost: Bool { streamedDepth == open.count }

    /// Whether nodes added now belong to `items`: the streamed sequence is open, and they are inside it.
    private var addsToItems: Bool { streamedDepth.map { open.count >= $0 } ?? false }

    /// Whether the node about to be added keeps its entry (or the rest of the document) within `maximumValues`;
    /// reports it when not.
    private mutating func hasRoomForNode(at location: SourceLocation, diagnostics: inout DiagnosticCollector) -> Bool {
        if isStreamedInnermost { currentItemStart = items.nodes.count }
        if addsToItems {
            guard items.nodes.count - currentItemStart >= Self.maximumValues else { return true }
            diagnostics.error(
                "more than \(Self.maximumValues) YAML values in one entry (an entry needs a few dozen)",
                at: location, keyPath: "files[\(streamedCount)]")
        } else {
            guard document.nodes.count >= Self.maximumValues else { return true }
            diagnostics.error(
                "more than \(Self.maximumValues) YAML values besides the entries of files "
                    + "(a manifest needs a few dozen)", at: location)
        }
        return false
    }

    private mutating func finishItem<Sink: YAMLEntrySink>(_ id: YAMLDocument.NodeID, sink: inout Sink) {
        _ = pending.popLast()
        if batch.capacity == 0 { batch.reserveCapacity(Self.batchSize) }
        batch.append(YAMLItem(node: id, index: streamedCount))
        streamedCount += 1
        if batch.count == Self.batchSize || items.nodes.count >= Self.handOverNodes { handOverBatch(to: &sink) }
    }

    /// Gives the finished items, with their arena, to the sink, and starts a new arena as large as the old (up to
    /// `handOverNodes`): the next batch grows into it without reallocating.
    private mutating func handOverBatch<Sink: YAMLEntrySink>(to sink: inout Sink) {
        guard !batch.isEmpty else { return }
        let capacity = (
            nodes: min(items.nodes.capacity, Self.handOverNodes),
            children: min(items.children.capacity, Self.handOverNodes)
        )
        sink.consume(items: batch, in: items)
        batch = []
        items = YAMLDocument()
        items.nodes.reserveCapacity(capacity.nodes)
        items.children.reserveCapacity(capacity.children)
    }

    // MARK: Building the arenas

    /// Runs `body` on the arena that nodes added now belong to.
    private mutating func withCurrentArena<R>(_ body: (inout YAMLDocument) -> R) -> R {
        addsToItems ? body(&items) : body(&document)
    }

    @discardableResult
    private mutating func add(_ node: YAMLDocument.Node) -> YAMLDocument.NodeID {
        let id = withCurrentArena { arena in
            arena.nodes.append(node)
            return YAMLDocument.NodeID(truncatingIfNeeded: arena.nodes.count - 1)
        }
        if open.isEmpty {
            document.root = id
        } else {
            pending.append(id)
        }
        return id
    }

    @discardableResult
    private mutating func openCollection(_ kind: YAMLDocument.Kind, at location: SourceLocation) -> YAMLDocument.NodeID
    {
        let id = add(YAMLDocument.Node(kind: kind, form: .plain, location: location))
        open.append((id, pending.count))
        return id
    }

    /// The closed collection's id.
    private mutating func closeCollection() -> YAMLDocument.NodeID? {
        guard let (id, start) = open.popLast() else { return nil }
        if let depth = streamedDepth, open.count < depth {
            // The streamed sequence itself: it lives in `document`, and later nodes do too.
            streamedDepth = nil
        }
        do {
            // Released before `pending` shrinks, which would otherwise copy it.
            let children = pending[start...]
            withCurrentArena { arena in
                arena.nodes[Int(id)].firstChild = Int32(truncatingIfNeeded: arena.children.count)
                arena.nodes[Int(id)].childCount = Int32(truncatingIfNeeded: children.count)
                arena.children.append(contentsOf: children)
            }
        }
        pending.removeSubrange(start...)
        return id
    }

    // MARK: Node properties

    private static let standardTagPrefix = "tag:yaml.org,2002:"
    /// Core-schema tags a plain manifest may carry; anything else asks for a type haul has no meaning for.
    private static let acceptedStandardTags: Set<String> = ["str", "int", "float", "bool", "null", "map", "seq"]

    private static func checkProperties(
        anchor: UnsafeMutablePointer<yaml_char_t>?, tag: UnsafeMutablePointer<yaml_char_t>?,
        at location: SourceLocation, diagnostics: inout DiagnosticCollector
    ) {
        if let anchor {
            diagnostics.error(
                "anchor \"&\(string(anchor))\" is not supported: haul manifests do not use anchors or aliases",
                at: location)
        }
        if let tag {
            let name = string(tag)
            if name == "!" { return }
            if name.hasPrefix(standardTagPrefix),
                acceptedStandardTags.contains(String(name.dropFirst(standardTagPrefix.count)))
            {
                return
            }
            diagnostics.error(
                "unsupported YAML tag \(Quoted.text(displayTag(name))) (haul manifests use plain YAML values)",
                at: location)
        }
    }

    /// `tag:yaml.org,2002:binary` reads back as the `!!binary` the user typed.
    private static func displayTag(_ tag: String) -> String {
        tag.hasPrefix(standardTagPrefix) ? "!!" + tag.dropFirst(standardTagPrefix.count) : tag
    }

    /// Decided on the bytes: comparing a `String` against the null spellings for every scalar showed up in profiles.
    private static func scalarForm(
        _ bytes: UnsafeBufferPointer<UInt8>, style: yaml_scalar_style_t,
        tag: UnsafeMutablePointer<yaml_char_t>?
    ) -> YAMLDocument.ScalarForm {
        if let tag {
            let name = string(tag)
            if name == standardTagPrefix + "null" { return .null }
            if name == standardTagPrefix + "str" || name == "!" { return .string }
        }
        guard style == YAML_PLAIN_SCALAR_STYLE else { return .string }
        switch bytes.count {
        case 0:
            return .null
        case 1:
            return bytes[0] == UInt8(ascii: "~") ? .null : .plain
        case 4:
            let spelled = String(decoding: bytes, as: UTF8.self)
            return spelled == "null" || spelled == "Null" || spelled == "NULL" ? .null : .plain
        default:
            return .plain
        }
    }

    // MARK: Positions and errors

    /// libyaml marks are 0-based; messages are 1-based like compilers'.
    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String {
        guard let pointer else { return "" }
        return String(cString: UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))
    }

    private static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }
}
