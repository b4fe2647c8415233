import Foundation
import Glibc
import HaulEngine
import Synchronization

/// Turns SIGINT and SIGTERM into the right kind of stop for where the sync is.
///
/// Until the sync starts changing anything (waiting for another run's lock, reading the state, hashing local
/// files, planning), there is nothing to leave tidy: the process says so and exits 130 or 143 at once, however
/// long the wait or the hashing would have taken. Once it changes things, the signal cancels the run instead, so
/// that it stops its transfers, keeps resumable partials, removes temporary files and exits 130 or 143, instead
/// of dying mid-write.
///
/// The signals are blocked in every thread (the mask is set before any worker thread starts and is inherited)
/// and taken synchronously by one thread with `sigwait`: no async-signal-safety puzzles.
final class InterruptWatcher: Sendable {
    private let received = Atomic<Int32>(0)
    /// False until `beginChanging`: a signal before then ends the process.
    private let changing = Atomic<Bool>(false)

    init(cancelling cancellation: Cancellation) {
        var signals = Self.signals
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let thread = Thread { [self] in
            var signals = InterruptWatcher.signals
            var number: Int32 = 0
            while sigwait(&signals, &number) == 0 {
                received.store(number, ordering: .relaxed)
                guard changing.load(ordering: .acquiring) else {
                    Output.flushLog()
                    Output.errors(["haul: interrupted by \(signalName) before anything was changed"])
                    _exit(128 + number)
                }
                cancellation.cancel()
            }
        }
        thread.name = "haul.signals"
        thread.start()
    }

    /// From here on a signal cancels the run rather than ending the process.
    func beginChanging() {
        changing.store(true, ordering: .releasing)
    }

    /// 128 + the signal's number, the shell's convention, once a signal arrived.
    var exitStatus: Int32? {
        let number = received.load(ordering: .relaxed)
        return number == 0 ? nil : 128 + number
    }

    var signalName: String { received.load(ordering: .relaxed) == SIGTERM ? "SIGTERM" : "SIGINT" }

    private static var signals: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        return set
    }
}
