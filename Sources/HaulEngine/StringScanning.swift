/// Header values and messages, without Foundation.
extension String {
    /// Without the spaces, tabs and line ends around it.
    var trimmingWhitespace: String {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0d || byte == 0x0a }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }), let last = utf8.lastIndex(where: { !isSpace($0) })
        else {
            return ""
        }
        return String(self[first...last])
    }
}
