#!/usr/bin/env python3
"""The floor of the write path: create the files of an index.tsv (same paths and sizes) under DIR.

usage: writefiles.py INDEX_TSV DIR [--rename] [--fsync] [--threads N] [--sync-at-end]

--rename       write NAME.part, then rename() it into place (atomic)
--fsync        fsync() each file before it is closed and renamed (durable)
--threads N    N threads (fsync releases the GIL, so flushes overlap)
--sync-at-end  one sync() after the last file instead of a flush per file
The bytes are one random buffer over and over: what is measured is the file system's cost per file and per byte.
"""
import argparse
import os
from concurrent.futures import ThreadPoolExecutor

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("index")
ap.add_argument("dir")
ap.add_argument("--rename", action="store_true")
ap.add_argument("--fsync", action="store_true")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--sync-at-end", action="store_true")
a = ap.parse_args()
buffer = os.urandom(1 << 20)
with open(a.index) as f:
    files = [(os.path.join(a.dir, path), int(size)) for _, size, path in (l.rstrip("\n").split("\t", 2) for l in f)]
for folder in sorted({os.path.dirname(path) for path, _ in files}):
    os.makedirs(folder, exist_ok=True)


def write(item):
    path, size = item
    staged = path + ".part" if a.rename else path
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    left = size
    while left:
        left -= os.write(fd, buffer[:min(left, len(buffer))])
    if a.fsync:
        os.fsync(fd)
    os.close(fd)
    if a.rename:
        os.rename(staged, path)


if a.threads > 1:
    with ThreadPoolExecutor(a.threads) as pool:
        list(pool.map(write, files, chunksize=16))
else:
    for item in files:
        write(item)
if a.sync_at_end:
    os.sync()
