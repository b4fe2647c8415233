#!/usr/bin/env python3
"""A markdown table of measure.py's records.

usage: report.py RESULTS.jsonl [...]

Wall is the median of the successful runs; spread is (max - min) / median; files/s and MB/s (10^6 bytes) are
per median wall. Client CPU is the command's and its children's; kernel CPU is kernel threads (writeback, journal,
loop devices) plus interrupts, machine-wide; other CPU is what other processes used meanwhile (noise). A record with
an `fs` field (measure.py --field fs=NAME) shows the file system measured beside its scenario.
"""
import json
import sys

ORDER = ["small", "medium", "large", "mixed", "huge-manifest", "archive-large", "archive-small"]


def main():
    records = []
    for path in sys.argv[1:]:
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    records.sort(key=lambda r: ORDER.index(r["scenario"]) if r["scenario"] in ORDER else len(ORDER))
    print("| scenario | measurement | kind | runs | wall median s | spread | files/s | MB/s "
          "| client CPU s | nginx CPU s | kernel CPU s | peak RSS MiB | other CPU s | status |")
    print("|---" * 14 + "|")
    for r in records:
        scenario = r["scenario"] + (f" on {r['fs']}" if r.get("fs") else "")
        label = r["label"].replace("|", "\\|")  # a pipeline's bar would end the cell
        wall = r.get("wall_median")
        if not wall:
            print(f"| {scenario} | {label} | {r['kind']} | 0 |" + " – |" * 9
                  + f" {r['status']}: {'; '.join(r['problems'])} |")
            continue
        runs = sum(1 for run in r["runs"] if run.get("ok"))
        spread = (r["wall_max"] - r["wall_min"]) / wall * 100
        files = f"{r['files'] / wall:,.0f}" if r["files"] else "–"
        mbs = f"{r['bytes'] / wall / 1e6:,.0f}" if r["bytes"] and r["kind"] != "noop" else "–"
        problems = sorted({p.split(": ", 1)[-1] for p in r["problems"]})
        status = r["status"] + (f" ({'; '.join(problems)})" if problems else "") + (f" — {r['note']}" if r.get("note") else "")
        print(f"| {scenario} | {label} | {r['kind']} | {runs} | {wall:.3f} | {spread:.0f}% | {files} | {mbs} "
              f"| {r['cpu_median']:.2f} | {r['server_cpu_median']:.2f} | {r.get('kernel_median', 0):.2f} "
              f"| {r['rss_kib_max'] / 1024:.1f} | {r['other_cpu_median']:.2f} | {status} |")


if __name__ == "__main__":
    main()
