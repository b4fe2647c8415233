/// A regular expression matched in time linear in its input: a Thompson NFA run as a Pike VM (the design of RE2,
/// Go's `regexp` and Rust's `regex`), with capture slots.
///
/// Why not Swift's `Regex`: it backtracks, so a pattern such as `(a+)+$` takes seconds to minutes on a URL of forty
/// characters, and a config file's rule would then stall every entry it is tried on. Here a match costs at most
/// (pattern size × URL length) steps, whatever the pattern. The price is RE2's: no backreferences and no
/// lookarounds (refused when the config is read, with what to write instead).
///
/// Syntax: literals; `.` (any character but a newline); `[...]` and `[^...]` with ranges and the classes below;
/// `\d \D \w \W \s \S` (ASCII); `\t \n \r \f \v`; `\` before any other punctuation for the character itself; `^`
/// and `$` (start and end of the input); groups `(...)`, `(?:...)`, `(?<name>...)`, `(?P<name>...)`; `|`;
/// `* + ? {n} {n,} {n,m}`, each followed by `?` to prefer fewer; a leading `(?i)` for ASCII letters in any case.
/// Characters are Unicode scalars. Matching prefers the leftmost alternative and the greedy choice, as a
/// backtracking engine would, so groups capture what they would capture there.
package struct LinearRegex: Sendable {
    /// Capturing groups in the pattern.
    package let groupCount: Int
    private let program: [Instruction]

    /// The most instructions a pattern may compile to: `x{1000}` of a long `x` would otherwise make matching slow
    /// again, by the pattern's size rather than the input's.
    static let maximumInstructions = 20_000
    /// The most a counted repetition may say, as in RE2.
    static let maximumRepetition = 1_000

    package init(_ pattern: String) throws(LinearRegexError) {
        var parser = Parser(Array(pattern.unicodeScalars))
        let tree = try parser.parse()
        var compiler = Compiler(caseInsensitive: parser.caseInsensitive)
        try compiler.emit(.group(tree, capture: 0))
        compiler.program.append(.match)
        program = compiler.program
        groupCount = parser.groupCount
    }

    /// The whole of `input` matched: element 0 is the input, element k group k's text (nil when it took no part).
    /// nil when the pattern does not match the whole input.
    package func wholeMatch(_ input: String) -> [Substring?]? {
        let scalars = Array(input.unicodeScalars)
        guard let slots = run(scalars) else { return nil }
        let indices = Array(input.unicodeScalars.indices) + [input.unicodeScalars.endIndex]
        return (0...groupCount).map { group in
            let start = slots[2 * group], end = slots[2 * group + 1]
            guard start >= 0, end >= start else { return nil }
            return input[indices[start]..<indices[end]]
        }
    }

    // MARK: - The machine

    fileprivate enum Instruction: Sendable {
        case scalar(Unicode.Scalar)
        case scalarAnyCase(lower: Unicode.Scalar, upper: Unicode.Scalar)
        case set(ScalarSet)
        case anyButNewline
        /// Try `preferred` first, then `other`.
        case split(preferred: Int, other: Int)
        case jump(Int)
        case save(Int)
        case assertStart
        case assertEnd
        case match
    }

    private struct Thread {
        var pc: Int
        var slots: [Int]
    }

    /// Runs every thread in lockstep over the input, each program position at most once per input position: the
    /// highest-priority thread that reaches `match` at the end of the input wins.
    private func run(_ input: [Unicode.Scalar]) -> [Int]? {
        let slotCount = 2 * (groupCount + 1)
        var current: [Thread] = []
        var next: [Thread] = []
        var seen = [Int](repeating: -1, count: program.count)
        var stack: [Thread] = []
        current.reserveCapacity(program.count)
        next.reserveCapacity(program.count)
        add(
            Thread(pc: 0, slots: [Int](repeating: -1, count: slotCount)), at: 0, of: input, to: &current,
            seen: &seen, generation: 0, stack: &stack)
        for position in 0...input.count {
            guard !current.isEmpty else { return nil }
            let scalar: Unicode.Scalar? = position < input.count ? input[position] : nil
            for thread in current {
                switch program[thread.pc] {
                case .match:
                    // Only a match of the whole input counts; the threads after this one are lower in priority.
                    if scalar == nil { return thread.slots }
                    continue
                case .scalar(let expected):
                    guard scalar == expected else { continue }
                case .scalarAnyCase(let lower, let upper):
                    guard scalar == lower || scalar == upper else { continue }
                case .set(let set):
                    guard let scalar, set.contains(scalar) else { continue }
                case .anyButNewline:
                    guard let scalar, scalar != "\n" else { continue }
                case .split, .jump, .save, .assertStart, .assertEnd:
                    continue  // followed by `add`, never queued
                }
                add(
                    Thread(pc: thread.pc + 1, slots: thread.slots), at: position + 1, of: input, to: &next,
                    seen: &seen, generation: position + 1, stack: &stack)
            }
            swap(&current, &next)
            next.removeAll(keepingCapacity: true)
        }
        return nil
    }

    /// Follows the instructions that consume nothing from `thread`, in priority order, and queues the threads that
    /// wait for a character (or at `match`). An explicit stack, so a long chain of them cannot overflow the thread's.
    private func add(
        _ thread: Thread, at position: Int, of input: [Unicode.Scalar], to list: inout [Thread],
        seen: inout [Int], generation: Int, stack: inout [Thread]
    ) {
        stack.append(thread)
        while var thread = stack.popLast() {
            guard seen[thread.pc] != generation else { continue }
            seen[thread.pc] = generation
            switch program[thread.pc] {
            case .jump(let target):
                thread.pc = target
                stack.append(thread)
            case .split(let preferred, let other):
                stack.append(Thread(pc: other, slots: thread.slots))
                thread.pc = preferred
                stack.append(thread)
            case .save(let slot):
                thread.slots[slot] = position
                thread.pc += 1
                stack.append(thread)
            case .assertStart:
                guard position == 0 else { continue }
                thread.pc += 1
                stack.append(thread)
            case .assertEnd:
                guard position == input.count else { continue }
                thread.pc += 1
                stack.append(thread)
            case .scalar, .scalarAnyCase, .set, .anyButNewline, .match:
                list.append(thread)
            }
        }
    }
}

/// Why a pattern was refused, and where in it (a 1-based character position).
package struct LinearRegexError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var position: Int?
    package var description: String { position.map { "\(message) at character \($0)" } ?? message }
}

/// Characters a class matches: ranges, possibly negated.
private struct ScalarSet: Sendable {
    var ranges: [ClosedRange<UInt32>] = []
    var negated = false

    func contains(_ scalar: Unicode.Scalar) -> Bool {
        ranges.contains { $0.contains(scalar.value) } != negated
    }

    mutating func add(_ lower: Unicode.Scalar, _ upper: Unicode.Scalar) { ranges.append(lower.value...upper.value) }

    mutating func add(_ other: ScalarSet) {
        guard other.negated else { return ranges += other.ranges }
        // The complement of `other`'s ranges over all scalars.
        var start: UInt32 = 0
        for range in other.ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if range.lowerBound > start { ranges.append(start...(range.lowerBound - 1)) }
            start = max(start, range.upperBound &+ 1)
        }
        if start <= 0x10FFFF { ranges.append(start...0x10FFFF) }
    }

    /// With ASCII letters in both cases.
    func foldingASCIICase() -> ScalarSet {
        var folded = self
        for range in ranges {
            for (from, to) in [(UInt32(0x61), UInt32(0x7A)), (UInt32(0x41), UInt32(0x5A))] {
                let low = max(range.lowerBound, from), high = min(range.upperBound, to)
                guard low <= high else { continue }
                let shift: Int64 = from == 0x61 ? -32 : 32
                folded.ranges.append(UInt32(Int64(low) + shift)...UInt32(Int64(high) + shift))
            }
        }
        return folded
    }

    static let digits = ScalarSet(ranges: [0x30...0x39])
    static let word = ScalarSet(ranges: [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A])
    static let space = ScalarSet(ranges: [0x09...0x0D, 0x20...0x20])
}

// MARK: - Parsing

private indirect enum Node {
    case empty
    case scalar(Unicode.Scalar)
    case set(ScalarSet)
    case anyButNewline
    case start, end
    case group(Node, capture: Int?)
    case sequence([Node])
    case alternatives([Node])
    case repetition(Node, minimum: Int, maximum: Int?, greedy: Bool)
}

private struct Parser {
    private let pattern: [Unicode.Scalar]
    private var index = 0
    private(set) var groupCount = 0
    private(set) var caseInsensitive = false

    init(_ pattern: [Unicode.Scalar]) { self.pattern = pattern }

    mutating func parse() throws(LinearRegexError) -> Node {
        if pattern.starts(with: Array("(?i)".unicodeScalars)) {
            caseInsensitive = true
            index = 4
        }
        let tree = try alternatives()
        if index < pattern.count { throw failure("unbalanced \")\"") }  // the only way `alternatives` stops early
        return tree
    }

    private func failure(_ message: String, at position: Int? = nil) -> LinearRegexError {
        LinearRegexError(message: message, position: (position ?? index) + 1)
    }

    private var current: Unicode.Scalar? { index < pattern.count ? pattern[index] : nil }

    private mutating func alternatives() throws(LinearRegexError) -> Node {
        var branches = [try sequence()]
        while current == "|" {
            index += 1
            branches.append(try sequence())
        }
        return branches.count == 1 ? branches[0] : .alternatives(branches)
    }

    private mutating func sequence() throws(LinearRegexError) -> Node {
        var items: [Node] = []
        while let scalar = current, scalar != "|", scalar != ")" {
            let atom = try self.atom()
            items.append(try quantified(atom))
        }
        return items.isEmpty ? .empty : items.count == 1 ? items[0] : .sequence(items)
    }

    private mutating func atom() throws(LinearRegexError) -> Node {
        let start = index
        guard let scalar = current else { throw failure("the pattern ends too soon") }
        index += 1
        switch scalar {
        case ".": return .anyButNewline
        case "^": return .start
        case "$": return .end
        case "[": return .set(try characterClass())
        case "\\": return try escape(inClass: false)
        case "(": return try group(openedAt: start)
        case "*", "+", "?":
            throw failure("\"\(scalar)\" repeats nothing: write \"\\\(scalar)\" for the character itself", at: start)
        default: return .scalar(scalar)
        }
    }

    private mutating func group(openedAt start: Int) throws(LinearRegexError) -> Node {
        var capture: Int?
        if current == "?" {
            let rest = pattern[(index + 1)...]
            if rest.first == ":" {
                index += 2
            } else if rest.starts(with: ["<"]) && !rest.starts(with: ["<", "="]) && !rest.starts(with: ["<", "!"])
                || rest.starts(with: ["P", "<"]) || rest.starts(with: ["'"])
            {
                let close: Unicode.Scalar = rest.first == "'" ? "'" : ">"
                guard let end = pattern[index...].firstIndex(of: close), end > index + (rest.first == "P" ? 3 : 2) - 1
                else {
                    throw failure("a group name is not closed", at: start)
                }
                index = end + 1
                groupCount += 1
                capture = groupCount
            } else if rest.starts(with: ["="]) || rest.starts(with: ["!"]) || rest.starts(with: ["<", "="])
                || rest.starts(with: ["<", "!"])
            {
                throw failure(
                    "lookarounds ((?=, (?!, (?<=, (?<!) are not supported: rules are matched in linear time, "
                        + "as RE2 does", at: start)
            } else {
                throw failure("\"(?\" here is not supported (only (?:, (?<name> and a leading (?i))", at: start)
            }
        } else {
            groupCount += 1
            capture = groupCount
        }
        let inner = try alternatives()
        guard current == ")" else { throw failure("expected \")\" to close the group opened", at: start) }
        index += 1
        return .group(inner, capture: capture)
    }

    private mutating func quantified(_ atom: Node) throws(LinearRegexError) -> Node {
        var node = atom
        while let scalar = current {
            let start = index
            let bounds: (Int, Int?)
            switch scalar {
            case "*": bounds = (0, nil); index += 1
            case "+": bounds = (1, nil); index += 1
            case "?": bounds = (0, 1); index += 1
            case "{":
                guard let counted = try counted() else { return node }
                bounds = counted
            default: return node
            }
            if case .start = node { throw failure("\"^\" cannot be repeated", at: start) }
            if case .end = node { throw failure("\"$\" cannot be repeated", at: start) }
            var greedy = true
            if current == "?" {
                greedy = false
                index += 1
            } else if current == "+" {
                throw failure("possessive quantifiers are not supported", at: index)
            }
            node = .repetition(node, minimum: bounds.0, maximum: bounds.1, greedy: greedy)
        }
        return node
    }

    /// `{n}`, `{n,}`, `{n,m}`; nil (and nothing consumed) when the brace does not start one: it is then a literal.
    private mutating func counted() throws(LinearRegexError) -> (Int, Int?)? {
        let start = index
        var cursor = index + 1
        func number() -> Int? {
            var value: Int?
            while cursor < pattern.count, ("0"..."9").contains(pattern[cursor]) {
                value = min((value ?? 0) * 10 + Int(pattern[cursor].value - 0x30), 1_000_000)
                cursor += 1
            }
            return value
        }
        guard let minimum = number() else { return nil }
        var maximum: Int? = minimum
        if cursor < pattern.count, pattern[cursor] == "," {
            cursor += 1
            maximum = number()
        }
        guard cursor < pattern.count, pattern[cursor] == "}" else { return nil }
        index = cursor + 1
        if let maximum, maximum < minimum {
            throw failure("{\(minimum),\(maximum)} repeats at least more than at most", at: start)
        }
        guard max(minimum, maximum ?? 0) <= LinearRegex.maximumRepetition else {
            throw failure("a repetition count is at most \(LinearRegex.maximumRepetition)", at: start)
        }
        return (minimum, maximum)
    }

    private mutating func characterClass() throws(LinearRegexError) -> ScalarSet {
        let start = index - 1
        var set = ScalarSet()
        if current == "^" {
            set.negated = true
            index += 1
        }
        var first = true
        while true {
            guard let scalar = current else { throw failure("expected \"]\" to close the class opened", at: start) }
            if scalar == "]" && !first { break }
            first = false
            index += 1
            let lower: Unicode.Scalar
            switch scalar {
            case "\\":
                switch try escape(inClass: true) {
                case .scalar(let escaped): lower = escaped
                case .set(let named):
                    set.add(named)
                    continue
                default: throw failure("unexpected escape in a class", at: index - 2)
                }
            case "[":
                throw failure("\"[\" inside a class: write \"\\[\" for the character itself", at: index - 1)
            default:
                lower = scalar
            }
            // A range `a-z`, unless the `-` is last (`[a-]`).
            if current == "-", index + 1 < pattern.count, pattern[index + 1] != "]" {
                index += 1
                guard var upper = current else { throw failure("expected \"]\" to close the class opened", at: start) }
                index += 1
                if upper == "\\" {
                    guard case .scalar(let escaped) = try escape(inClass: true) else {
                        throw failure("a range cannot end in a class such as \\d", at: index - 2)
                    }
                    upper = escaped
                }
                guard lower.value <= upper.value else {
                    throw failure("the range \(lower)-\(upper) is backwards", at: index - 1)
                }
                set.add(lower, upper)
            } else {
                set.add(lower, lower)
            }
        }
        index += 1
        return set
    }

    /// After a `\`.
    private mutating func escape(inClass: Bool) throws(LinearRegexError) -> Node {
        guard let scalar = current else { throw failure("the pattern ends with a lone \"\\\"", at: index - 1) }
        index += 1
        switch scalar {
        case "d": return .set(.digits)
        case "D": return .set(ScalarSet(ranges: ScalarSet.digits.ranges, negated: true))
        case "w": return .set(.word)
        case "W": return .set(ScalarSet(ranges: ScalarSet.word.ranges, negated: true))
        case "s": return .set(.space)
        case "S": return .set(ScalarSet(ranges: ScalarSet.space.ranges, negated: true))
        case "t": return .scalar("\t")
        case "n": return .scalar("\n")
        case "r": return .scalar("\r")
        case "f": return .scalar("\u{0C}")
        case "v": return .scalar("\u{0B}")
        case "1"..."9":
            throw failure(
                "backreferences (\\\(scalar)) are not supported: rules are matched in linear time, as RE2 does",
                at: index - 2)
        default:
            guard scalar.isASCII, !scalar.properties.isAlphabetic, !("0"..."9").contains(scalar) else {
                throw failure("unknown escape \"\\\(scalar)\"", at: index - 2)
            }
            return .scalar(scalar)
        }
    }
}

// MARK: - Compiling

private struct Compiler {
    let caseInsensitive: Bool
    var program: [LinearRegex.Instruction] = []

    mutating func emit(_ node: Node) throws(LinearRegexError) {
        guard program.count <= LinearRegex.maximumInstructions else {
            throw LinearRegexError(
                message: "the pattern is too large (more than \(LinearRegex.maximumInstructions) "
                    + "steps once its repetitions are written out)", position: nil)
        }
        switch node {
        case .empty:
            break
        case .scalar(let scalar):
            let lower = Self.asciiLowercase(scalar), upper = Self.asciiUppercase(scalar)
            program.append(
                caseInsensitive && lower != upper ? .scalarAnyCase(lower: lower, upper: upper) : .scalar(scalar))
        case .set(let set):
            program.append(.set(caseInsensitive ? set.foldingASCIICase() : set))
        case .anyButNewline:
            program.append(.anyButNewline)
        case .start:
            program.append(.assertStart)
        case .end:
            program.append(.assertEnd)
        case .group(let inner, let capture):
            if let capture { program.append(.save(2 * capture)) }
            try emit(inner)
            if let capture { program.append(.save(2 * capture + 1)) }
        case .sequence(let items):
            for item in items { try emit(item) }
        case .alternatives(let branches):
            var jumpsToEnd: [Int] = []
            for (offset, branch) in branches.enumerated() {
                if offset < branches.count - 1 {
                    let split = program.count
                    program.append(.split(preferred: split + 1, other: -1))
                    try emit(branch)
                    jumpsToEnd.append(program.count)
                    program.append(.jump(-1))
                    program[split] = .split(preferred: split + 1, other: program.count)
                } else {
                    try emit(branch)
                }
            }
            for jump in jumpsToEnd { program[jump] = .jump(program.count) }
        case .repetition(let inner, let minimum, let maximum, let greedy):
            for _ in 0..<minimum { try emit(inner) }
            if let maximum {
                // Each optional copy may be skipped to the end of all of them.
                var splits: [Int] = []
                for _ in minimum..<maximum {
                    splits.append(program.count)
                    program.append(.split(preferred: -1, other: -1))
                    try emit(inner)
                }
                for split in splits { program[split] = choice(split + 1, program.count, greedy: greedy) }
            } else {
                // `inner*`: L: split(body, end); body; jump L.
                let loop = program.count
                program.append(.split(preferred: -1, other: -1))
                try emit(inner)
                program.append(.jump(loop))
                program[loop] = choice(loop + 1, program.count, greedy: greedy)
            }
        }
    }

    private func choice(_ body: Int, _ skip: Int, greedy: Bool) -> LinearRegex.Instruction {
        greedy ? .split(preferred: body, other: skip) : .split(preferred: skip, other: body)
    }

    static func asciiLowercase(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        ("A"..."Z").contains(scalar) ? Unicode.Scalar(scalar.value + 32) ?? scalar : scalar
    }

    static func asciiUppercase(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        ("a"..."z").contains(scalar) ? Unicode.Scalar(scalar.value - 32) ?? scalar : scalar
    }
}
