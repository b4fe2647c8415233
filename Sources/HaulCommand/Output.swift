import Glibc
import Haul
import HaulEngine
import HaulFileSystem
import HaulManifest
import Synchronization

/// stdout for results, stderr for diagnostics; whole lines, never interleaved mid-line across threads. Every line
/// is a `TerminalText`: whatever it quotes (a destination, a URL, a server's words) is already escaped, so nothing
/// written here can move the cursor, recolour or reorder the terminal but the view's own sequences.
///
/// While the live progress view is up (`showLive`), it sits at the bottom of the terminal, on stderr, and every
/// line written through here appears above it: the view is erased, the line written and the view drawn again,
/// all under the one lock, so no line lands in the middle of a frame and no frame is drawn over a line.
///
/// A reader that stops reading (a pipe nobody drains, a stalled log shipper, a terminal stopped with Ctrl-S) holds
/// a write up, and the run with it, for as long as it stalls; but never the end of the run: once a signal or the
/// time limit stops it (`stopWaiting`), what a stream does not take within a quarter of a second is dropped
/// (`OutputDescriptor`), so the run ends, leaving its files and its state as a stop always does.
enum Output {
    /// The frame on screen, if any: its lines (to draw it again after a line is printed above it) and the
    /// columns each took (to know how many rows to move up even if the terminal narrowed and wrapped them).
    private struct LiveRegion {
        var lines: [String]
        var columns: [Int]
    }

    private static let live = Mutex<LiveRegion?>(nil)
    /// Log lines held back by `logLines`, written with the next write or `flushLog`.
    private static let held = Mutex<String>("")
    /// Decided once: whether stdout shares the screen with the view (then stdout lines must be written above
    /// it too), or goes to a file or a pipe (then the view need not move for it).
    private static let stdoutIsTerminal = isatty(STDOUT_FILENO) == 1

    private static let standardOutput = OutputDescriptor(STDOUT_FILENO)
    private static let standardError = OutputDescriptor(STDERR_FILENO)
    /// Until when (`MonotonicClock` seconds, as a `Double`'s bits) a write may wait for its reader: forever until
    /// the run is being stopped.
    private static let waitDeadline = Atomic<UInt64>(Double.infinity.bitPattern)
    /// How long a reader still gets once the run is being stopped: a reader that reads (a terminal, `tee`) takes
    /// the last lines, one that stalls costs no more than this.
    private static let readerGraceAfterStop = 0.25

    static func lines(_ lines: [TerminalText]) { write(lines, to: STDOUT_FILENO) }
    static func errors(_ lines: [TerminalText]) {
        guard diagnosticsAsEvents.load(ordering: .relaxed) else { return write(lines, to: STDERR_FILENO) }
        write(lines.map { TerminalText(JSONEvents.diagnostic(line: $0.rendered).encoded()) }, to: STDOUT_FILENO)
    }

    /// `haul add --json`: its messages are written deep in the download, edit and placing steps, each as a line for
    /// a person; a program reading stdout gets every one of them as an event instead, in the order they came.
    private static let diagnosticsAsEvents = Atomic<Bool>(false)

    /// From now on, `errors` writes each line to stdout as a `warning` or `error` event.
    static func writeDiagnosticsAsEvents() { diagnosticsAsEvents.store(true, ordering: .relaxed) }

    /// From now on (give or take `readerGraceAfterStop`) no write waits for a reader that does not read: what a
    /// stream does not take by then is dropped, and that stream is written no more. For a signal and the time limit,
    /// which must end the run however its output is read; a write waiting meanwhile gives up too. Once: a second
    /// signal does not extend the grace.
    static func stopWaiting() {
        let deadline = MonotonicClock.seconds() + readerGraceAfterStop
        _ = waitDeadline.compareExchange(
            expected: Double.infinity.bitPattern, desired: deadline.bitPattern, ordering: .relaxed)
    }

    /// `status`, or 74 (`outputFailed`) instead of 0 when standard output could not be written (a full disk, an I/O
    /// error; said on standard error), as `cat` fails: a run whose report is lost did not succeed. Any other status
    /// already says that something went wrong, and says it more precisely. A reader that left (a closed pipe,
    /// `haul … | head`) is no such error, nor is output dropped because the run was stopped (`stopWaiting`).
    static func exitStatus(after status: Int32) -> Int32 {
        flushLog()
        guard let code = standardOutput.failure else { return status }
        errors(["error: cannot write to standard output: \(Errno(code).description)"])
        return status == ExitStatus.success.rawValue ? ExitStatus.outputFailed.rawValue : status
    }

    /// Stdout lines that may wait a moment (a plain log's line per file): held and written together by the
    /// next write of any kind, so the order of everything printed is kept, or by `flushLog`, which the plain
    /// progress's ticker calls twice a second. 100,000 files are then a few hundred writes, not 100,000.
    static func logLines(_ lines: [TerminalText]) {
        guard !lines.isEmpty else { return }
        let flushNow = held.withLock { held in
            for line in lines {
                held += line.rendered
                held += "\n"
            }
            return held.utf8.count >= heldLimit
        }
        if flushNow { flushLog() }
    }

    static func flushLog() { write([], to: STDOUT_FILENO) }

    /// Stdout text too large to hold whole (a plan of a million changes, `--json`'s plan event), written as
    /// `produce` hands it over, in writes of about `streamedWrite` bytes, with no other output between its pieces.
    /// A piece is part of a line; `TerminalText.lineEnd` ends one.
    static func stream(_ produce: ((TerminalText) -> Void) -> Void) {
        live.withLock { region in
            writeHeldLines(above: region)
            var pending = ""
            produce { piece in
                pending += piece.rendered
                guard pending.utf8.count >= streamedWrite else { return }
                writeAbove(region, pending, to: STDOUT_FILENO)
                pending = ""
            }
            if !pending.isEmpty { writeAbove(region, pending, to: STDOUT_FILENO) }
        }
    }

    private static let streamedWrite = 64 * 1024

    private static let heldLimit = 64 * 1024

    private static func write(_ lines: [TerminalText], to descriptor: Int32) {
        live.withLock { region in
            writeHeldLines(above: region)
            if !lines.isEmpty {
                writeAbove(region, lines.map(\.rendered).joined(separator: "\n") + "\n", to: descriptor)
            }
        }
    }

    /// What `logLines` held back, first: the order of everything printed is kept.
    private static func writeHeldLines(above region: LiveRegion?) {
        let pending = held.withLock { held in
            defer { held = "" }
            return held
        }
        if !pending.isEmpty { writeAbove(region, pending, to: STDOUT_FILENO) }
    }

    /// Writes `text`, above the live view if one is shown where it goes.
    private static func writeAbove(_ region: LiveRegion?, _ text: String, to descriptor: Int32) {
        guard let shown = region, descriptor == STDERR_FILENO || stdoutIsTerminal else {
            writeAll(text, to: descriptor)
            return
        }
        if descriptor == STDERR_FILENO {
            writeAll(erase(shown) + text + draw(shown.lines), to: STDERR_FILENO)  // one write: no flicker
        } else {
            writeAll(erase(shown), to: STDERR_FILENO)
            writeAll(text, to: descriptor)
            writeAll(draw(shown.lines), to: STDERR_FILENO)
        }
    }

    /// Replaces the live view on stderr with `frame` in a single write(2): back to the frame's first row, then
    /// each line cleared and rewritten in place (never the whole view cleared first, which would flicker), then
    /// any rows the old frame had beyond the new one cleared. Each line must already fit in the terminal's
    /// width - 1, so that no line wraps.
    static func showLive(_ frame: [TerminalText]) {
        let lines = frame.map(\.rendered)
        live.withLock { region in
            let oldRows = region.map(rows(of:)) ?? 0
            // The row the cursor rests on is cleared too: a `^C` the terminal echoed there goes with the view.
            let text = up(oldRows) + draw(lines) + clearRows(max(0, oldRows - lines.count) + 1)
            writeAll(text, to: STDERR_FILENO)
            region = LiveRegion(lines: lines, columns: lines.map { ProgressFormatting.columns(of: $0) })
        }
    }

    /// Erases the live view, leaving the cursor where the view began: what is printed next takes its place.
    static func endLive() {
        live.withLock { region in
            guard let shown = region else { return }
            writeAll(erase(shown), to: STDERR_FILENO)
            region = nil
        }
    }

    /// Back to the first row of the frame, every row of it cleared.
    ///
    /// Row by row (EL), not with "erase below" (ED): when the frame fills the screen, ED from its top is a
    /// clear-screen, and tmux (`scroll-on-clear`, on by default) then copies the whole frame into the
    /// scrollback every time a line is printed above it.
    /// The row below the frame, where the cursor rests, is cleared too: nothing of ours is there, but a `^C`
    /// that the terminal echoed is.
    private static func erase(_ region: LiveRegion) -> String {
        let rows = rows(of: region)
        return up(rows) + clearRows(rows + 1)
    }

    /// Rows the frame occupies now: a line narrower than the old width may wrap onto several rows if the
    /// terminal was narrowed since (terminals that reflow do that).
    private static func rows(of region: LiveRegion) -> Int {
        let width = max(1, TerminalSize.current(STDERR_FILENO).columns)
        return region.columns.reduce(0) { $0 + max(1, ($1 + width - 1) / width) }
    }

    private static func up(_ rows: Int) -> String { rows > 0 ? "\r\u{1B}[\(rows)A" : "\r" }

    /// Clears `count` rows from the cursor's down (moving down never scrolls), then returns to the first.
    private static func clearRows(_ count: Int) -> String {
        guard count > 0 else { return "" }
        return Array(repeating: "\u{1B}[2K", count: count).joined(separator: "\u{1B}[B")
            + (count > 1 ? "\u{1B}[\(count - 1)A" : "")
    }

    private static func draw(_ lines: [String]) -> String {
        lines.map { "\u{1B}[2K" + $0 + "\n" }.joined()
    }

    /// Straight to the stream's descriptor: no stdio buffer to flush.
    private static func writeAll(_ text: String, to descriptor: Int32) {
        let stream = descriptor == STDERR_FILENO ? standardError : standardOutput
        stream.write(text, waitingUntil: Double(bitPattern: waitDeadline.load(ordering: .relaxed)))
    }
}

/// A descriptor `Output` writes to, written so that a stalled reader can never hold the process: a pipe or a
/// terminal through a descriptor of its own for it (`/proc/self/fd/N` opened again, non-blocking), a socket with
/// `MSG_DONTWAIT`. A write the reader is not ready for then waits in `poll`, which looks every `waitSlice` whether
/// it still should, rather than in `write(2)`, which nothing would interrupt (SIGINT and SIGTERM are blocked in
/// every thread). Not `O_NONBLOCK` on the descriptor itself: that flag belongs to the open file, which the shell
/// and every other process on the terminal or pipe share, and a crash would leave it set for them. A regular file
/// or another device never waits for a reader and is written as it is.
final class OutputDescriptor: Sendable {
    private enum Writer {
        case direct
        case reopened(Int32)
        case socket
    }

    let descriptor: Int32
    private let writer: Writer
    /// Set once the stream failed or a write was given up: it is not written again (no line after a torn one).
    private let ended = Atomic<Bool>(false)
    /// The errno of a write that failed, if one did: 0 when none did, or when the reader only left (EPIPE).
    private let failureCode = Atomic<Int32>(0)
    /// How often a write waiting for its reader looks whether it should still wait, in milliseconds.
    static let waitSlice: Int32 = 100

    init(_ descriptor: Int32) {
        self.descriptor = descriptor
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            writer = .direct
            return
        }
        let kind = info.st_mode & S_IFMT
        if kind == S_IFSOCK {
            writer = .socket
        } else if kind == S_IFIFO || (kind == S_IFCHR && isatty(descriptor) == 1) {
            // O_NOCTTY: a terminal opened again must not become the controlling terminal of a session leader.
            let own = open("/proc/self/fd/\(descriptor)", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
            writer = own >= 0 ? .reopened(own) : .direct
        } else {
            writer = .direct
        }
    }

    /// The errno of the write that failed, if one did (a reader that left is no failure).
    var failure: Int32? {
        let code = failureCode.load(ordering: .relaxed)
        return code == 0 ? nil : code
    }

    /// Writes all of `text`, waiting for a reader not ready for it until `deadline` (`MonotonicClock` seconds; a
    /// deadline already past: not at all) and no longer; gives up (and ends the stream) then, or when the stream
    /// fails. `Output`'s deadline moves from infinity to a moment from now when the run is stopped: it is read
    /// again while waiting.
    func write(_ text: String, waitingUntil deadline: @autoclosure () -> Double) {
        guard !ended.load(ordering: .relaxed) else { return }
        var text = text
        text.withUTF8 { bytes in
            guard let start = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = put(start + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                    continue
                }
                let code = written < 0 ? errno : 0
                if code == EINTR { continue }
                if code == EAGAIN, waitForRoom(until: deadline) { continue }
                // EPIPE (the reader left, SIGPIPE being ignored) simply ends the output.
                if code != EAGAIN && code != EPIPE && code != 0 {
                    _ = failureCode.compareExchange(expected: 0, desired: code, ordering: .relaxed)
                }
                ended.store(true, ordering: .relaxed)
                return
            }
        }
    }

    private func put(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> Int {
        switch writer {
        case .direct: Glibc.write(descriptor, bytes, count)
        case .reopened(let own): Glibc.write(own, bytes, count)
        case .socket: send(descriptor, bytes, count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
        }
    }

    /// True when the reader made room (or the next write will say what went wrong); false once `deadline()` has
    /// passed. The deadline is looked at again every `waitSlice`: it may come nearer while this waits.
    private func waitForRoom(until deadline: () -> Double) -> Bool {
        let polled: Int32 =
            switch writer {
            case .reopened(let own): own
            case .direct, .socket: descriptor
            }
        while true {
            let remaining = deadline() - MonotonicClock.seconds()
            guard remaining > 0 else { return false }
            var entry = pollfd(fd: polled, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(min(Double(Self.waitSlice), (remaining * 1000).rounded(.up)))
            if poll(&entry, 1, milliseconds) != 0 { return true }
        }
    }
}

/// The terminal's size from the kernel (TIOCGWINSZ), asked again for every frame so a resized window is
/// followed; 80×24 when the descriptor is not a terminal or the terminal does not say.
struct TerminalSize: Equatable {
    var columns: Int
    var rows: Int

    static func current(_ descriptor: Int32) -> TerminalSize {
        var size = winsize()
        guard ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0 else { return TerminalSize(columns: 80, rows: 24) }
        return TerminalSize(
            columns: size.ws_col > 0 ? Int(size.ws_col) : 80, rows: size.ws_row > 0 ? Int(size.ws_row) : 24)
    }
}

enum Environment {
    /// The process's environment as it is now (`environ`; an entry without `=` is skipped). Read here rather than
    /// through Foundation, which the command does not otherwise need (it would add the toolchain's largest libraries
    /// to a static binary).
    static var current: [String: String] {
        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            // A name set twice counts once, as getenv(3) reads it: the first.
            if let equals = text.firstIndex(of: "="), variables[String(text[..<equals])] == nil {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return variables
    }
}

/// Keeps `values` alive until the process exits, on purpose: the command is about to return and the process to
/// end, and freeing a 100,000-entry manifest, observation and plan one node at a time costs a sixth of a no-op sync
/// (0.17 s of 1.0 s, `perf stat` of both builds, 4 × 5 runs interleaved), while the kernel takes the whole address
/// space back at once.
func keepUntilExit(_ values: Any...) {
    _ = Unmanaged.passRetained(ValuesKeptUntilExit(values))
}

private final class ValuesKeptUntilExit {
    let values: [Any]
    init(_ values: [Any]) { self.values = values }
}
