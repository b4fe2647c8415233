import Glibc
import Synchronization

/// Out of descriptors: EMFILE (this process's limit) or ENFILE (the system's). Within haul's budget
/// (`DescriptorBudget`) it is a matter of waiting: another part of the run gives its descriptors back when its
/// transfer, copy or commit ends.
package enum DescriptorShortage {
    package static func means(_ code: Int32) -> Bool { code == EMFILE || code == ENFILE }

    /// How long a wait for a descriptor lasts before it is an error: long enough for any transfer of the run to
    /// give one back, short enough that descriptors something else holds for good end the run.
    package static let patienceSeconds = 30.0

    /// `attempt`, tried again while `isShortage` says its result is a shortage, with a pause between tries
    /// (1 ms, doubling to 50 ms), for at most `patienceSeconds`: then the last result. Once a wait has run out of
    /// patience, the descriptors are not coming back: later shortages in the process are not waited for again.
    package static func waiting<Value>(_ attempt: () -> Value, isShortage: (Value) -> Bool) -> Value {
        var result = attempt()
        guard isShortage(result), !gaveUp.load(ordering: .relaxed) else { return result }
        var pause = 0.001
        var waited = 0.0
        while isShortage(result) {
            guard waited < patienceSeconds else {
                gaveUp.store(true, ordering: .relaxed)
                break
            }
            var time = timespec(tv_sec: 0, tv_nsec: Int(pause * 1e9))
            _ = nanosleep(&time, nil)
            waited += pause
            pause = min(0.05, pause * 2)
            result = attempt()
        }
        return result
    }

    private static let gaveUp = Atomic<Bool>(false)
}
