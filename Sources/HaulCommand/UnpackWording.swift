import Haul
import HaulArchive
import HaulManifest

/// The words for an archive that was not unpacked: the archive, the member when one is to blame, and the rule it
/// broke (`cannot unpack "tool.tar.gz": member "../etc/passwd": its name contains "..", which could leave the
/// folder`).
package enum UnpackWording {
    package static func sentence(_ failure: UnpackFailure) -> String {
        let subject =
            failure.member.map { "cannot unpack \(Quoted.text(failure.archive)): member \(Quoted.text($0))" }
            ?? "cannot unpack \(Quoted.text(failure.archive))"
        return "\(subject): \(rule(failure.rule))"
    }

    /// Why an entry's tree was not put in place.
    package static func sentence(_ failure: TreeFailure) -> String {
        switch failure {
        case .archiveNotRead(let destination):
            "cannot unpack \(Quoted.text(destination.description)): the archive was not read"
        case .unpack(let failure): sentence(failure)
        case .treeMismatch(let unpacked, let pinned):
            "the unpacked tree's digest is \(unpacked.subresourceIntegrity), not the pinned "
                + "\(pinned.subresourceIntegrity)"
        case .digest(let error): StoreWording.sentence(error)
        }
    }

    package static func rule(_ rule: UnpackFailure.Rule) -> String {
        switch rule {
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
        case .special(let kind):
            "it is \(StoreWording.kind(kind)): device nodes, FIFOs and sockets are not unpacked"
        case .symlinkTargetInvalid(let why): "it is a symlink whose target is \(invalid(why))"
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
            "a \(format.rawValue) archive cannot be unpacked as it arrives: its index comes after its data"
        case .outOfMemory: "out of memory"
        case .writeFailed(let failure): "cannot write \(Quoted.text(failure.path)): \(StoreWording.reason(failure))"
        }
    }

    private static func invalid(_ target: UnpackFailure.InvalidTarget) -> String {
        switch target {
        case .empty: "empty"
        case .notUTF8: "not valid UTF-8"
        case .tooLong(let bytes): "\(bytes) bytes long, over \(DestinationPath.maximumBytes)"
        }
    }
}
