import Haul
import HaulFileSystem
import XCTest

/// How a run shares its address-space limit, from values: small stacks and few arenas under a limit, every part
/// within what is available, transfers first, and below the minimum no budget at all.
final class MemoryBudgetTests: XCTestCase {
    func testWithoutALimitNothingChanges() throws {
        let settings = MemoryBudget.settings(available: nil, cores: 2)
        XCTAssertNil(settings.threadStack)
        XCTAssertNil(settings.arenas)
        let budget = try XCTUnwrap(
            MemoryBudget(
                available: nil, settings: MemoryBudget.settings(available: nil, cores: 4),
                entries: 1_000_000, wantedTransfers: 16, cores: 4, transfers: true, cache: true))
        XCTAssertEqual(budget, MemoryBudget.unlimited(transfers: 16, cores: 4))
    }

    /// Under a limit: 2 MiB stacks, and as many arenas as a quarter of the room holds (glibc's own number once
    /// that is more).
    func testUnderALimitStacksAndArenasAreSized() {
        let tight = MemoryBudget.settings(available: 150 << 20, cores: 2)
        XCTAssertEqual(tight.threadStack, 2 << 20)
        XCTAssertEqual(tight.arenas, 1)
        XCTAssertEqual(MemoryBudget.settings(available: 1 << 30, cores: 2).arenas, 4)
        XCTAssertEqual(MemoryBudget.settings(available: 64 << 30, cores: 2).arenas, nil, "glibc's 16 fit")
    }

    func testEveryShareFitsAndBelowTheMinimumThereIsNone() throws {
        for cores in [1, 2, 8] {
            for cache in [false, true] {
                let settings = MemoryBudget.settings(available: 200 << 20, cores: cores)
                let minimum = MemoryBudget.minimum(entries: 3000, transfers: true, cache: cache, settings: settings)
                XCTAssertNil(
                    MemoryBudget(
                        available: minimum - 1, settings: settings, entries: 3000, wantedTransfers: 16,
                        cores: cores, transfers: true, cache: cache))
                var previous = 0
                for available in stride(from: minimum, through: minimum + (200 << 20), by: 1 << 20) {
                    let budget = try XCTUnwrap(
                        MemoryBudget(
                            available: available, settings: settings, entries: 3000,
                            wantedTransfers: 16, cores: cores, transfers: true, cache: cache))
                    let stack = 2 << 20
                    let loops = min(cores, budget.transfers)
                    let cost =
                        MemoryBudget.runHeap + 3000 * MemoryBudget.perEntry + MemoryBudget.longLivedThreads * stack
                        + loops * (stack + MemoryBudget.perHandle)
                        + budget.transfers * (MemoryBudget.perHandle + stack + MemoryBudget.readBuffer)
                        + (budget.observers + budget.cacheCopiers) * (stack + MemoryBudget.readBuffer)
                    XCTAssertLessThanOrEqual(cost, available, "\(available >> 20) MiB, \(cores) cores")
                    XCTAssertGreaterThanOrEqual(budget.transfers, max(1, previous))
                    XCTAssertEqual(budget.cacheCopiers > 0, cache)
                    if budget.transfers < 16 {
                        // Transfers first: what went to more threads would not pay for one more.
                        let extra =
                            (budget.observers - 1 + max(0, budget.cacheCopiers - 1)) * (stack + MemoryBudget.readBuffer)
                        let next =
                            MemoryBudget.perHandle + stack + MemoryBudget.readBuffer
                            + (budget.transfers < cores ? stack + MemoryBudget.perHandle : 0)
                        XCTAssertLessThan(available - cost + extra, next, "transfers first")
                    }
                    previous = budget.transfers
                }
                XCTAssertEqual(previous, 16)
            }
        }
    }

    /// More entries need more room: the same limit that runs 3,000 refuses 10 million.
    func testTheMinimumGrowsWithTheEntries() {
        let settings = MemoryBudget.settings(available: 200 << 20, cores: 2)
        XCTAssertNotNil(
            MemoryBudget(
                available: 150 << 20, settings: settings, entries: 3000, wantedTransfers: 16, cores: 2,
                transfers: true, cache: false))
        XCTAssertNil(
            MemoryBudget(
                available: 150 << 20, settings: settings, entries: 10_000_000, wantedTransfers: 16, cores: 2,
                transfers: true, cache: false))
    }
}
