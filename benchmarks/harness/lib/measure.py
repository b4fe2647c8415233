#!/usr/bin/env python3
"""Run one benchmark command several times and record what it cost.

usage: measure.py --label L --scenario S --dir WORK --results FILE.jsonl [options] -- CMD [ARG ...]

Once: --setup (bash, in WORK, untimed). Per run: --prepare (bash, in WORK, untimed), a wait of up to --quiet-wait s
for the machine to go idle, then CMD in WORK/--run-dir, timed, then the checks (untimed).
Recorded per run: wall s (fork to exit), CPU s (user + system of CMD and its children, from wait4), peak RSS
(GNU time's %M, the largest process's; a child forked from Python would report Python's until exec), CPU s of the
nginx named by --server-pidfile, of kernel threads and of interrupts, and "other" CPU: what the rest of the machine
used meanwhile. A run with other CPU above --noisy-cores on average is discarded and repeated (--noisy-retries).
Checks: the exit status; --verify SHA256SUMS against the run folder (or --check-dir); --expect-files; with --noop,
the number of files whose (inode, mtime, size) the run changed. File counts and the no-op check leave out a `.haul`
folder at the top of the folder checked (haul's lock and state, which every sync rewrites). --check-once: --verify
and --expect-files after the first run only (hashing a large tree again after every run adds nothing). --exact: a
file count other than --expect-files fails the measurement (an extra file is a wrong tree), rather than marking it.
--field KEY=VALUE (repeatable) adds KEY to the record, e.g. the file system measured or a peer's short name.
Appends one JSON object per measurement to --results, prints one line, and logs all output to --log (default
commands.log beside --results). Exit status 1 when the measurement failed.
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")
PRIVATE = ".haul"


def machine_cpu():
    """(busy in process context, irq + softirq, steal), seconds over all CPUs since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2]) / TICK, (v[5] + v[6]) / TICK, (v[7] if len(v) > 7 else 0) / TICK


def wait_quiet(limit, cores=0.15, window=0.5):
    """Wait until the machine used under `cores` CPUs over `window` s; seconds waited, or -1 past `limit`."""
    start = time.monotonic()
    while True:
        before = sum(machine_cpu()[:2])
        time.sleep(window)
        if (sum(machine_cpu()[:2]) - before) / window < cores:
            return time.monotonic() - start
        if time.monotonic() - start > limit:
            return -1


def process_cpu(pidfile):
    """(CPU s of the nginx master in pidfile and its workers, CPU s of kernel threads), from /proc."""
    master = -1
    try:
        master = int(open(pidfile).read().strip()) if pidfile else -1
    except (OSError, ValueError):
        pass
    server = kernel = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        parent, ticks = int(fields[1]), int(fields[11]) + int(fields[12])
        if parent == master or int(entry) == master:
            server += ticks
        elif parent == 2:
            kernel += ticks
    return server / TICK, kernel / TICK


def loopback_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])
    return 0


def walk(root):
    """Every file under root but the private folder at its top."""
    for folder, subfolders, names in os.walk(root):
        if folder == root and PRIVATE in subfolders:
            subfolders.remove(PRIVATE)
        for name in names:
            yield os.path.join(folder, name)


def snapshot(root):
    seen = {}
    for path in walk(root):
        try:
            st = os.lstat(path)
            seen[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    return seen


def wrong_files(sums, root):
    """The paths of a SHA256SUMS list whose file under root is missing or has other bytes."""
    wrong = []
    with open(sums) as f:
        for line in f:
            want, path = line.rstrip("\n").split("  ", 1)
            digest = hashlib.sha256()
            try:
                with open(os.path.join(root, path), "rb") as data:
                    while block := data.read(1 << 20):
                        digest.update(block)
            except OSError:
                wrong.append(path)
                continue
            if digest.hexdigest() != want:
                wrong.append(path)
    return wrong


def shell(command, cwd, log, timeout=None):
    if not command:
        return 0
    with open(log, "ab") as out:
        out.write(f"\n$ {command}\n".encode())
        out.flush()
        return subprocess.run(["bash", "-c", command], cwd=cwd, stdout=out, stderr=out, timeout=timeout).returncode


def gnu_time():
    path = shutil.which(os.environ.get("GNU_TIME", "/usr/bin/time"))
    if not path:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if "GNU" in version.stdout + version.stderr else None


def run_timed(command, cwd, log, timeout, timer):
    """(wall s, exit code, rusage, timed out, peak RSS KiB) of one run."""
    rss_file = None
    argv = list(command)
    if timer:
        fd, rss_file = tempfile.mkstemp(prefix="measure-rss-")
        os.close(fd)
        argv = [timer, "-q", "-f", "%M", "-o", rss_file] + argv
    with open(log, "ab") as out:
        out.write(("\n$ " + " ".join(command) + "\n").encode())
        out.flush()
        start = time.perf_counter()
        child = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=out, start_new_session=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if timeout and time.perf_counter() - start > timeout:
                timed_out = True
                os.killpg(child.pid, signal.SIGKILL)  # the session started for it just above
                pid, status, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    rss = usage.ru_maxrss
    if rss_file:
        try:
            rss = int(open(rss_file).read().split()[-1])
        except (OSError, ValueError, IndexError):
            pass
        os.unlink(rss_file)
    return wall, child.returncode, usage, timed_out, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--kind", default="download", help="download | noop | limit")
    ap.add_argument("--dir", required=True, help="work folder: --setup and --prepare run here")
    ap.add_argument("--run-dir", default=".", help="the command's folder, relative to --dir")
    ap.add_argument("--check-dir", default="", help="the folder the checks look at, relative to --dir "
                    "(default: --run-dir), e.g. the tree a command unpacks beside its download")
    ap.add_argument("--check-once", action="store_true", help="--verify and --expect-files after the first run only")
    ap.add_argument("--exact", action="store_true", help="a file count other than --expect-files fails the measurement")
    ap.add_argument("--field", action="append", default=[], metavar="KEY=VALUE", help="a field added to the record")
    ap.add_argument("--setup", default="", help="bash, once, before the runs")
    ap.add_argument("--prepare", default="", help="bash, before every run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300, help="s one run may take before it is killed")
    ap.add_argument("--files", type=int, default=0, help="files per run (for files/s)")
    ap.add_argument("--bytes", type=int, default=0, help="bytes per run (for MB/s)")
    ap.add_argument("--verify", default="", help="SHA256SUMS to check the run folder against after each run")
    ap.add_argument("--expect-files", type=int, default=-1)
    ap.add_argument("--noop", action="store_true", help="count the files each run changed")
    ap.add_argument("--ok-codes", default="0", help="exit codes that count as success, comma-separated")
    ap.add_argument("--server-pidfile", default="")
    ap.add_argument("--results", required=True)
    ap.add_argument("--log", default="")
    ap.add_argument("--note", default="")
    ap.add_argument("--quiet-wait", type=float, default=float(os.environ.get("QUIET_WAIT", 120)))
    ap.add_argument("--noisy-retries", type=int, default=int(os.environ.get("NOISY_RETRIES", 2)))
    ap.add_argument("--noisy-cores", type=float, default=0.25)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no command")
    ok_codes = {int(code) for code in a.ok_codes.split(",")}
    fields = dict(field.split("=", 1) for field in a.field if "=" in field)
    if len(fields) != len(a.field):
        ap.error("--field takes KEY=VALUE")
    results = os.path.abspath(a.results)
    os.makedirs(os.path.dirname(results), exist_ok=True)
    log = a.log or os.path.join(os.path.dirname(results), "commands.log")
    run_dir = os.path.join(a.dir, a.run_dir)
    check_dir = os.path.join(a.dir, a.check_dir) if a.check_dir else run_dir
    timer = gnu_time()
    rec = {"label": a.label, "scenario": a.scenario, "kind": a.kind, "cmd": command, "files": a.files,
           "bytes": a.bytes, "note": a.note, "runs": [], "status": "ok", "problems": [], "noisy_discarded": 0}
    rec.update({key: value for key, value in fields.items() if key not in rec})

    def problem(status, text):
        rec["status"] = status or rec["status"]
        rec["problems"].append(text)

    try:
        code = shell(a.setup, a.dir, log, timeout=a.timeout * 2 if a.timeout else None)
    except subprocess.TimeoutExpired:
        code = "timeout"
    if code != 0:
        problem("setup-failed", f"setup exit {code}, see {log}")

    checked = False
    while rec["status"] == "ok" and len(rec["runs"]) < a.runs:
        if shell(a.prepare, a.dir, log) != 0:
            problem("prepare-failed", f"prepare failed, see {log}")
            break
        waited = wait_quiet(a.quiet_wait) if a.quiet_wait > 0 else 0
        before = snapshot(check_dir) if a.noop else None
        busy0, irq0, steal0 = machine_cpu()
        (server0, kernel0), lo0 = process_cpu(a.server_pidfile), loopback_bytes()
        load = os.getloadavg()[0]
        wall, code, usage, timed_out, rss = run_timed(command, run_dir, log, a.timeout, timer)
        busy1, irq1, steal1 = machine_cpu()
        (server1, kernel1), lo1 = process_cpu(a.server_pidfile), loopback_bytes()
        cpu = usage.ru_utime + usage.ru_stime
        other = max(0.0, (busy1 - busy0) - cpu - (server1 - server0) - (kernel1 - kernel0))
        run = {"wall": wall, "rc": code, "cpu": cpu, "user": usage.ru_utime, "sys": usage.ru_stime, "rss_kib": rss,
               "server_cpu": server1 - server0, "kthreads": kernel1 - kernel0, "irq": irq1 - irq0,
               "steal": steal1 - steal0, "other_cpu": other, "lo_bytes": lo1 - lo0, "load1": load,
               "quiet_wait": waited, "ok": True}
        number = len(rec["runs"]) + 1
        if timed_out:
            problem("timeout", f"run {number} exceeded {a.timeout:.0f}s and was killed")
        elif code not in ok_codes:
            problem("failed", f"run {number} exit {code}, see {log}")
        check = not (a.check_once and checked)
        checked = True
        if a.verify and check and not timed_out:
            wrong = wrong_files(a.verify, check_dir)
            if wrong:
                with open(log, "a") as out:
                    out.write(f"verify: {len(wrong)} wrong, first: {wrong[:3]}\n")
                problem("verify-failed", f"run {number}: sha256sum -c failed")
        if a.expect_files >= 0 and check:
            run["file_count"] = sum(1 for _ in walk(check_dir))
            if run["file_count"] != a.expect_files:
                problem("wrong-files" if a.exact else None,
                        f"{run['file_count']} files in dir, expected {a.expect_files}")
        if a.noop:
            after = snapshot(check_dir)
            run["rewritten"] = sum(1 for path, seen in after.items() if before.get(path) != seen)
            if run["rewritten"]:
                problem(None, f"no-op run rewrote {run['rewritten']} files")
        run["ok"] = rec["status"] == "ok"
        run["noisy"] = (other > a.noisy_cores * wall and other > 0.05) or waited < 0
        if run["ok"] and run["noisy"] and rec["noisy_discarded"] < a.noisy_retries:
            rec["noisy_discarded"] += 1
            rec.setdefault("discarded", []).append(run)
            continue
        rec["runs"].append(run)

    kept_noisy = sum(1 for run in rec["runs"] if run["noisy"])
    if kept_noisy:
        problem(None, f"{kept_noisy} run(s) kept despite foreign CPU load")
    if rec["status"] == "ok" and rec["problems"]:
        rec["status"] = "ok*"
    good = [run for run in rec["runs"] if run["ok"]]
    if good:
        median = lambda key: statistics.median(run[key] for run in good)
        rec.update(wall_median=median("wall"), wall_min=min(run["wall"] for run in good),
                   wall_max=max(run["wall"] for run in good), cpu_median=median("cpu"),
                   rss_kib_max=max(run["rss_kib"] for run in good), rss_kib_median=median("rss_kib"),
                   server_cpu_median=median("server_cpu"), lo_bytes_median=median("lo_bytes"),
                   other_cpu_median=median("other_cpu"), steal_median=median("steal"), irq_median=median("irq"),
                   kernel_median=median("kthreads") + median("irq"))
    with open(results, "a") as out:
        out.write(json.dumps(rec) + "\n")

    wall = rec.get("wall_median")
    problems = f"  ({'; '.join(rec['problems'])})" if rec["problems"] else ""
    if not wall:
        print(f"{a.scenario:14s} {a.label:44s} FAILED: {rec['status']}{problems}", flush=True)
        return 1
    rates = f"  {a.files / wall:9.0f} files/s" if a.files else ""
    if a.bytes and a.kind != "noop":
        rates += f"  {a.bytes / wall / 1e6:8.1f} MB/s"
    print(f"{a.scenario:14s} {a.label:44s} {wall:8.3f}s [{rec['wall_min']:.3f}..{rec['wall_max']:.3f}]{rates}"
          f"  cpu {rec['cpu_median']:.2f}s  rss {rec['rss_kib_max'] / 1024:.1f} MiB  nginx {rec['server_cpu_median']:.2f}s"
          f"  other {rec['other_cpu_median']:.2f}s  {rec['status']}{problems}", flush=True)
    return 0 if rec["status"].startswith("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
