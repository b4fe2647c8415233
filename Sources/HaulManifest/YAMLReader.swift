import CLibYAML

/// Receives the items of the top-level `files:` sequence a batch at a time, as soon as libyaml has finished them, so
/// that a 100,000-entry manifest never exists as a 100,000-entry tree: the reader discards a batch's nodes once the
/// sink has seen them.
protocol YAMLEntrySink {
    /// `items` are nodes of `document`, in file order. The reader drops them from its own arena afterwards, without
    /// touching `document`'s storage: a sink may keep `document` (to hand it to another thread) at no extra cost.
    mutating func consume(items: [YAMLItem], in document: YAMLDocument)
    /// A scalar value of a top-level key, as soon as it is read (long before the document ends when `files:`
    /// comes later); the document is validated as a whole afterwards all the same.
    mutating func sawTopLevelScalar(key: String, value: YAMLDocument.NodeID, in document: YAMLDocument)
}

extension YAMLEntrySink {
    mutating func sawTopLevelScalar(key: String, value: YAMLDocument.NodeID, in document: YAMLDocument) {}
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
    private var document = YAMLDocument()
    /// Open collections: node id and where their children start in `pending`.
    private var open: [(node: YAMLDocument.NodeID, pendingStart: Int)] = []
    /// Children of every open collection, innermost last; moved to `document.children` when a collection closes,
    /// so building the arena needs no per-collection allocation.
    private var pending: [YAMLDocument.NodeID] = []
    /// The `files:` sequence whose items go to the sink instead of the tree.
    private var streamed: YAMLDocument.NodeID?
    private var streamedCount = 0
    /// Finished items not yet handed to the sink.
    private var batch: [YAMLItem] = []
    /// Arena sizes when the first item of `batch` started; restored once the sink has consumed the batch.
    private var batchMarks = (nodes: 0, children: 0)
    /// Items per hand-over: one call per item was measurable, and a thread on the other end wants few wake-ups.
    static let batchSize = 256

    /// Nil when there is no document to validate (syntax error or empty input); the reason is in `diagnostics`.
    static func read<Sink: YAMLEntrySink>(_ bytes: [UInt8], diagnostics: inout DiagnosticCollector,
                                          sink: inout Sink) -> YAMLDocument? {
        var reader = YAMLReader()
        return reader.run(bytes, diagnostics: &diagnostics, sink: &sink)
    }

    private mutating func run<Sink: YAMLEntrySink>(_ bytes: [UInt8], diagnostics: inout DiagnosticCollector,
                                                   sink: inout Sink) -> YAMLDocument? {
        // libyaml wants a non-null pointer even for empty input.
        let input = bytes.isEmpty ? [0] : bytes
        // libyaml keeps pointers into the input for the parser's whole life: create and delete it inside the pin.
        return input.withUnsafeBufferPointer { buffer -> YAMLDocument? in
            guard let base = buffer.baseAddress else { return nil }
            let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
            defer { parser.deallocate() }
            guard yaml_parser_initialize(parser) == 1 else {
                diagnostics.error("cannot parse YAML: out of memory", at: nil)
                return nil
            }
            defer { yaml_parser_delete(parser) }
            yaml_parser_set_input_string(parser, base, bytes.count)
            return parseEvents(parser, bytes: UnsafeBufferPointer(rebasing: buffer[..<bytes.count]),
                               diagnostics: &diagnostics, sink: &sink)
        }
    }

    private mutating func parseEvents<Sink: YAMLEntrySink>(_ parser: UnsafeMutablePointer<yaml_parser_t>,
                                                           bytes: UnsafeBufferPointer<UInt8>,
                                                           diagnostics: inout DiagnosticCollector,
                                                           sink: inout Sink) -> YAMLDocument? {
        var event = yaml_event_t()
        var documents = 0
        while true {
            guard yaml_parser_parse(parser, &event) == 1 else {
                Self.reportParserError(parser.pointee, bytes: bytes, diagnostics: &diagnostics)
                return nil
            }
            defer { yaml_event_delete(&event) }
            let location = Self.location(event.start_mark)

            switch event.type {
            case YAML_STREAM_END_EVENT:
                guard documents > 0, document.root != nil else {
                    diagnostics.error("the manifest is empty (expected a mapping with \"version\" and \"files\")",
                                      at: SourceLocation(line: 1, column: 1))
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
                let startsItem = markItemStart()
                let id = add(YAMLDocument.Node(kind: .scalar, form: form, location: location, text: text))
                if startsItem { finishItem(id, sink: &sink) }
                if let key = topLevelKey(ofValue: id) { sink.sawTopLevelScalar(key: key, value: id, in: document) }
            case YAML_ALIAS_EVENT:
                let name = Self.string(event.data.alias.anchor)
                diagnostics.error("alias \"*\(name)\" is not supported: haul manifests do not use anchors or aliases",
                                  at: location)
                let startsItem = markItemStart()
                let id = add(YAMLDocument.Node(kind: .alias, form: .plain, location: location))
                if startsItem { finishItem(id, sink: &sink) }
            case YAML_SEQUENCE_START_EVENT:
                let start = event.data.sequence_start
                Self.checkProperties(anchor: start.anchor, tag: start.tag, at: location, diagnostics: &diagnostics)
                let isFiles = streamed == nil && isValueOfRootFilesKey()
                _ = markItemStart()
                let id = openCollection(.sequence, at: location)
                if isFiles { streamed = id }
            case YAML_MAPPING_START_EVENT:
                let start = event.data.mapping_start
                Self.checkProperties(anchor: start.anchor, tag: start.tag, at: location, diagnostics: &diagnostics)
                _ = markItemStart()
                openCollection(.mapping, at: location)
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                // The streamed sequence's last items go to the sink before anything else joins the arena.
                if streamed != nil, open.last?.node == streamed { handOverBatch(to: &sink) }
                if let id = closeCollection(), streamed != nil, open.last?.node == streamed {
                    finishItem(id, sink: &sink)
                }
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
              (pending.count - root.pendingStart) % 2 == 1, let key = pending.last else { return false }
        return document.kind(of: key) == .scalar && document.form(of: key) != .null
            && document.text(of: key) == TopLevelKey.files.rawValue
    }

    /// The top-level key whose value `node` (just added) is, if it is one.
    private func topLevelKey(ofValue node: YAMLDocument.NodeID) -> String? {
        guard open.count == 1, let root = open.first, document.kind(of: root.node) == .mapping,
              pending.last == node, (pending.count - root.pendingStart) % 2 == 0 else { return nil }
        let key = pending[pending.count - 2]
        guard document.kind(of: key) == .scalar, document.form(of: key) != .null else { return nil }
        return document.text(of: key)
    }

    /// Whether the node about to start is an item of the streamed sequence; the first of a batch marks the arena.
    private mutating func markItemStart() -> Bool {
        guard streamed != nil, open.last?.node == streamed else { return false }
        if batch.isEmpty { batchMarks = (document.nodes.count, document.children.count) }
        return true
    }

    private mutating func finishItem<Sink: YAMLEntrySink>(_ id: YAMLDocument.NodeID, sink: inout Sink) {
        _ = pending.popLast()
        if batch.capacity == 0 { batch.reserveCapacity(Self.batchSize) }
        batch.append(YAMLItem(node: id, index: streamedCount))
        streamedCount += 1
        if batch.count == Self.batchSize { handOverBatch(to: &sink) }
    }

    /// Gives the finished items to the sink, then forgets their nodes. The arena keeps only what precedes them, in
    /// fresh storage: truncating in place would first copy every node of a batch the sink still holds.
    private mutating func handOverBatch<Sink: YAMLEntrySink>(to sink: inout Sink) {
        guard !batch.isEmpty else { return }
        sink.consume(items: batch, in: document)
        batch = []
        document.nodes = Self.prefix(document.nodes, count: batchMarks.nodes)
        document.children = Self.prefix(document.children, count: batchMarks.children)
    }

    /// The first `count` elements in new storage as large as the old: the next batch grows into it without
    /// reallocating.
    private static func prefix<Element>(_ elements: [Element], count: Int) -> [Element] {
        var kept: [Element] = []
        kept.reserveCapacity(elements.capacity)
        kept.append(contentsOf: elements[..<count])
        return kept
    }

    // MARK: Building the arena

    @discardableResult
    private mutating func add(_ node: YAMLDocument.Node) -> YAMLDocument.NodeID {
        let id = YAMLDocument.NodeID(truncatingIfNeeded: document.nodes.count)
        document.nodes.append(node)
        if open.isEmpty {
            document.root = id
        } else {
            pending.append(id)
        }
        return id
    }

    @discardableResult
    private mutating func openCollection(_ kind: YAMLDocument.Kind, at location: SourceLocation) -> YAMLDocument.NodeID {
        let id = add(YAMLDocument.Node(kind: kind, form: .plain, location: location))
        open.append((id, pending.count))
        return id
    }

    /// The closed collection's id.
    private mutating func closeCollection() -> YAMLDocument.NodeID? {
        guard let (id, start) = open.popLast() else { return nil }
        let first = document.children.count
        document.children.append(contentsOf: pending[start...])
        let count = pending.count - start
        pending.removeSubrange(start...)
        document.nodes[Int(id)].firstChild = Int32(truncatingIfNeeded: first)
        document.nodes[Int(id)].childCount = Int32(truncatingIfNeeded: count)
        return id
    }

    // MARK: Node properties

    private static let standardTagPrefix = "tag:yaml.org,2002:"
    /// Core-schema tags a plain manifest may carry; anything else asks for a type haul has no meaning for.
    private static let acceptedStandardTags: Set<String> = ["str", "int", "float", "bool", "null", "map", "seq"]

    private static func checkProperties(anchor: UnsafeMutablePointer<yaml_char_t>?, tag: UnsafeMutablePointer<yaml_char_t>?,
                                        at location: SourceLocation, diagnostics: inout DiagnosticCollector) {
        if let anchor {
            diagnostics.error("anchor \"&\(string(anchor))\" is not supported: haul manifests do not use anchors or aliases",
                              at: location)
        }
        if let tag {
            let name = string(tag)
            if name == "!" { return }
            if name.hasPrefix(standardTagPrefix),
               acceptedStandardTags.contains(String(name.dropFirst(standardTagPrefix.count))) {
                return
            }
            diagnostics.error("unsupported YAML tag \(Quoted.text(displayTag(name))) (haul manifests use plain YAML values)",
                              at: location)
        }
    }

    /// `tag:yaml.org,2002:binary` reads back as the `!!binary` the user typed.
    private static func displayTag(_ tag: String) -> String {
        tag.hasPrefix(standardTagPrefix) ? "!!" + tag.dropFirst(standardTagPrefix.count) : tag
    }

    /// Decided on the bytes: comparing a `String` against the null spellings for every scalar showed up in profiles.
    private static func scalarForm(_ bytes: UnsafeBufferPointer<UInt8>, style: yaml_scalar_style_t,
                                   tag: UnsafeMutablePointer<yaml_char_t>?) -> YAMLDocument.ScalarForm {
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
    static func location(_ mark: yaml_mark_t) -> SourceLocation {
        SourceLocation(line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }

    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String {
        guard let pointer else { return "" }
        return String(cString: UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))
    }

    private static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    private static func reportParserError(_ parser: yaml_parser_t, bytes: UnsafeBufferPointer<UInt8>,
                                          diagnostics: inout DiagnosticCollector) {
        let problem = string(parser.problem) ?? "invalid YAML"
        switch parser.error {
        case YAML_MEMORY_ERROR:
            diagnostics.error("cannot parse YAML: out of memory", at: nil)
        case YAML_READER_ERROR:
            // Reader errors (bad encoding, control characters) carry a byte offset instead of a mark.
            diagnostics.error(problem, at: location(ofByte: parser.problem_offset, in: bytes))
        default:
            var message = problem
            if let context = string(parser.context) {
                let mark = location(parser.context_mark)
                message += " (\(context) at line \(mark.line), column \(mark.column))"
            }
            diagnostics.error(message, at: location(parser.problem_mark))
        }
    }

    /// Counts lines and characters (not bytes) up to `offset`, as libyaml's marks do.
    private static func location(ofByte offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> SourceLocation {
        var line = 1, column = 1
        var index = 0
        let end = min(offset, bytes.count)
        while index < end {
            let byte = bytes[index]
            let isLoneCR = byte == UInt8(ascii: "\r") && (index + 1 >= bytes.count || bytes[index + 1] != UInt8(ascii: "\n"))
            if byte == UInt8(ascii: "\n") || isLoneCR {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 && byte != UInt8(ascii: "\r") {
                column += 1
            }
            index += 1
        }
        return SourceLocation(line: line, column: column)
    }
}
