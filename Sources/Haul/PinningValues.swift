import HaulDigest
import HaulEngine
import HaulManifest
import HaulStore

/// What `haul add` was asked to pin, as values: the command parses and checks its options into one, and the
/// `Pinning` step does the rest without knowing how it was asked.
package struct PinningRequest: Sendable {
    package enum Source: Sendable {
        /// URLs to pin as new entries, each checked as a manifest entry already.
        case urls([EntryDraft])
        /// A checksum list: each file it names (those a glob of `matching` selects; every one when empty) pinned by its
        /// listed digest. `folder` (`DIR/`): where they go instead of the list's own folder.
        case checksumList(EntryDraft, matching: [String], folder: String?)
        /// Entries of the manifest pinned anew from their own urls: those of these destinations, nil for every entry
        /// with a checksum.
        case entries([String]?)
    }

    package var source: Source
    /// The archive rule each URL is unpacked by (its tree is pinned once unpacked); nil for plain files.
    package var extract: ExtractRule?
    /// The digest given instead of a download, and the size given with it (nil: a HEAD request's, if any).
    package var given: (digest: Digest, size: Int64?)?
    /// With a checksum list: an entry the list now gives another digest is pinned anew rather than refused.
    package var repinsChangedListEntries: Bool

    package init(
        source: Source, extract: ExtractRule? = nil, given: (digest: Digest, size: Int64?)? = nil,
        repinsChangedListEntries: Bool = false
    ) {
        self.source = source
        self.extract = extract
        self.given = given
        self.repinsChangedListEntries = repinsChangedListEntries
    }
}

/// The manifest as `haul add` reads it: as sync would read that file, in that environment, so that an edit that
/// loads here loads for the next sync.
package struct ManifestReading: Sendable {
    /// As given on the command line: messages name it so.
    package let fileName: String
    package let environment: [String: String]
    /// The header names the command line sends, which the loader takes as given.
    package let commandLineHeaders: Set<String>

    package init(fileName: String, environment: [String: String], commandLineHeaders: Set<String> = []) {
        self.fileName = fileName
        self.environment = environment
        self.commandLineHeaders = commandLineHeaders
    }

    package func load(_ bytes: [UInt8]) throws(DiagnosticsError) -> Manifest {
        try ManifestLoader.parse(
            bytes: bytes, fileName: fileName, manifestDirectory: directory, environment: environment,
            commandLineHeaders: commandLineHeaders)
    }

    /// The folder `root` is relative to: the manifest's, as the loader takes it.
    private var directory: String {
        guard let slash = fileName.lastIndex(of: "/") else { return "." }
        return slash == fileName.startIndex ? "/" : String(fileName[..<slash])
    }

    /// The manifest's own errors, if it has any: what a failed edit reports in their place, at the file's own lines.
    func existingProblems(_ original: [UInt8]?) -> [String]? {
        guard let original else { return nil }
        do {
            _ = try load(original)
            return nil
        } catch {
            return error.diagnostics.map(\.description)
        }
    }
}

/// One entry as the run left it.
package struct PinnedFile: Sendable, Equatable {
    package enum Result: String, Sendable { case added, updated, unchanged }

    /// Its position in `files:` (of the new manifest when it was written).
    package let index: Int
    package let destination: String
    /// As written in the manifest (a `${VAR}` stays a reference).
    package let url: String
    package let digest: Digest
    /// The size the entry pins now.
    package let size: Int64?
    /// The size this run learned of the file, nil when it learned none (a list gives none, a server may announce
    /// none): a message tells only what was learned.
    package let measuredSize: Int64?
    /// The tree an archive entry pins now, when this run pinned it.
    package let tree: Digest?
    package let result: Result
    /// Its line in the new manifest; nil when the manifest was not written.
    package let line: Int?
    /// What an updated entry was pinned to.
    package let previous: PreviousPin?

    /// An updated entry's pin before: `digest` nil when it had none; `tree` only when the tree was pinned anew.
    package struct PreviousPin: Sendable, Equatable {
        package let digest: Digest?
        package let tree: Digest?
    }
}

/// The manifest after the run.
package enum ManifestChange: Sendable {
    /// Nothing to write; the manifest as it was loaded, when it was (what is placed comes from it).
    case unchanged(Manifest?)
    /// The new text, to replace the file with atomically, and that text loaded back (every pin read back exactly).
    case replaced(bytes: [UInt8], manifest: Manifest)

    package var bytes: [UInt8]? {
        if case .replaced(let bytes, _) = self { return bytes }
        return nil
    }

    package var manifest: Manifest? {
        switch self {
        case .unchanged(let manifest): manifest
        case .replaced(_, let manifest): manifest
        }
    }
}

/// What a pinning step did: each entry's result (unchanged first, then updated, then added, each in the manifest's
/// order), the manifest to write, and what to put in place from what was downloaded.
package struct PinningOutcome: Sendable {
    package let files: [PinnedFile]
    package let manifest: ManifestChange
    /// The destinations to put in place once the manifest is written.
    package let placing: [String]
    /// There was no manifest: the first entry made it.
    package let created: Bool

    package func files(_ result: PinnedFile.Result) -> [PinnedFile] { files.filter { $0.result == result } }
}

/// Something worth telling that does not stop the run, as it is noticed (so that a message comes beside the
/// download it is about).
package enum PinningNotice: Sendable {
    /// A new entry's URL is already fetched by `listed`: legal (one file in two places), but rarely meant.
    case urlAlreadyListed(url: String, listed: ListedEntry)
    /// A download attempt failed; `next` is what comes next, nil when nothing does.
    case attemptFailed(AttemptFailure, next: NextAttempt?)
    /// The server applied a `Content-Encoding` unasked: the pin is of the encoded bytes.
    case contentEncoded(url: String, encoding: String)
    /// A HEAD request announced no size for a file pinned by a given digest: the entry has none.
    case noAnnouncedSize(url: String)
    /// A HEAD request announced a size no file of the given digest can have: the entry has none.
    case impossibleAnnouncedSize(url: String, announced: Int64, contradiction: String)
}

/// An entry of the manifest as a message names it (`files[2] (bin/tool)`), with where it starts.
package struct ManifestEntryReference: Sendable, Equatable {
    package let index: Int
    package let destination: String
    package let location: SourceLocation

    init(_ index: Int, of manifest: Manifest) {
        self.index = index
        destination = manifest.files[index].destination.description
        location = manifest.files[index].location
    }
}

/// Why a pinning step stopped; the manifest is never written when one is thrown.
package enum PinningFailure: Error, Sendable {
    /// The destination is `files[index]`'s already; `taken`: that entry's destination, when the manifest loads.
    case destinationTaken(ManifestEditError, taken: String?)
    /// Two new entries would have one destination: their positions among them, from 0, and their URLs (nil: known
    /// only by position).
    case destinationRepeated(first: Int, second: Int, urls: (String?, String?), destination: String)
    /// The manifest's text cannot take an entry: its own problems when it has any, else the editor's.
    case notEditable(ManifestEditError, existingProblems: [String]?)
    /// The edited text does not load: the manifest's own problems when it has any, else the edit's (positions
    /// point into a text never written).
    case editDoesNotLoad(DiagnosticsError, existingProblems: [String]?)
    /// The edited text loads but does not read back a new entry exactly: the last guard against quoting that would
    /// change a value.
    case entryDoesNotReadBack
    /// The rewritten text loads but does not read back a new pin exactly.
    case pinDoesNotReadBack
    /// `--from-sums` with `--dest DIR/`: this list file would not be a destination there.
    case notADestination(folder: String, path: String)
    /// The checksum list does not parse, or a name in it is no destination.
    case checksumList(ChecksumListError)
    /// The globs select no file of the list.
    case nothingMatches(list: String, patterns: [String])
    /// Entries the list now gives another digest, without leave to pin them anew.
    case listedDigestsChanged([(entry: ManifestEntryReference, was: Digest, now: Digest)])
    /// Entries whose digest the list changed but which pin a size, which the list does not give.
    case listedEntriesPinSizes([ManifestEntryReference])
    /// An entry's notation cannot take the new pin.
    case repinRefused(ManifestEditError)
    /// Pins rewritten in place do not load (a checksum list's: no entry is named).
    case repinDoesNotLoad(DiagnosticsError, entries: [ManifestEntryReference])
    /// There is no manifest to update.
    case noManifest
    /// The manifest to update does not load.
    case invalidManifest(DiagnosticsError)
    /// Destinations given to update that are no entry's.
    case noSuchEntries([String])
    /// A digest was given for an archive entry, whose tree only a download can pin.
    case givenDigestForTree(ManifestEntryReference)
    /// Entries named for update that take their digests from a signed list (`from:`): each sync reads the digest
    /// from the list, and a checksum beside `from:` would not load. Each with its list's name.
    case pinnedByList([(entry: ManifestEntryReference, list: String)])

    package var exitStatus: ExitStatus {
        switch self {
        case .entryDoesNotReadBack, .pinDoesNotReadBack: .entryFailed
        case .notADestination, .nothingMatches, .noSuchEntries, .givenDigestForTree, .pinnedByList: .usage
        case .destinationTaken, .destinationRepeated, .notEditable, .editDoesNotLoad, .checksumList,
            .listedDigestsChanged,
            .listedEntriesPinSizes, .repinRefused, .repinDoesNotLoad, .noManifest, .invalidManifest:
            .invalidManifest
        }
    }
}

/// An update's download failed: the entry it was for, and why.
package struct RepinFailure: Error, Sendable {
    package let entry: ManifestEntryReference
    package let failure: PinFailure
}
