#!/usr/bin/env python3
"""Compact table and target verdicts from local-state.sh's results.

usage: local_state_report.py RESULTS.jsonl PROOF.jsonl TIMED.jsonl JOBS

RESULTS.jsonl: measure.py records (the harness's peers.sh's and local-state.sh's own); PROOF.jsonl: noop_proof.py
records; TIMED.jsonl: requests the counting server saw during each counted timed measurement (all its runs).
Ratios are wall-time medians over curl --parallel's median (same scenario, same run of the script).
"""
import json
import statistics
import sys

ORDER = ["large", "huge-manifest"]


def load(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []


def main():
    recs, proofs, timed, jobs = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3]), sys.argv[4]
    curl_label = f"curl --parallel-max {jobs} (no hash check)"
    haul_label = f"haul sync --jobs {jobs}"
    scenarios = sorted({r["scenario"] for r in recs} | {p["scenario"] for p in proofs},
                       key=lambda s: (ORDER.index(s) if s in ORDER else 99, s))

    def find(sc, label):
        for r in reversed(recs):  # the last measurement of that label wins (a re-run appends)
            if r["scenario"] == sc and r["label"] == label:
                return r
        return None

    def proof(sc, mode):
        for p in reversed(proofs):
            if p["scenario"] == sc and p["mode"] == mode:
                return p
        return None

    out = []
    out.append("| scenario | measurement | runs | wall s median [min..max] | × curl | CPU s | peak RSS MiB | steal s | status |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for sc in scenarios:
        curl = find(sc, curl_label)
        warm = proof(sc, "warm")
        for r in [r for r in recs if r["scenario"] == sc]:
            w = r.get("wall_median")
            ok = [x for x in r["runs"] if x.get("ok")]
            if not w:
                out.append(f"| {sc} | {r['label']} | 0 | – | – | – | – | – | {r['status']}: {'; '.join(r['problems'])} |")
                continue
            ratio = f"{w / curl['wall_median']:.2f}" if curl and curl.get("wall_median") else "–"
            probs = sorted(set(p.split(": ", 1)[-1] for p in r["problems"]))
            notes = []
            for p in probs:
                # measure.py counts haul's .haul/lock (holder line rewritten by every sync) as a rewritten file;
                # say so only when noop_proof.py saw exactly that and nothing else.
                if p == "no-op run rewrote 1 files" and r["label"].startswith("haul no-op: sync") and warm \
                        and warm["user_files_changed"] == 0 and warm["private_changed"] == [".haul/lock"]:
                    notes.append("\"rewrote 1 files\" = .haul/lock only (run lock's holder line; user files untouched, see proofs)")
                else:
                    notes.append(p)
            if r.get("noisy_discarded"):
                notes.append(f"{r['noisy_discarded']} disturbed run(s) discarded and repeated")
            status = r["status"] + (f" ({'; '.join(notes)})" if notes else "")
            out.append(f"| {sc} | {r['label']} | {len(ok)} | {w:.3f} [{r['wall_min']:.3f}..{r['wall_max']:.3f}] | {ratio} "
                       f"| {r['cpu_median']:.2f} | {r['rss_kib_max'] / 1024:.1f} | {r.get('steal_median', 0):.2f} | {status} |")

    out.append("")
    out.append("| scenario | proof run (untimed, one run) | exit | requests in access log | connect() (strace) | user files changed | .haul changed | verdict |")
    out.append("|---|---|---|---|---|---|---|---|")
    for p in sorted(proofs, key=lambda p: (scenarios.index(p["scenario"]), ["warm", "plan", "nostate", "control"].index(p["mode"]))):
        sc = p["inet_connects"] if p["inet_connects"] is not None else "n/a"
        out.append(f"| {p['scenario']} | {p['mode']}: {' '.join(p['cmd'])} | {p['exit']} | {p['requests']} | {sc} "
                   f"| {p['user_files_changed']} of {p['user_files']} | {', '.join(p['private_changed']) or 'nothing'} "
                   f"| {'OK' if p['ok'] else 'FAIL: ' + '; '.join(p['problems'])} |")

    if timed:
        out.append("")
        out.append("Requests the counting server saw during the timed counted runs (all runs, incl. discarded ones): "
                   + "; ".join(f"{t['scenario']} / {t['label']}: {t['requests']}" for t in timed))

    out.append("")
    out.append("Targets:")

    def verdict(ok, text):
        out.append(f"- **{'MET' if ok else 'MISSED'}** {text}")

    def med(r):
        return r.get("wall_median") if r else None

    for sc, limit in (("large", 0.1), ("huge-manifest", 1.0)):
        if sc not in scenarios:
            continue
        counted = find(sc, "haul no-op: sync again, requests counted")
        uncounted = find(sc, "haul no-op: sync again")
        rows = [(n, x) for n, x in (("counted", counted), ("peers.sh", uncounted)) if med(x)]
        if rows:
            verdict(max(med(x) for _, x in rows) < limit, f"{sc}: no-op sync with the state warm under {limit} s wall: "
                    + ", ".join(f"{med(x):.3f} s ({n})" for n, x in rows))
        if sc == "huge-manifest":
            if rows:
                rss = max(x["rss_kib_max"] for _, x in rows) / 1024
                verdict(rss < 200, f"{sc}: no-op peak RSS under 200 MiB: {rss:.1f} MiB")
            h, c = find(sc, haul_label), find(sc, curl_label)
            if med(h) and med(c):
                # On this shared VM a tool's runs can all land in a slow phase. measure.py discards runs with foreign
                # CPU load in the guest, but not hypervisor steal (CPU time taken from the guest, which inflates wall
                # time without showing as load): the verdict uses runs whose steal was under 5% of their wall time,
                # and otherwise asks for medians and best runs to agree.
                def clean(r):
                    return [x["wall"] for x in r["runs"] if x.get("ok") and x.get("steal", 0) <= 0.05 * x["wall"]]
                ch, cc = clean(h), clean(c)
                by_med, by_min = med(h) / med(c), h["wall_min"] / c["wall_min"]
                text = (f"{sc}: first full sync (every hash verified) no slower than curl --parallel (unverified): "
                        f"median haul {med(h):.2f} s vs curl {med(c):.2f} s = {by_med:.2f}x, best runs "
                        f"{h['wall_min']:.2f} vs {c['wall_min']:.2f} s = {by_min:.2f}x")
                if ch and cc:
                    by_clean = statistics.median(ch) / statistics.median(cc)
                    text += (f", runs without steal ({len(ch)} haul, {len(cc)} curl): {statistics.median(ch):.2f} vs "
                             f"{statistics.median(cc):.2f} s = {by_clean:.2f}x")
                text += (f"; client CPU {h['cpu_median']:.2f} vs {c['cpu_median']:.2f} s; peak RSS haul "
                         f"{h['rss_kib_max'] / 1024:.0f} MiB, curl {c['rss_kib_max'] / 1024:.0f} MiB")
                if ch and cc:
                    verdict(by_clean <= 1, text)
                elif (by_med <= 1) == (by_min <= 1):
                    verdict(by_med <= 1, text)
                else:
                    out.append(f"- **UNDECIDED (noise: median and best runs disagree; re-run)** {text}")
        ns, ctl = proof(sc, "nostate"), proof(sc, "control")
        nsr = find(sc, "haul no-op: .haul/state deleted (re-hash), requests counted")
        t = [x for x in timed if x["scenario"] == sc and x["label"] == (nsr or {}).get("label")]
        if ns:
            ok = ns["ok"] and (ctl is None or ctl["ok"]) and all(x["requests"] == 0 for x in t)
            verdict(ok, f"{sc}: after deleting .haul/state the sync re-hashes and makes no request: "
                    + (f"{med(nsr):.3f} s median; " if med(nsr) else "")
                    + f"requests: {', '.join(str(x['requests']) for x in t) or '?'} over the timed runs, "
                    f"{ns['requests']} + connect() {ns['inet_connects']} in the proof run; state written again: "
                    f"{'yes' if '.haul/state' in ns['private_changed'] else 'NO'}; positive control (1 file deleted): "
                    f"{ctl['requests'] if ctl else '?'} request(s)")
    return "\n".join(out)


if __name__ == "__main__":
    print(main())
