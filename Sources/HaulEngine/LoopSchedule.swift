/// The decisions of one engine loop about its transfers that are not in libcurl, as a value: which takes a free
/// slot next (a wait that is over, a transfer that waited for descriptors, a new request), when waiting for
/// descriptors has lasted too long, whether the loop sleeps after a turn and for how long, and which transfer paused
/// for the `--limit-rate` budget goes on first. The loop tells it what happened (a transfer parked, short of
/// descriptors, ready to go on; how many hold a slot; the time) and carries out what it answers; the schedule holds
/// the waiting transfers but touches none of them, so that each rule is tested from values.
///
/// `Waiter` is whatever the loop schedules (its transfers); the schedule only keeps them in order.
struct LoopSchedule<Waiter> {
    /// Transfers of this loop at once (its share of `--jobs`): one in libcurl, or whose hash is being computed,
    /// holds a slot; one waiting does not.
    let slots: Int
    /// Past this long with some waiting for descriptors and nothing of this loop running, the descriptors are not
    /// coming back (something else holds them) and the waiting ones fail. Time, not turns: a turn can be short when
    /// the other loop's transfers are what holds the descriptors.
    static var descriptorPatience: Double { 30 }
    /// The longest a loop sleeps while some wait for descriptors: a retry that finds none again must not spin, and
    /// one that would find some must not wait for a second.
    static var descriptorPollSeconds: Double { 0.05 }

    /// Waiting out a backoff until `due`: no slot, no handle, no open file (any number may wait).
    private var parked: [(waiter: Waiter, due: Double)] = []
    /// Due to go on (a wait that is over, a sharer going on alone): they get free slots before new requests. First
    /// in, first out: taken from `readyHead`, the array emptied when all are taken.
    private var ready: [Waiter] = []
    private var readyHead = 0
    /// Out of descriptors (EMFILE, ENFILE) when they were to open their file or connect: they go on, one a turn, as
    /// a slot is free, and no new request starts while they wait (it would only take their descriptors).
    private var waitingForDescriptors: [Waiter] = []
    /// Since when nothing of this loop has run while some wait for descriptors.
    private var starvedSince: Double?
    /// Which paused transfer `pausedOrder` puts first: a different one each turn.
    private var pausedTurn = 0

    init(slots: Int) {
        self.slots = slots
    }

    /// Nothing waits: the loop's work is only what holds a slot.
    var isEmpty: Bool { parked.isEmpty && readyHead == ready.count && waitingForDescriptors.isEmpty }

    /// The transfer waits until `due`, holding nothing.
    mutating func park(_ waiter: Waiter, until due: Double) { parked.append((waiter, due)) }

    /// The transfer goes on at the next free slot, before any new request.
    mutating func makeReady(_ waiter: Waiter) { ready.append(waiter) }

    /// The transfer found no descriptor for its file or its connection: it waits for one given back.
    mutating func waitForDescriptors(_ waiter: Waiter) { waitingForDescriptors.append(waiter) }

    /// The start of a turn at `now`, with `running` transfers holding a slot: waits that are over join the ready
    /// (soonest due first), and one transfer waiting for descriptors goes on if a slot is free. Returns the
    /// transfers that waited for descriptors for `descriptorPatience` with nothing of this loop running: they are
    /// the loop's to fail.
    mutating func beginTurn(now: Double, running: Int) -> [Waiter] {
        if parked.contains(where: { $0.due <= now }) {
            let due = parked.filter { $0.due <= now }.sorted { $0.due < $1.due }
            parked.removeAll { $0.due <= now }
            for one in due { makeReady(one.waiter) }
        }
        guard !waitingForDescriptors.isEmpty else { return [] }
        if running == 0 {
            let since = starvedSince ?? now
            starvedSince = since
            guard now - since <= Self.descriptorPatience else {
                starvedSince = nil
                defer { waitingForDescriptors = [] }
                return waitingForDescriptors
            }
        } else {
            starvedSince = nil
            guard running < slots else { return [] }
        }
        makeReady(waitingForDescriptors.removeFirst())
        return []
    }

    /// What takes a free slot next.
    enum Next {
        /// A transfer that waited: it goes on.
        case resume(Waiter)
        /// The next request of the run's queue, if any is left.
        case newRequest
    }

    /// With `running` transfers holding a slot, what takes the next one; nil when none may start now (no slot free,
    /// or none ready and some waiting for descriptors).
    mutating func next(running: Int) -> Next? {
        guard running < slots else { return nil }
        if readyHead < ready.count {
            let waiter = ready[readyHead]
            readyHead += 1
            if readyHead == ready.count {
                ready.removeAll(keepingCapacity: true)
                readyHead = 0
            }
            return .resume(waiter)
        }
        return waitingForDescriptors.isEmpty ? .newRequest : nil
    }

    /// How long the loop sleeps in `curl_multi_poll` after a turn at `now`, or nil for turning again at once.
    /// - `running`: transfers holding a slot after the turn; `finishedSome`: libcurl ended some in this turn (the
    ///   next turn may fill their slots); `digestsArrived`: trailing hashes came back (their verdicts may free
    ///   slots); `rateWait`: with transfers paused for the rate budget, how long until it allows more.
    /// libcurl's poll sleeps its whole timeout when it holds no transfer, so the timeout is never longer than the
    /// soonest wait that ends, and at most a second.
    func sleep(now: Double, running: Int, finishedSome: Bool, digestsArrived: Bool, rateWait: Double?) -> Int32? {
        let hasWork = running > 0 || !isEmpty
        // While some wait for descriptors, a turn always sleeps a little, even after transfers ended: a retry
        // that finds none again must not spin.
        let endedSome = finishedSome && waitingForDescriptors.isEmpty
        let slotForReady = readyHead < ready.count && running < slots
        guard hasWork, !endedSome, !digestsArrived, !slotForReady else { return nil }
        guard waitingForDescriptors.isEmpty else { return Self.milliseconds(Self.descriptorPollSeconds) }
        var delay = parked.map { $0.due - now }.min() ?? 1
        if let rateWait { delay = min(delay, rateWait) }
        return Self.milliseconds(delay)
    }

    /// A poll timeout for a wait of `seconds`: rounded up to the millisecond, at most a second. Rounded down, a wait
    /// of 0.4 ms is a poll that returns at once, turn after turn: a loop spinning on a core while transfers wait
    /// for the `--limit-rate` budget.
    static func milliseconds(_ seconds: Double) -> Int32 {
        Int32(max(0, min(1000, (seconds * 1000).rounded(.up))))
    }

    /// The transfers paused for the rate budget, in the order the budget is offered to them this turn: a different
    /// one first each turn, so that none waits behind the others for ever.
    mutating func pausedOrder<Paused>(_ paused: [Paused]) -> [Paused] {
        guard !paused.isEmpty else { return [] }
        pausedTurn &+= 1
        let first = pausedTurn % paused.count
        return Array(paused[first...] + paused[..<first])
    }

    /// The run is stopping: every waiting transfer, and the schedule empty.
    mutating func drain() -> [Waiter] {
        defer { self = LoopSchedule(slots: slots) }
        return parked.map(\.waiter) + ready[readyHead...] + waitingForDescriptors
    }
}
