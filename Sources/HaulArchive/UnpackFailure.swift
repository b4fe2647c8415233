import HaulFileSystem
import HaulManifest

/// Why an archive was not unpacked: the archive, the member (when one is to blame) and the rule it broke, e.g.
/// `cannot unpack "tool.tar.gz": member "../etc/passwd": its name contains "..", which could leave the folder`.
/// The whole unpack fails on the first one; the caller removes the folder.
package struct UnpackFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The archive as the caller named it.
    package let archive: String
    /// The member's name as the archive spells it (bytes that are not UTF-8 shown as U+FFFD); nil when the
    /// archive as a whole failed.
    package let member: String?
    package let rule: Rule

    package init(archive: String, member: String?, rule: Rule) {
        self.archive = archive
        self.member = member
        self.rule = rule
    }

    package enum Rule: Error, Sendable, Equatable {
        // A member's name.
        case invalidUTF8
        case containsNUL
        case absolute
        case parentComponent
        /// A member other than a folder whose name, stripped, is the tree's root (`.`).
        case namesTheRoot
        case nameTooLong(bytes: Int)
        case componentTooLong(component: String, bytes: Int)
        // What a member is.
        /// A device node, FIFO, socket or unknown type, in words.
        case special(String)
        case symlinkTargetInvalid(String)
        case symlinkTargetAbsolute(String)
        case symlinkTargetOutside(String)
        case symlinkTargetClimbsAfterName(String)
        case hardLinkTarget(String)
        // Where a member goes.
        case throughSymlink(String)
        case throughNonFolder(String)
        case duplicate
        // Limits.
        case tooManyMembers(limit: Int)
        case tooManyBytes(limit: Int64)
        // The archive itself.
        /// The bytes are not the format the entry names (`format:` or the URL's suffix).
        case notFormat(ArchiveFormat, reason: String)
        /// No format haul reads recognizes the bytes.
        case unrecognized(String)
        /// libarchive could not read on (damaged data, a bad checksum, an unsupported member); nil when it gave no
        /// reason.
        case unreadable(String?)
        /// The bytes ran out before the archive's end.
        case truncated(String?)
        /// A format whose index comes after its data (7z) arrived as a stream.
        case cannotStream(String)
        case outOfMemory
        case writeFailed(SystemError)
    }

    package var description: String {
        let subject =
            member.map { "cannot unpack \(Quoted.text(archive)): member \(Quoted.text($0))" }
            ?? "cannot unpack \(Quoted.text(archive))"
        return "\(subject): \(rule)"
    }
}

extension UnpackFailure.Rule: CustomStringConvertible {
    package var description: String {
        switch self {
        case .invalidUTF8: "its name is not valid UTF-8"
        case .containsNUL: "its name contains a NUL byte"
        case .absolute: "its name is absolute; members are unpacked inside the folder"
        case .parentComponent: "its name contains \"..\", which could leave the folder"
        case .namesTheRoot: "it names the folder itself, and is not a folder"
        case .nameTooLong(let bytes):
            "its path is \(bytes) bytes long; a path has at most \(DestinationPath.maximumBytes) bytes"
        case .componentTooLong(let component, let bytes):
            "\(Quoted.text(component)) is \(bytes) bytes long; a file or folder name has at most "
                + "\(DestinationPath.maximumNameBytes) bytes"
        case .special(let what): "it is \(what): device nodes, FIFOs and sockets are not unpacked"
        case .symlinkTargetInvalid(let why): "it is a symlink whose target is \(why)"
        case .symlinkTargetAbsolute(let target): "it is a symlink to an absolute path, \(Quoted.text(target))"
        case .symlinkTargetOutside(let target): "it is a symlink to \(Quoted.text(target)), outside the folder"
        case .symlinkTargetClimbsAfterName(let target):
            "it is a symlink to \(Quoted.text(target)): a \"..\" after a name could leave the folder through another "
                + "symlink"
        case .hardLinkTarget(let target):
            "it is a hard link to \(Quoted.text(target)), which is not a file unpacked before it"
        case .throughSymlink(let path): "its path goes through \(Quoted.text(path)), a symlink the archive made"
        case .throughNonFolder(let path): "its path goes through \(Quoted.text(path)), which is not a folder"
        case .duplicate: "the archive holds this path twice"
        case .tooManyMembers(let limit): "the archive holds more than \(limit) members"
        case .tooManyBytes(let limit): "the members unpack to more than \(limit) bytes"
        case .notFormat(let format, let reason): "not a \(format.rawValue) archive: \(reason)"
        case .unrecognized(let reason):
            "not an archive haul reads (\(ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", "))): \(reason)"
        case .unreadable(let reason): "cannot read it" + (reason.map { ": \($0)" } ?? " (libarchive gives no reason)")
        case .truncated(let reason): "the archive ends early" + (reason.map { ": \($0)" } ?? "")
        case .cannotStream(let format):
            "a \(format) archive cannot be unpacked as it arrives: its index comes after its data"
        case .outOfMemory: "out of memory"
        case .writeFailed(let failure): "cannot write \(Quoted.text(failure.path)): \(failure.reason)"
        }
    }
}
