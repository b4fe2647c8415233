#!/usr/bin/env bash
# Shards of one root at once against one unsharded run, on the harness in benchmarks/harness (corpus, private
# nginx on 127.0.0.1). One command:
#
#   benchmarks/shards.sh [SCENARIO]          default: huge-manifest (100,000 files)
#
# Per run (RUNS, default 5, interleaved so that the machine's drift hits both alike), on BENCH_WORK (tmpfs by
# default):
#   first:  one `haul sync` into an empty root  vs  SHARDS (default 4) `haul sync --shard K/N` started at once
#           into another empty root (wall: until the last shard exits; CPU: all of them)
#   no-op:  `haul sync` again on the synced root  vs  one `haul sync --shard 1/N` on it
# and then checks that the sharded root holds exactly the unsharded one's files (sha256sum -c of the corpus).
# Prints medians and the ratios the targets are judged by: sharded first ≤ 1.0 × unsharded; shard no-op ≤
# unsharded no-op / N + 0.1 s.
#
# Env: BENCH (benchmarks/harness), BENCH_DATA (corpora, default $TMPDIR or /tmp + /bench-data), BENCH_WORK
# (/dev/shm/haul-shards), RUNS (5), SHARDS (4), JOBS (16), SHARD_JOBS (--jobs of each shard, default JOBS),
# PORT (18380).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx python3 sha256sum
SCENARIO=${1:-huge-manifest}
RUNS=${RUNS:-5} SHARDS=${SHARDS:-4} JOBS=${JOBS:-16} PORT=${PORT:-18380}
SHARD_JOBS=${SHARD_JOBS:-$JOBS}
export BENCH_DATA=${BENCH_DATA:-${TMPDIR:-/tmp}/bench-data}
WORK=${BENCH_WORK:-/dev/shm/haul-shards}
export BENCH_STATE=${TMPDIR:-/tmp}/haul-shards-nginx-$PORT TLS_PORT=0

cd "$HERE"
swift build -c release --product haul >/dev/null
HAUL=$HERE/.build/release/haul
python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" "$SCENARIO" >/dev/null
"$BENCH/server.sh" start "$BENCH_DATA/corpus" "$PORT" >/dev/null
trap '"$BENCH/server.sh" stop "$PORT" >/dev/null 2>&1 || true' EXIT
rm -rf "$WORK" && mkdir -p "$WORK"
python3 "$BENCH/manifest.py" "$BENCH_DATA/corpus/$SCENARIO" "http://127.0.0.1:$PORT/$SCENARIO/files" "$WORK/one" --root ./dl >/dev/null
python3 "$BENCH/manifest.py" "$BENCH_DATA/corpus/$SCENARIO" "http://127.0.0.1:$PORT/$SCENARIO/files" "$WORK/sharded" --root ./dl >/dev/null

# Wall and CPU (user + system of every child) of a shell command, as "wall cpu".
measure() { python3 "$HERE/benchmarks/lib/timed.py" "$WORK" bash -c "$1"; }

UNSHARDED="'$HAUL' sync '$WORK/one/manifest.yaml' --jobs $JOBS --quiet"
SHARDED="for k in \$(seq 1 $SHARDS); do '$HAUL' sync '$WORK/sharded/manifest.yaml' --jobs $SHARD_JOBS --quiet --shard \$k/$SHARDS & done; \
status=0; for job in \$(jobs -p); do wait \$job || status=1; done; exit \$status"
SHARD_NOOP="'$HAUL' sync '$WORK/sharded/manifest.yaml' --jobs $JOBS --quiet --shard 1/$SHARDS"

: > "$WORK/runs.txt"
for run in $(seq 1 "$RUNS"); do
  rm -rf "$WORK/one/dl" "$WORK/sharded/dl"
  sync; sleep 1
  echo "first-one $(measure "$UNSHARDED")" >> "$WORK/runs.txt"
  sync; sleep 1
  echo "first-sharded $(measure "$SHARDED")" >> "$WORK/runs.txt"
  # Let the state settle (records as recent as the state are proved by hashing once more), then the no-ops.
  "$HAUL" sync "$WORK/one/manifest.yaml" --quiet && "$HAUL" sync "$WORK/sharded/manifest.yaml" --quiet
  echo "noop-one $(measure "$UNSHARDED")" >> "$WORK/runs.txt"
  echo "noop-shard $(measure "$SHARD_NOOP")" >> "$WORK/runs.txt"
  echo "run $run: $(tail -4 "$WORK/runs.txt" | tr '\n' ' ')"
done
(cd "$WORK/sharded/dl" && sha256sum -c --quiet "$BENCH_DATA/corpus/$SCENARIO/SHA256SUMS") \
  && echo "sharded root: every file of the corpus, verified"
diff <(cd "$WORK/one/dl" && find . -path ./.haul -prune -o -type f -print | sort) \
     <(cd "$WORK/sharded/dl" && find . -path ./.haul -prune -o -type f -print | sort) >/dev/null \
  && echo "sharded root: the same file list as the unsharded one"

python3 - "$WORK/runs.txt" "$SHARDS" "$SCENARIO" "$RUNS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, wall, cpu = line.split()
    rows.setdefault(name, []).append((float(wall), float(cpu)))
med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in rows.items()}
n = int(sys.argv[2])
print(f"\n{sys.argv[3]}, {n} shards, median of {sys.argv[4]} (wall s / CPU s):")
for name, label in [("first-one", "first sync, unsharded"), ("first-sharded", f"first sync, {n} shards at once"),
                    ("noop-one", "no-op, unsharded"), ("noop-shard", f"no-op, one shard of {n}")]:
    print(f"  {label:32} {med[name][0]:7.2f} {med[name][1]:7.2f}")
ratio = med["first-sharded"][0] / med["first-one"][0]
bound = med["noop-one"][0] / n + 0.1
print(f"  {n} shards / unsharded, first sync: {ratio:.2f}x (target <= 1.0)")
print(f"  shard no-op {med['noop-shard'][0]:.2f} s vs unsharded/{n} + 0.1 s = {bound:.2f} s")
EOF
