#!/usr/bin/env python3
"""Writes an archive member by member, exactly as described, for haul's unpacking tests: the hostile ones no
archiver would make (absolute names, "..", links out of the tree, device nodes, duplicates, invalid UTF-8).

Usage: craft_archive.py FORMAT OUTPUT < MEMBERS
FORMAT: gnu, pax or ustar (tar), or zip. MEMBERS: a JSON list, in archive order, of objects:
    name       the member's name; or name_hex, its bytes in hex (for names that are not UTF-8)
    type       file (default), dir, symlink, hardlink, chr, blk, fifo
    data       a file's content (text; default empty)
    target     a symlink's or hard link's target
    mode       permission bits (default 0o644, 0o755 for folders)
A zip member's type and mode go in its external attributes (made on Unix), as Info-ZIP writes them.
"""
import io
import json
import stat
import sys
import tarfile
import zipfile

TAR_TYPES = {'file': tarfile.REGTYPE, 'dir': tarfile.DIRTYPE, 'symlink': tarfile.SYMTYPE,
             'hardlink': tarfile.LNKTYPE, 'chr': tarfile.CHRTYPE, 'blk': tarfile.BLKTYPE, 'fifo': tarfile.FIFOTYPE}
ZIP_TYPES = {'file': stat.S_IFREG, 'dir': stat.S_IFDIR, 'symlink': stat.S_IFLNK}


def name_of(member):
    if 'name_hex' in member:
        return bytes.fromhex(member['name_hex']).decode('utf-8', 'surrogateescape')
    return member['name']


def write_tar(path, members, form):
    formats = {'gnu': tarfile.GNU_FORMAT, 'pax': tarfile.PAX_FORMAT, 'ustar': tarfile.USTAR_FORMAT}
    with tarfile.open(path, 'w', format=formats[form], encoding='utf-8', errors='surrogateescape') as archive:
        for member in members:
            kind = member.get('type', 'file')
            info = tarfile.TarInfo(name_of(member))
            info.type = TAR_TYPES[kind]
            info.mode = member.get('mode', 0o755 if kind == 'dir' else 0o644)
            info.linkname = member.get('target', '')
            data = member.get('data', '').encode()
            info.size = len(data) if kind == 'file' else 0
            archive.addfile(info, io.BytesIO(data) if kind == 'file' else None)


def write_zip(path, members):
    with zipfile.ZipFile(path, 'w', compression=zipfile.ZIP_DEFLATED) as archive:
        for member in members:
            kind = member.get('type', 'file')
            info = zipfile.ZipInfo(name_of(member))
            info.create_system = 3
            info.external_attr = (ZIP_TYPES[kind] | member.get('mode', 0o755 if kind == 'dir' else 0o644)) << 16
            data = member.get('target', '') if kind == 'symlink' else member.get('data', '')
            archive.writestr(info, data.encode())


def main():
    form, output = sys.argv[1], sys.argv[2]
    members = json.load(sys.stdin)
    if form == 'zip':
        write_zip(output, members)
    else:
        write_tar(output, members, form)


main()
