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
}
