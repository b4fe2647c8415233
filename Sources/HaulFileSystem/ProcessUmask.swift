import Glibc

/// The umask as the kernel reports it in /proc/self/status (Linux 4.7+): reading it with umask(2) would mean
/// setting it, for a moment, under every other thread of the process.
package enum ProcessUmask {
    package static func read() -> UInt32? {
        guard let file = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("Umask:") else { continue }
            return UInt32(String(text.dropFirst("Umask:".count).filter { ("0"..."7").contains($0) }), radix: 8)
        }
        return nil
    }
}
