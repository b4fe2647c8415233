#!/usr/bin/env python3
"""One timed run of a command: prints "wall cpu" in seconds; CPU is user + system of the command and its children.

    timed.py DIR COMMAND [ARG ...]     runs COMMAND in DIR (stdout discarded); exits nonzero if it fails
"""
import resource
import subprocess
import sys
import time

directory, command = sys.argv[1], sys.argv[2:]
before = resource.getrusage(resource.RUSAGE_CHILDREN)
start = time.perf_counter()
code = subprocess.call(command, cwd=directory, stdout=subprocess.DEVNULL)
wall = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
if code != 0:
    sys.exit(f"{command[0]} exited {code}: {' '.join(command)}")
print(f"{wall:.4f} {cpu:.4f}")
