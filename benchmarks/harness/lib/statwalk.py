#!/usr/bin/env python3
"""The floor of a no-op: stat() every file of an index.tsv under DIR and compare its size.

usage: statwalk.py INDEX_TSV DIR      exit 0 when every file is there with its size
"""
import os
import sys

index, root = sys.argv[1], sys.argv[2]
wrong = 0
with open(index) as f:
    for line in f:
        _, size, path = line.rstrip("\n").split("\t", 2)
        try:
            wrong += os.stat(os.path.join(root, path)).st_size != int(size)
        except FileNotFoundError:
            wrong += 1
sys.exit(1 if wrong else 0)
