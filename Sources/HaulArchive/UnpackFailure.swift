import HaulFailures
import HaulFileSystem
import HaulManifest

/// Why an archive was not unpacked: the archive, the member (when one is to blame) and the rule it broke, e.g.
/// `cannot unpack "tool.tar.gz": member "../etc/passwd": its name contains "..", which could leave the folder`
/// (the command's words, `UnpackWording`).
/// The whole unpack fails on the first one; the caller removes the folder.
package struct UnpackFailure: Error, Sendable, Equatable {
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
        /// A device node, FIFO, socket or unknown type.
        case special(FileKind)
        case symlinkTargetInvalid(InvalidTarget)
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
        case cannotStream(ArchiveFormat)
        case outOfMemory
        case writeFailed(SystemError)
    }

    /// Why a symlink's target cannot be a path.
    package enum InvalidTarget: Sendable, Equatable {
        case empty
        case notUTF8
        case tooLong(bytes: Int)
    }
}
