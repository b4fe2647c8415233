import CLibCrypto

/// The digest algorithms a manifest may name. SHA-1 and MD5 are accepted for old asset sets but are weak:
/// the manifest loader warns about them.
package enum DigestAlgorithm: String, Sendable, CaseIterable, Hashable {
    case sha256, sha384, sha512, sha1, md5

    /// Length of a digest in bytes.
    package var byteCount: Int {
        switch self {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        case .sha1: 20
        case .md5: 16
        }
    }

    /// Collision attacks are practical against these; a pin made with them protects less.
    package var isWeak: Bool { self == .sha1 || self == .md5 }
}

/// A computed or expected digest: the algorithm and its raw bytes. Two digests are equal only when both agree.
///
/// Digests of up to 32 bytes (SHA-256, SHA-1, MD5) are held inline rather than in an array: a manifest, a state
/// cache and a plan each hold one per file, and 100,000 files would otherwise be 100,000 heap objects apiece,
/// retained and released at every copy. Longer ones (SHA-384, SHA-512) are rare enough to stay on the heap
/// rather than make every copy of every digest twice as large.
package struct Digest: Sendable, Hashable, CustomStringConvertible {
    package let algorithm: DigestAlgorithm
    private let storage: Storage

    /// One representation per value (inline exactly when the length allows), so synthesized `==` is right.
    private enum Storage: Sendable, Hashable {
        /// Zero-padded past the digest's length.
        case inline(UInt64, UInt64, UInt64, UInt64)
        case heap([UInt8])
    }

    private static let inlineCapacity = 32

    package init(algorithm: DigestAlgorithm, bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { Digest(algorithm: algorithm, copying: $0) }
    }

    package init(algorithm: DigestAlgorithm, copying bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == algorithm.byteCount, "digest length does not match its algorithm")
        self.algorithm = algorithm
        guard bytes.count <= Self.inlineCapacity else {
            storage = .heap(Array(bytes))
            return
        }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: bytes) }
        storage = .inline(words.0, words.1, words.2, words.3)
    }

    /// Parses lowercase or uppercase hex; nil unless it is exactly `algorithm.byteCount` bytes.
    package init?(algorithm: DigestAlgorithm, hex: some StringProtocol) {
        let parse = { (utf8: UnsafeBufferPointer<UInt8>) in Digest(algorithm: algorithm, hexUTF8: utf8) }
        guard
            let digest = hex.utf8.withContiguousStorageIfAvailable(parse)
                ?? Array(hex.utf8).withUnsafeBufferPointer(parse)
        else { return nil }
        self = digest
    }

    /// The same from UTF-8 bytes (a line of a file being parsed), decoded straight into place.
    package init?(algorithm: DigestAlgorithm, hexUTF8 input: UnsafeBufferPointer<UInt8>) {
        let count = algorithm.byteCount
        guard input.count == 2 * count else { return nil }
        self.algorithm = algorithm
        if count <= Self.inlineCapacity {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            guard withUnsafeMutableBytes(of: &words, { Hex.decode(input, into: $0) }) else { return nil }
            storage = .inline(words.0, words.1, words.2, words.3)
        } else {
            var bytes = [UInt8](repeating: 0, count: count)
            guard bytes.withUnsafeMutableBytes({ Hex.decode(input, into: $0) }) else { return nil }
            storage = .heap(bytes)
        }
    }

    /// Parses standard base64 with its padding (as in Subresource Integrity), by libcrypto; nil unless it decodes
    /// to the right length.
    package init?(algorithm: DigestAlgorithm, base64: some StringProtocol) {
        let text = Array(base64.utf8)
        let padding = text.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard text.count % 4 == 0, padding <= 2, !text.dropLast(padding).contains(UInt8(ascii: "=")) else { return nil }
        // libcrypto decodes whole groups of four, the padding as zero bytes.
        var bytes = [UInt8](repeating: 0, count: text.count / 4 * 3)
        let decoded = Int(EVP_DecodeBlock(&bytes, text, Int32(text.count)))
        guard decoded >= 0, decoded - padding == algorithm.byteCount else { return nil }
        self.init(algorithm: algorithm, bytes: Array(bytes.prefix(algorithm.byteCount)))
    }

    package var bytes: [UInt8] { withUnsafeBytes(Array.init) }

    /// The digest's bytes, without copying them out.
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch storage {
        case .inline(let a, let b, let c, let d):
            try Swift.withUnsafeBytes(of: (a, b, c, d)) { words in
                try body(UnsafeRawBufferPointer(rebasing: words.prefix(algorithm.byteCount)))
            }
        case .heap(let bytes):
            try bytes.withUnsafeBytes(body)
        }
    }

    package var hex: String {
        var out: [UInt8] = []
        out.reserveCapacity(2 * algorithm.byteCount)
        Hex.append(self, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Standard base64 with its padding.
    package var base64: String { Base64.encode(bytes) }

    /// Subresource Integrity form, `sha256-<base64>`: an `integrity:` pin, and a tree's digest as
    /// `nix hash path` prints it.
    package var subresourceIntegrity: String { "\(algorithm.rawValue)-\(base64)" }

    /// Parses one `sha256-<base64>` token (sha384 and sha512 alike; SRI names no weaker algorithm); nil for
    /// anything else.
    package init?(subresourceIntegrity text: some StringProtocol) {
        guard let dash = text.firstIndex(of: "-"), let algorithm = DigestAlgorithm(rawValue: String(text[..<dash])),
            !algorithm.isWeak
        else { return nil }
        self.init(algorithm: algorithm, base64: text[text.index(after: dash)...])
    }

    /// `sha256:9f86…`, the unambiguous form used in logs.
    package var description: String { "\(algorithm.rawValue):\(hex)" }
}

/// Hex encoding without Foundation, so that hashing thousands of files does not allocate formatters.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Straight into a buffer being built (a state file of 100,000 digests), no String in between.
    package static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        bytes.withUnsafeBytes { append($0, to: &out) }
    }

    package static func append(_ digest: Digest, to out: inout [UInt8]) {
        digest.withUnsafeBytes { append($0, to: &out) }
    }

    /// Written to a stack buffer and appended whole: appending two bytes at a time checked capacity and
    /// uniqueness per byte, which made the digests most of the cost of writing a 100,000-file state.
    package static func append(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bytes.count * 2) { text in
            digits.withUnsafeBufferPointer { digits in
                for (offset, byte) in bytes.enumerated() {
                    text[2 * offset] = digits[Int(byte >> 4)]
                    text[2 * offset + 1] = digits[Int(byte & 0x0f)]
                }
            }
            out.append(contentsOf: text)
        }
    }

    /// Straight from the UTF-8 bytes, no intermediate array: manifests and the state cache decode one digest per
    /// entry, 100,000 at a time.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        if let decoded = text.utf8.withContiguousStorageIfAvailable(decode(bytes:)) { return decoded }
        return Array(text.utf8).withUnsafeBufferPointer(decode(bytes:))
    }

    /// The same for text that is still bytes (a line of a file being parsed), without making a String of it.
    package static func decode(utf8 bytes: ArraySlice<UInt8>) -> [UInt8]? {
        bytes.withUnsafeBufferPointer(decode(bytes:))
    }

    private static func decode(bytes input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard input.count % 2 == 0 else { return nil }
        var output = [UInt8](repeating: 0, count: input.count / 2)
        return output.withUnsafeMutableBytes({ decode(input, into: $0) }) ? output : nil
    }

    /// Decodes `input` (an even number of hex digits, either case) into the first `input.count / 2` bytes of
    /// `output`; false on any other character. By table: a manifest and a state of 100,000 digests each are
    /// decoded on every no-op sync.
    package static func decode(_ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableRawBufferPointer) -> Bool
    {
        precondition(input.count / 2 <= output.count, "hex decoding past the end of its output")
        return nibbles.withUnsafeBufferPointer { table in
            var invalid: UInt8 = 0
            for index in 0..<input.count / 2 {
                let high = table[Int(input[2 * index])], low = table[Int(input[2 * index + 1])]
                invalid |= high | low
                output[index] = high << 4 | (low & 0x0F)
            }
            return invalid & 0xF0 == 0
        }
    }

    /// A hex digit's value; 0xFF for any other byte.
    private static let nibbles: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt8(byte) - UInt8(ascii: "A") + 10
        default: 0xFF
        }
    }
}
