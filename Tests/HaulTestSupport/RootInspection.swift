import Glibc

/// A file's identity as `lstat` reports it: the fields `.haul/state` records.
public struct OnDiskIdentity: Equatable, Sendable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// `seconds.nanoseconds` (nine digits after the point), as the state file writes times.
    public var modified: String
    public var changed: String

    public init(device: UInt64, inode: UInt64, size: Int64, modified: String, changed: String) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modified = modified
        self.changed = changed
    }

    public static func format(_ time: timespec) -> String {
        let fraction = String(time.tv_nsec)
        return "\(time.tv_sec)." + String(repeating: "0", count: 9 - fraction.count) + fraction
    }

    /// The identity of the regular file at `path` (a final symlink is not followed); nil for anything else.
    public static func of(_ path: String) -> OnDiskIdentity? {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return OnDiskIdentity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modified: format(info.st_mtim), changed: format(info.st_ctim))
    }

    public var description: String {
        "dev \(device) ino \(inode) size \(size) mtime \(modified) ctime \(changed)"
    }
}

/// One line of `<root>/.haul/state`, read independently of haul's own parser: `dest, dev, ino, size, mtime,
/// ctime, <algorithm>:<hex>` (times as `seconds.nanoseconds`). Only the first seven tab-separated fields are read, so columns added later do
/// not break the tests.
public struct StateFileRecord: Equatable, Sendable {
    public var destination: String
    public var identity: OnDiskIdentity
    /// As written, e.g. `sha256:9f86…`.
    public var digest: String
}

public enum StateFile {
    public enum Contents: Equatable, Sendable {
        case absent
        /// Present but not in the documented format; `reason` says where.
        case malformed(String)
        case records([StateFileRecord])
    }

    public static let header = "haul-state\t5"

    public static func path(root: String) -> String { root + "/.haul/state" }

    public static func read(root: String) -> Contents {
        guard let bytes = readFile(path(root: root)) else { return .absent }
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)[...]
        guard let first = lines.popFirst(), String(decoding: first, as: UTF8.self) == header else {
            return .malformed("the first line is not \"haul-state<TAB>5\"")
        }
        var records: [StateFileRecord] = []
        for (number, line) in lines.enumerated() {
            let fields = line.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false)
                .map { String(decoding: $0, as: UTF8.self) }
            guard fields.count >= 7,
                let destination = percentDecoded(fields[0]),
                let device = UInt64(fields[1]), let inode = UInt64(fields[2]), let size = Int64(fields[3]),
                isTime(fields[4]), isTime(fields[5]),
                fields[6].contains(":")
            else { return .malformed("record \(number + 1) is not dest, dev, ino, size, mtime, ctime, digest") }
            records.append(
                StateFileRecord(
                    destination: destination,
                    identity: OnDiskIdentity(
                        device: device, inode: inode, size: size, modified: fields[4], changed: fields[5]),
                    digest: fields[6]))
        }
        return .records(records)
    }

    /// `seconds.nanoseconds` with exactly nine digits after the point.
    private static func isTime(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 2 && Int64(parts[0]) != nil && parts[1].count == 9 && parts[1].allSatisfy(\.isASCII)
            && Int(parts[1]) != nil
    }

    private static func percentDecoded(_ text: String) -> String? {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                continue
            }
            guard bytes.count >= 2, let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
            else { return nil }
            out.append(value)
            bytes = bytes.dropFirst(2)
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// What a test expects at one destination after haul was stopped at an arbitrary moment.
public struct DestinationExpectation: Sendable {
    public var destination: String
    /// What was there before the run; nil: nothing.
    public var old: [UInt8]?
    public var new: [UInt8]
    /// The mode the manifest asks for; the new content must never be visible with another.
    public var newMode: mode_t?

    public init(destination: String, old: [UInt8]?, new: [UInt8], newMode: mode_t? = nil) {
        self.destination = destination
        self.old = old
        self.new = new
        self.newMode = newMode
    }
}

/// Where one destination stands.
public enum DestinationState: Equatable, Sendable {
    case absent, old, new
}

/// The promises haul makes about a root whatever moment it was killed at, checked from the outside.
/// Each check returns human-readable violations (empty when all hold) rather than failing, so that a test can
/// also prove that the checks catch what they must.
public enum RootInspection {
    /// `sha256` maps bytes to lowercase hex; it is passed in because this target does not link haul's digests.
    public static func crashViolations(
        root: String, expectations: [DestinationExpectation],
        sha256: ([UInt8]) -> String
    ) -> [String] {
        var violations: [String] = []
        for expectation in expectations {
            if case .failure(let problem) = state(of: expectation, root: root) {
                violations.append(problem.description)
            }
        }
        violations += strayFiles(root: root, destinations: Set(expectations.map(\.destination)))
            .map { "\($0) is not a destination: a temporary or partial file escaped haul's private area" }
        violations += stateViolations(root: root, sha256: sha256)
        if !lockIsFree(root: root) { violations.append(".haul/lock is still held") }
        return violations
    }

    /// Old, new or absent; a failure describes anything else (partial bytes, a wrong mode, a wrong kind).
    public static func state(of expectation: DestinationExpectation, root: String) -> Result<DestinationState, Problem>
    {
        let path = root + "/" + expectation.destination
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT {
                return expectation.old == nil
                    ? .success(.absent) : .failure(Problem("\(expectation.destination) lost its old content (absent)"))
            }
            return .failure(Problem("\(expectation.destination): lstat failed: \(String(cString: strerror(errno)))"))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            return .failure(
                Problem("\(expectation.destination) is not a regular file (mode \(String(info.st_mode, radix: 8)))"))
        }
        let bytes = readFile(path) ?? []
        if bytes == expectation.new {
            if let mode = expectation.newMode, info.st_mode & 0o7777 != mode {
                return .failure(
                    Problem(
                        "\(expectation.destination) has its new content with mode "
                            + "\(String(info.st_mode & 0o7777, radix: 8)), not \(String(mode, radix: 8))"))
            }
            return .success(.new)
        }
        if let old = expectation.old, bytes == old { return .success(.old) }
        return .failure(
            Problem(
                "\(expectation.destination) holds \(bytes.count) bytes that are neither its old "
                    + "(\(expectation.old.map { "\($0.count) bytes" } ?? "absent")) nor its new (\(expectation.new.count) bytes) content"
            ))
    }

    public struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Every non-directory under root, outside `.haul`, that is not one of `destinations` (paths relative to root).
    public static func strayFiles(root: String, destinations: Set<String>) -> [String] {
        var stray: [String] = []
        func walk(_ relative: String) {
            let directory = relative.isEmpty ? root : root + "/" + relative
            for name in entries(of: directory) {
                let child = relative.isEmpty ? name : relative + "/" + name
                if child == ".haul" { continue }
                var info = stat()
                guard lstat(root + "/" + child, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    walk(child)
                } else if !destinations.contains(child) {
                    stray.append(child)
                }
            }
        }
        walk("")
        return stray.sorted()
    }

    /// `.haul/state` must be well-formed when present, and none of its records may claim a digest for a file
    /// that is on disk, with exactly the recorded identity, but holds other bytes: haul would trust such a
    /// record and skip a file that is wrong. (A record whose identity no longer matches is a stale hint that
    /// haul ignores, not a lie.)
    public static func stateViolations(root: String, sha256: ([UInt8]) -> String) -> [String] {
        switch StateFile.read(root: root) {
        case .absent:
            return []
        case .malformed(let reason):
            return [".haul/state is malformed: \(reason)"]
        case .records(let records):
            var violations: [String] = []
            for record in records {
                let path = root + "/" + record.destination
                guard let identity = OnDiskIdentity.of(path), identity == record.identity else { continue }
                let actual = "sha256:" + sha256(readFile(path) ?? [])
                if record.digest != actual {
                    violations.append(
                        ".haul/state claims \(record.destination) (\(identity)) is \(record.digest), "
                            + "but the file with that identity is \(actual)")
                }
            }
            return violations
        }
    }

    /// Whether every destination has a record in `.haul/state` that matches the file now on disk and its digest.
    public static func stateDescribesEveryDestination(
        root: String, destinations: [String],
        sha256: ([UInt8]) -> String
    ) -> [String] {
        guard case .records(let records) = StateFile.read(root: root) else {
            return [".haul/state is missing or malformed"]
        }
        let byDestination = Dictionary(records.map { ($0.destination, $0) }, uniquingKeysWith: { _, last in last })
        var problems: [String] = []
        for destination in destinations {
            let path = root + "/" + destination
            guard let record = byDestination[destination] else {
                problems.append(".haul/state has no record of \(destination)")
                continue
            }
            if OnDiskIdentity.of(path) != record.identity {
                problems.append(".haul/state records another identity for \(destination)")
            }
            if record.digest != "sha256:" + sha256(readFile(path) ?? []) {
                problems.append(".haul/state records a wrong digest for \(destination)")
            }
        }
        return problems
    }

    /// Regular files in `.haul/tmp` (and its transfer loops' folders, `loop-K`) and `.haul/partial` (partials'
    /// `.meta` files left out): bytes in flight.
    public static func stagedFiles(root: String) -> [(name: String, size: Int64)] {
        var files: [(name: String, size: Int64)] = []
        let loopFolders = entries(of: root + "/.haul/tmp").filter { $0.hasPrefix("loop-") }.map { "tmp/" + $0 }
        for folder in ["tmp", "partial"] + loopFolders {
            let directory = root + "/.haul/" + folder
            for name in entries(of: directory) where !name.hasSuffix(".meta") && !name.hasSuffix(".meta.new") {
                var info = stat()
                if lstat(directory + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
                    files.append((folder + "/" + name, Int64(info.st_size)))
                }
            }
        }
        return files
    }

    /// Sizes of the staged files, sorted: what a test compares with the offsets at which it stalled the server.
    public static func stagedSizes(root: String) -> [Int64] {
        stagedFiles(root: root).map(\.size).sorted()
    }

    /// Whether another process could take `.haul/lock` now (true when there is no lock file at all).
    public static func lockIsFree(root: String) -> Bool {
        let descriptor = open(root + "/.haul/lock", O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return errno == ENOENT }
        defer { close(descriptor) }
        guard RootLock.take(descriptor) else { return false }
        RootLock.release(descriptor)
        return true
    }

    /// Names in a directory, sorted, without `.` and `..`; empty when it cannot be read.
    public static func entries(of directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}

/// The whole file, or nil when it cannot be opened.
func readFile(_ path: String) -> [UInt8]? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    while true {
        let count = read(descriptor, &chunk, chunk.count)
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        bytes += chunk[0..<count]
    }
    return bytes
}
