import Synchronization

/// A handler that plays queued answers first and then defers to a fallback, for tests of retries and resumes:
///
///     let files = StaticFiles(["/a": bytes])
///     let script = ScriptedResponses(then: files.respond)
///     script.enqueue([.status(503)], for: "/a")          // first request to /a: 503
///     script.enqueueFault(.resetAfter(bytes: 1000), for: "/a")  // second: the real file, cut by an RST
///     let server = try LoopbackHTTPServer(handler: script.respond)
///
/// Queues for a specific path are consulted before the any-path queue.
public final class ScriptedResponses: Sendable {
    public typealias Handler = @Sendable (RecordedRequest) -> ServerResponse

    private let fallback: Handler
    private let queues = Mutex<[String?: [Handler]]>([:])

    public init(then fallback: @escaping Handler = { _ in .notFound }) {
        self.fallback = fallback
    }

    public func enqueue(_ responses: [ServerResponse], for path: String? = nil) {
        for response in responses {
            enqueue(for: path) { _ in response }
        }
    }

    public func enqueue(for path: String? = nil, _ handler: @escaping Handler) {
        queues.withLock { $0[path, default: []].append(handler) }
    }

    /// Queues the fallback's own answer with a fault applied, so the bytes stay those of the real resource.
    public func enqueueFault(_ fault: Fault, for path: String? = nil) {
        let fallback = self.fallback
        enqueue(for: path) { fallback($0).with(fault: fault) }
    }

    /// Scripted answers not yet used; a test can assert the script ran out.
    public var pendingCount: Int {
        queues.withLock { $0.values.reduce(0) { $0 + $1.count } }
    }

    public func respond(to request: RecordedRequest) -> ServerResponse {
        let next: Handler? = queues.withLock { queues in
            for key in [request.path, nil] as [String?] {
                if var queue = queues[key], !queue.isEmpty {
                    let first = queue.removeFirst()
                    queues[key] = queue
                    return first
                }
            }
            return nil
        }
        return (next ?? fallback)(request)
    }
}
