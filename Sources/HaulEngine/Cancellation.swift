import Synchronization

/// Stops a running engine from another thread (a signal handler's thread, a test). Thread-safe; cancelling
/// twice is the same as once.
package final class Cancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, reason: FailureReason, wakeUps: [MultiHandle.WakeUp])>(
        (false, .interrupted, []))

    package init() {}

    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Why the run stopped, what every unfinished transfer ends with: `.interrupted` (a signal) unless said otherwise.
    package var reason: FailureReason { state.withLock { $0.reason } }

    /// The first reason given is the one kept.
    package func cancel(because reason: FailureReason = .interrupted) {
        state.withLock { state in
            if !state.cancelled { state.reason = reason }
            state.cancelled = true
            // Under the lock that `detach` takes: no multi handle can be freed while it is being woken.
            for wakeUp in state.wakeUps { wakeUp.wake() }
        }
    }

    /// Each of the engine's loops registers its wake-up for the time it runs.
    func attach(_ wakeUp: MultiHandle.WakeUp) { state.withLock { $0.wakeUps.append(wakeUp) } }
    func detach(_ wakeUp: MultiHandle.WakeUp) { state.withLock { $0.wakeUps.removeAll { $0.raw == wakeUp.raw } } }
}
