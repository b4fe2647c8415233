/// Gathers every finding so that one run reports all of them; sorting happens at the end because the validator
/// visits keys in whatever order checks complete, not in file order.
///
/// Only the first `reportedLimit` in file order are kept; the rest are counted. A hostile manifest can hold
/// millions of mistakes, and nobody reads past the first screenful: keeping them all cost a gigabyte.
struct DiagnosticCollector {
    static let reportedLimit = 50

    let file: String
    /// Candidates for the first `reportedLimit`, each with its discovery order (ties in position keep it). Holds
    /// up to twice the limit between trims, so that trimming (sorting this small buffer) costs a few comparisons
    /// per finding.
    private var kept: [(diagnostic: Diagnostic, order: Int)] = []
    /// Every finding so far, kept or not.
    private(set) var count = 0
    private(set) var errorCount = 0

    init(file: String) { self.file = file }

    mutating func error(_ message: String, at location: SourceLocation?, keyPath: String? = nil) {
        errorCount += 1
        add(Diagnostic(severity: .error, file: file, location: location, keyPath: keyPath, message: message))
    }

    mutating func warning(_ message: String, at location: SourceLocation?, keyPath: String? = nil) {
        add(Diagnostic(severity: .warning, file: file, location: location, keyPath: keyPath, message: message))
    }

    var hasErrors: Bool { errorCount > 0 }

    /// `other`'s findings, as if found after this collector's.
    mutating func append(contentsOf other: DiagnosticCollector) {
        for item in other.kept { keep(item.diagnostic, order: count + item.order) }
        count += other.count
        errorCount += other.errorCount
    }

    /// File order, at most `reportedLimit`; diagnostics without a location (the file itself) come first, ties keep
    /// discovery order.
    var inFileOrder: [Diagnostic] {
        Array(Self.sorted(kept).prefix(Self.reportedLimit).map(\.diagnostic))
    }

    /// Findings beyond those `inFileOrder` lists.
    var omittedCount: Int { count - min(kept.count, Self.reportedLimit) }

    private mutating func add(_ diagnostic: Diagnostic) {
        keep(diagnostic, order: count)
        count += 1
    }

    private mutating func keep(_ diagnostic: Diagnostic, order: Int) {
        kept.append((diagnostic, order))
        if kept.count >= 2 * Self.reportedLimit {
            kept = Array(Self.sorted(kept).prefix(Self.reportedLimit))
        }
    }

    private static func sorted(
        _ items: [(diagnostic: Diagnostic, order: Int)]
    ) -> [(diagnostic: Diagnostic, order: Int)] {
        items.sorted { a, b in
            let la = a.diagnostic.location, lb = b.diagnostic.location
            if la != lb {
                guard let la else { return true }
                guard let lb else { return false }
                return la < lb
            }
            return a.order < b.order
        }
    }
}

/// Why a single value was rejected; the caller adds the key path and position.
package struct RuleFailure: Error, CustomStringConvertible {
    package var messages: [String]
    init(_ message: String) { messages = [message] }
    init(messages: [String]) { self.messages = messages }
    package var description: String { messages.joined(separator: "; ") }
}
