import HaulDigest
import HaulFileSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A manifest read from a file of its own, held open and read from its start by each pass that needs it (the
/// settled check's hash, the guess of `root`, the validating parse), a chunk at a time.
///
/// Why not its bytes: held whole, a manifest of a million entries (185 MB) was more than a quarter of the load's
/// peak memory, though libyaml never needs more than its own 16 KiB buffer of it. Each pass reads with `pread` from
/// the file's start, so passes never move each other's place, and the validating parse hashes what it reads: the
/// fingerprint a settled run records is that of the bytes validated, even when the file changed between passes.
package final class ManifestFile: Sendable {
    fileprivate let descriptor: Int32
    /// The size `fstat` gave when the file was opened (a hint: the file may change).
    package let size: Int

    /// Takes ownership of `descriptor`, which must be open for reading.
    init(descriptor: Int32, size: Int) {
        self.descriptor = descriptor
        self.size = size
    }

    deinit { close(descriptor) }

    /// A new pass over the file, from its start; `hashing`: it hashes what it reads (SHA-256).
    func reading(hashing: Bool = false) -> Reading { Reading(of: self, hashing: hashing) }

    /// The whole file, for a message that needs the bytes before a place libyaml named (only on the way to an
    /// error); empty when it cannot be read.
    func contents() -> [UInt8] {
        var bytes: [UInt8] = []
        reading().readToEnd { bytes += $0 }
        return bytes
    }

    /// One pass: where it is, the hash of what it read, and why it stopped early. Handed from the thread that
    /// reads (libyaml's, in `ReadingPipeline`) to the one that asks for the digest after the join, hence the lock.
    final class Reading: Sendable {
        private struct State {
            var offset = 0
            var hasher: StreamingHasher?
            var failure: String?
            /// Once the whole file is hashed.
            var digest: Digest?
        }

        /// Held, so that the descriptor stays open while a pass reads it.
        let file: ManifestFile
        private let state = Mutex(State())

        fileprivate init(of file: ManifestFile, hashing: Bool) {
            self.file = file
            if hashing { state.withLock { $0.hasher = StreamingHasher(.sha256) } }
        }

        /// Why the pass stopped before the end of the file (a read error, or more than `ManifestLoader.maximumBytes`).
        var failure: String? { state.withLock { $0.failure } }

        /// The next bytes into `buffer`: their count, 0 at the end of the file, nil on a failure (`failure` says).
        func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
            state.withLock { state -> Int? in
                guard state.failure == nil else { return nil }
                guard state.digest == nil else { return 0 }  // hashed to its end already
                var count: Int
                repeat {
                    count = pread(file.descriptor, buffer.baseAddress, buffer.count, off_t(state.offset))
                } while count < 0 && errno == EINTR
                guard count >= 0 else {
                    state.failure = "cannot read manifest: \(Errno(errno))"
                    return nil
                }
                guard state.offset + count <= ManifestLoader.maximumBytes else {
                    state.failure = ManifestLoader.tooLarge
                    return nil
                }
                guard count > 0 else { return 0 }
                state.offset += count
                state.hasher?.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                return count
            }
        }

        /// Reads on to the end of the file (or a failure), handing each chunk to `body`.
        func readToEnd(_ body: (UnsafeRawBufferPointer) -> Void) {
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while let count = chunk.withUnsafeMutableBytes({ read(into: $0) }), count > 0 {
                chunk.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            }
        }

        /// SHA-256 of the whole file: what was read, and then the rest (a parser stops at the end of its document,
        /// which a well-formed manifest's end is). nil after a failure, or for a pass that does not hash.
        func digest() -> Digest? {
            guard state.withLock({ $0.hasher != nil }) else { return nil }
            readToEnd { _ in }
            return state.withLock { state in
                guard state.failure == nil else { return nil }
                if state.digest == nil { state.digest = state.hasher?.finalize() }
                return state.digest
            }
        }
    }
}

/// What libyaml reads: bytes in memory (standard input, a pipe, text a test or `haul add` built), or a manifest
/// file read a chunk at a time.
enum YAMLSource: Sendable {
    case bytes([UInt8])
    case file(ManifestFile.Reading)
}
