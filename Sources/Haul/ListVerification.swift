import Glibc
import HaulFailures
import HaulManifest
import HaulSignature
import HaulStore

/// A checksum list's signature checked against the trusted keys, OpenPGP included: the system's verifier reads
/// files, so for it the list and its signature are written to a private scratch folder, removed afterwards.
package enum ListVerification {
    package static func verify(
        list: [UInt8], signature: [UInt8]?, keys: [TrustedKey], now: Double
    ) -> Result<VerifiedList, ListRefusal> {
        ListSignature.verify(list: list, signature: signature, keys: keys, now: now) { list, signature, keyring in
            let scratch: ScratchDirectory
            do throws(StoreError) { scratch = try ScratchDirectory.make(prefix: "haul-verify") } catch {
                return .failure(.couldNotRun(path: error.path, errno: error.errno))
            }
            defer { scratch.remove() }
            let listPath = scratch.path + "/list"
            let signaturePath = scratch.path + "/list.sig"
            if let code = write(list, to: listPath) ?? signature.flatMap({ write($0, to: signaturePath) }) {
                return .failure(.couldNotRun(path: scratch.path, errno: code))
            }
            guard signature != nil else {
                return OpenPGPVerifier.verifyClearSigned(messageFile: listPath, keyringFile: keyring)
                    .map { $0.signedText ?? [] }
            }
            return OpenPGPVerifier.verifyDetached(
                signatureFile: signaturePath, dataFile: listPath, keyringFile: keyring
            ).map { _ in list }
        }
    }

    /// A key file's bytes (a key is small: a megabyte at most is read).
    package static func readKeyFile(_ path: String) -> Result<[UInt8], SystemError> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(SystemError(errno: errno, path: path)) }
        defer { close(descriptor) }
        return BoundedRead.all(descriptor, limit: 1 << 20).mapError { SystemError(errno: $0.errno, path: path) }
    }

    /// Creates `path` (it must not exist) holding `bytes`; the errno of a failure.
    private static func write(_ bytes: [UInt8], to path: String) -> Int32? {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return written == 0 ? EIO : errno }
            offset += written
        }
        return nil
    }
}
