/// Small byte-level string helpers for header values and messages, without Foundation.
extension String {
    var trimmingWhitespace: String {
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 || bytes[start] == 0x0d || bytes[start] == 0x0a { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 || bytes[end - 1] == 0x0d || bytes[end - 1] == 0x0a { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// Plain substring replacement without Foundation.
    func replacingAll(_ target: String, with replacement: String) -> String {
        let haystack = Array(utf8), needle = Array(target.utf8)
        guard !needle.isEmpty, haystack.count >= needle.count else { return self }
        var out: [UInt8] = []
        out.reserveCapacity(haystack.count)
        var index = 0
        while index < haystack.count {
            if index + needle.count <= haystack.count, haystack[index..<(index + needle.count)].elementsEqual(needle) {
                out.append(contentsOf: replacement.utf8)
                index += needle.count
            } else {
                out.append(haystack[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
