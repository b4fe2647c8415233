import CLibCrypto

/// Standard base64 with its padding, by libcrypto: digests in Subresource Integrity form, and credentials in an
/// `Authorization: Basic` header.
package enum Base64 {
    package static func encode(_ bytes: [UInt8]) -> String {
        var text = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let count = Int(EVP_EncodeBlock(&text, bytes, Int32(bytes.count)))
        return String(decoding: text.prefix(count), as: UTF8.self)
    }
}
