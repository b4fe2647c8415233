#!/usr/bin/env bash
# The local-state performance targets in one command: what a sync costs when (almost) everything is already on disk, next
# to curl --parallel, on the harness in benchmarks/harness (corpus, private nginx on 127.0.0.1, lib/measure.py:
# wall, CPU, peak RSS by GNU time, runs disturbed by other load discarded and repeated).
#
#   benchmarks/local-state.sh [SCENARIO ...]        default: huge-manifest large
#
# Measures, per scenario, all in one run:
#   1. first full sync: `haul sync --jobs 16` (verifies every hash) vs `curl --parallel` (no check) and
#      curl + sha256sum -c: the harness's peers.sh with PEERS="curl haul", which also gives
#   2. the no-op re-sync with the state cache warm ("haul no-op: sync again") and
#   4. `haul plan` ("haul no-op: plan (exit 0)"); then this script adds
#   2'. the same no-op against a request-counting server (lib/countserver.py), with the floors it is judged by:
#      a Python stat() of every file (the harness's lib/statwalk.py) and `cp -r` of the tree;
#   3. the no-op after deleting <root>/.haul/state (every file re-hashed), also against the counting server;
#   and untimed proof runs (lib/noop_proof.py): no request (server access log and strace connect()), no user
#   file rewritten, what changed under .haul/, and a positive control (one file deleted -> exactly 1 request).
# Why a second server: the harness's nginx runs with `access_log off`, so it cannot count requests. The counted
# manifest is the same file list (same dest/sha256/size, root ../dl) with the counting server's host:port in
# the URLs; haul keeps a file whose hash matches whatever its URL, so only "did it ask" differs.
#
# Env: BENCH (default benchmarks/harness), BENCH_WORK (default /dev/shm/haul-local-state: tmpfs; on ext4 without a
# journal see benchmarks/harness/README.md), RUNS (3), JOBS (16), PORT (18180; TLS on PORT+1, counting server on
# COUNT_PORT=PORT+2), QUIET_WAIT (30), NOISY_RETRIES (4), PEERS (default "curl haul"), RESULTS (default
# benchmarks/results/local-state-<timestamp>, git-ignored), and whatever the harness's peers.sh reads. Needs nginx,
# curl, openssl, GNU time and strace (installed when missing and run as root with apt).
# Prints the harness's report, then a compact table with ratios vs curl and the verdicts against the targets
# (summary.md).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx curl python3 sha256sum -- openssl time strace
LIB=$HERE/benchmarks/lib
[ $# -gt 0 ] || set -- huge-manifest large

cd "$HERE"
echo "local-state.sh: swift build -c release --product haul"
swift build -c release --product haul >/dev/null
HAUL_BIN=$HERE/.build/release/haul

export BENCH_DATA=${BENCH_DATA:-${TMPDIR:-/tmp}/bench-data}
export BENCH_WORK=${BENCH_WORK:-/dev/shm/haul-local-state}
export RUNS=${RUNS:-3} JOBS=${JOBS:-16} PORT=${PORT:-18180} TIMEOUT=${TIMEOUT:-300}
export TLS_PORT=$((PORT + 1))
COUNT_PORT=${COUNT_PORT:-$((PORT + 2))}
export PEERS=${PEERS:-curl haul}
export CURL_SCALE=${CURL_SCALE-}
export QUIET_WAIT=${QUIET_WAIT:-30} NOISY_RETRIES=${NOISY_RETRIES:-4}
export RESULTS=${RESULTS:-$HERE/benchmarks/results/local-state-$(date +%Y%m%d-%H%M%S)}
export BENCH_STATE=${BENCH_STATE:-${TMPDIR:-/tmp}/haul-bench-nginx-$(id -u)-$PORT}
mkdir -p "$RESULTS" "$BENCH_WORK"
RESULTS=$(cd "$RESULTS" && pwd)
JSONL=$RESULTS/results.jsonl
PROOF=$RESULTS/proof.jsonl
TIMED=$RESULTS/timed-requests.jsonl
ACCESS=$RESULTS/access.log
LOG=$RESULTS/commands.log
{
  echo "haul: $HAUL_BIN, commit $(git rev-parse --short HEAD) on $(git rev-parse --abbrev-ref HEAD)"
  git status --short -- Sources Package.swift | sed 's/^/  uncommitted: /'
} > "$RESULTS/env-haul.txt"
cat "$RESULTS/env-haul.txt"

# One nginx for everything (the harness's peers.sh uses a running one and leaves it running), plus the counting server.
python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" "$@"
# server.sh refuses (exit 1) to start a second nginx on the port: one left running by an earlier run serves as well.
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "local-state.sh: using the server already listening on port $PORT"
else
  "$BENCH/server.sh" start "$BENCH_DATA/corpus" "$PORT"
fi
: > "$ACCESS"
python3 "$LIB/countserver.py" "$BENCH_DATA/corpus" "$COUNT_PORT" "$ACCESS" 2>>"$LOG" &
COUNT_PID=$!
cleanup() {
  kill "$COUNT_PID" 2>/dev/null || true
  "$BENCH/server.sh" stop "$PORT" >/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$COUNT_PORT") 2>/dev/null && break; sleep 0.1; done
sleep 0.3
grep -q '^conn ' "$ACCESS" || { echo "local-state.sh: counting server not logging on port $COUNT_PORT" >&2; exit 1; }
: > "$ACCESS"  # the readiness probe's connection is not haul's (the server appends with O_APPEND: safe to truncate)

# 1, 2, 4: first sync vs curl, warm no-op, plan (the harness's peers.sh, as benchmarks/peers.sh uses it)
HAUL=$HAUL_BIN "$BENCH/peers.sh" "$@"

requests() { grep -c '^req ' "$ACCESS" || true; }
for sc in "$@"; do
  W=$BENCH_WORK/$sc
  C=$BENCH_DATA/corpus/$sc
  NF=$(wc -l < "$C/index.tsv")
  NB=$(awk -F'\t' '{s += $2} END {printf "%d", s}' "$C/index.tsv")
  echo "== $sc: no-op runs (local-state.sh)"
  python3 "$BENCH/manifest.py" "$C" "http://127.0.0.1:$COUNT_PORT/$sc/files" "$W/counted" --root ../dl >/dev/null
  m() {
    python3 "$BENCH/lib/measure.py" --scenario "$sc" --dir "$W" --files "$NF" --bytes "$NB" --runs "$RUNS" \
      --timeout "$TIMEOUT" --server-pidfile "$BENCH_STATE/nginx.pid" --results "$JSONL" "$@" || true
  }
  proof() {
    python3 "$LIB/noop_proof.py" --haul "$HAUL_BIN" --manifest ../counted/manifest.yaml --dir "$W/dl" \
      --access-log "$ACCESS" --index "$C/index.tsv" --scenario "$sc" --results "$PROOF" --strace --mode "$1" || true
  }
  timed_counted() {  # measure.py ... with the access log's growth over all its runs recorded
    local label=$1 before after
    before=$(requests)
    m --label "$label" "${@:2}"
    after=$(requests)
    printf '{"scenario": "%s", "label": "%s", "requests": %d}\n' "$sc" "$label" $((after - before)) >> "$TIMED"
  }

  # Floors: what any tool pays to copy the tree, and to stat() every file from Python (the reference floors).
  m --kind limit --label "limit: cp -r corpus (local, no network)" --prepare 'rm -rf cpdl && mkdir cpdl && sync' \
    --run-dir cpdl --verify "$W/SHA256SUMS" --expect-files "$NF" -- cp -r "$C/files/." .
  rm -rf "$W/cpdl"

  # haul's tree: one fresh sync from nginx, untimed (the timed ones are peers.sh's "haul sync" rows).
  echo "\$ (fresh) haul sync ../manifest.yaml in $W/dl" >> "$LOG"
  (rm -rf "$W/dl" && mkdir "$W/dl" && cd "$W/dl" && "$HAUL_BIN" sync ../manifest.yaml --jobs "$JOBS") >> "$LOG" 2>&1
  m --kind limit --label "limit: stat every file, check size" -- python3 "$BENCH/lib/statwalk.py" "$C/index.tsv" dl

  proof warm
  proof plan
  # No --noop / --expect-files here: the proof runs above and below check the user files and .haul apart.
  # --verify still hashes every file after each run.
  timed_counted "haul no-op: sync again, requests counted" --kind noop --prepare sync --run-dir dl \
    --verify "$W/SHA256SUMS" -- "$HAUL_BIN" sync ../counted/manifest.yaml --jobs "$JOBS"
  timed_counted "haul no-op: .haul/state deleted (re-hash), requests counted" --kind noop \
    --prepare 'rm -f dl/.haul/state && sync' --run-dir dl \
    --verify "$W/SHA256SUMS" -- "$HAUL_BIN" sync ../counted/manifest.yaml --jobs "$JOBS"
  proof nostate
  proof control   # last: it re-fetches one file
done

python3 "$BENCH/lib/report.py" "$JSONL" > "$RESULTS/report.md"
python3 "$LIB/local_state_report.py" "$JSONL" "$PROOF" "$TIMED" "$JOBS" > "$RESULTS/summary.md"
echo
cat "$RESULTS/summary.md"
echo
echo "local-state.sh: results in $RESULTS (summary.md, report.md, results.jsonl, proof.jsonl, access.log, commands.log)"
