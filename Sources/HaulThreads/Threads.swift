// Plain threads for CPU-bound and blocking work, shared by the manifest reader (libyaml beside validation), the
// observe step (the state read beside lstat'ing and hashing), the engine (one libcurl loop per core) and the CLI
// (the signal watcher, the progress ticker).
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
    let rc = pthread_create(
        &thread, nil,
        { context in
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

/// `first` on a thread of its own while `second` runs on the caller's, and both results once both are done (one
/// after the other on the caller's thread if no thread can be started).
package func concurrently<First: Sendable, Second>(
    _ first: @escaping @Sendable () -> First,
    _ second: () -> Second
) -> (First, Second) {
    let result = Mutex<First?>(nil)
    let thread = startThread { result.withLock { $0 = first() } }
    let other = second()
    if let thread { pthread_join(thread, nil) }
    guard let done = result.withLock({ $0.take() }) else { return (first(), other) }
    return (done, other)
}

package enum ProcessorCount {
    /// The cores this process may run on now: how many threads CPU-bound work is split over.
    package static var online: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}
