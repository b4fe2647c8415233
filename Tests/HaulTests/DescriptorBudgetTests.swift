import Haul
import HaulFileSystem
import XCTest

/// How a run shares its open-file limit, from values: every part fits in what is available, transfers first, and
/// below the minimum there is no budget at all.
final class DescriptorBudgetTests: XCTestCase {
    private func cost(_ budget: DescriptorBudget, cores: Int, cache: Bool) -> Int {
        let loops = min(cores, budget.transfers)
        return DescriptorBudget.runFiles + DescriptorBudget.commit + budget.commitFolders
            + loops * DescriptorBudget.perLoop + budget.transfers * DescriptorBudget.perTransfer
            + (cache
                ? DescriptorBudget.cacheFolder + budget.cacheFolders + budget.cacheCopiers
                    * DescriptorBudget.perCacheCopier : 0)
    }

    func testBelowTheMinimumThereIsNoBudget() {
        for cache in [false, true] {
            let minimum = DescriptorBudget.minimum(transfers: true, cache: cache)
            XCTAssertNil(
                DescriptorBudget(available: minimum - 1, wantedTransfers: 16, cores: 2, transfers: true, cache: cache))
            let least = DescriptorBudget(
                available: minimum, wantedTransfers: 16, cores: 2, transfers: true, cache: cache)
            XCTAssertEqual(least?.transfers, 1)
            XCTAssertGreaterThanOrEqual(least?.observers ?? 0, 1)
            XCTAssertEqual(least?.cacheCopiers, cache ? 1 : 0)
            XCTAssertEqual(least?.commitFolders, 0)
            XCTAssertEqual(least?.cacheFolders, 0)
        }
        let looking = DescriptorBudget.minimum(transfers: false, cache: false)
        XCTAssertLessThan(looking, DescriptorBudget.minimum(transfers: true, cache: false))
        XCTAssertNil(
            DescriptorBudget(available: looking - 1, wantedTransfers: 16, cores: 2, transfers: false, cache: false))
        XCTAssertEqual(
            DescriptorBudget(available: looking, wantedTransfers: 16, cores: 2, transfers: false, cache: false)?
                .observers, 1)
    }

    /// Whatever is available, the parts together fit in it; transfers grow first, then copiers, then folders.
    func testEveryShareFitsInWhatIsAvailable() throws {
        for cores in [1, 2, 8, 64] {
            for cache in [false, true] {
                var previous: DescriptorBudget?
                for available in DescriptorBudget.minimum(transfers: true, cache: cache)...2000 {
                    let budget = try XCTUnwrap(
                        DescriptorBudget(
                            available: available, wantedTransfers: 16, cores: cores,
                            transfers: true, cache: cache))
                    XCTAssertLessThanOrEqual(
                        cost(budget, cores: cores, cache: cache), available, "\(available), \(cores) cores")
                    XCTAssertLessThanOrEqual(
                        DescriptorBudget.runFiles + budget.observers * DescriptorBudget.perObserver, available)
                    XCTAssertLessThanOrEqual(budget.transfers, 16)
                    if budget.transfers < 16 {
                        // Transfers first: what went to more copiers and to folders would not pay for one more.
                        let extra =
                            max(0, budget.cacheCopiers - 1) * DescriptorBudget.perCacheCopier + budget.commitFolders
                            + budget.cacheFolders
                        let next =
                            DescriptorBudget.perTransfer + (budget.transfers < cores ? DescriptorBudget.perLoop : 0)
                        XCTAssertLessThan(
                            available - cost(budget, cores: cores, cache: cache) + extra, next, "transfers first")
                    }
                    if budget.cacheFolders > 0 { XCTAssertEqual(budget.commitFolders, 16) }
                    if let previous { XCTAssertGreaterThanOrEqual(budget.transfers, previous.transfers) }
                    previous = budget
                }
                XCTAssertEqual(previous?.cacheFolders, cache ? 768 : 0, "plenty: every folder held")
                XCTAssertEqual(previous?.observers, cores)
            }
        }
    }

    /// The limit that leaves enough counts the descriptors open above the present limit: they come within it.
    func testTheLimitThatLeavesEnough() {
        let limit = DescriptorLimit(limit: 10, open: [0, 1, 2, 12, 13, 40])
        XCTAssertEqual(limit.inUse, 3)
        XCTAssertEqual(limit.available, 7)
        XCTAssertEqual(limit.limit(leaving: 7), 10)
        XCTAssertEqual(limit.limit(leaving: 20), 25, "0-2, 12 and 13 below it")
        XCTAssertEqual(limit.limit(leaving: 40), 46, "and 40")
    }
}
