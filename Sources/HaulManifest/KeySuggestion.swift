/// "did you mean" for unknown keys: typos in key names are otherwise silent misconfiguration.
enum KeySuggestion {
    static let maximumDistance = 2

    /// The closest known key within `maximumDistance` edits (case-insensitive); ties go to the earlier key.
    static func closest(to key: String, among candidates: [String]) -> String? {
        // No key name is nearly this long (lowercasing never drops a scalar): a hostile one of megabytes gets no
        // copies made of it.
        guard key.utf8.count <= 256 else { return nil }
        let typed = Array(key.lowercased().unicodeScalars)
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            // Lengths further apart than the distance cannot be close: most candidates stop here, which matters
            // when a manifest holds a hundred thousand unknown keys.
            let other = Array(candidate.lowercased().unicodeScalars)
            guard abs(other.count - typed.count) <= maximumDistance else { continue }
            let distance = editDistance(typed, other)
            if distance <= maximumDistance, distance < (best?.distance ?? Int.max) {
                best = (candidate, distance)
            }
        }
        return best?.name
    }

    /// Levenshtein distance.
    static func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
