import ArgumentParser
import Haul
import HaulManifest
import HaulSignature

/// `haul add --from-sums LIST --trusted-key KEY [--signature URL|auto]`: the list's signature is checked against the keys
/// before a digest of it is read, and the entries it brings are written below a comment saying where they came from.
extension AddCommand {
    /// What `--trusted-key` and `--signature` ask for: the keys, read, and the signature's URLs to try.
    struct SignatureRequest {
        let keys: [TrustedKey]
        /// `--signature URL`: that one; `auto`: the list's URL with each of `ListVerification.signatureSuffixes`.
        let candidates: [TemplatedString]
        /// `auto`: a URL the server does not have (404, 410) moves on to the next, and a clear-signed list is checked
        /// as such, with no signature fetched.
        let probing: Bool
    }

    /// A list whose signature checked out: the text to read the digests from, and where it came from.
    struct SignedList {
        let verified: VerifiedList
        /// nil: clear-signed.
        let signatureURL: String?
    }

    /// The keys read and the signature's URLs made, before anything is fetched; nil without `--trusted-key`. A key that
    /// cannot be read, or a URL that is not one, exits 64.
    func signatureRequest() throws -> SignatureRequest? {
        guard let list = fromSums, !keys.isEmpty else { return nil }
        var trusted: [TrustedKey] = []
        var problems: [String] = []
        for key in keys {
            switch ListVerification.trustedKey(key) {
            case .success(let read): trusted.append(read)
            case .failure(let failure): problems.append("error: --trusted-key \(SignatureWording.sentence(failure))")
            }
        }
        let probing = signature == nil || signature == "auto"
        let urls = probing ? ListVerification.signatureSuffixes.map { list + $0 } : [signature ?? ""]
        var candidates: [TemplatedString] = []
        for url in urls {
            do {
                candidates.append(
                    try EntryDraft(url: url, destination: "signature", environment: Environment.current).url)
            } catch {
                problems += error.messages.map { "error: --signature: \($0)" }
                break
            }
        }
        guard problems.isEmpty else {
            Output.errors(problems.map { TerminalText($0) })
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        return SignatureRequest(keys: trusted, candidates: candidates, probing: probing)
    }

    /// The list checked against its signature (nil: clear-signed; `.noneFound`: no URL had one): the text to read,
    /// or an error naming the list, the signature and why, exiting 1 with nothing written.
    func verify(_ list: [UInt8], signature fetched: SignatureFetch?, request: SignatureRequest) throws -> SignedList {
        let listURL = Redaction.redactingUserinfo(fromSums ?? "")
        let unmodified = printOnly ? "" : "; \(manifest) was not modified"
        var signatureURL: String?
        var signature: [UInt8]?
        switch fetched {
        case .noneFound(let tried)?:
            Output.errors([
                TerminalText(
                    "error: \(listURL): no signature found at "
                        + tried.map { Redaction.redactingUserinfo($0) }.joined(separator: ", ")
                        + " (each answered 404 or 410)\(unmodified)"),
                "hint: give the signature's URL with --signature",
            ])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        case .found(let url, let bytes)?:
            (signatureURL, signature) = (Redaction.redactingUserinfo(url), bytes)
        case nil:
            break
        }
        switch ListVerification.verify(list: list, signature: signature, keys: request.keys, now: ListVerification.now)
        {
        case .success(let verified):
            return SignedList(verified: verified, signatureURL: signatureURL)
        case .failure(let refusal):
            let subject =
                signatureURL.map { "\($0): the signature of \(listURL) is refused" }
                ?? "\(listURL): its clear signature is refused"
            Output.errors([TerminalText("error: \(subject): \(SignatureWording.sentence(refusal))\(unmodified)")])
            throw ExitCode(ExitStatus.entryFailed.rawValue)
        }
    }

    /// The lines telling whose signature the list carries (and, `--verbose`, minisign's trusted comment).
    func lines(_ signed: SignedList) -> [TerminalText] {
        var lines = [TerminalText("Verified \(provenance(signed)).")]
        if verbose, let comment = signed.verified.trustedComment {
            lines.append(TerminalText("Trusted comment: \(comment)"))
        }
        return lines
    }

    /// Where a verified list's entries came from, as the comment above them says it: `from URL, signature URL
    /// (minisign), key RW…`.
    func provenance(_ signed: SignedList) -> String {
        let format = SignatureWording.name(signed.verified.format)
        let signature = signed.signatureURL.map { "signature \($0) (\(format))" } ?? "clear-signed (\(format))"
        return "from \(Redaction.redactingUserinfo(fromSums ?? "")), \(signature), key \(signed.verified.key)"
    }
}
