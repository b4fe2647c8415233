import HaulThreads
#if canImport(Glibc)
import Glibc
#endif

/// Reads a large manifest on two threads: libyaml and the node arena on a second one, validation on the caller's.
///
/// Parsing is most of what comes before the first request of a first sync of 100,000 entries; side by side, it
/// takes about as long as libyaml's half alone (the larger one). Batches of items cross over as they are finished,
/// in file order, at most a few at a time (memory stays that of one batch per slot), so the validator sees exactly
/// what a single thread would show it, in the same order.
enum ReadingPipeline {
    /// Below this many bytes (about 600 entries) a second thread costs more than it saves.
    static let minimumBytes = 128 << 10

    private enum Message: Sendable {
        case items([YAMLItem], YAMLDocument)
        case finished(YAMLDocument?, DiagnosticCollector)
    }

    /// Forwards what the reader finds to the validating thread.
    private struct Forwarder: YAMLEntrySink {
        let handOff: HandOff<Message>

        mutating func consume(items: [YAMLItem], in document: YAMLDocument) {
            handOff.send(.items(items, document))
        }
    }

    /// What `YAMLReader.read` returns for `source`, with `validator` fed the streamed items meanwhile; on this
    /// thread alone if a second one cannot be started.
    static func read(
        _ source: YAMLSource, fileName: String, diagnostics: inout DiagnosticCollector,
        validator: inout ManifestValidator
    ) -> YAMLDocument? {
        let handOff = HandOff<Message>(capacity: 4)
        let reader = startThread {
            var forwarder = Forwarder(handOff: handOff)
            var readerDiagnostics = DiagnosticCollector(file: fileName)
            let document = YAMLReader.read(source, diagnostics: &readerDiagnostics, sink: &forwarder)
            handOff.send(.finished(document, readerDiagnostics))
        }
        guard let reader else { return YAMLReader.read(source, diagnostics: &diagnostics, sink: &validator) }
        defer { pthread_join(reader, nil) }
        while true {
            switch handOff.receive() {
            case .items(let items, let document):
                validator.consume(items: items, in: document)
            case .finished(let document, let readerDiagnostics):
                diagnostics.append(contentsOf: readerDiagnostics)
                return document
            }
        }
    }
}
