#!/usr/bin/env python3
"""Times `haul plan` on manifests with N, 10N and 100N of one thing and prints how the time grows.

usage: manifest_scaling.py HAUL WORK_DIR N RUNS

Kinds (each in one mapping or sequence, where a quadratic step would show):
  unknown-keys  N unknown top-level keys (refused: exit 3, 50 diagnostics printed)
  headers       one entry with N headers (exit 2)
  entries       N entries (exit 2: all missing)
  bad-entries   N entries with an unknown key each (refused: exit 3)

Each time is the fastest wall time of RUNS runs: on a shared machine, other load only ever adds time. Linear
loading: the ratios 10N/N and 100N/N stay at or below 12 and 120, which decides the verdict; a quadratic step
makes them hundreds. `haul plan` on an empty manifest (process start, no work) is measured the same way, and the
"net" ratios subtract it: the work alone, which grows a little faster than 10 and 100 because the cost of each
item rises once arenas and tables of hundreds of thousands of them outgrow the CPU's caches.
"""
import os
import subprocess
import sys
import time

# Lines are long enough that even N = 4000 makes a manifest over 128 KiB: all three sizes are then read the same
# way (libyaml on a second thread), so the ratios compare like with like.
PAD = "x" * 32
KINDS = {
    # name: (writer, expected exit status)
    "unknown-keys": (lambda out, n: [out.write("version: 1\n")] + [out.write(f"key-{i}: {PAD}\n") for i in range(n)]
                     + [out.write("files: []\n")], 3),
    "headers": (lambda out, n: [out.write("version: 1\nroot: dl\nfiles:\n  - url: http://127.0.0.1:1/a\n"
                                          "    dest: a\n    headers:\n")]
                + [out.write(f"      X-Header-{i}: {PAD}\n") for i in range(n)], 2),
    "entries": (lambda out, n: [out.write("version: 1\nroot: dl\nfiles:\n")]
                + [out.write(f"  - {{url: \"http://127.0.0.1:1/{PAD}/{i}\", dest: d{i % 100}/f{i}, size: {i}}}\n")
                   for i in range(n)], 2),
    "bad-entries": (lambda out, n: [out.write("version: 1\nroot: dl\nfiles:\n")]
                    + [out.write(f"  - {{url: \"http://127.0.0.1:1/{PAD}/{i}\", dest: d{i % 100}/f{i}, colour: red}}\n")
                       for i in range(n)], 3),
}


def write(path, kind, n):
    with open(path, "w") as out:
        KINDS[kind][0](out, n)


def fastest_time(haul, path, expected, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run([haul, "plan", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        if result.returncode != expected:
            sys.exit(f"{path}: exit {result.returncode}, expected {expected}: not the work this benchmark means")
    return min(times)


def main():
    haul, work, n, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(work, exist_ok=True)
    empty = os.path.join(work, "empty.yaml")
    with open(empty, "w") as out:
        out.write("version: 1\nroot: dl\nfiles: []\n")
    base = fastest_time(haul, empty, 0, runs)
    print(f"haul plan of an empty manifest (process start): {base * 1000:.1f} ms; N = {n}, fastest of {runs} runs\n")
    print("| kind | N | 10N | 100N | 10N/N | 100N/N | net 10N/N | net 100N/N | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = False
    for kind, (_, expected) in KINDS.items():
        times, sizes = [], []
        for scale in (1, 10, 100):
            path = os.path.join(work, f"{kind}-{n * scale}.yaml")
            write(path, kind, n * scale)
            sizes.append(os.path.getsize(path))
            times.append(fastest_time(haul, path, expected, runs))
        raw = [times[1] / times[0], times[2] / times[0]]
        work_times = [max(t - base, 1e-4) for t in times]
        net = [work_times[1] / work_times[0], work_times[2] / work_times[0]]
        ok = raw[0] <= 12 and raw[1] <= 120
        failed |= not ok
        cells = [f"{t * 1000:.0f} ms ({s / 1e6:.1f} MB)" for t, s in zip(times, sizes)]
        print(f"| {kind} | " + " | ".join(cells)
              + f" | {raw[0]:.1f} | {raw[1]:.1f} | {net[0]:.1f} | {net[1]:.1f} | {'linear' if ok else 'SUPERLINEAR'} |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
