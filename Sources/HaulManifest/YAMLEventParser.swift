import CLibYAML

/// libyaml's event parser: the one place that sets it up, tears it down, frees its events and turns its errors
/// into a message and a place. libyaml keeps pointers into the input (or to the file's reading) for the parser's
/// whole life, so a parser exists only inside `parse(_:_:)`, over input that is pinned there.
struct YAMLEventParser: ~Copyable {
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    /// For messages that need the text before a place (a tab in an indentation, a byte offset's line).
    private let input: Input
    /// The event `next()` returned last, freed by the next call or at the end.
    private let current = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
    private var holdsEvent = false
    /// The last quoted value that ran over more than one line: where it opened, and the line it closed on. A quote
    /// left open in a manifest runs on to the next quote in the file, and YAML fails just after that one, on the
    /// line it closed on: the place to fix is where it opened.
    private var lastQuoteOverLines: (opening: yaml_mark_t, closingLine: Int)?

    private enum Input {
        case bytes(UnsafeBufferPointer<UInt8>)
        case file(ManifestFile.Reading)

        /// The text, read again from the file if need be: only on the way to a message.
        func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
            switch self {
            case .bytes(let bytes): body(bytes)
            case .file(let reading): reading.file.contents().withUnsafeBufferPointer(body)
            }
        }
    }

    /// Runs `body` with a parser over `source`; nil when libyaml cannot make one (out of memory).
    static func parse<Result>(_ source: YAMLSource, _ body: (inout YAMLEventParser) -> Result) -> Result? {
        switch source {
        case .bytes(let bytes):
            // libyaml wants a non-null pointer even for empty input.
            let pinned = bytes.isEmpty ? [0] : bytes
            return pinned.withUnsafeBufferPointer { buffer -> Result? in
                guard let base = buffer.baseAddress else { return nil }
                let input = UnsafeBufferPointer(rebasing: buffer[..<bytes.count])
                guard
                    var parser = YAMLEventParser(
                        input: .bytes(input), start: { yaml_parser_set_input_string($0, base, input.count) })
                else { return nil }
                return body(&parser)
            }
        case .file(let reading):
            return withExtendedLifetime(reading) {
                let data = Unmanaged.passUnretained(reading).toOpaque()
                guard
                    var parser = YAMLEventParser(
                        input: .file(reading),
                        start: { yaml_parser_set_input($0, readChunk, data) })
                else { return nil }
                return body(&parser)
            }
        }
    }

    /// libyaml's read handler for a file: the next bytes of the reading `data` points to.
    private static let readChunk:
        @convention(c) (
            UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt8>?, Int,
            UnsafeMutablePointer<Int>?
        ) -> Int32 = { data, buffer, size, sizeRead in
            guard let data, let buffer, let sizeRead else { return 0 }
            let reading = Unmanaged<ManifestFile.Reading>.fromOpaque(data).takeUnretainedValue()
            guard let count = reading.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size)) else {
                return 0
            }
            sizeRead.pointee = count
            return 1
        }

    private init?(input: Input, start: (UnsafeMutablePointer<yaml_parser_t>) -> Void) {
        parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        guard yaml_parser_initialize(parser) == 1 else {
            parser.deallocate()
            current.deallocate()
            return nil
        }
        self.input = input
        start(parser)
    }

    deinit {
        if holdsEvent { yaml_event_delete(current) }
        current.deallocate()
        yaml_parser_delete(parser)
        parser.deallocate()
    }

    /// The next event, valid until the next call (its strings point into libyaml's memory); nil at a syntax
    /// error, which `error` then describes.
    mutating func next() -> yaml_event_t? {
        if holdsEvent { yaml_event_delete(current) }
        holdsEvent = yaml_parser_parse(parser, current) == 1
        guard holdsEvent else { return nil }
        let event = current.pointee
        if event.type == YAML_SCALAR_EVENT, event.start_mark.line != event.end_mark.line,
            event.data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE
                || event.data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE
        {
            lastQuoteOverLines = (event.start_mark, Int(event.end_mark.line))
        }
        return event
    }

    /// Why `next()` returned nil: libyaml's problem, in a manifest editor's words (`YAMLSyntaxAdvice`), at the place
    /// libyaml names.
    var error: (message: String, location: SourceLocation?) {
        let state = parser.pointee
        let problem = state.problem.map { String(cString: $0) } ?? "invalid YAML"
        switch state.error {
        case YAML_MEMORY_ERROR:
            return ("cannot parse YAML: out of memory", nil)
        case YAML_READER_ERROR:
            if case .file(let reading) = input, let failure = reading.failure { return (failure, nil) }
            // Reader errors (bad encoding, control characters) carry a byte offset instead of a mark.
            return (
                YAMLSyntaxAdvice.message(problem: problem, context: nil, lineIndentedWithTab: false),
                input.withBytes { Self.location(ofByte: state.problem_offset, in: $0) }
            )
        case YAML_SCANNER_ERROR
        where Self.unclosedQuoteProblems.contains(problem)
            && state.context.map({ String(cString: $0) }) == "while scanning a quoted scalar":
            // libyaml gives up where the quote should have closed, the end of the file or of the document, far from
            // the mistake: the place to fix is the quote that opens the value.
            return (
                YAMLSyntaxAdvice.message(
                    problem: problem, context: "while scanning a quoted scalar",
                    lineIndentedWithTab: false),
                Self.location(state.context_mark)
            )
        default:
            let location = Self.location(state.problem_mark)
            let context = state.context.map { String(cString: $0) }.map { context in
                let mark = Self.location(state.context_mark)
                return "\(context) at line \(mark.line), column \(mark.column)"
            }
            let tab = input.withBytes { Self.indentationHasTab(line: location.line, in: $0) }
            if !tab, let quote = lastQuoteOverLines, quote.closingLine == Int(state.problem_mark.line) {
                return (
                    YAMLSyntaxAdvice.quoteRunningOn(to: location, problem: problem, context: context),
                    Self.location(quote.opening)
                )
            }
            return (YAMLSyntaxAdvice.message(problem: problem, context: context, lineIndentedWithTab: tab), location)
        }
    }

    /// libyaml's problems for a quoted value that runs to the end of the input.
    private static let unclosedQuoteProblems: Set<String> = [
        "found unexpected end of stream",
        "found unexpected document indicator",
    ]

    /// Whether line `line` (1-based) starts with blanks that include a tab.
    private static func indentationHasTab(line: Int, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var current = 1
        var index = 0
        while current < line, index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") { current += 1 }
            index += 1
        }
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
            if bytes[index] == UInt8(ascii: "\t") { return true }
            index += 1
        }
        return false
    }

    static func location(_ mark: yaml_mark_t) -> SourceLocation {
        SourceLocation(line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }

    /// Counts lines and characters (not bytes) up to `offset`, as libyaml's marks do.
    private static func location(ofByte offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> SourceLocation {
        var line = 1, column = 1
        var index = 0
        let end = min(offset, bytes.count)
        while index < end {
            let byte = bytes[index]
            let isLoneCR =
                byte == UInt8(ascii: "\r") && (index + 1 >= bytes.count || bytes[index + 1] != UInt8(ascii: "\n"))
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
