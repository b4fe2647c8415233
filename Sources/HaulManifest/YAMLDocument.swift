/// A YAML document as a flat arena of nodes: one array of structs, children stored as index ranges into a second
/// array, instead of one object per node. With `files:` items streamed out (see `YAMLEntrySink`) the arena holds
/// the top level plus one entry at a time.
struct YAMLDocument {
    typealias NodeID = Int32

    enum Kind: UInt8 {
        case scalar, mapping, sequence
        /// An alias (`*name`), already reported; validation skips it silently.
        case alias
    }

    /// How a scalar was written, which decides how it may be read: `retries: "5"` is a string, not a number.
    enum ScalarForm: UInt8 {
        /// Unquoted, untagged text: may be read as a number, a boolean or text.
        case plain
        /// Quoted, block (`|`, `>`) or tagged `!!str`: always text.
        case string
        /// Empty plain, `~`, `null` or tagged `!!null`.
        case null
    }

    struct Node {
        var kind: Kind
        var form: ScalarForm
        /// 1-based, stored narrow: a million nodes are common and `SourceLocation` is twice the size.
        var line: UInt32
        var column: UInt32
        /// Scalar text; empty for collections.
        var text: String
        /// Range in `children`; mappings hold key, value, key, value, ….
        var firstChild: Int32 = 0
        var childCount: Int32 = 0

        init(kind: Kind, form: ScalarForm, location: SourceLocation, text: String = "") {
            self.kind = kind
            self.form = form
            self.line = UInt32(truncatingIfNeeded: location.line)
            self.column = UInt32(truncatingIfNeeded: location.column)
            self.text = text
        }

        var location: SourceLocation { SourceLocation(line: Int(line), column: Int(column)) }
    }

    var nodes: [Node] = []
    var children: [NodeID] = []
    var root: NodeID?
    /// The top-level `files:` sequence, if its items were handed to a `YAMLEntrySink` instead of kept here
    /// (the node then has no children).
    var streamedFiles: (sequence: NodeID, count: Int)?

    // Field accessors read through the array in place: returning a whole `Node` would copy it (and retain its text).
    func kind(of id: NodeID) -> Kind { nodes[Int(id)].kind }
    func form(of id: NodeID) -> ScalarForm { nodes[Int(id)].form }
    func text(of id: NodeID) -> String { nodes[Int(id)].text }
    func location(of id: NodeID) -> SourceLocation { nodes[Int(id)].location }
    func childCount(of id: NodeID) -> Int { Int(nodes[Int(id)].childCount) }

    /// Child node ids of a sequence, or key/value ids alternating for a mapping.
    func childIDs(of id: NodeID) -> ArraySlice<NodeID> {
        let start = Int(nodes[Int(id)].firstChild)
        return children[start..<start + childCount(of: id)]
    }

    /// Key/value pairs of a mapping, in file order.
    func pairs(of id: NodeID) -> [(key: NodeID, value: NodeID)] {
        let ids = childIDs(of: id)
        var result: [(key: NodeID, value: NodeID)] = []
        result.reserveCapacity(ids.count / 2)
        var index = ids.startIndex
        while index + 1 < ids.endIndex {
            result.append((ids[index], ids[index + 1]))
            index += 2
        }
        return result
    }

    /// What a node is, as messages say it: `expected a mapping, found a sequence`.
    func describe(_ id: NodeID) -> String {
        let node = nodes[Int(id)]
        switch node.kind {
        case .mapping: return "a mapping"
        case .sequence: return "a sequence"
        case .alias: return "an alias"
        case .scalar:
            switch node.form {
            case .null: return "null"
            case .string: return "the string \(Quoted.text(node.text))"
            case .plain: return Quoted.text(node.text)
            }
        }
    }
}
