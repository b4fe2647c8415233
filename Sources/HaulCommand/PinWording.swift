import Haul
import HaulEngine

/// Why a single download of `haul add` or of a signed list failed: one line per URL tried (the last failure of
/// each), or what stopped it.
package enum PinWording {
    package static func lines(
        _ failure: PinFailure, describing: (FailureReason) -> String = { HumanReport.describe($0, checksum: nil) }
    ) -> [String] {
        switch failure {
        case .workspace(let error): [StoreWording.sentence(error)]
        case .unpack(let failure): [UnpackWording.sentence(failure)]
        case .unfinished(let url): ["\(url): the transfer did not finish"]
        case .transfer(let failure):
            failure.lastFailurePerSource.map { "\($0.sourceDisplayURL): \(describing($0.reason))" }
        }
    }
}
