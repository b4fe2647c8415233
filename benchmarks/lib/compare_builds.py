#!/usr/bin/env python3
"""Two haul binaries side by side on the same corpus, runs interleaved (A, B, A, B, ...) so that the machine's
drift hits both alike; prints medians, the ratio B/A, and client CPU (user + sys of the haul process).

usage: compare_builds.py --a BIN --b BIN --manifest MANIFEST --work DIR [--runs N] [--kind first|noop]
                         [--extra ARG ...]

first: each run starts from an empty root (`rm -rf` untimed), then `haul sync MANIFEST`.
noop:  two untimed syncs into an empty root, then the timed one (nothing to do, the state warm).
Every first run's result is checked by the exit status (0) only; the benchmark is about time, the suite about bytes.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time


def run_once(binary, manifest, work, extra):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([binary, "sync", manifest, "--progress", "none", "--quiet"] + extra, cwd=work,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{binary} exited {done.returncode}: {done.stderr.decode(errors='replace')[:2000]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def root_of(manifest, work):
    for line in open(os.path.join(work, manifest)):
        if line.startswith("root:"):
            return os.path.join(work, line.split(":", 1)[1].strip().strip('"'))
    return work


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--a", required=True)
    parser.add_argument("--b", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kind", choices=["first", "noop"], default="first")
    parser.add_argument("--label", default="")
    parser.add_argument("--extra", nargs="*", default=[])
    args = parser.parse_args()
    root = root_of(args.manifest, args.work)
    results = {"a": [], "b": []}
    for number in range(args.runs):
        order = ("a", "b") if number % 2 == 0 else ("b", "a")
        for which in order:
            binary = getattr(args, which)
            shutil.rmtree(root, ignore_errors=True)
            os.sync()
            if args.kind == "noop":
                # Each build's no-op starts from its own first sync (the other build's state is not its own), and
                # a second one lets the records of files written in the state's last clock tick settle.
                run_once(binary, args.manifest, args.work, args.extra)
                run_once(binary, args.manifest, args.work, args.extra)
            results[which].append(run_once(binary, args.manifest, args.work, args.extra))
    wall = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in results.items()}
    print(f"| {args.label or args.manifest} ({args.kind}) | {wall['a']:.3f} s, CPU {cpu['a']:.2f} s | "
          f"{wall['b']:.3f} s, CPU {cpu['b']:.2f} s | {wall['b'] / wall['a']:.2f} | {cpu['b'] / cpu['a']:.2f} |")


if __name__ == "__main__":
    main()
