import Glibc
import HaulFileSystem

/// Creating the engine's temporary files, and giving a verified file to a second destination.
///
/// A URL listed for several destinations is fetched once (`TransferRequest.sharers`); every destination then needs
/// a file of its own to commit. A reflink (`ioctl(FICLONE)`) shares the blocks on file systems that can (btrfs,
/// xfs): no bytes move and nothing more is stored. Elsewhere (ext4, tmpfs) the kernel copies them (`sendfile`),
/// which for the files listed twice in a manifest is far cheaper than a second download.
enum FileClone {
    /// A new file `file` (which must not exist) with `mode` exactly, or 0600 without one
    /// (`DirectoryHandle.createFile`). `hasFileMode`: the mode was set exactly.
    static func create(
        _ file: StagedFile, mode: UInt32?, umask: UInt32?
    ) -> Result<(descriptor: Int32, hasFileMode: Bool), Errno> {
        switch file.folder.createFile(file.name, mode: mode, umask: umask) {
        case .success(let created): .success((created.descriptor, created.hasMode))
        case .failure(let failure): .failure(Errno(failure.errno))
        }
    }

    /// A copy of `source` as `target` (new, with `mode` as `create` gives it): a reflink where the file system
    /// can, else the kernel copies the bytes. Returns whether the mode was set exactly, or the errno; a failed
    /// copy leaves no file behind.
    static func copy(_ source: StagedFile, to target: StagedFile, mode: UInt32?, umask: UInt32?) -> Result<Bool, Errno>
    {
        let input: Int32
        switch source.open(O_RDONLY) {
        case .success(let opened): input = opened
        case .failure(let failure): return .failure(Errno(failure.errno))
        }
        defer { close(input) }
        let created: (descriptor: Int32, hasFileMode: Bool)
        switch create(target, mode: mode, umask: umask) {
        case .success(let file): created = file
        case .failure(let code): return .failure(code)
        }
        let output = created.descriptor
        var failure: Int32?
        if KernelCopy.reflink(input, to: output) != nil {
            var info = stat()
            failure = fstat(input, &info) == 0 ? KernelCopy.send(input, to: output, size: Int64(info.st_size)) : errno
        }
        if close(output) != 0, failure == nil { failure = errno }
        if let failure {
            target.remove()
            return .failure(Errno(failure))
        }
        return .success(created.hasFileMode)
    }
}
