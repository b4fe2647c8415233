import Synchronization

/// `--limit-rate`: one budget of bytes per second for the whole run, shared by every transfer of every loop (as
/// rclone's `--bwlimit` and aria2's `--max-overall-download-limit`; curl's `--limit-rate` is per transfer).
///
/// A token bucket that may go into debt: a chunk is taken whole whenever the balance is above zero, so libcurl's
/// chunks (up to 256 KiB) are never split, and the debt is then waited off. A transfer that finds the balance spent is
/// paused: libcurl keeps the chunk and stops reading that socket, so the server is slowed down too, not only the
/// disk. The loops resume paused transfers once the balance is above zero again.
package final class RateLimiter: Sendable {
    package let bytesPerSecond: Double
    /// What the balance may save up while little arrives: a tenth of a second's worth, so that a quiet moment is not
    /// followed by a burst above the rate.
    private let ceiling: Double
    private let account: Mutex<Account>

    private struct Account {
        var balance: Double
        var updatedAt: Double
    }

    /// `now`: seconds on the monotonic clock the callers use.
    package init(bytesPerSecond: Int64, now: Double) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        self.ceiling = max(1, self.bytesPerSecond / 10)
        self.account = Mutex(Account(balance: ceiling, updatedAt: now))
    }

    /// Whether a chunk may be received now.
    package func allows(now: Double) -> Bool {
        account.withLock { refill(&$0, now: now) > 0 }
    }

    /// `bytes` were received.
    package func spend(_ bytes: Int, now: Double) {
        account.withLock {
            refill(&$0, now: now); $0.balance -= Double(bytes)
        }
    }

    /// Seconds until a chunk may be received (0 when one may now).
    package func wait(now: Double) -> Double {
        account.withLock { max(0, -refill(&$0, now: now)) / bytesPerSecond }
    }

    @discardableResult
    private func refill(_ account: inout Account, now: Double) -> Double {
        let elapsed = max(0, now - account.updatedAt)
        account.balance = min(ceiling, account.balance + elapsed * bytesPerSecond)
        account.updatedAt = max(account.updatedAt, now)
        return account.balance
    }
}
