#!/usr/bin/env bash
# What a root filled from the content cache (`haul sync --cache DIR`) costs next to `cp -r` of the same tree, on tmpfs.
#
#   benchmarks/cache-fill.sh [SCENARIO ...]        default: large huge-manifest
#
# Per scenario (the corpora of benchmarks/harness, generated under $BENCH_DATA):
#   1. the cache is filled once by haul, syncing from the harness's nginx (untimed);
#   2. timed, RUNS times each, interleaved, after an untimed `rm -rf` + `sync` of the target:
#        cp -r of the tree (a copy of the corpus files on tmpfs, as the synced tree holds them) into a fresh directory;
#        haul sync --cache CACHE of a manifest whose URLs point at a request-counting server, into a fresh empty root;
#      each haul run's root is checked file by file (sha256sum -c) afterwards, untimed;
#   3. prints medians of wall and CPU (user+sys of the command and its children), the ratio haul/cp, and the number
#      of requests the counting server saw during the haul runs (must be 0: every file came from the cache).
# Cache, trees and roots all live on tmpfs (BENCH_WORK), so both commands read and write the same file system.
#
# Env: BENCH (default benchmarks/harness), BENCH_DATA (default /tmp/bench-data), BENCH_WORK (default /dev/shm/haul-cache-fill),
# RUNS (5), JOBS (16), PORT (18280, the harness's nginx), COUNT_PORT (PORT+2), HAUL (a binary to measure instead of building
# the release one), KEEP=1 to keep BENCH_WORK afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx python3 sha256sum
[ $# -gt 0 ] || set -- large huge-manifest

if [ -z "${HAUL:-}" ]; then
  echo "cache-fill.sh: swift build -c release --product haul"
  (cd "$HERE" && swift build -c release --product haul >/dev/null)
  HAUL=$HERE/.build/release/haul
fi
export BENCH_DATA=${BENCH_DATA:-/tmp/bench-data}
BENCH_WORK=${BENCH_WORK:-/dev/shm/haul-cache-fill}
RUNS=${RUNS:-5} JOBS=${JOBS:-16} PORT=${PORT:-18280}
COUNT_PORT=${COUNT_PORT:-$((PORT + 2))}
export TLS_PORT=0
export BENCH_STATE=${BENCH_STATE:-/tmp/haul-bench-nginx-$(id -u)-$PORT}
mkdir -p "$BENCH_WORK"
ACCESS=$BENCH_WORK/access.log

python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" "$@" >/dev/null
STARTED_NGINX=0
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "cache-fill.sh: using the server already listening on port $PORT"
else
  "$BENCH/server.sh" start "$BENCH_DATA/corpus" "$PORT" >/dev/null
  STARTED_NGINX=1
fi
: > "$ACCESS"
python3 "$HERE/benchmarks/lib/countserver.py" "$BENCH_DATA/corpus" "$COUNT_PORT" "$ACCESS" 2>/dev/null &
COUNT_PID=$!
cleanup() {
  kill "$COUNT_PID" 2>/dev/null || true
  [ "$STARTED_NGINX" = 1 ] && "$BENCH/server.sh" stop "$PORT" >/dev/null 2>&1 || true
  [ "${KEEP:-0}" = 1 ] || rm -rf "$BENCH_WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$COUNT_PORT") 2>/dev/null && break; sleep 0.1; done
requests() { grep -c '^req ' "$ACCESS" || true; }

# One timed run: prints "wall cpu" (seconds) of CMD, run in DIR; CPU is user+sys of CMD and its children.
timed() { python3 "$HERE/benchmarks/lib/timed.py" "$@"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

SUMMARY=$BENCH_WORK/summary.txt
: > "$SUMMARY"
for sc in "$@"; do
  C=$BENCH_DATA/corpus/$sc
  W=$BENCH_WORK/$sc
  rm -rf "$W" && mkdir -p "$W"
  NF=$(wc -l < "$C/index.tsv")
  python3 "$BENCH/manifest.py" "$C" "http://127.0.0.1:$PORT/$sc/files" "$W/fill" --root ../seed >/dev/null
  python3 "$BENCH/manifest.py" "$C" "http://127.0.0.1:$COUNT_PORT/$sc/files" "$W/counted" --root ../dl >/dev/null
  echo "== $sc ($NF files): filling the cache from nginx"
  "$HAUL" sync "$W/fill/manifest.yaml" --jobs "$JOBS" --cache "$W/cache" --quiet
  "$HAUL" cache info --cache "$W/cache"
  # The tree cp copies: the synced files without haul's private folder.
  cp -r "$W/seed" "$W/tree" && rm -rf "$W/tree/.haul"
  : > "$W/cp.txt"; : > "$W/haul.txt"
  before=$(requests)
  for run in $(seq "$RUNS"); do
    rm -rf "$W/cpdl" && sync
    timed "$W" cp -r "$W/tree" "$W/cpdl" >> "$W/cp.txt"
    rm -rf "$W/dl" && mkdir "$W/dl" && sync
    timed "$W/dl" "$HAUL" sync ../counted/manifest.yaml --jobs "$JOBS" --cache "$W/cache" --quiet >> "$W/haul.txt"
    (cd "$W/dl" && sha256sum --quiet -c "$C/SHA256SUMS") || { echo "cache-fill.sh: run $run: wrong bytes in $W/dl" >&2; exit 1; }
    echo "  run $run: cp $(tail -1 "$W/cp.txt"), haul $(tail -1 "$W/haul.txt") (wall cpu, s)"
  done
  during=$(( $(requests) - before ))
  cp_wall=$(cut -d' ' -f1 "$W/cp.txt" | median); cp_cpu=$(cut -d' ' -f2 "$W/cp.txt" | median)
  haul_wall=$(cut -d' ' -f1 "$W/haul.txt" | median); haul_cpu=$(cut -d' ' -f2 "$W/haul.txt" | median)
  ratio=$(awk -v a="$haul_wall" -v b="$cp_wall" 'BEGIN {printf "%.2f", a / b}')
  line=$(printf '%-14s cp -r: wall %6.3f s cpu %6.3f s | haul sync --cache: wall %6.3f s cpu %6.3f s | ratio %s× | requests during cache fills: %d' \
    "$sc" "$cp_wall" "$cp_cpu" "$haul_wall" "$haul_cpu" "$ratio" "$during")
  echo "$line" | tee -a "$SUMMARY"
  rm -rf "$W/cpdl" "$W/dl" "$W/seed"
done
echo
echo "cache-fill.sh: medians of $RUNS runs ($HAUL, $(cd "$HERE" && git rev-parse --short HEAD))"
cat "$SUMMARY"
