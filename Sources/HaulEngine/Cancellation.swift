import Synchronization

/// Stops a running engine from another thread (a signal handler's thread, a test). Thread-safe; cancelling
/// twice is the same as once.
public final class Cancellation: Sendable {
    private let state = Mutex<(cancelled: Bool, wakeUp: MultiHandle.WakeUp?)>((false, nil))

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    public func cancel() {
        state.withLock { state in
            state.cancelled = true
            // Under the lock that `detach` takes: the multi handle cannot be freed while it is being woken.
            state.wakeUp?.wake()
        }
    }

    /// The engine's loop registers its wake-up for the time it runs.
    func attach(_ wakeUp: MultiHandle.WakeUp) { state.withLock { $0.wakeUp = wakeUp } }
    func detach() { state.withLock { $0.wakeUp = nil } }
}
