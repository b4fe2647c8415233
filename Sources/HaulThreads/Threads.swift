// Plain threads for CPU-bound work, shared by the manifest reader (libyaml beside validation), the store (hashing,
// stat'ing, reading the state) and the engine (one libcurl loop per core).
import Dispatch
import Glibc
import Synchronization

/// Hands out index ranges to worker threads; taking chunks keeps the shared counter off the per-file path.
package final class WorkCounter: Sendable {
    package let count: Int
    package let chunk: Int
    private let next = Atomic<Int>(0)

    package init(count: Int, chunk: Int) {
        self.count = count
        self.chunk = max(1, chunk)
    }

    package func take() -> Range<Int>? {
        let start = next.wrappingAdd(chunk, ordering: .relaxed).oldValue
        guard start < count else { return nil }
        return start..<min(start + chunk, count)
    }
}

/// `transform` of every index in `0..<count`, in index order, computed on up to `threads` threads (the caller one
/// of them) taking `chunk` indices at a time. Each thread has a `Context` of its own (a read buffer, a held
/// folder), made by `makeContext` and closed by `close`. A thread keeps its results to itself until it is done and
/// hands them over once, under a lock: no memory is written by two threads.
package func concurrentMap<Context, Result: Sendable>(
    count: Int, threads: Int, chunk: Int, makeContext: @escaping @Sendable () -> Context,
    close: @escaping @Sendable (inout Context) -> Void = { _ in },
    _ transform: @escaping @Sendable (inout Context, Int) -> Result
) -> [Result] {
    let counter = WorkCounter(count: count, chunk: chunk)
    let finished = Mutex<[(start: Int, results: [Result])]>([])
    runOnThreads(max(1, min(threads, (count + chunk - 1) / max(1, chunk)))) {
        var context = makeContext()
        var mine: [(start: Int, results: [Result])] = []
        while let range = counter.take() {
            mine.append((range.lowerBound, range.map { transform(&context, $0) }))
        }
        close(&context)
        finished.withLock { $0 += mine }
    }
    return finished.withLock { parts in
        parts.sort { $0.start < $1.start }
        return parts.flatMap(\.results)
    }
}

private final class ThreadWork {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Runs `work` on `threads` threads, the caller being one of them, and returns when all have finished.
///
/// Plain pthreads rather than Swift concurrency or Dispatch: the work blocks in read(2), so it must not occupy
/// the cooperative pool (two threads on this hardware), and its width must be what the caller asked for (a
/// network filesystem wants more than the core count). If a thread cannot be started the others do its share.
package func runOnThreads(_ threads: Int, _ work: @escaping @Sendable () -> Void) {
    var started: [pthread_t] = []
    if threads > 1 {
        for _ in 1..<threads {
            guard let thread = startThread(work) else { break }
            started.append(thread)
        }
    }
    work()
    for thread in started { pthread_join(thread, nil) }
}

/// A new thread running `work`, to be joined; nil if none could be started.
///
/// SIGINT and SIGTERM are blocked in it whatever its creator's mask: the CLI takes them on one thread of its own
/// (`sigwait`), and a worker started before that thread blocked them (the state is read while the manifest is
/// parsed) must not take one and end the process without a word.
package func startThread(_ work: @escaping @Sendable () -> Void) -> pthread_t? {
    let context = Unmanaged.passRetained(ThreadWork(work)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { context in
        guard let context else { return nil }
        var interrupts = sigset_t()
        sigemptyset(&interrupts)
        sigaddset(&interrupts, SIGINT)
        sigaddset(&interrupts, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &interrupts, nil)
        Unmanaged<ThreadWork>.fromOpaque(context).takeRetainedValue().run()
        return nil
    }, context)
    guard rc == 0 else {
        Unmanaged<ThreadWork>.fromOpaque(context).release()
        return nil
    }
    return thread
}

/// A thread running `work` that nobody joins (it ends on its own or with the process); false if none could be
/// started.
@discardableResult
package func startDetachedThread(_ work: @escaping @Sendable () -> Void) -> Bool {
    guard let thread = startThread(work) else { return false }
    pthread_detach(thread)
    return true
}

/// Carries values from one thread to another, in order, holding at most `capacity` of them: a producer that runs
/// ahead waits for the consumer, so what is in flight stays bounded.
package final class HandOff<Element: Sendable>: Sendable {
    private let queue = Mutex<[Element]>([])
    private let filled = DispatchSemaphore(value: 0)
    private let room: DispatchSemaphore

    package init(capacity: Int) {
        room = DispatchSemaphore(value: max(1, capacity))
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
    private let arrived = DispatchSemaphore(value: 0)
    /// Signalled at `finish`: cuts the last window short.
    private let finishing = DispatchSemaphore(value: 0)
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
            if !done { _ = finishing.wait(timeout: .now() + .nanoseconds(Int(window * 1e9))) }
            let batch = state.withLock { state in
                defer { state.pending = [] }
                return state.pending
            }
            if !batch.isEmpty { deliver(batch) }
            if state.withLock({ $0.finishing && $0.pending.isEmpty }) { return }
        }
    }
}
