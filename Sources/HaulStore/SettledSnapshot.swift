import Glibc
import HaulDigest
import HaulFailures
import HaulFileSystem
import HaulManifest

/// `<root>/.haul/settled/<name>`: what a run that left every entry of a manifest verified in place recorded of
/// them, so that the next run of the same manifest can tell it has nothing to do from its fingerprint and an `lstat`
/// of each file, without validating the manifest or reading the state (a no-op of 100,000 files at the speed of
/// stat; see ARCHITECTURE, "The settled fast path").
///
/// It proves nothing alone: it is believed only for the key it was written under (the manifest's fingerprint with
/// what else the verdict depends on), while the state is the one it was written beside (the same identity, no
/// journal: a run that saved or lost the state, or an edit, sends the next run the whole way) and while every file
/// still has the identity recorded here, by the rule the state's records follow (`FileIdentity.isOlder(than:)`).
/// A run that changes anything forgets the manifest's snapshots first; a torn or foreign file reads as none.
package struct SettledSnapshot: Sendable {
    /// What is checked before any file is looked at.
    package var header: Header
    /// Each entry's destination and the identity of its verified file, in manifest order.
    package var files: [(destination: String, identity: FileIdentity)]

    /// A snapshot's first lines: what a run checks before it looks at any file.
    package struct Header: Sendable {
        /// What the verdict depended on (the manifest's fingerprint, haul's version, the shard).
        package let key: Digest
        /// The environment variables the manifest names, whose values the fingerprint covers: known before the
        /// manifest is read again.
        package let variables: [String]
        /// Root as the run resolved it, normalized.
        package let root: String
        /// Entries in the whole manifest (a shard's snapshot lists only its own files).
        package let manifestEntries: Int
        /// For unpinned entries kept because their server said they stay fresh: when that was judged, and until when
        /// all of them stay fresh (seconds since the epoch); nil when every entry is pinned.
        package let freshness: Freshness?

        init(key: Digest, variables: [String], root: String, manifestEntries: Int, freshness: Freshness?) {
            self.key = key
            self.variables = variables
            self.root = FileSystem.normalizedRoot(root)
            self.manifestEntries = manifestEntries
            self.freshness = freshness
        }

        /// Whether it was written for `root` (as a manifest or `--root` resolves it).
        package func isFor(root: String) -> Bool { self.root == FileSystem.normalizedRoot(root) }
    }

    package struct Freshness: Sendable, Equatable {
        package var judgedAt: Double
        package var until: Double

        package init(judgedAt: Double, until: Double) {
            self.judgedAt = judgedAt
            self.until = until
        }
    }

    package init(
        key: Digest, variables: [String], root: String, manifestEntries: Int, freshness: Freshness? = nil,
        files: [(destination: String, identity: FileIdentity)]
    ) {
        header = Header(
            key: key, variables: variables, root: root, manifestEntries: manifestEntries, freshness: freshness)
        self.files = files
    }

    static let firstLine = "haul-settled\t1"
    /// The last line: a file cut short by a crash has none, and is no snapshot.
    static let trailer = "end"
    /// A snapshot lists at most as many files as the largest manifest can (one line each is longer than 60 bytes).
    static let maximumBytes = 1 << 30

    /// The file's name for the manifest at `manifestPath` (absolute), one per shard.
    package static func name(manifestPath: String, shard: Shard?) -> String {
        let digest = StreamingHasher.digest(Array(manifestPath.utf8), algorithm: .sha256)
        return prefix(of: digest) + (shard.map { "-\($0.index)-of-\($0.count)" } ?? "")
    }

    private static func prefix(of digest: Digest) -> String { String(digest.hex.prefix(32)) }

    // MARK: Reading

    /// The snapshot under `name`, its header read; nil when there is none, it is not one this haul wrote, or the
    /// state is no longer the one it was written beside. Its files are read only when asked (`stillHolds`): a run
    /// of another key reads no further than the header.
    package static func read(named name: String, in area: PrivateArea) -> Found? {
        guard case .success(let folder) = area.folder.subdirectory(PrivateArea.Member.settled.rawValue),
            case .bytes(let bytes, let identity?) = PrivateFile.read(name, in: folder, limit: maximumBytes),
            let found = Found(bytes, writtenAt: identity.modified),
            let current = StateMark.now(in: area), current == found.state
        else { return nil }
        return found
    }

    /// The state file as a snapshot was written beside it.
    enum StateMark: Equatable {
        case absent
        case file(FileIdentity)

        /// Now; nil while a journal is left (the next run must retire it) or when it cannot be told.
        static func now(in area: PrivateArea) -> StateMark? {
            guard case .failure(let failure) = area.folder.status(of: PrivateArea.Member.journal.rawValue),
                failure.errno == ENOENT
            else { return nil }
            switch area.folder.status(of: PrivateArea.Member.state.rawValue) {
            case .success(let info): return .file(FileIdentity(info))
            case .failure(let failure) where failure.errno == ENOENT: return .absent
            case .failure: return nil
            }
        }
    }

    /// A snapshot as read: what a run checks before it looks at any file, and the rest of the bytes.
    package struct Found: Sendable {
        package let header: Header
        let state: StateMark
        /// Its mtime: every file's identity must be older.
        let writtenAt: FileTime
        private let bytes: [UInt8]
        /// Where the files' lines begin.
        private let filesStart: Int

        init?(_ bytes: [UInt8], writtenAt: FileTime) {
            let tab = UInt8(ascii: "\t")
            let read = bytes.withUnsafeBufferPointer { buffer -> (Header, StateMark, Int)? in
                var lines = Lines(buffer)
                let fields = { (line: Slice<UnsafeBufferPointer<UInt8>>) in
                    line.split(separator: tab, omittingEmptySubsequences: false).map {
                        UnsafeBufferPointer(rebasing: $0)
                    }
                }
                guard lines.next()?.elementsEqual(SettledSnapshot.firstLine.utf8) == true,
                    let key = lines.next().map(fields), key.count == 2, key[0].elementsEqual("key".utf8),
                    let digest = Digest(algorithm: .sha256, hexUTF8: key[1]),
                    let variables = lines.next().map(fields), variables.first?.elementsEqual("variables".utf8) == true,
                    let rootLine = lines.next().map(fields), rootLine.count == 3,
                    rootLine[0].elementsEqual("root".utf8),
                    let root = StateFile.unescape(rootLine[1]), let manifestEntries = Int(decimal: rootLine[2]),
                    let freshLine = lines.next().map(fields), freshLine.first?.elementsEqual("fresh".utf8) == true,
                    let stateLine = lines.next().map(fields), stateLine.first?.elementsEqual("state".utf8) == true
                else { return nil }
                let state: StateMark
                switch stateLine.count {
                case 1: state = .absent
                case 6:
                    guard let identity = identity({ stateLine[$0] }) else { return nil }
                    state = .file(identity)
                default: return nil
                }
                var freshness: Freshness?
                switch freshLine.count {
                case 1: break
                case 3:
                    let number = { (field: UnsafeBufferPointer<UInt8>) in Double(String(decoding: field, as: UTF8.self))
                    }
                    guard let judgedAt = number(freshLine[1]), let until = number(freshLine[2]) else { return nil }
                    freshness = Freshness(judgedAt: judgedAt, until: until)
                default: return nil
                }
                var names: [String] = []
                for name in variables.dropFirst() {
                    guard let text = StateFile.unescape(name) else { return nil }
                    names.append(text)
                }
                let header = Header(
                    key: digest, variables: names, root: root, manifestEntries: manifestEntries,
                    freshness: freshness)
                return (header, state, lines.position)
            }
            guard let (header, state, filesStart) = read else { return nil }
            self.header = header
            self.state = state
            self.writtenAt = writtenAt
            self.bytes = bytes
            self.filesStart = filesStart
        }

        /// How many files it lists when every one is still the one recorded (a regular file with the recorded
        /// identity, older than the snapshot: a file changed within the clock's resolution of the snapshot's
        /// writing could otherwise keep its identity; its parents checked as the observer checks them, so that no
        /// symlink leads out of root); nil when one is not, or the snapshot was not written whole.
        package func stillHolds(concurrency: Int) -> Int? {
            guard let files = self.files() else { return nil }
            let looks = LocalObserver(root: header.root).look(at: files.map(\.destination), concurrency: concurrency)
            let holds = zip(looks, files).allSatisfy { look, file in
                guard case .regularFile(let identity) = look else { return false }
                return identity == file.identity && identity.isOlder(than: writtenAt)
            }
            return holds ? files.count : nil
        }

        /// The files' lines, up to the trailer that only a snapshot written whole has.
        private func files() -> [(destination: DestinationPath, identity: FileIdentity)]? {
            bytes.withUnsafeBufferPointer { buffer in
                var lines = Lines(buffer, from: filesStart)
                var files: [(destination: DestinationPath, identity: FileIdentity)] = []
                var fields: [Range<Int>] = []
                fields.reserveCapacity(6)
                while let line = lines.next() {
                    if line.elementsEqual(trailer.utf8) {
                        // Only a file written whole ends so, with nothing after.
                        guard lines.next() == nil, lines.endedWithNewline else { return nil }
                        return files
                    }
                    fields.removeAll(keepingCapacity: true)
                    var start = line.startIndex
                    for index in line.indices where buffer[index] == UInt8(ascii: "\t") {
                        fields.append(start..<index)
                        start = index + 1
                    }
                    fields.append(start..<line.endIndex)
                    let field = { (number: Int) in UnsafeBufferPointer(rebasing: buffer[fields[number]]) }
                    guard fields.count == 6, files.count < header.manifestEntries,
                        let text = StateFile.unescape(field(0)),
                        let destination = DestinationPath(text), let identity = identity(field)
                    else { return nil }
                    files.append((destination, identity))
                }
                return nil
            }
        }
    }

    /// Fields 1 to 5 of a line: `dev ino size mtime ctime`, as the state writes them.
    fileprivate static func identity(_ field: (Int) -> UnsafeBufferPointer<UInt8>) -> FileIdentity? {
        guard let device = UInt64(decimal: field(1)), let inode = UInt64(decimal: field(2)),
            let size = Int64(decimal: field(3)), let modified = FileTime(field: field(4)),
            let changed = FileTime(field: field(5))
        else { return nil }
        return FileIdentity(device: device, inode: inode, size: size, modified: modified, changed: changed)
    }

    private static func appendIdentity(_ identity: FileIdentity, to out: inout [UInt8]) {
        StateFile.appendDecimal(identity.device, to: &out)
        StateFile.appendDecimal(identity.inode, to: &out)
        StateFile.appendDecimal(identity.size, to: &out)
        StateFile.appendTime(identity.modified, to: &out)
        StateFile.appendTime(identity.changed, to: &out)
    }

    /// The lines of a buffer, without their newlines.
    fileprivate struct Lines {
        let buffer: UnsafeBufferPointer<UInt8>
        var position: Int
        /// Whether the last line read had its newline.
        var endedWithNewline = false

        init(_ buffer: UnsafeBufferPointer<UInt8>, from position: Int = 0) {
            self.buffer = buffer
            self.position = position
        }

        mutating func next() -> Slice<UnsafeBufferPointer<UInt8>>? {
            guard position < buffer.count else { return nil }
            let end = buffer[position...].firstIndex(of: UInt8(ascii: "\n"))
            defer { position = (end ?? buffer.count) + 1 }
            endedWithNewline = end != nil
            return buffer[position..<(end ?? buffer.count)]
        }
    }

    // MARK: Writing

    /// Writes it under `name` (a temporary file renamed over the old one), beside the state as it is now (none
    /// while a journal is left). Not flushed: a snapshot lost or cut short by a crash is read as none, and one that
    /// survives still names only verified files. Failing to write costs the next run its fast path, nothing else.
    package func write(named name: String, in area: PrivateArea) -> StoreError? {
        guard let state = StateMark.now(in: area) else { return nil }
        let folder: DirectoryHandle
        do { folder = try area.privateFolder(.settled) } catch { return error }
        let temporary = "\(name).\(getpid()).new"
        let descriptor: Int32
        switch folder.openFile(temporary, flags: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW) {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return StoreError(operation: .write, path: failure.path, errno: failure.errno)
        }
        let code = PrivateFile.write(serialized(beside: state), to: descriptor)
        close(descriptor)
        if let code {
            _ = folder.remove(temporary)
            return StoreError(operation: .write, path: folder.displayPath(of: temporary), errno: code)
        }
        if let failure = folder.rename(temporary, to: name) {
            _ = folder.remove(temporary)
            return StoreError(operation: .rename, path: failure.path, errno: failure.errno)
        }
        return nil
    }

    func serialized(beside state: StateMark) -> [UInt8] {
        var out = Array((Self.firstLine + "\nkey\t" + header.key.hex + "\nvariables").utf8)
        for name in header.variables {
            out.append(UInt8(ascii: "\t"))
            StateFile.appendEscaped(name, to: &out)
        }
        out.append(contentsOf: "\nroot\t".utf8)
        StateFile.appendEscaped(header.root, to: &out)
        StateFile.appendDecimal(header.manifestEntries, to: &out)
        out.append(contentsOf: "\nfresh".utf8)
        if let freshness = header.freshness {
            out.append(contentsOf: "\t\(freshness.judgedAt)\t\(freshness.until)".utf8)
        }
        out.append(contentsOf: "\nstate".utf8)
        if case .file(let identity) = state { Self.appendIdentity(identity, to: &out) }
        out.append(UInt8(ascii: "\n"))
        out.reserveCapacity(out.count + files.count * 96)
        for (destination, identity) in files {
            StateFile.appendEscaped(destination, to: &out)
            Self.appendIdentity(identity, to: &out)
            out.append(UInt8(ascii: "\n"))
        }
        out.append(contentsOf: (Self.trailer + "\n").utf8)
        return out
    }

    /// Removes every snapshot of the manifest at `manifestPath`, of every shard: what a run changes may change what
    /// another shard's run, or a run of the whole manifest, would decide.
    package static func forget(manifestPath: String, in area: PrivateArea) {
        guard case .success(let folder) = area.folder.subdirectory(PrivateArea.Member.settled.rawValue),
            let names = folder.names()
        else { return }
        let prefix = Self.prefix(of: StreamingHasher.digest(Array(manifestPath.utf8), algorithm: .sha256))
        for name in names where name.hasPrefix(prefix) { _ = folder.remove(name) }
    }
}
