#!/usr/bin/env python3
"""The figures of "a million entries at the speed of stat", side by side in one run.

    million.py HAUL WORK RUNS SIZES NOOP_FILES

1. `haul plan` of manifests of SIZES entries (none of their files on disk): median wall and CPU seconds, peak
   resident set (the child's ru_maxrss), and that set as a multiple of the manifest's bytes, so the curve from 10k
   to 1M shows whether memory and time grow linearly.
2. The no-op `haul sync` of NOOP_FILES files already in place and recorded, against the stat floor
   `find ROOT -printf '%s %T@ %C@ %i\\n'` on the same tree, alternating, medians of RUNS; then the no-op of each of
   four shards (`--shard K/4`) of the same root, against a quarter of the whole no-op plus 0.1 s.
3. The time to the first request of a first sync of the largest of SIZES (nothing on disk): a loopback server
   notes when the first request arrives, and the run is then stopped (SIGTERM).
Apart from 3, no request is made: the URLs name a closed port on 127.0.0.1, and every file is already what its entry
pins.
"""
import hashlib
import http.server
import os
import signal
import threading
import statistics
import subprocess
import sys
import tempfile
import time

haul, work, runs = os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sizes = [int(n) for n in sys.argv[4].split()]
noop_files = int(sys.argv[5])
DEAD = "http://127.0.0.1:9"


def run(command, cwd, expect=(0,)):
    """Wall, CPU (user + system) and peak RSS in bytes of one run of `command`, its output discarded."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code not in expect:
        sys.exit(f"{' '.join(command)} exited {code}: {stderr[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def entry(index, digest, size):
    folder = f"{index // 1000:04d}"
    return (f"  - url: {DEAD}/data/{folder}/file-{index:07d}.bin\n    dest: data/{folder}/file-{index:07d}.bin\n"
            f"    sha256: {digest}\n    size: {size}\n")


def plan_curve():
    print("haul plan of a manifest whose files are all missing (exit 2), median of", runs)
    print(f"{'entries':>9} {'manifest MB':>11} {'wall s':>7} {'CPU s':>6} {'RSS MB':>7} {'RSS / bytes':>11} {'s per 100k':>10}")
    for n in sizes:
        path = os.path.join(work, f"plan-{n}.yaml")
        with open(path, "w") as manifest:
            manifest.write("version: 1\nroot: out\nfiles:\n")
            for index in range(n):
                manifest.write(entry(index, hashlib.sha256(str(index).encode()).hexdigest(), 16384))
        size = os.path.getsize(path)
        samples = [run([haul, "plan", path], work, expect=(2,)) for _ in range(runs)]
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        rss = statistics.median(s[2] for s in samples)
        print(f"{n:>9} {size / 1e6:>11.1f} {wall:>7.2f} {cpu:>6.2f} {rss / 1e6:>7.0f} {rss / size:>11.2f} {wall / n * 1e5:>10.3f}")
        os.unlink(path)


def first_request(n):
    """Seconds from starting `haul sync` of n entries (none on disk) to its first request reaching the server."""
    arrived = threading.Event()
    times = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            times.setdefault("first", time.perf_counter())
            arrived.set()
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    folder = os.path.join(work, "first")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "haul.yaml"), "w") as manifest:
        manifest.write("version: 1\nroot: out\nfiles:\n")
        for index in range(n):
            manifest.write(entry(index, hashlib.sha256(str(index).encode()).hexdigest(), 16384).replace(DEAD, base))
    start = time.perf_counter()
    process = subprocess.Popen([haul, "sync", "haul.yaml", "--progress", "none", "--quiet"], cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    arrived.wait(600)
    process.send_signal(signal.SIGTERM)
    process.wait()
    server.shutdown()
    subprocess.run(["rm", "-rf", folder], check=True)
    print(f"\nfirst sync of {n} entries: first request after {times['first'] - start:.2f} s")


def noop():
    root = os.path.join(work, "noop")
    lines = ["version: 1\nroot: out\nfiles:\n"]
    for index in range(noop_files):
        data = f"file {index}\n".encode()
        path = os.path.join(root, "out", "data", f"{index // 1000:04d}", f"file-{index:07d}.bin")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(data)
        lines.append(entry(index, hashlib.sha256(data).hexdigest(), len(data)))
    with open(os.path.join(root, "haul.yaml"), "w") as manifest:
        manifest.write("".join(lines))
    run([haul, "sync", "haul.yaml", "--progress", "none"], root)  # hashes each file once and records it
    floor = ["find", "out", "-printf", "%s %T@ %C@ %i\\n"]
    haul_runs, find_runs = [], []
    for _ in range(runs):
        find_runs.append(run(floor, root))
        haul_runs.append(run([haul, "sync", "haul.yaml", "--progress", "none"], root))
    find_wall = statistics.median(s[0] for s in find_runs)
    haul_wall = statistics.median(s[0] for s in haul_runs)
    print(f"\nno-op sync of {noop_files} files in place and recorded, in {work}, median of {runs}")
    print(f"  find -printf (the stat floor): {find_wall:.3f} s wall, {statistics.median(s[1] for s in find_runs):.3f} s CPU")
    print(f"  haul sync (no-op):             {haul_wall:.3f} s wall, {statistics.median(s[1] for s in haul_runs):.3f} s CPU, "
          f"{statistics.median(s[2] for s in haul_runs) / 1e6:.0f} MB RSS")
    print(f"  ratio haul / floor:            {haul_wall / find_wall:.2f}")
    shards = [f"{k}/4" for k in range(1, 5)]
    for _ in range(3):  # each shard's first runs prove what the others saved; then each is settled
        for shard in shards:
            run([haul, "sync", "haul.yaml", "--progress", "none", "--shard", shard], root)
    shard_walls = []
    for shard in shards:
        samples = [run([haul, "sync", "haul.yaml", "--progress", "none", "--shard", shard], root) for _ in range(runs)]
        shard_walls.append(statistics.median(s[0] for s in samples))
    print(f"  one shard of four (no-op):     {statistics.mean(shard_walls):.3f} s wall on average "
          f"(slowest {max(shard_walls):.3f} s), bound no-op / 4 + 0.1 s = {haul_wall / 4 + 0.1:.3f} s")


plan_curve()
if sizes:
    first_request(max(sizes))
if noop_files:
    noop()
