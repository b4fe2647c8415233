#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Byte-level access to string contents. Generic algorithms over `String.UTF8View` (`contains`, `allSatisfy`,
/// index loops) validate every index and cost several times a plain buffer loop; these run on every scalar of a
/// large manifest. Inlinable so that other modules get them specialized for `String`: called generically across
/// a module boundary, each call looked up type metadata at run time, a tenth of a 100,000-file no-op.
extension StringProtocol {
    @inlinable package func withUTF8Buffer<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = String(self)
        return copy.withUTF8(body)
    }

    func containsByte(_ byte: UInt8) -> Bool {
        withUTF8Buffer { $0.contains(byte) }
    }

    /// Same UTF-8 bytes. `==` on strings is Unicode canonical equivalence, under which "caf\u{e9}" and
    /// "cafe\u{301}" are equal: two different names to the kernel.
    @inlinable package func hasSameBytes<Other: StringProtocol>(as other: Other) -> Bool {
        // The same storage (one string compared with a copy of itself, the common case) is equal at once; else
        // memcmp, not `elementsEqual`: a byte-by-byte generic loop was a measurable share of a 100,000-file no-op.
        withUTF8Buffer { a in
            other.withUTF8Buffer { b in
                guard a.count == b.count else { return false }
                guard let left = a.baseAddress, let right = b.baseAddress, left != right else { return true }
                return memcmp(left, right, a.count) == 0
            }
        }
    }

    /// Whether the UTF-8 bytes are exactly `bytes`.
    @inlinable package func hasSameBytes(as bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        withUTF8Buffer { own in
            guard own.count == bytes.count else { return false }
            guard let left = own.baseAddress, let right = bytes.baseAddress else { return true }
            return memcmp(left, right, own.count) == 0
        }
    }

    /// Byte order, which is also Unicode scalar order (UTF-8 preserves it).
    @inlinable package func bytesPrecede<Other: StringProtocol>(_ other: Other) -> Bool {
        withUTF8Buffer { a in
            other.withUTF8Buffer { b in
                let common = Swift.min(a.count, b.count)
                guard common > 0, let left = a.baseAddress, let right = b.baseAddress else { return a.count < b.count }
                let order = memcmp(left, right, common)
                return order != 0 ? order < 0 : a.count < b.count
            }
        }
    }

    /// Feeds the UTF-8 bytes to `hasher`, to hash consistently with `hasSameBytes`.
    @inlinable package func hashBytes(into hasher: inout Hasher) {
        withUTF8Buffer { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// A destination's path as text that is compared, hashed and ordered by its UTF-8 bytes, for tables keyed by
/// destination (the state, pruning, the folders a walk has reached). A `String` key would make "caf\u{e9}" and
/// "cafe\u{301}", two files to the kernel, one entry: one file's record would vouch for the other, and a prune
/// could delete the wrong one.
package struct DestinationKey: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let text: String

    package init(_ text: String) { self.text = text }
    package init(_ destination: DestinationPath) { text = destination.description }
    package init(stringLiteral value: String) { text = value }

    package var description: String { text }

    package static func == (a: DestinationKey, b: DestinationKey) -> Bool { a.text.hasSameBytes(as: b.text) }
    package func hash(into hasher: inout Hasher) { text.hashBytes(into: &hasher) }
    package static func < (a: DestinationKey, b: DestinationKey) -> Bool { a.text.bytesPrecede(b.text) }
}
