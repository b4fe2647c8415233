/// The limit on an entry's bytes, said one way wherever it stops them: a download, a cache copy.
package enum SizeLimit {
    /// Why bytes were refused for passing `limit`: the entry's own `size` when `pinned`, else `--max-file-size`.
    package static func exceeded(_ limit: Int64, pinned: Bool) -> String {
        pinned
            ? "more than the \(limit) bytes its size says"
            : "more than \(ByteCount.format(limit)), the --max-file-size limit (an entry's size sets its own)"
    }
}

/// Byte counts the way people read them: 1 decimal place, binary units (`1.5 MiB`).
package enum ByteCount {
    package static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
    }
}
