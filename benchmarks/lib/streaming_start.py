#!/usr/bin/env python3
"""Streaming start, side by side in one run (see benchmarks/streaming-start.sh).

    streaming_start.py WORK RUNS SIZES HAUL [HAUL ...]

1. For each of SIZES entries (none of their files on disk): seconds from starting the program to the first request
   reaching a loopback server, median of RUNS, the programs taking turns: `haul sync` of each build given, and
   `curl --parallel -K` of a config file listing the same URLs and outputs (the peer: it also has to read its list).
2. For the largest size, the same manifest with its last entry broken: the time each build takes to refuse it
   (exit 3), how many requests reached the server first, and whether anything was left in the root or in $TMPDIR.
The server answers each entry's URL with the 256 bytes the entry pins; each run of 1. is killed once its first
request has arrived.
"""
import hashlib
import http.server
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

work, runs = sys.argv[1], int(sys.argv[2])
sizes = [int(n) for n in sys.argv[3].split()]
builds = sys.argv[4:]


class Server:
    """Counts requests and notes when the first arrived since the last `reset`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.arrived = threading.Event()
        self.first = None
        self.count = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                with outer.lock:
                    outer.count += 1
                    if outer.first is None:
                        outer.first = time.perf_counter()
                outer.arrived.set()
                name = self.path.rsplit("/file-", 1)[-1].removesuffix(".bin")
                body = body_of(int(name)) if name.isdigit() else None
                self.send_response(200 if body else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):
                pass

        class Quiet(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a killed run resets its connections

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def reset(self):
        with self.lock:
            self.first, self.count = None, 0
        self.arrived.clear()


def body_of(index):
    """What the server answers for entry `index`: 256 bytes, which its entry pins."""
    return f"{index:0256d}".encode()


def write_inputs(folder, n, base, broken=False):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "haul.yaml"), "w") as manifest, open(os.path.join(folder, "curl.cfg"), "w") as config:
        manifest.write("version: 1\nroot: out\nfiles:\n")
        for index in range(n):
            path = f"data/{index // 1000:04d}/file-{index:07d}.bin"
            digest = "broken" if broken and index == n - 1 else hashlib.sha256(body_of(index)).hexdigest()
            manifest.write(f"  - url: {base}/{path}\n    dest: {path}\n    sha256: {digest}\n    size: 256\n")
            config.write(f'url = "{base}/{path}"\noutput = "out/{path}"\n')


def clean(folder):
    for name in ("out", "tmp"):
        shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    os.makedirs(os.path.join(folder, "tmp"))


def first_request(command, folder, server):
    clean(folder)
    server.reset()
    environment = dict(os.environ, TMPDIR=os.path.join(folder, "tmp"))
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=folder, env=environment, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    if not server.arrived.wait(600):
        sys.exit(f"{command[0]}: no request within 600 s")
    process.send_signal(signal.SIGKILL)
    process.wait()
    return server.first - start


def main():
    server = Server()
    programs = [(f"haul {number}", [binary, "sync", "haul.yaml", "--progress", "none", "--quiet"])
                for number, binary in enumerate(builds, 1)]
    programs.append(("curl --parallel -K", ["curl", "--parallel", "--parallel-max", "16", "--create-dirs", "-s", "-K", "curl.cfg"]))
    for number, binary in enumerate(builds, 1):
        print(f"haul {number}: {binary}")
    print()
    print(f"seconds to the first request of a first sync, median of {runs}")
    print(f"{'entries':>9} {'manifest MB':>11}" + "".join(f" {name:>19}" for name, _ in programs))
    for n in sizes:
        folder = os.path.join(work, str(n))
        write_inputs(folder, n, server.base)
        times = {name: [] for name, _ in programs}
        for _ in range(runs):
            for name, command in programs:
                times[name].append(first_request(command, folder, server))
        size = os.path.getsize(os.path.join(folder, "haul.yaml"))
        print(f"{n:>9} {size / 1e6:>11.1f}" + "".join(f" {statistics.median(times[name]):>19.3f}" for name, _ in programs))
        shutil.rmtree(folder)

    n = max(sizes)
    folder = os.path.join(work, "invalid")
    write_inputs(folder, n, server.base, broken=True)
    print(f"\nan invalid manifest of {n} entries (its last entry broken), median of {runs}")
    print(f"{'build':>10} {'refused after s':>16} {'requests first':>15} {'left in root':>13} {'left in TMPDIR':>15}")
    samples = {binary: [] for binary in builds}
    for _ in range(runs):
        for binary in builds:  # taking turns, as above
            clean(folder)
            server.reset()
            start = time.perf_counter()
            code = subprocess.run([binary, "sync", "haul.yaml", "--progress", "none"], cwd=folder,
                                  env=dict(os.environ, TMPDIR=os.path.join(folder, "tmp")),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            wall = time.perf_counter() - start
            if code != 3:
                sys.exit(f"{binary}: an invalid manifest exited {code}, not 3")
            samples[binary].append((wall, server.count, os.path.exists(os.path.join(folder, "out")),
                                    len(os.listdir(os.path.join(folder, "tmp")))))
    for number, binary in enumerate(builds, 1):
        runs_of = samples[binary]
        print(f"{f'haul {number}':>10} {statistics.median(s[0] for s in runs_of):>16.2f} {max(s[1] for s in runs_of):>15}"
              f" {'yes' if any(s[2] for s in runs_of) else 'nothing':>13} {max(s[3] for s in runs_of):>15}")
    server.httpd.shutdown()


main()
