import Glibc

/// Copies between two open files without the bytes passing through haul: a reflink (`ioctl(FICLONE)`) shares the
/// blocks where the file system can (btrfs, xfs), `sendfile` has the kernel copy them elsewhere (ext4, tmpfs).
/// Used to give a verified download to a second destination and to add one to the content cache.
package enum KernelCopy {
    /// `_IOW(0x94, 9, int)` from linux/fs.h.
    private static let ficlone: UInt = 0x4004_9409

    /// `output` (empty) becomes a clone of `input`; the errno when it does not.
    package static func reflink(_ input: Int32, to output: Int32) -> Int32? {
        ioctl(output, ficlone, input) == 0 ? nil : errno
    }

    /// Whether a failed reflink's errno means "not between these two files" (another file system, or one without
    /// reflinks), so that copying is the answer; anything else (ENOSPC, EIO) is a real failure.
    package static func meansNoReflinks(_ code: Int32) -> Bool {
        [EXDEV, EOPNOTSUPP, ENOTTY, EINVAL, ENOSYS, EPERM].contains(code)
    }

    /// The first `size` bytes of `input` to `output`, in the kernel; the errno of a failure (EIO when `input` is
    /// shorter than `size`: not the bytes the caller meant).
    package static func send(_ input: Int32, to output: Int32, size: Int64) -> Int32? {
        var offset: off_t = 0
        while offset < size {
            let sent = sendfile(output, input, &offset, Int(min(size - Int64(offset), 1 << 30)))
            if sent < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if sent == 0 { return EIO }
        }
        return nil
    }
}
