/// A TLS alert about the client's certificate that the server sent, read from the OpenSSL error code libcurl quotes
/// in its message (`error:0A00045C:…`): the code, which OpenSSL defines, not the words after it, which it may
/// reword. libcurl has no code of its own for these: it reports them as a failed handshake or receive.
enum TLSAlert: Int, Sendable, CaseIterable {
    case badCertificate = 42
    case certificateRevoked = 44
    case certificateExpired = 45
    case certificateUnknown = 46
    case unknownCA = 48
    /// TLS 1.3's: the server wanted a certificate and got none.
    case certificateRequired = 116

    /// OpenSSL's reason code for an alert received is `SSL_AD_REASON_OFFSET` (1000) plus the alert's number.
    private static let reasonOffset = 1000

    /// The first OpenSSL error code in `message` that is one of these alerts; nil if there is none.
    init?(libcurlMessage message: String) {
        let bytes = Array(message.utf8)
        let prefix = Array("error:".utf8)
        var index = 0
        while let start = bytes[index...].firstRange(of: prefix) {
            index = start.upperBound
            // Eight hex digits and a colon: the packed code ERR_error_string_n writes.
            guard bytes.count >= index + 9, bytes[index + 8] == UInt8(ascii: ":"),
                let code = UInt32(String(decoding: bytes[index..<index + 8], as: UTF8.self), radix: 16)
            else { continue }
            // The reason is the code's low bits, in the packing of OpenSSL 3 (23 bits) and 1.1 (12 bits) alike.
            if let alert = TLSAlert(rawValue: Int(code & 0xFFF) - Self.reasonOffset) {
                self = alert
                return
            }
        }
        return nil
    }
}
