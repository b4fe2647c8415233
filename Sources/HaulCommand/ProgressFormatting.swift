import Haul

/// The text of progress output, as pure functions of numbers and a width, so that every layout decision
/// (bar, truncation, rate, ETA, what fits in 80 columns) is unit-tested without a terminal or a clock.
///
/// Widths are in terminal columns, not Characters: a CJK name takes two columns per character, and a line that
/// is one column too wide wraps, which breaks the cursor arithmetic of the live view.
enum ProgressFormatting {
    /// The longest run of transfers the live view lists before it says "… and N more".
    static let maxTransferLines = 8

    // MARK: Numbers

    /// `8.1 MiB/s`, in the same units as every byte count haul prints.
    static func rate(_ bytesPerSecond: Double) -> String {
        ByteCount.format(Int64(max(0, bytesPerSecond).rounded())) + "/s"
    }

    /// `11s`, `2m05s`, `1h02m`: short enough for an 80-column line, precise where it matters (the last minute).
    /// Anything beyond 99 hours is not an estimate worth showing.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "?" }
        let whole = Int(seconds.rounded(.up))
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return "\(whole / 60)m\(twoDigits(whole % 60))s" }
        let hours = whole / 3600
        if hours > 99 { return ">99h" }
        return "\(hours)h\(twoDigits((whole % 3600) / 60))m"
    }

    /// Seconds left at `rate`; nil when it cannot be estimated (nothing known to be left, or no rate yet).
    static func eta(remaining: Int64, rate: Double?) -> Double? {
        guard let rate, rate > 0, remaining > 0 else { return nil }
        return Double(remaining) / rate
    }

    /// `1.2 MiB / 4.0 MiB`, or just `1.2 MiB` when the size is not known.
    static func amount(_ done: Int64, of total: Int64?) -> String {
        guard let total else { return ByteCount.format(done) }
        return "\(ByteCount.format(done)) / \(ByteCount.format(total))"
    }

    // MARK: Bars

    /// `[#####-----]` with `width` cells between the brackets. An unknown fraction draws a short block whose
    /// position follows the bytes received, so a transfer of unknown size still visibly moves.
    static func bar(fraction: Double?, width: Int, phase: Int64 = 0) -> String {
        let cells = max(0, width)
        guard let fraction else {
            let block = min(3, cells)
            guard cells > 0 else { return "[]" }
            let span = cells - block + 1
            let start = Int((phase % Int64(2 * span) + Int64(2 * span)) % Int64(2 * span))
            let position = start < span ? start : 2 * span - 1 - start  // back and forth, not wrap-around
            return "[" + String(repeating: "-", count: position) + String(repeating: "#", count: block)
                + String(repeating: "-", count: cells - position - block) + "]"
        }
        let clamped = fraction.isFinite ? min(1, max(0, fraction)) : 0
        // Full only when done: a bar that looks complete while bytes are still missing is a small lie.
        var filled = Int((clamped * Double(cells)).rounded(.down))
        if clamped < 1 { filled = min(filled, cells - 1) }
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: cells - filled) + "]"
    }

    // MARK: Columns and truncation

    /// Columns a character takes on a terminal: 2 for East Asian wide and fullwidth characters and most emoji,
    /// 1 otherwise (a Character already carries its combining marks). An approximation of `wcwidth`, which
    /// would depend on the process's locale.
    static func columns(of character: Character) -> Int {
        guard let scalar = character.unicodeScalars.first?.value else { return 0 }
        switch scalar {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    static func columns(of text: some StringProtocol) -> Int {
        text.reduce(0) { $0 + columns(of: $1) }
    }

    /// A destination or URL as the view shows it: escaped as every line is (`TerminalText`), but before it is
    /// measured and truncated, so that the columns counted are the columns drawn.
    static func displayName(_ name: String) -> String {
        TerminalText.escaping(name)
    }

    /// At most `width` columns: the head and the tail with `…` between, keeping more of the tail, where a
    /// path's file name is.
    static func truncateMiddle(_ text: String, to width: Int) -> String {
        guard columns(of: text) > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        let budget = width - 1
        let headBudget = budget / 3
        let head = prefix(text, columns: headBudget)
        let tail = suffix(text, columns: budget - columns(of: head))
        return head + "…" + tail
    }

    /// The longest prefix that fits in `width` columns (a cut, no ellipsis): the last defence of a line's width.
    static func clip(_ text: String, to width: Int) -> String {
        guard columns(of: text) > width else { return text }
        return prefix(text, columns: width)
    }

    private static func prefix(_ text: String, columns width: Int) -> String {
        var used = 0
        var result = ""
        for character in text {
            let next = columns(of: character)
            if used + next > width { break }
            used += next
            result.append(character)
        }
        return result
    }

    private static func suffix(_ text: String, columns width: Int) -> String {
        var used = 0
        var characters: [Character] = []
        for character in text.reversed() {
            let next = columns(of: character)
            if used + next > width { break }
            used += next
            characters.append(character)
        }
        return String(characters.reversed())
    }

    /// `text` padded with spaces to `width` columns (on the left when `right` is true).
    static func pad(_ text: String, to width: Int, right: Bool = false) -> String {
        let missing = max(0, width - columns(of: text))
        let spaces = String(repeating: " ", count: missing)
        return right ? spaces + text : text + spaces
    }

    // MARK: Lines

    /// `[12/40 files] 35.2 MiB / 120.0 MiB  8.1 MiB/s  ETA 11s`, clipped to `width` - 1 columns (writing the
    /// last column makes some terminals wrap). The ETA appears only when the total is known.
    static func overallLine(
        filesDone: Int, filesTotal: Int, failed: Int, bytesDone: Int64, bytesTotal: Int64?,
        rate: Double?, width: Int
    ) -> String {
        var line =
            "[\(filesDone)/\(filesTotal) files\(failed > 0 ? ", \(failed) failed" : "")] "
            + amount(bytesDone, of: bytesTotal)
        if let rate { line += "  " + self.rate(rate) }
        if let bytesTotal, let seconds = eta(remaining: bytesTotal - bytesDone, rate: rate) {
            line += "  ETA " + duration(seconds)
        }
        return clip(line, to: max(1, width - 1))
    }

    /// One active transfer in the live view.
    struct TransferRow: Equatable {
        var name: String
        var done: Int64
        var total: Int64?
        /// nil until there is enough history for a smoothed rate.
        var rate: Double?
        /// Shown instead of the rate, e.g. `retrying` between a failed attempt and the next.
        var note: String?
        /// Shown instead of bar, amount and rate while the transfer waits out a backoff:
        /// `retry 2 of 3 for URL in 4 s`.
        var wait: String?
    }

    /// Field widths that fit the largest values ByteCount produces (`1023.9 MiB`), so bars line up.
    static let amountColumns = 23
    static let rateColumns = 12
    static let indent = "  "

    /// The rows of the live view, all with the same layout: `  name  [#####-----]  1.2 MiB / 4.0 MiB  800.0 KiB/s`.
    ///
    /// Every line is at most `width` - 1 columns. Names share one column as wide as the longest shown needs
    /// (middle-truncated when space is short); the bar takes what is left, between 10 and 30 cells, and
    /// disappears before a name is cut below 12 columns.
    static func transferLines(_ rows: [TransferRow], width: Int) -> [String] {
        let usable = max(1, width - 1)
        let names = rows.map { displayName($0.name) }
        let longest = names.map { columns(of: $0) }.max() ?? 0
        let stats = indent.count + 2 + amountColumns + 2 + rateColumns  // indent, gaps, fixed fields
        let minimumName = min(longest, 12)
        if usable - stats < minimumName {
            // A narrow terminal: name and amount only, the name taking what the amount leaves.
            return zip(rows, names).map { row, name in
                if let wait = row.wait {
                    // The wait says more than the name: the name gets a third of the line at most.
                    let shown = truncateMiddle(name, to: max(1, min(columns(of: name), usable / 3)))
                    let room = max(1, usable - indent.count - 2 - columns(of: shown))
                    return clip(indent + shown + "  " + truncateMiddle(wait, to: room), to: usable)
                }
                let amount = amount(row.done, of: row.total)
                let room = max(1, usable - indent.count - 2 - columns(of: amount))
                return clip(indent + truncateMiddle(name, to: room) + "  " + amount, to: usable)
            }
        }
        var barCells = min(30, usable - stats - longest - 4)  // 4: two brackets, one gap
        if barCells < 10 {
            // Not enough for everything: keep a 10-cell bar while names keep at least 12 columns.
            barCells = usable - stats - minimumName - 4 >= 10 ? 10 : 0
        }
        let barColumns = barCells > 0 ? barCells + 4 : 0
        let nameColumns = max(1, min(longest, usable - stats - barColumns))
        return zip(rows, names).map { row, name in
            var line = indent + pad(truncateMiddle(name, to: nameColumns), to: nameColumns)
            if let wait = row.wait {
                // Bytes and a rate of nothing say less than what the transfer is waiting for.
                return line + "  " + truncateMiddle(wait, to: max(1, usable - columns(of: line) - 2))
            }
            if barCells > 0 {
                let fraction = row.total.map { $0 > 0 ? Double(row.done) / Double($0) : 0 }
                line += "  " + bar(fraction: fraction, width: barCells, phase: row.done / 65_536)
            }
            line += "  " + pad(amount(row.done, of: row.total), to: amountColumns, right: true)
            let tail = row.note ?? row.rate.map(rate) ?? ""
            line += "  " + pad(tail, to: rateColumns, right: true)
            return clip(line, to: usable)
        }
    }

    /// `… and 5 more`, under the listed transfers.
    static func moreLine(_ hidden: Int, width: Int) -> String {
        clip(indent + "… and \(hidden) more", to: max(1, width - 1))
    }

    // MARK: Plain lines

    /// `still fetching big.iso: 1.2 GiB / 4.0 GiB, 85.0 MiB/s`: a log's sign of life for a long transfer.
    static func heartbeatLine(name: String, done: Int64, total: Int64?, rate: Double?) -> String {
        "still fetching \(displayName(name)): \(amount(done, of: total)), \(self.rate(rate ?? 0))"
    }

    /// `still fetching big.iso: retry 2 of 3 for https://h/big.iso in 4 s`: a transfer between two attempts.
    static func heartbeatLine(name: String, waiting: String) -> String {
        "still fetching \(displayName(name)): \(waiting)"
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}

/// SGR colours for a terminal (see `TerminalText.painted`). Only ever used when `Colour.enabled` said so for the
/// stream written to.
enum ANSI {
    static let green = "32", yellow = "33", red = "31", cyan = "36", magenta = "35", boldRed = "1;31"
}
