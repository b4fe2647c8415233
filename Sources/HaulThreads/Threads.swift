// Plain threads for CPU-bound work, shared by the store (hashing, stat'ing, reading the state) and the engine
// (one libcurl loop per core).
import Glibc
import Synchronization

/// Hands out index ranges to worker threads; taking chunks keeps the shared counter off the per-file path.
public final class WorkCounter: Sendable {
    public let count: Int
    public let chunk: Int
    private let next = Atomic<Int>(0)

    public init(count: Int, chunk: Int) {
        self.count = count
        self.chunk = max(1, chunk)
    }

    public func take() -> Range<Int>? {
        let start = next.wrappingAdd(chunk, ordering: .relaxed).oldValue
        guard start < count else { return nil }
        return start..<min(start + chunk, count)
    }
}

/// A buffer whose disjoint slots are written by different threads, each slot by exactly one; the join in
/// `runOnThreads` orders those writes before the caller reads them.
public struct DisjointWrites<Element>: @unchecked Sendable {
    public let buffer: UnsafeMutableBufferPointer<Element>
    public init(buffer: UnsafeMutableBufferPointer<Element>) { self.buffer = buffer }
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
public func runOnThreads(_ threads: Int, _ work: @escaping @Sendable () -> Void) {
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
public func startThread(_ work: @escaping @Sendable () -> Void) -> pthread_t? {
    let context = Unmanaged.passRetained(ThreadWork(work)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { context in
        guard let context else { return nil }
        Unmanaged<ThreadWork>.fromOpaque(context).takeRetainedValue().run()
        return nil
    }, context)
    guard rc == 0 else {
        Unmanaged<ThreadWork>.fromOpaque(context).release()
        return nil
    }
    return thread
}
