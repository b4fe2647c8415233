import HaulDigest

/// A minisign or signify public key: the `RW…` line, alone or in its key file. Its key number is stored as the key
/// holds it; minisign prints it reversed, as a little-endian number in hex.
package struct NumberedEd25519Key: Sendable, Hashable {
    package let keyID: [UInt8]
    package let key: [UInt8]

    package init(_ text: some StringProtocol) throws(SignatureFailure) {
        switch NumberedEd25519Line.decodeKey(text) {
        case .success(let line): (keyID, key) = (line.keyNumber, line.payload)
        case .failure(let malformation): throw .unreadableKey(malformation)
        }
    }

    /// The same key, from bytes already decoded (a `TrustedKey`).
    init(keyID: [UInt8], key: [UInt8]) {
        (self.keyID, self.key) = (keyID, key)
    }
}

/// The shape minisign and signify share: an optional `untrusted comment:` line, then one line of base64 holding a
/// 2-byte algorithm tag, an 8-byte key number and the payload (a 32-byte key or a 64-byte signature). The key
/// number is how a signature names its key: both tools check it before the signature itself.
struct NumberedEd25519Line {
    let algorithm: [UInt8]
    let keyNumber: [UInt8]
    let payload: [UInt8]

    static let keyNumberCount = 8

    /// `lines[index]` decoded; its number in messages is `index + 1`.
    static func decode(
        _ lines: [ArraySlice<UInt8>], at index: Int, payloadCount: Int, algorithms: [[UInt8]]
    ) -> Result<NumberedEd25519Line, Malformation> {
        guard index < lines.count else { return .failure(.missingLine(index + 1)) }
        guard let bytes = Base64.decode(utf8: lines[index]) else { return .failure(.notBase64(line: index + 1)) }
        let expected = 2 + keyNumberCount + payloadCount
        guard bytes.count == expected else { return .failure(.wrongLength(expected: expected, found: bytes.count)) }
        let algorithm = Array(bytes[0..<2])
        guard algorithms.contains(algorithm) else { return .failure(.unknownAlgorithm(algorithm)) }
        return .success(
            NumberedEd25519Line(
                algorithm: algorithm, keyNumber: Array(bytes[2..<2 + keyNumberCount]),
                payload: Array(bytes[(2 + keyNumberCount)...])))
    }

    /// A public key given as its line alone or as the key file (the comment line first).
    static func decodeKey(_ text: some StringProtocol) -> Result<NumberedEd25519Line, Malformation> {
        let lines = TextLines.split(Array(text.utf8))
        let index = lines.first.map { $0.starts(with: untrustedComment) } == true ? 1 : 0
        guard lines.count == index + 1 else { return .failure(.missingLine(min(lines.count, index) + 1)) }
        return decode(lines, at: index, payloadCount: 32, algorithms: [ed])
    }

    static let ed = Array("Ed".utf8)
    static let untrustedComment = Array("untrusted comment:".utf8)
}

/// Lines of a small text file as bytes: split at LF, a CR before it dropped, and the empty lines at the end (a
/// final newline, or several) left out.
enum TextLines {
    static func split(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }
}
