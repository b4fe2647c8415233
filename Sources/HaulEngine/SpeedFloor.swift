/// The low-speed floor: an attempt whose bytes over the last `window` seconds average under `bytesPerSecond` fails,
/// as soon as that is true, however the bytes came (a burst then a trickle, or a trickle all along).
///
/// Why not libcurl's `CURLOPT_LOW_SPEED_*`: libcurl judges a speed it averages over its own last five seconds, then
/// waits the whole window again once that speed is under the limit, so a `timeout: 3s` attempt that trickled failed
/// after 6 to 9 s. A value: fed the attempt's byte count from the transfer-info callback (at least once a second),
/// it never reads a clock, so it is tested from numbers.
struct SpeedFloor {
    let window: Double
    let bytesPerSecond: Int
    /// (time, bytes received by then), oldest first: the oldest is at or before `window` ago once one is.
    private var samples: [(time: Double, bytes: Int64)] = []

    init(window: Double, bytesPerSecond: Int) {
        self.window = window
        self.bytesPerSecond = bytesPerSecond
    }

    /// The window starts again at `now` (a new attempt, or a transfer going on after waiting for the rate budget).
    mutating func restart(at now: Double, bytes: Int64) {
        samples.removeAll(keepingCapacity: true)
        samples.append((now, bytes))
    }

    /// False when the last `window` seconds brought fewer than `window × bytesPerSecond` bytes.
    mutating func allows(now: Double, bytes: Int64) -> Bool {
        guard let first = samples.first else {
            restart(at: now, bytes: bytes)
            return true
        }
        // A sample every tenth of a second at most: a window of minutes stays a few hundred entries.
        if let last = samples.last, now - last.time >= 0.1 { samples.append((now, bytes)) }
        // The newest sample at or before the window's start is the baseline; older ones are no longer needed. It is
        // found from the front, where it is (older ones go as the window moves on): no walk over the whole window
        // in a callback that runs for every read.
        let start = now - window
        guard first.time <= start else { return true }
        var baseline = 0
        while baseline + 1 < samples.count, samples[baseline + 1].time <= start { baseline += 1 }
        if baseline > 0 { samples.removeFirst(baseline) }
        let (since, then) = samples[0]
        let elapsed = now - since
        return Double(bytes - then) >= Double(bytesPerSecond) * elapsed
    }
}
