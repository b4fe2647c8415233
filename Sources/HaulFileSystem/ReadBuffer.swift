import Glibc

/// A buffer files are read into, from malloc: nil when there is no memory for it, where
/// `UnsafeMutableRawBufferPointer.allocate` would end the process. The caller fails what it was reading for, with
/// ENOMEM, and frees the buffer with `free`.
package enum ReadBuffer {
    package static func allocate(_ bytes: Int) -> UnsafeMutableRawBufferPointer? {
        var pointer: UnsafeMutableRawPointer?
        guard posix_memalign(&pointer, 64, bytes) == 0, let pointer else { return nil }
        return UnsafeMutableRawBufferPointer(start: pointer, count: bytes)
    }

    package static func free(_ buffer: UnsafeMutableRawBufferPointer?) {
        Glibc.free(buffer?.baseAddress)
    }
}
