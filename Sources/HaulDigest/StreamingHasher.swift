import CLibCrypto

/// Incremental hashing through OpenSSL's EVP interface (which uses the CPU's SHA extensions).
///
/// Not thread-safe: one hasher belongs to one transfer or one file read at a time. `Sendable` only so that it
/// can be handed from the thread that created it to the one that feeds it.
package final class StreamingHasher: @unchecked Sendable {
    package let algorithm: DigestAlgorithm
    private let context: OpaquePointer
    private var finished = false

    /// nil when OpenSSL cannot allocate the hash's state (out of memory): the caller fails what it was hashing
    /// for, with ENOMEM, rather than the process.
    package init?(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        guard let context = EVP_MD_CTX_new() else { return nil }
        self.context = context
        EVP_DigestInit_ex(context, Self.evpType(algorithm), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        precondition(!finished, "update after finalize")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    package func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// Ends the hash; the hasher cannot be fed afterwards.
    package func finalize() -> Digest {
        precondition(!finished, "finalize twice")
        finished = true
        return withUnsafeTemporaryAllocation(byteCount: Int(EVP_MAX_MD_SIZE), alignment: 8) { out in
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
            return Digest(algorithm: algorithm, copying: UnsafeRawBufferPointer(rebasing: out.prefix(Int(length))))
        }
    }

    /// One-shot convenience for small buffers (names, URLs, tests): a few hundred bytes of state that cannot be had
    /// leave the process nothing to go on with.
    package static func digest(_ bytes: [UInt8], algorithm: DigestAlgorithm) -> Digest {
        guard let hasher = StreamingHasher(algorithm) else { fatalError("EVP_MD_CTX_new: out of memory") }
        hasher.update(bytes)
        return hasher.finalize()
    }

    static func evpType(_ algorithm: DigestAlgorithm) -> OpaquePointer? {
        switch algorithm {
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        case .sha1: EVP_sha1()
        case .md5: EVP_md5()
        }
    }
}

extension Digest {
    /// Whether this is the digest of zero bytes: the one file size a digest states on its own (a file of
    /// `size: 0` has exactly this digest, and only an empty file has it).
    package var isOfEmptyContent: Bool {
        self == StreamingHasher.digest([], algorithm: algorithm)
    }
}
