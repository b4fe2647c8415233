import XCTest

@testable import HaulCommand
@testable import HaulEngine

/// The pure pieces of progress output: layout, truncation, numbers, and the model's bookkeeping under a fake clock.
final class ProgressFormattingTests: XCTestCase {
    private typealias F = ProgressFormatting

    func testBarIsProportionalAndFullOnlyWhenDone() {
        XCTAssertEqual(F.bar(fraction: 0.5, width: 10), "[#####-----]")
        XCTAssertEqual(F.bar(fraction: 0, width: 4), "[----]")
        XCTAssertEqual(F.bar(fraction: 0.999, width: 10), "[#########-]", "not full while bytes are missing")
        XCTAssertEqual(F.bar(fraction: 1, width: 10), "[##########]")
        XCTAssertEqual(F.bar(fraction: 7, width: 3), "[###]")
        XCTAssertEqual(F.bar(fraction: .nan, width: 3), "[---]")
        XCTAssertEqual(F.bar(fraction: nil, width: 10, phase: 0), "[###-------]")
        XCTAssertEqual(F.bar(fraction: nil, width: 10, phase: 2), "[--###-----]")
        XCTAssertEqual(F.bar(fraction: nil, width: 10, phase: 8), "[-------###]")
        XCTAssertEqual(F.bar(fraction: nil, width: 10, phase: 9), "[------###-]", "it bounces back")
        for phase in 0..<40 { XCTAssertEqual(F.bar(fraction: nil, width: 10, phase: Int64(phase)).count, 12) }
    }

    func testTruncateMiddleKeepsTheHeadAndMoreOfTheTail() {
        XCTAssertEqual(F.truncateMiddle("short.txt", to: 20), "short.txt")
        XCTAssertEqual(F.truncateMiddle("data/very/long/path/file.csv", to: 15), "data…h/file.csv")
        XCTAssertEqual(F.columns(of: F.truncateMiddle("data/very/long/path/file.csv", to: 15)), 15)
        XCTAssertEqual(F.truncateMiddle("abc", to: 1), "…")
        XCTAssertEqual(F.truncateMiddle("abc", to: 0), "")
        // Two columns per CJK character: never one column too many.
        let wide = "データ/とても長いファイル名です.csv"
        for width in 1...30 {
            XCTAssertLessThanOrEqual(F.columns(of: F.truncateMiddle(wide, to: width)), width, "\(width)")
        }
        XCTAssertEqual(F.columns(of: "日本"), 4)
        XCTAssertEqual(F.clip("日本語", to: 5), "日本")
    }

    func testControlCharactersInNamesNeverReachTheTerminal() {
        XCTAssertEqual(F.displayName("a\u{1B}[31mb\nc\u{7F}.txt"), #"a\u{1b}[31mb\nc\u{7f}.txt"#)
        XCTAssertEqual(F.displayName("plain/name.txt"), "plain/name.txt")
    }

    func testRateDurationAndETA() {
        XCTAssertEqual(F.rate(8.1 * 1_048_576), "8.1 MiB/s")
        XCTAssertEqual(F.rate(800 * 1024), "800.0 KiB/s")
        XCTAssertEqual(F.rate(0), "0 B/s")
        XCTAssertEqual(F.duration(0.2), "1s")
        XCTAssertEqual(F.duration(11), "11s")
        XCTAssertEqual(F.duration(125), "2m05s")
        XCTAssertEqual(F.duration(3720), "1h02m")
        XCTAssertEqual(F.duration(400_000), ">99h")
        XCTAssertEqual(F.duration(.infinity), "?")
        XCTAssertEqual(F.eta(remaining: 100, rate: 50), 2)
        XCTAssertNil(F.eta(remaining: 100, rate: nil))
        XCTAssertNil(F.eta(remaining: 100, rate: 0))
        XCTAssertNil(F.eta(remaining: 0, rate: 10))
    }

    func testOverallLineShowsAnETAOnlyWhenTheTotalIsKnown() {
        let mib = 1_048_576.0
        XCTAssertEqual(
            F.overallLine(
                filesDone: 12, filesTotal: 40, failed: 0, bytesDone: Int64(35.2 * mib),
                bytesTotal: Int64(120 * mib), rate: 8.1 * mib, width: 80),
            "[12/40 files] 35.2 MiB / 120.0 MiB  8.1 MiB/s  ETA 11s")
        XCTAssertEqual(
            F.overallLine(
                filesDone: 1, filesTotal: 3, failed: 1, bytesDone: 2048, bytesTotal: nil,
                rate: 1024, width: 80),
            "[1/3 files, 1 failed] 2.0 KiB  1.0 KiB/s")
        XCTAssertEqual(
            F.overallLine(
                filesDone: 0, filesTotal: 3, failed: 0, bytesDone: 0, bytesTotal: 10, rate: nil,
                width: 80), "[0/3 files] 0 B / 10 B")
        XCTAssertEqual(
            F.overallLine(
                filesDone: 12, filesTotal: 40, failed: 0, bytesDone: 0, bytesTotal: 10, rate: nil,
                width: 12), "[12/40 file")
    }

    func testTransferLinesLineUpAndNeverExceedTheWidth() {
        let rows = [
            F.TransferRow(name: "data/a.csv", done: 1_258_291, total: 4_194_304, rate: 800 * 1024, note: nil),
            F.TransferRow(
                name: "a/very/long/directory/name/that/goes/on/and/on/forever/file.tar.gz", done: 5,
                total: nil, rate: nil, note: "retrying"),
            F.TransferRow(name: "データ/とても長いファイル名です.csv", done: 1 << 40, total: 1 << 41, rate: 1e12, note: nil),
        ]
        let at80 = F.transferLines(rows, width: 80)
        XCTAssertEqual(at80[0], "  data/a.csv                [##--------]        1.2 MiB / 4.0 MiB   800.0 KiB/s")
        XCTAssertTrue(at80[1].hasPrefix("  a/very/…ever/file.tar.gz  [###-------]"), at80[1])
        XCTAssertTrue(at80[1].hasSuffix("5 B      retrying"), at80[1])
        let barColumns = at80.compactMap { line in line.range(of: "  [").map { F.columns(of: line[..<$0.lowerBound]) } }
        XCTAssertEqual(barColumns.count, 3)
        XCTAssertEqual(Set(barColumns).count, 1, "the bars start in the same column: \(at80)")
        for width in 1...200 {
            for line in F.transferLines(rows, width: width) + [F.moreLine(12, width: width)] {
                XCTAssertLessThanOrEqual(F.columns(of: line), max(1, width - 1), "width \(width): \(line)")
            }
        }
        XCTAssertEqual(
            F.transferLines([rows[0]], width: 120)[0],
            "  data/a.csv  [########----------------------]        1.2 MiB / 4.0 MiB   800.0 KiB/s", "at most 30 cells")
        XCTAssertEqual(
            F.transferLines([rows[0]], width: 40)[0], "  data/a.csv  1.2 MiB / 4.0 MiB", "narrow: no bar, no rate")
    }

    // MARK: The model

    private func progress(_ total: Int64, chunk: Int, of expected: Int64? = nil) -> TransferProgress {
        TransferProgress(bytesWritten: chunk, totalBytesWritten: total, totalBytesExpected: expected)
    }

    func testReceivedBytesExcludeAResumedPrefixAndSurviveARestart() {
        var model = ProgressModel(rateWindow: 3, now: 0)
        model.started(0, "a", size: 10_000, now: 0)
        model.progress(0, "a", progress(6_100, chunk: 100, of: 10_000), size: 10_000, now: 0.1)  // resumed at 6000
        model.sample(now: 0.1)
        model.progress(0, "a", progress(7_100, chunk: 100), size: 10_000, now: 1.1)
        model.sample(now: 1.1)
        XCTAssertEqual(model.active[0]?.received, 1_100)
        XCTAssertEqual(model.active[0]?.meter.rate ?? 0, 1_000, accuracy: 0.001, "the resumed prefix is not a download")
        XCTAssertEqual(model.bytesDone, 7_100, "but it is done")
        model.attemptFailed(
            0, next: NextAttempt(sourceDisplayURL: "u", sourceIndex: 0, delay: 0, retry: 1, retries: 3), now: 1.5)
        XCTAssertEqual(model.active[0]?.note, "retrying")
        model.progress(0, "a", progress(300, chunk: 300), size: 10_000, now: 2)  // the next attempt starts over
        XCTAssertEqual(model.active[0]?.received, 1_400)
        XCTAssertNil(model.active[0]?.note)
        model.finished(0, .fetched(size: 10_000))
        XCTAssertEqual(model.filesDone, 1)
        XCTAssertEqual(model.bytesDone, 10_000)
    }

    func testTotalsAreKnownOnlyWhenEverySizeIs() {
        var model = ProgressModel(rateWindow: 3, now: 0)
        model.started(0, "sized", size: 100, now: 0)
        XCTAssertEqual(model.bytesTotal, 100)
        model.started(1, "unsized", size: nil, now: 0)
        XCTAssertNil(model.bytesTotal)
        model.progress(1, "unsized", progress(10, chunk: 10, of: 50), size: nil, now: 0.1)
        XCTAssertEqual(model.bytesTotal, 150, "the server announced a length")
        model.finished(1, .failed)
        XCTAssertEqual(model.bytesTotal, 100)
        XCTAssertEqual(model.failed, 1)
        model.finished(2, .failed)
        XCTAssertEqual(model.failed, 1, "an entry that was never a transfer is not counted")
        XCTAssertEqual(model.filesTotal, 2)
    }

    /// Planned entries count before they start; one that fails before any attempt is done (and failed); one
    /// never planned (a refusal) is not a transfer at all.
    func testPlannedEntriesCountFromTheStartAndLeaveOnceWhateverHappens() {
        var model = ProgressModel(rateWindow: 3, now: 0)
        model.expect(0, size: 100)
        model.expect(1, size: nil)
        model.expect(5, size: 50)
        model.expect(0, size: 100)  // once only
        XCTAssertEqual(model.filesTotal, 3)
        XCTAssertNil(model.bytesTotal, "entry 1's size is unknown")
        model.finished(1, .failed)  // failed before any attempt started
        XCTAssertEqual([model.filesDone, model.failed], [1, 1])
        XCTAssertEqual(model.bytesTotal, 150)
        model.started(0, "a", size: 100, now: 0)
        model.started(0, "a", size: 100, now: 0.5)  // a second attempt is the same transfer
        XCTAssertEqual(model.filesTotal, 3)
        XCTAssertEqual(model.bytesTotal, 150)
        model.finished(0, .fetched(size: 100))
        model.finished(0, .fetched(size: 100))  // told twice, counted once
        model.finished(3, .failed)  // never planned
        XCTAssertEqual([model.filesTotal, model.filesDone, model.failed], [3, 2, 1])
        XCTAssertEqual(model.bytesDone, 100)
    }

    func testHeartbeatIsAtMostOnceAnIntervalAndTransfersTakeTurns() {
        var model = ProgressModel(rateWindow: 5, now: 0)
        model.started(0, "a", size: 100, now: 0)
        model.started(1, "b", size: 100, now: 0.5)
        XCTAssertNil(model.heartbeat(now: 4.9, interval: 5))
        XCTAssertEqual(model.heartbeat(now: 5, interval: 5), "still fetching a: 0 B / 100 B, 0 B/s")
        XCTAssertNil(model.heartbeat(now: 9.9, interval: 5), "one line per interval for the whole run")
        XCTAssertEqual(model.heartbeat(now: 10, interval: 5)?.hasPrefix("still fetching b:"), true)
        XCTAssertEqual(model.heartbeat(now: 15, interval: 5)?.hasPrefix("still fetching a:"), true)
        model.finished(0, .fetched(size: 100))
        model.finished(1, .fetched(size: 100))
        model.started(2, "c", size: nil, now: 16)
        XCTAssertNil(model.heartbeat(now: 20, interval: 5), "c is not long yet")
        XCTAssertEqual(model.heartbeat(now: 21, interval: 5), "still fetching c: 0 B, 0 B/s")
    }

    func testFrameListsAtMostEightTransfersAndFitsAShortTerminal() {
        var model = ProgressModel(rateWindow: 3, now: 0)
        for index in 0..<12 {
            model.started(index, "f\(index < 10 ? "0" : "")\(index).bin", size: 1000, now: Double(index))
        }
        let tall = model.frame(columns: 80, rows: 24)
        XCTAssertEqual(tall.count, 10)
        XCTAssertEqual(tall[1].hasPrefix("  f00.bin"), true, "oldest first")
        XCTAssertEqual(tall.last, "  … and 4 more")
        let short = model.frame(columns: 80, rows: 6)
        XCTAssertEqual(short.count, 5, "never as tall as the terminal: \(short)")
        XCTAssertEqual(short.last, "  … and 9 more")
        XCTAssertEqual(model.frame(columns: 80, rows: 2).count, 1)
    }

    func testRateMeterSmoothsOverItsWindowAndFallsToZeroWhenStalled() {
        var meter = RateMeter(window: 2)
        meter.add(time: 0, bytes: 0)
        XCTAssertNil(meter.rate)
        meter.add(time: 0.1, bytes: 1000)
        XCTAssertNil(meter.rate, "a tenth of a second is a burst, not a rate")
        meter.add(time: 1, bytes: 1000)
        XCTAssertEqual(meter.rate ?? 0, 1000, accuracy: 0.001)
        for tick in 2...6 { meter.add(time: Double(tick), bytes: 1000) }
        XCTAssertEqual(meter.rate, 0)
    }
}
