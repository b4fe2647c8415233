/// Byte-level access to string contents. Generic algorithms over `String.UTF8View` (`contains`, `allSatisfy`,
/// index loops) validate every index and cost several times a plain buffer loop; these run on every scalar of a
/// large manifest.
extension StringProtocol {
    func withUTF8Buffer<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = String(self)
        return copy.withUTF8(body)
    }

    func containsByte(_ byte: UInt8) -> Bool {
        withUTF8Buffer { $0.contains(byte) }
    }

    /// Whether every byte is ASCII: such text has no other spelling under Unicode normalization.
    var isASCII: Bool {
        withUTF8Buffer { bytes in bytes.allSatisfy { $0 < 0x80 } }
    }

    /// Same UTF-8 bytes. `==` on strings is Unicode canonical equivalence, under which "caf\u{e9}" and
    /// "cafe\u{301}" are equal: two different names to the kernel.
    func hasSameBytes<Other: StringProtocol>(as other: Other) -> Bool {
        withUTF8Buffer { a in other.withUTF8Buffer { b in a.count == b.count && a.elementsEqual(b) } }
    }

    /// Byte order, which is also Unicode scalar order (UTF-8 preserves it).
    func bytesPrecede<Other: StringProtocol>(_ other: Other) -> Bool {
        withUTF8Buffer { a in other.withUTF8Buffer { b in a.lexicographicallyPrecedes(b) } }
    }

    /// Feeds the UTF-8 bytes to `hasher`, to hash consistently with `hasSameBytes`.
    func hashBytes(into hasher: inout Hasher) {
        withUTF8Buffer { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
