#!/usr/bin/env python3
"""The archive benchmark's table: per file system and corpus, each way of getting the tree (wall s / CPU s,
medians) and the ratios the targets are judged by.

usage: archives_report.py RESULTS.jsonl

Reads the measure.py records archives.sh writes, told apart by their `fs` and `peer` fields (peer: pipe, careful,
haul, haul-tree, noop, find). Ratios are of wall-time medians: haul / (curl | tar) (target <= 1.1),
haul / (curl -o, sha256sum -c, tar -xf) (target <= 0.6), haul's no-op / find -printf of the same tree (<= 1.5).
A ratio whose parts are missing (haul not measured, a failed measurement) is shown as "–".
"""
import json
import sys

PEERS = ["pipe", "careful", "haul", "haul-tree", "noop", "find"]
HEADERS = ["curl \\| tar -x", "curl -o, sha256sum -c, tar -xf", "haul sync", "haul sync, tree pinned",
           "haul no-op", "find -printf"]
TARGETS = [("haul", "pipe", 1.1), ("haul", "careful", 0.6), ("noop", "find", 1.5)]
RATIO_HEADERS = ["haul / curl \\| tar (≤ 1.1)", "haul / careful (≤ 0.6)", "no-op / find (≤ 1.5)"]
CORPORA = ["archive-large", "archive-small"]


def main():
    with open(sys.argv[1]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    table = {}
    for r in records:  # a later record of the same measurement replaces an earlier one
        table.setdefault((r.get("fs", "?"), r["scenario"]), {})[r.get("peer", r["label"])] = r
    file_systems = list(dict.fromkeys(fs for fs, _ in table))
    keys = sorted(table, key=lambda k: (file_systems.index(k[0]), CORPORA.index(k[1]) if k[1] in CORPORA else 99))

    print("Wall s / CPU s (user + system of the client and its children), medians; ratios of wall time.")
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
            text = f"{value:.2f} {'met' if value <= target else 'missed'}"
            pinned = wall("haul-tree") if numerator == "haul" else None
            return text + (f" (pinned {pinned / bottom:.2f})" if pinned else "")

        cells = [cell(peer) for peer in PEERS] + [ratio(*target) for target in TARGETS]
        print(f"| {fs} | {corpus} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
