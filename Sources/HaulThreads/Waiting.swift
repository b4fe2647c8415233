import Dispatch
import Glibc
import Synchronization

/// How a thread started by `startThread` waits for another: a counting semaphore (a futex wait, no descriptor),
/// with an optional time limit. (libdispatch's semaphore underneath; nothing else of Dispatch is used.)
package final class Semaphore: Sendable {
    private let semaphore: DispatchSemaphore

    package init(value: Int = 0) { semaphore = DispatchSemaphore(value: value) }

    package func signal() { semaphore.signal() }
    package func wait() { semaphore.wait() }

    /// False when `seconds` passed without a signal.
    package func wait(seconds: Double) -> Bool {
        semaphore.wait(timeout: .now() + .nanoseconds(Int(max(0, min(seconds, 1e9)) * 1e9))) == .success
    }
}

/// Sleeps the calling thread for `seconds` (a signal does not cut it short): for waits on something that cannot
/// wake a thread, such as a lock another process holds or a file system's clock.
package func sleepThread(seconds: Double) {
    let whole = max(0, seconds.rounded(.down))
    var pause = timespec(tv_sec: Int(min(whole, 1e9)), tv_nsec: Int(max(0, seconds - whole) * 1e9))
    var left = timespec()
    while nanosleep(&pause, &left) != 0 && errno == EINTR { pause = left }
}

/// Carries values from one thread to another, in order, holding at most `capacity` of them: a producer that runs
/// ahead waits for the consumer, so what is in flight stays bounded.
package final class HandOff<Element: Sendable>: Sendable {
    private let queue = Mutex<[Element]>([])
    private let filled = Semaphore()
    private let room: Semaphore

    package init(capacity: Int) {
        room = Semaphore(value: max(1, capacity))
    }

    /// Waits while `capacity` values are waiting to be received.
    package func send(_ element: Element) {
        room.wait()
        queue.withLock { $0.append(element) }
        filled.signal()
    }

    /// The oldest value sent, waiting for one if there is none.
    package func receive() -> Element {
        filled.wait()
        // `filled` counts the values in `queue`: one is there.
        let element = queue.withLock { $0.removeFirst() }
        room.signal()
        return element
    }
}

/// Gathers values handed in from any thread and gives them, in arrival order, to `deliver` on a plain thread of
/// its own: the first value of a batch waits `window` seconds for company, then the batch goes whole.
///
/// A plain thread and semaphores (futex waits) rather than a Dispatch timer: a timer needs descriptors that
/// libdispatch cannot do without (it traps when the process is out of them), and a run near its open-file limit
/// must go on committing. If no thread can be started, each value is delivered at once, on the caller's thread.
package final class BatchWindow<Element: Sendable>: Sendable {
    private struct State {
        var pending: [Element] = []
        var finishing = false
    }

    private let window: Double
    private let deliver: @Sendable ([Element]) -> Void
    private let state = Mutex(State())
    /// Signalled when a value arrives into an empty batch, or at `finish`.
    private let arrived = Semaphore()
    /// Signalled at `finish`: cuts the last window short.
    private let finishing = Semaphore()
    private let thread = Mutex<pthread_t?>(nil)

    package init(window: Double, deliver: @escaping @Sendable ([Element]) -> Void) {
        self.window = window
        self.deliver = deliver
        let started = startThread { [self] in run() }
        thread.withLock { $0 = started }
    }

    package func add(_ element: Element) {
        guard thread.withLock({ $0 != nil }) else { return deliver([element]) }
        let first = state.withLock { state in
            state.pending.append(element)
            return state.pending.count == 1
        }
        if first { arrived.signal() }
    }

    /// Delivers what is still waiting and returns once everything handed in has been delivered.
    package func finish() {
        guard let running = thread.withLock({ $0.take() }) else { return }
        state.withLock { $0.finishing = true }
        arrived.signal()
        finishing.signal()
        pthread_join(running, nil)
    }

    private func run() {
        while true {
            arrived.wait()
            let done = state.withLock { $0.finishing }
            if !done { _ = finishing.wait(seconds: window) }
            let batch = state.withLock { state in
                defer { state.pending = [] }
                return state.pending
            }
            if !batch.isEmpty { deliver(batch) }
            if state.withLock({ $0.finishing && $0.pending.isEmpty }) { return }
        }
    }
}

/// Calls `tick` every `interval` seconds on its own thread until `stop()`, which returns only after the last
/// tick has finished: after it, `tick` is not called any more. No thread, no ticks.
package final class Ticker: Sendable {
    private let stopRequested = Semaphore()
    private let stopped = Semaphore()
    private let running = Atomic<Bool>(true)

    package init(interval: Double, _ tick: @escaping @Sendable () -> Void) {
        let started = startDetachedThread { [stopRequested, stopped] in
            while !stopRequested.wait(seconds: interval) { tick() }
            stopped.signal()
        }
        if !started { stopped.signal() }
    }

    /// Idempotent.
    package func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        stopRequested.signal()
        stopped.wait()
    }
}
