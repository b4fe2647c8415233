import Synchronization

/// Stops a running engine from another thread (a signal handler's thread, a test). Thread-safe; cancelling
/// twice is the same as once.
public final class Cancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, wakeUps: [MultiHandle.WakeUp])>((false, []))

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    public func cancel() {
        state.withLock { state in
            state.cancelled = true
            // Under the lock that `detach` takes: no multi handle can be freed while it is being woken.
            for wakeUp in state.wakeUps { wakeUp.wake() }
        }
    }

    /// Each of the engine's loops registers its wake-up for the time it runs.
    func attach(_ wakeUp: MultiHandle.WakeUp) { state.withLock { $0.wakeUps.append(wakeUp) } }
    func detach(_ wakeUp: MultiHandle.WakeUp) { state.withLock { $0.wakeUps.removeAll { $0.raw == wakeUp.raw } } }
}
