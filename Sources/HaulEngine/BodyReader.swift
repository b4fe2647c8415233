import HaulDigest

/// A second reader of a body as it arrives, beside its hash: what the body is for, when it is more than a file to
/// put in place (an archive unpacked while it downloads). The engine knows nothing of what it does; it only lets
/// it read, on a thread of its own beside the one that trails the writer (`TrailingHasher`), the bytes already
/// hashed.
package protocol BodyReader: AnyObject, Sendable {
    /// `next` gives the body's bytes in order from byte 0, each chunk valid until the next call; nil at the body's
    /// end, or when the attempt is abandoned (its bytes dropped, the transfer stopped). Returns when it wants no
    /// more; the trailing reader then reads on to the end for the hash, and only then reports the digest, so a
    /// reader has finished by the time the body it read is verified.
    func read(_ next: () -> UnsafeRawBufferPointer?)
}

/// Makes a `BodyReader` for each pass over a body: an attempt whose bytes are dropped starts another pass, from
/// byte 0, with a new reader. A request with one is always read back by a trailing thread, whatever its size.
package protocol BodyReading: Sendable {
    /// `expectedSize`: the body's size when the answer or the request said it. nil when no reader can be made (out
    /// of memory): the pass goes on without one, and whoever delivers the body finds no reading done.
    func makeReader(expectedSize: Int64?) -> (any BodyReader)?
}

/// What a body became besides a file, for whoever reports it: an archive's unpacked tree (its files, their bytes,
/// and the tree's digest when it was computed).
package struct UnpackSummary: Sendable, Equatable {
    /// Regular files and symlinks (what the state records), folders not counted.
    package var files: Int
    package var bytes: Int64
    /// The tree's digest, when the entry pins it (it is computed only then: it reads every member again).
    package var tree: Digest?
    /// Files and symlinks in the folder that the archive did not put there (the user's), carried into the new
    /// tree: reported, as a replaced tree keeps them.
    package var keptFiles: [String]

    package init(files: Int, bytes: Int64, tree: Digest?, keptFiles: [String] = []) {
        self.files = files
        self.bytes = bytes
        self.tree = tree
        self.keptFiles = keptFiles
    }
}
