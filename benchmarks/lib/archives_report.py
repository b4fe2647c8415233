#!/usr/bin/env python3
"""The archive benchmark's table: per file system and corpus, each way of getting the tree (wall s / CPU s,
medians) and the ratios the targets are judged by.

usage: archives_report.py RESULTS.jsonl

Reads the measure.py records archives.sh writes, told apart by their `fs` and `peer` fields (peer: pipe, careful,
unpinned, haul, noop, find; haul's record says with `pinned` whether the tree's digest was pinned). The targets
judge wall-time medians: haul / (curl | tar) (target <= 1.1), haul / (curl -o, sha256sum -c, tar -xf) (target
<= 0.6), haul's no-op / find -printf of the same tree (<= 1.5); the same ratio of CPU medians is shown beside it.
A ratio whose parts are missing (haul not measured, a failed measurement) is shown as "–".
"""
import json
import sys

PEERS = ["pipe", "careful", "unpinned", "haul", "noop", "find"]
HEADERS = ["curl \\| tar -x", "curl -o, sha256sum -c, tar -xf", "haul sync, extract: true", "haul sync",
           "haul no-op", "find -printf"]
TARGETS = [("haul", "pipe", 1.1), ("haul", "careful", 0.6), ("noop", "find", 1.5)]
RATIO_HEADERS = ["haul / curl \\| tar (≤ 1.1)", "haul / careful (≤ 0.6)", "no-op / find (≤ 1.5)"]
PINNED = {"yes": "tree: pinned", "no": "extract: true"}
CORPORA = ["archive-large", "archive-small"]


def main():
    with open(sys.argv[1]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    table = {}
    for r in records:  # a later record of the same measurement replaces an earlier one
        table.setdefault((r.get("fs", "?"), r["scenario"]), {})[r.get("peer", r["label"])] = r
    file_systems = list(dict.fromkeys(fs for fs, _ in table))
    keys = sorted(table, key=lambda k: (file_systems.index(k[0]), CORPORA.index(k[1]) if k[1] in CORPORA else 99))

    print("Wall s / CPU s (user + system of the command and its children), medians; ratios of wall time, CPU ratio")
    pinned = sorted({PINNED.get(r.get("pinned"), "?") for r in records if r.get("peer") == "haul"})
    print("in brackets." + (f" haul sync: {', '.join(pinned)}." if pinned else ""))
    print()
    print("| file system | corpus | " + " | ".join(HEADERS + RATIO_HEADERS) + " |")
    print("|---|---|" + "---|" * (len(HEADERS) + len(RATIO_HEADERS)))
    for fs, corpus in keys:
        row = table[(fs, corpus)]

        def wall(peer):
            return row[peer].get("wall_median") if peer in row else None

        def cell(peer):
            if peer not in row:
                return "–"
            r = row[peer]
            if not r.get("wall_median"):
                return f"{r['status']}"
            flag = "" if r["status"] == "ok" else f" ({r['status']})"
            return f"{r['wall_median']:.2f} / {r['cpu_median']:.2f}{flag}"

        def ratio(numerator, denominator, target):
            top, bottom = wall(numerator), wall(denominator)
            if not top or not bottom:
                return "–"
            value = top / bottom
            cpu = row[numerator]["cpu_median"] / max(row[denominator]["cpu_median"], 1e-6)
            return f"{value:.2f} {'met' if value <= target else 'missed'} [{cpu:.2f}]"

        cells = [cell(peer) for peer in PEERS] + [ratio(*target) for target in TARGETS]
        print(f"| {fs} | {corpus} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
