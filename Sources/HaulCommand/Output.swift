import Foundation
import Haul
import HaulEngine
import HaulManifest
import Synchronization

/// stdout for results, stderr for diagnostics; whole lines, never interleaved mid-line across threads.
enum Output {
    private static let lock = Mutex(())

    static func lines(_ lines: [String]) { write(lines, to: STDOUT_FILENO) }
    static func errors(_ lines: [String]) { write(lines, to: STDERR_FILENO) }

    /// Straight to the file descriptor: no stdio buffer to flush, and a closed pipe (EPIPE, SIGPIPE ignored)
    /// simply ends the output.
    private static func write(_ lines: [String], to descriptor: Int32) {
        guard !lines.isEmpty else { return }
        var text = lines.joined(separator: "\n") + "\n"
        lock.withLock { _ in
            text.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { return }
                    offset += written
                }
            }
        }
    }
}

enum Environment {
    static var current: [String: String] { ProcessInfo.processInfo.environment }
}

/// Prints failures as they happen (and, with --verbose, every fetch and retry).
final class ProgressPrinter: SyncObserver, Sendable {
    let verbose: Bool

    init(verbose: Bool) { self.verbose = verbose }

    func entry(_ entry: FileEntry, attemptFailed failure: AttemptFailure, retryIn: Double?) {
        guard verbose else { return }
        let next = retryIn.map { "; retrying in \(String(format: "%.1f", $0)) s" } ?? ""
        Output.errors(["warning: \(entry.destination): \(failure)\(next)"])
    }

    func entry(_ entry: FileEntry, finished outcome: EntryOutcome) {
        switch outcome {
        case .upToDate:
            break
        case .notModified:
            if verbose { Output.lines(["unchanged \(entry.destination) (the server answered 304)"]) }
        case .fetched(let file):
            if verbose { Output.lines(["fetched \(entry.destination) (\(ByteCount.format(file.size))) from \(file.sourceDisplayURL)"]) }
        case .failed(.transfer(let failure)) where failure.attempts.last?.reason == .interrupted:
            break  // one line for the whole interruption, not one per entry
        case .failed(let failure):
            Output.errors(HumanReport.failureLines(entry: entry, failure: failure))
        }
    }

    func pruned(_ destination: DestinationPath, outcome: PruneOutcome) {
        if case .deleted = outcome, verbose { Output.lines(["pruned \(destination)"]) }
        if let line = HumanReport.pruneLine(destination, outcome) { Output.errors([line]) }
    }
}
