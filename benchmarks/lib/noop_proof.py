#!/usr/bin/env python3
"""One untimed haul run with everything a no-op claim needs checked, as JSON (appended to --results).

usage: noop_proof.py --mode warm|nostate|plan|control --haul BIN --manifest M --dir DL --access-log LOG
                     --index INDEX_TSV --scenario S --results FILE [--strace]

Modes:
  warm     `haul sync M` with the state cache warm: no request, no file rewritten, .haul/state not rewritten.
  nostate  delete DL/.haul/state first, then `haul sync M`: every file re-hashed, still no request and no file
           rewritten; the state file is written again.
  plan     `haul plan M`: exit 0, no request, nothing at all written (not even under .haul/).
  control  positive control for the method: delete the index's first file, then `haul sync M`: exactly that
           file is fetched (one request in the access log, one connect() in strace) and put back intact.

Requests are counted twice, independently: lines added to the counting server's access log (server side; M's
URLs point at countserver.py), and connect() calls to an AF_INET/AF_INET6 address made by haul (client side,
`strace -f --seccomp-bpf -e trace=connect`, with --strace; strace slows nothing but syscalls we do not trace).

Files are compared by (inode, size, mtime ns, ctime ns) before and after. haul's private folder DL/.haul is
counted apart from the user's files, on purpose and in the open: every `sync` takes the run lock and writes its
holder line into .haul/lock (`ftruncate` + `pwrite`, so its mtime moves: by design, to name the holder to a
second haul); that is the only .haul change a warm no-op may make. benchmarks/harness/lib/measure.py's --noop and
--expect-files checks leave the top .haul folder out; a harness whose checks count it reports "rewrote 1 files" /
N+2 files for haul.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def snapshot(root):
    snap = {}
    for dp, dns, fns in os.walk(root):
        for fn in fns + [d for d in dns if os.path.islink(os.path.join(dp, d))]:
            p = os.path.join(dp, fn)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            snap[os.path.relpath(p, root)] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return snap


def private(rel):
    return rel == ".haul" or rel.startswith(".haul/")


def count_lines(path, prefix):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f if l.startswith(prefix)]
    except FileNotFoundError:
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", required=True, choices=["warm", "nostate", "plan", "control"])
    ap.add_argument("--haul", required=True)
    ap.add_argument("--manifest", required=True, help="relative to --dir, or absolute")
    ap.add_argument("--dir", required=True, help="the manifest's root (haul's download dir)")
    ap.add_argument("--access-log", required=True)
    ap.add_argument("--index", required=True, help="the corpus's index.tsv (sha256, size, path)")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--strace", action="store_true")
    a = ap.parse_args()

    index = []
    with open(a.index) as f:
        for line in f:
            h, size, rel = line.rstrip("\n").split("\t", 2)
            index.append((h, int(size), rel))
    state = os.path.join(a.dir, ".haul", "state")
    problems = []
    victim = None
    if a.mode == "nostate":
        if os.path.exists(state):
            os.unlink(state)
        else:
            problems.append("no .haul/state to delete before the run")
    if a.mode == "control":
        victim = index[0][2]
        os.unlink(os.path.join(a.dir, victim))
    subprocess.run(["sync"])

    before = snapshot(a.dir)
    reqs0, conns0 = len(count_lines(a.access_log, "req ")), len(count_lines(a.access_log, "conn "))
    cmd = [a.haul, "plan" if a.mode == "plan" else "sync", a.manifest]
    trace = None
    if a.strace and shutil.which("strace"):
        fd, trace = tempfile.mkstemp(prefix="noop-proof-strace-")
        os.close(fd)
        cmd = ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=connect", "-o", trace] + cmd
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=a.dir, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    time.sleep(0.2)  # let the server's handler threads write their lines
    after = snapshot(a.dir)
    reqs = count_lines(a.access_log, "req ")[reqs0:]
    conns = count_lines(a.access_log, "conn ")[conns0:]
    inet_connects = None
    if trace:
        with open(trace) as f:
            inet_connects = sum(1 for l in f if "connect(" in l and ("AF_INET" in l))
        os.unlink(trace)

    changed = sorted(p_ for p_ in set(before) | set(after) if before.get(p_) != after.get(p_))
    user_changed = [c for c in changed if not private(c)]
    private_changed = [c for c in changed if private(c)]
    user_files = sum(1 for rel in after if not private(rel))
    rec = {"scenario": a.scenario, "mode": a.mode, "cmd": ["haul"] + cmd[-2:], "exit": p.returncode, "wall_untimed": wall,
           "requests": len(reqs), "connections": len(conns), "inet_connects": inet_connects,
           "first_requests": reqs[:3], "user_files_changed": len(user_changed), "user_changed_first": user_changed[:5],
           "private_changed": private_changed, "user_files": user_files, "expected_files": len(index),
           "stdout_tail": p.stdout.strip().splitlines()[-1:], "stderr_tail": p.stderr.strip().splitlines()[-3:]}

    want_exit = 0
    if p.returncode != want_exit:
        problems.append(f"exit {p.returncode}")
    if user_files != len(index):
        problems.append(f"{user_files} files outside .haul, expected {len(index)}")
    if a.mode == "control":
        if len(reqs) != 1:
            problems.append(f"{len(reqs)} requests for 1 deleted file (expected exactly 1)")
        if inet_connects is not None and inet_connects < 1:
            problems.append("strace saw no connect() although a file had to be fetched")
        if user_changed != [victim]:
            problems.append(f"changed files {user_changed[:5]}, expected only {victim}")
        vpath = os.path.join(a.dir, victim)
        if not os.path.exists(vpath) or os.path.getsize(vpath) != index[0][1]:
            problems.append(f"{victim} not restored")
    else:
        if reqs or conns:
            problems.append(f"{len(reqs)} requests, {len(conns)} connections to the counting server")
        if inet_connects:
            problems.append(f"{inet_connects} connect() calls to an inet address")
        if user_changed:
            problems.append(f"{len(user_changed)} user files changed, first {user_changed[:3]}")
        allowed = {"plan": set(), "warm": {".haul/lock"}, "nostate": {".haul/lock", ".haul/state"}}[a.mode]
        extra = [c for c in private_changed if c not in allowed]
        if extra:
            problems.append(f".haul changes beyond {sorted(allowed) or 'none'}: {extra}")
        if a.mode == "nostate" and ".haul/state" not in after:
            problems.append(".haul/state was not written again")
    rec["problems"] = problems
    rec["ok"] = not problems
    with open(a.results, "a") as f:
        f.write(json.dumps(rec) + "\n")
    sc = f"{inet_connects} connect()" if inet_connects is not None else "strace n/a"
    print(f"{a.scenario:14s} proof {a.mode:8s} exit {p.returncode}  access log +{len(reqs)} req/+{len(conns)} conn  {sc}  "
          f"user files changed {len(user_changed)}/{user_files}  .haul changed {private_changed}  "
          f"{'OK' if not problems else 'FAIL: ' + '; '.join(problems)}", flush=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
