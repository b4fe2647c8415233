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
/// Either way output stops waiting for its readers (`Output.stopWaiting`): a reader that does not read cannot hold
/// the run, nor the root's lock, any longer.
///
/// The signals are blocked first thing in `main` (`watchProcess`), so the mask holds in every thread and no signal
/// finds the process unprepared, however early it comes; one thread takes them with `sigwait` for the whole life of
/// the process: no async-signal-safety puzzles. Before a command makes a watcher of its own (only `sync` and `add`
/// do), a signal ends the process at once, 130 or 143, saying so.
final class InterruptWatcher: Sendable {
    private let received = Atomic<Int32>(0)
    /// False until `beginChanging`: a signal before then ends the process.
    private let changing = Atomic<Bool>(false)
    /// What a signal cancels once the run is changing things.
    let cancellation: Cancellation

    /// The command's watcher, once it made one.
    private static let current = Mutex<InterruptWatcher?>(nil)

    /// Blocks SIGINT and SIGTERM in the calling thread (`main`'s, before any other thread exists: every thread
    /// inherits the mask) and starts the thread that takes them. The first thing the process does.
    static func watchProcess() {
        var signals = Self.signals
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let watching = startDetachedThread {
            var signals = InterruptWatcher.signals
            var number: Int32 = 0
            while sigwait(&signals, &number) == 0 {
                Output.stopWaiting()
                guard let watcher = current.withLock({ $0 }) else {
                    exitAtOnce(128 + number, "haul: interrupted by \(name(of: number))")
                }
                watcher.take(number)
            }
        }
        // No thread to take them: the signals end the process as they would have without haul's help.
        if !watching { pthread_sigmask(SIG_UNBLOCK, &signals, nil) }
    }

    /// The command's watcher from now on. `timeLimit`: seconds from now, and how the user wrote them (for messages).
    init(cancelling cancellation: Cancellation, timeLimit: (seconds: Double, written: String)? = nil) {
        self.cancellation = cancellation
        Self.current.withLock { $0 = self }
        if let timeLimit { startTimer(timeLimit, cancelling: cancellation) }
    }

    private func take(_ number: Int32) {
        received.store(number, ordering: .relaxed)
        guard changing.load(ordering: .acquiring) else {
            Self.exitAtOnce(128 + number, "haul: interrupted by \(signalName) before anything was changed")
        }
        cancellation.cancel()
    }

    /// A plain thread that sleeps until the limit (a futex wait: no descriptor, no Dispatch timer).
    private func startTimer(_ limit: (seconds: Double, written: String), cancelling cancellation: Cancellation) {
        startDetachedThread { [self] in
            // Never signalled: the wait is the timer.
            _ = Semaphore().wait(seconds: limit.seconds)
            Output.stopWaiting()
            guard changing.load(ordering: .acquiring) else {
                Self.exitAtOnce(
                    ExitStatus.entryFailed.rawValue,
                    "error: the run's time limit (--max-time \(limit.written)) was reached before anything was changed")
            }
            cancellation.cancel(because: .timeLimitReached("--max-time \(limit.written)"))
        }
    }

    /// Says why, as far as standard error takes it without waiting (see `Output.stopWaiting`), and exits.
    private static func exitAtOnce(_ status: Int32, _ message: TerminalText) -> Never {
        Output.flushLog()
        Output.errors([message])
        _exit(status)
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

    var signalName: String { Self.name(of: received.load(ordering: .relaxed)) }

    private static func name(of signal: Int32) -> String { signal == SIGTERM ? "SIGTERM" : "SIGINT" }

    private static var signals: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        return set
    }
}
