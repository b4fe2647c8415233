/// Gathers every finding so that one run reports all of them; sorting happens once at the end because
/// the validator visits keys in whatever order checks complete, not in file order.
struct DiagnosticCollector {
    let file: String
    private(set) var diagnostics: [Diagnostic] = []
    private(set) var errorCount = 0

    init(file: String) { self.file = file }

    mutating func error(_ message: String, at location: SourceLocation?, keyPath: String? = nil) {
        errorCount += 1
        diagnostics.append(Diagnostic(severity: .error, file: file, location: location, keyPath: keyPath,
                                      message: message))
    }

    mutating func warning(_ message: String, at location: SourceLocation?, keyPath: String? = nil) {
        diagnostics.append(Diagnostic(severity: .warning, file: file, location: location, keyPath: keyPath,
                                      message: message))
    }

    var hasErrors: Bool { errorCount > 0 }

    mutating func append(contentsOf other: DiagnosticCollector) {
        diagnostics.append(contentsOf: other.diagnostics)
        errorCount += other.errorCount
    }

    /// File order; diagnostics without a location (the file itself) come first, ties keep discovery order.
    var inFileOrder: [Diagnostic] {
        diagnostics.enumerated().sorted { a, b in
            let la = a.element.location, lb = b.element.location
            if la != lb {
                guard let la else { return true }
                guard let lb else { return false }
                return la < lb
            }
            return a.offset < b.offset
        }.map(\.element)
    }
}

/// Why a single value was rejected; the caller adds the key path and position.
struct RuleFailure: Error {
    var messages: [String]
    init(_ message: String) { messages = [message] }
    init(messages: [String]) { self.messages = messages }
}
