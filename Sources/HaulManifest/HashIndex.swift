/// A map from 64-bit hashes to claim numbers: open addressing with linear probing over one flat array.
///
/// `Dictionary<UInt64, Int32>` spends most of its time in its own SipHash and generic equality; the keys here are
/// already hashes, so mixing them once and probing a plain array is several times cheaper. A slot keeps only a
/// 32-bit fingerprint next to its value (8 bytes, so 100,000 entries fit in 2 MB and probes stay in cache);
/// callers confirm every hit against the real path, so a fingerprint collision never yields a wrong answer.
struct HashIndex {
    private struct Slot {
        /// 0 marks an empty slot; fingerprints always have their low bit set.
        var fingerprint: UInt32
        var value: Int32
    }

    private var slots: [Slot]
    private var count = 0

    init(minimumCapacity: Int = 16) {
        var capacity = 16
        while capacity < minimumCapacity * 2 { capacity <<= 1 }
        slots = Array(repeating: Slot(fingerprint: 0, value: 0), count: capacity)
    }

    /// The murmur3 finalizer spreads the bits; the high half becomes the fingerprint.
    private static func fingerprint(_ hash: UInt64) -> UInt32 {
        var mixed = hash ^ (hash >> 33)
        mixed = mixed &* 0xff51_afd7_ed55_8ccd
        mixed ^= mixed >> 33
        return UInt32(truncatingIfNeeded: mixed >> 32) | 1
    }

    /// The home slot depends on the fingerprint alone, so growing can rehash without the original hashes.
    private func home(_ fingerprint: UInt32) -> Int { Int(fingerprint >> 1) & (slots.count - 1) }

    subscript(hash: UInt64) -> Int32? {
        let fingerprint = Self.fingerprint(hash)
        var index = home(fingerprint)
        while true {
            let slot = slots[index]
            if slot.fingerprint == fingerprint { return slot.value }
            if slot.fingerprint == 0 { return nil }
            index = (index + 1) & (slots.count - 1)
        }
    }

    /// Stores `value` for `hash` unless its fingerprint is already present; says whether it stored.
    @discardableResult
    mutating func insertIfAbsent(_ hash: UInt64, _ value: Int32) -> Bool {
        insert(Slot(fingerprint: Self.fingerprint(hash), value: value))
    }

    private mutating func insert(_ new: Slot) -> Bool {
        if (count + 1) * 2 > slots.count { grow() }
        var index = home(new.fingerprint)
        while true {
            let found = slots[index].fingerprint
            if found == new.fingerprint { return false }
            if found == 0 { break }
            index = (index + 1) & (slots.count - 1)
        }
        slots[index] = new
        count += 1
        return true
    }

    private mutating func grow() {
        var larger = HashIndex(minimumCapacity: slots.count)
        for slot in slots where slot.fingerprint != 0 { _ = larger.insert(slot) }
        self = larger
    }
}
