import Haul
import HaulDigest
import HaulFailures
import HaulManifest
import HaulSignature

/// What a run says of its signed checksum lists (`lists:`): one line per list that pinned nothing (an error: its
/// entries are left as they are), and with `--verbose`, or when the list changed, which key verified it.
package enum ListWording {
    /// `error: list "nightly" (https://…/SHA256SUMS): …; its entries are left as they are`, without `error: `.
    package static func failure(_ outcome: SignedLists.Outcome, _ failure: SignedLists.ListFailure) -> String {
        "list \(Quoted.text(outcome.name)) (\(outcome.url)): \(reason(failure)); the entries that take their digest "
            + "from it are left as they are"
    }

    /// A verified list worth a line: changed since the last run, or asked for with `--verbose`.
    package static func verified(
        _ outcome: SignedLists.Outcome, _ verified: SignedLists.Verified, verbose: Bool
    )
        -> String?
    {
        guard verified.changed || verbose else { return nil }
        let what = verified.changed ? "a new version, verified" : "verified"
        let comment = verbose ? verified.list.trustedComment.map { "; trusted comment: \(Quoted.text($0))" } ?? "" : ""
        return "list \(Quoted.text(outcome.name)): \(what) (\(SignatureWording.name(verified.list.format)), key "
            + "\(Quoted.text(verified.list.key)))\(comment)"
    }

    package static func reason(_ failure: SignedLists.ListFailure) -> String {
        switch failure {
        case .fetch(_, let pinFailure): PinWording.lines(pinFailure).joined(separator: "; ")
        case .noSignature(let tried): "no signature beside it (tried \(tried.joined(separator: ", ")))"
        case .key(let failure): SignatureWording.sentence(failure)
        case .refused(let refusal, let signatureURL):
            "its signature\(signatureURL.map { " (\($0))" } ?? "") does not check out: "
                + SignatureWording.sentence(refusal)
        case .unreadable(let error): "\(error)"
        case .older(let signedAt, let lastVerified):
            "it was signed at \(signedAt), before the copy verified last (signed at \(lastVerified)): an older list "
                + "served again is not taken"
        case .notKept: "no copy verified by an earlier sync is kept, and verify makes no request"
        }
    }

}
