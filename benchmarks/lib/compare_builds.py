#!/usr/bin/env python3
"""Two haul binaries side by side on the same corpus, runs interleaved (A, B, A, B, ...) so that the machine's
drift hits both alike; prints medians, the ratio B/A, and client CPU (user + sys of the haul process).

usage: compare_builds.py --a BIN --b BIN --manifest MANIFEST --work DIR [--runs N] [--kind first|noop|next]
                         [--command sync|plan] [--extra ARG ...]

first: each run starts from an empty root (`rm -rf` untimed), then `haul sync MANIFEST`.
noop:  two untimed syncs into an empty root, then the timed command (nothing to do, the state warm and settled).
next:  one untimed sync into an empty root, then the timed command at once: what a CI job's second step pays.
--command: what is timed after the untimed syncs (default sync; `plan` saves no state, so it pays every time
what the last sync left for it).
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


def run_once(binary, manifest, work, extra, command="sync"):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([binary, command, manifest, "--progress", "none", "--quiet"] + extra, cwd=work,
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
    parser.add_argument("--kind", choices=["first", "noop", "next"], default="first")
    parser.add_argument("--command", choices=["sync", "plan"], default="sync")
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
            if args.kind in ("noop", "next"):
                # Each build's no-op starts from its own first sync (the other build's state is not its own); for
                # `noop`, a second one lets any record of a file written in the state's last clock tick settle.
                run_once(binary, args.manifest, args.work, args.extra)
            if args.kind == "noop":
                run_once(binary, args.manifest, args.work, args.extra)
            timed = "sync" if args.kind == "first" else args.command
            results[which].append(run_once(binary, args.manifest, args.work, args.extra, timed))
    wall = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in results.items()}
    kind = args.kind if args.kind == "first" or args.command == "sync" else f"{args.kind}, {args.command}"
    print(f"| {args.label or args.manifest} ({kind}) | {wall['a']:.3f} s, CPU {cpu['a']:.2f} s | "
          f"{wall['b']:.3f} s, CPU {cpu['b']:.2f} s | {wall['b'] / wall['a']:.2f} | {cpu['b'] / cpu['a']:.2f} |")


if __name__ == "__main__":
    main()
