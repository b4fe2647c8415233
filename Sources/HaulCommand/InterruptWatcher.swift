import Foundation
import Glibc
import HaulEngine
import Synchronization

/// Turns SIGINT and SIGTERM into a cancellation of the running sync, so that it stops its transfers, keeps
/// resumable partials, removes temporary files and exits 130 or 143, instead of dying mid-write.
///
/// The signals are blocked in every thread (the mask is set before any worker thread starts and is inherited)
/// and taken synchronously by one thread with `sigwait`: no async-signal-safety puzzles.
final class InterruptWatcher: Sendable {
    private let received = Atomic<Int32>(0)

    init(cancelling cancellation: Cancellation) {
        var signals = Self.signals
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let thread = Thread { [self] in
            var signals = InterruptWatcher.signals
            var number: Int32 = 0
            while sigwait(&signals, &number) == 0 {
                received.store(number, ordering: .relaxed)
                cancellation.cancel()
            }
        }
        thread.name = "haul.signals"
        thread.start()
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
