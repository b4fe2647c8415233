import Glibc
import Haul
import HaulEngine
import HaulThreads
import Synchronization

/// Turns SIGINT, SIGTERM and the run's time limit (`--max-time`) into the right kind of stop for where the sync is.
///
/// Until the sync starts changing anything (waiting for another run's lock, reading the state, hashing local
/// files, planning), there is nothing to leave tidy: the process says so and exits 130 or 143 at once, however
/// long the wait or the hashing would have taken. Once it changes things, the signal cancels the run instead, so
/// that it stops its transfers, keeps resumable partials, removes temporary files and exits 130 or 143, instead
/// of dying mid-write. The time limit does the same, with exit status 1: the entries it stopped failed, named.
///
/// The signals are blocked in every thread (the mask is set before any worker thread starts and is inherited)
/// and taken synchronously by one thread with `sigwait`: no async-signal-safety puzzles.
final class InterruptWatcher: Sendable {
    private let received = Atomic<Int32>(0)
    /// False until `beginChanging`: a signal before then ends the process.
    private let changing = Atomic<Bool>(false)
    /// What a signal cancels once the run is changing things.
    let cancellation: Cancellation

    /// `timeLimit`: seconds from now, and how the user wrote them (for messages).
    init(cancelling cancellation: Cancellation, timeLimit: (seconds: Double, written: String)? = nil) {
        self.cancellation = cancellation
        var signals = Self.signals
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let watching = startDetachedThread { [self] in
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
        // No thread to take them: the signals end the process as they would have without haul's help.
        if !watching { pthread_sigmask(SIG_UNBLOCK, &signals, nil) }
        if let timeLimit { startTimer(timeLimit, cancelling: cancellation) }
    }

    /// A plain thread that sleeps until the limit (a futex wait: no descriptor, no Dispatch timer).
    private func startTimer(_ limit: (seconds: Double, written: String), cancelling cancellation: Cancellation) {
        startDetachedThread { [self] in
            // Never signalled: the wait is the timer.
            _ = Semaphore().wait(seconds: limit.seconds)
            guard changing.load(ordering: .acquiring) else {
                Output.flushLog()
                Output.errors(["error: the run's time limit (--max-time \(limit.written)) was reached before anything was changed"])
                _exit(ExitStatus.entryFailed.rawValue)
            }
            cancellation.cancel(because: .timeLimitReached("--max-time \(limit.written)"))
        }
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
