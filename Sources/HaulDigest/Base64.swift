import CLibCrypto

/// Standard base64 with its padding, by libcrypto: digests in Subresource Integrity form, and credentials in an
/// `Authorization: Basic` header.
package enum Base64 {
    package static func encode(_ bytes: [UInt8]) -> String {
        var text = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let count = Int(EVP_EncodeBlock(&text, bytes, Int32(bytes.count)))
        return String(decoding: text.prefix(count), as: UTF8.self)
    }

    /// Strict decoding (keys and signatures): whole groups of four, padding only at the end, and no other byte, not
    /// even white space; nil for anything else. In Swift rather than by libcrypto, whose decoder skips white space
    /// and leaves the padding's bytes to its caller.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(utf8: Array(text.utf8))
    }

    package static func decode(utf8 text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 == 0 else { return nil }
        let padding = text.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 4 * 3)
        var group: UInt32 = 0
        for (index, character) in text.dropLast(padding).enumerated() {
            let value = values[Int(character)]
            guard value < 64 else { return nil }
            group = group << 6 | UInt32(value)
            if index % 4 == 3 {
                bytes += [
                    UInt8(truncatingIfNeeded: group >> 16), UInt8(truncatingIfNeeded: group >> 8),
                    UInt8(truncatingIfNeeded: group),
                ]
                group = 0
            }
        }
        switch padding {
        case 1: bytes += [UInt8(truncatingIfNeeded: group >> 10), UInt8(truncatingIfNeeded: group >> 2)]
        case 2: bytes.append(UInt8(truncatingIfNeeded: group >> 4))
        default: break
        }
        return bytes
    }

    /// A base64 character's value; 0xFF for any other byte (the padding among them).
    private static let values: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt8(byte) - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt8(byte) - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: 0xFF
        }
    }
}
