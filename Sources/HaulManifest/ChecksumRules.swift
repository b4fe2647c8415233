import HaulDigest

/// Parses the three ways a manifest pins a digest. Messages say exactly what is wrong (length, or which character
/// at which position) because digests are pasted by hand and a single lost digit is the common mistake.
enum ChecksumRules {
    /// `sha256: <hex>` and its sha384/sha512 siblings.
    static func hexKey(_ text: String, algorithm: DigestAlgorithm) throws(RuleFailure) -> Checksum {
        let digest = try hexDigest(Substring(text), algorithm: algorithm, prefixCharacters: 0, expectation: "")
        return Checksum(digest: digest, notation: .hexKey)
    }

    /// `checksum: sha512:<hex>`; sha1 and md5 are accepted here (and only here) for old asset sets.
    static func prefixed(_ text: String) throws(RuleFailure) -> Checksum {
        guard let colon = text.firstIndex(of: ":") else {
            throw RuleFailure(
                "expected \"<algorithm>:<hex digits>\" with algorithm sha256, sha384, sha512, sha1 or md5")
        }
        let name = String(text[..<colon])
        guard let algorithm = DigestAlgorithm(rawValue: name) else {
            throw RuleFailure(
                "unknown checksum algorithm \(Quoted.text(name)) "
                    + "(expected sha256, sha384, sha512, sha1 or md5)")
        }
        let hex = text[text.index(after: colon)...]
        let digest = try hexDigest(
            hex, algorithm: algorithm, prefixCharacters: name.count + 1,
            expectation: " after \"\(name):\"")
        return Checksum(digest: digest, notation: .prefixedHex)
    }

    /// Subresource Integrity: `sha384-<base64>`, or several such tokens separated by spaces. As the SRI spec says,
    /// only the tokens of the strongest algorithm count, and content matching any of them passes (a publisher
    /// lists several when a file has more than one good version); a `?option` after a token is ignored. SRI
    /// defines only the SHA-2 family, so sha1/md5 are rejected here, as is any malformed token: in a manifest it is
    /// a typo, not a token meant for another browser.
    static func integrity(_ text: String) throws(RuleFailure) -> Checksum {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
        guard tokens.count > 1 else { return try integrityToken(Substring(text)) }
        var parsed: [Digest] = []
        for token in tokens { parsed.append(try integrityToken(token).digest) }
        let strongest = parsed.map(\.algorithm.byteCount).max() ?? 0
        var chosen: [Digest] = []
        for digest in parsed where digest.algorithm.byteCount == strongest && !chosen.contains(digest) {
            chosen.append(digest)
        }
        guard let first = chosen.first else {
            throw RuleFailure("expected at least one \"<algorithm>-<base64>\" token")
        }
        return Checksum(digest: first, notation: .subresourceIntegrity, alternatives: Array(chosen.dropFirst()))
    }

    /// One `sha384-<base64>[?options]` token.
    private static func integrityToken(_ token: Substring) throws(RuleFailure) -> Checksum {
        let text = token.firstIndex(of: "?").map { token[..<$0] } ?? token
        guard let dash = text.firstIndex(of: "-") else {
            throw RuleFailure(
                "expected \"<algorithm>-<base64>\" (Subresource Integrity) "
                    + "with algorithm sha256, sha384 or sha512")
        }
        let name = String(text[..<dash])
        guard let algorithm = DigestAlgorithm(rawValue: name), !algorithm.isWeak else {
            throw RuleFailure(
                "unsupported integrity algorithm \(Quoted.text(name)) "
                    + "(Subresource Integrity uses sha256, sha384 or sha512)")
        }
        let digest = try base64Digest(text[text.index(after: dash)...], algorithm: algorithm, name: name)
        return Checksum(digest: digest, notation: .subresourceIntegrity)
    }

    /// `tree: sha256-<base64>`: the digest of an unpacked tree (Nix's NAR hash) in the form `nix hash path` prints,
    /// SHA-256 only. A digest pasted in hex (what `nix-hash --type sha256` prints) is refused with its SRI
    /// spelling, so that fixing it is a copy.
    static func treeDigest(_ text: String) throws(RuleFailure) -> Digest {
        let expectation = "expected \"sha256-<base64>\", the SHA-256 of the unpacked tree as `nix hash path` prints it"
        let hex = text.hasPrefix("sha256:") ? text.dropFirst("sha256:".count) : Substring(text)
        if let digest = Digest(algorithm: .sha256, hex: hex) {
            throw RuleFailure("\(expectation); for this hex digest write \"sha256-\(digest.base64)\"")
        }
        guard let dash = text.firstIndex(of: "-") else {
            throw RuleFailure(expectation + ", found \(Quoted.text(text))")
        }
        let name = String(text[..<dash])
        guard name == DigestAlgorithm.sha256.rawValue else {
            throw RuleFailure(
                "a tree digest is SHA-256 only (\"sha256-<base64>\", as `nix hash path` prints it), "
                    + "found \(Quoted.text(name))")
        }
        return try base64Digest(text[text.index(after: dash)...], algorithm: .sha256, name: name)
    }

    /// The padded standard base64 after `name-` in an SRI token, as a digest of `algorithm`. Positions in
    /// messages count from the start of the token.
    private static func base64Digest(
        _ encoded: Substring, algorithm: DigestAlgorithm,
        name: String
    ) throws(RuleFailure) -> Digest {
        let expectedCount = (algorithm.byteCount + 2) / 3 * 4
        let expectation = "\(expectedCount) base64 characters after \"\(name)-\""
        var position = name.count + 1
        for character in encoded {
            position += 1
            guard character.isASCII, let ascii = character.asciiValue, isBase64(ascii) else {
                throw RuleFailure(
                    "invalid character \(Quoted.text(String(character))) at position \(position) "
                        + "(expected \(expectation))")
            }
        }
        guard encoded.utf8.count == expectedCount else {
            throw RuleFailure("expected \(expectation), found \(encoded.count)")
        }
        guard let digest = Digest(algorithm: algorithm, base64: encoded) else {
            throw RuleFailure("invalid base64 padding after \"\(name)-\"")
        }
        return digest
    }

    /// `prefixCharacters` shifts reported positions so that they count from the start of the whole value.
    private static func hexDigest(
        _ hex: Substring, algorithm: DigestAlgorithm, prefixCharacters: Int,
        expectation suffix: String
    ) throws(RuleFailure) -> Digest {
        let expected = algorithm.byteCount * 2
        // Fast path: the common, valid case touches only bytes.
        if hex.utf8.count == expected, let digest = Digest(algorithm: algorithm, hex: hex) { return digest }
        var position = prefixCharacters
        for character in hex {
            position += 1
            guard character.isHexDigit, character.isASCII else {
                throw RuleFailure(
                    "invalid character \(Quoted.text(String(character))) at position \(position) "
                        + "(expected \(expected) hex digits\(suffix))")
            }
        }
        throw RuleFailure("expected \(expected) hex digits\(suffix), found \(hex.count)")
    }

    private static func isBase64(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
            true
        default:
            false
        }
    }
}
