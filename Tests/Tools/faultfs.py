#!/usr/bin/env python3
"""A passthrough FUSE file system that fails chosen operations with a chosen errno, for haul's fault tests.

Usage: faultfs.py BACKING MOUNTPOINT CONTROL
CONTROL holds one rule per line, "<operation> <path substring> [errno name | DELAY]" (errno defaults to EIO),
and is read again on every call, so a test changes the faults while the file system is mounted:
    read a.bin            reading out/a.bin fails with EIO
    fsyncdir data         fsync of the folder data fails with EIO
    rename x ENOSPC
    unlink old DELAY      unlinking old takes a second longer, then succeeds
Operations: read write fsync fsyncdir rename open create mkdir unlink getattr readdir (listing a folder).
Times are passed through with their nanoseconds, unless FAULTFS_COARSE=1 is in the environment: then every
time is reported in whole seconds (ext3, FAT, many NFS and SMB servers), and the kernel caches no attributes, so
each stat sees the backing file's times as they are now.
"""
import errno
import os
import sys
import time

try:
    from fuse import FUSE, FuseOSError, Operations
except ImportError:  # Debian's python3-fusepy names the module fusepy
    from fusepy import FUSE, FuseOSError, Operations

BACKING, MOUNTPOINT, CONTROL = sys.argv[1], sys.argv[2], sys.argv[3]
COARSE = os.environ.get('FAULTFS_COARSE') == '1'


def rules():
    try:
        with open(CONTROL) as control:
            found = []
            for line in control:
                parts = line.split()
                if len(parts) >= 2:
                    code = parts[2] if len(parts) > 2 else 'EIO'
                    found.append((parts[0], parts[1], code if code == 'DELAY' else getattr(errno, code)))
            return found
    except FileNotFoundError:
        return []


def inject(operation, path):
    for rule_operation, substring, code in rules():
        if rule_operation == operation and substring in path:
            if code == 'DELAY':
                time.sleep(1.0)
                continue
            raise FuseOSError(code)


class FaultFS(Operations):
    def __init__(self):
        self.paths = {}

    def _real(self, path):
        return os.path.join(BACKING, path.lstrip('/'))

    def access(self, path, mode):
        if not os.access(self._real(path), mode, follow_symlinks=False):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path, mode):
        return os.chmod(self._real(path), mode)

    def chown(self, path, uid, gid):
        return os.lchown(self._real(path), uid, gid)

    def getattr(self, path, fh=None):
        inject('getattr', path)
        st = os.lstat(self._real(path))
        attributes = {key: getattr(st, key) for key in ('st_gid', 'st_mode', 'st_nlink', 'st_size', 'st_uid', 'st_ino')}
        for key in ('st_atime', 'st_mtime', 'st_ctime'):
            attributes[key] = getattr(st, key + '_ns') // 1_000_000_000 if COARSE else getattr(st, key + '_ns') / 1e9
        return attributes

    def readdir(self, path, fh):
        inject('readdir', path)
        return ['.', '..'] + os.listdir(self._real(path))

    def readlink(self, path):
        return os.readlink(self._real(path))

    def mknod(self, path, mode, dev):
        return os.mknod(self._real(path), mode, dev)

    def rmdir(self, path):
        return os.rmdir(self._real(path))

    def mkdir(self, path, mode):
        inject('mkdir', path)
        return os.mkdir(self._real(path), mode)

    def statfs(self, path):
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in ('f_bavail', 'f_bfree', 'f_blocks', 'f_bsize', 'f_favail', 'f_ffree',
                                                  'f_files', 'f_flag', 'f_frsize', 'f_namemax')}

    def unlink(self, path):
        inject('unlink', path)
        return os.unlink(self._real(path))

    def symlink(self, name, target):
        return os.symlink(target, self._real(name))

    def rename(self, old, new):
        inject('rename', new)
        return os.rename(self._real(old), self._real(new))

    def link(self, target, name):
        return os.link(self._real(name), self._real(target))

    def utimens(self, path, times=None):
        return os.utime(self._real(path), times, follow_symlinks=False)

    def open(self, path, flags):
        inject('open', path)
        fd = os.open(self._real(path), flags)
        self.paths[fd] = path
        return fd

    def create(self, path, mode, fi=None):
        inject('create', path)
        fd = os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        self.paths[fd] = path
        return fd

    def read(self, path, length, offset, fh):
        inject('read', self.paths.get(fh, path))
        return os.pread(fh, length, offset)

    def write(self, path, data, offset, fh):
        inject('write', self.paths.get(fh, path))
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            return os.ftruncate(fh, length)
        return os.truncate(self._real(path), length)

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        self.paths.pop(fh, None)
        return os.close(fh)

    def fsync(self, path, datasync, fh):
        inject('fsync', self.paths.get(fh, path))
        return os.fsync(fh)

    def fsyncdir(self, path, datasync, fh):
        inject('fsyncdir', path)
        return 0


if __name__ == '__main__':
    uncached = dict(attr_timeout=0, entry_timeout=0, negative_timeout=0) if COARSE else {}
    FUSE(FaultFS(), MOUNTPOINT, foreground=True, nothreads=False, allow_other=True, use_ino=True, **uncached)
