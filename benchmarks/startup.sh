#!/usr/bin/env bash
# What the self-contained binary (scripts/install.sh: --static-swift-stdlib, no Foundation in haul's own code)
# changes next to a plain `swift build -c release` binary, which loads the Swift runtime and Foundation from the
# toolchain's folder at every start:
#
#   benchmarks/startup.sh
#
# Prints each binary's size (and stripped, as installed), then, interleaved RUNS times: the wall time of 100
# `haul --version` and of 20 no-op syncs of the `large` corpus (both files in place, so no request is made).
#
# Env: BENCH (benchmarks/harness), BENCH_DATA (/tmp/bench-data), BENCH_WORK (/dev/shm/haul-startup), RUNS (5),
# BEFORE (another haul binary to measure beside them, e.g. one built from an older commit).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
RUNS=${RUNS:-5} BENCH_WORK=${BENCH_WORK:-/dev/shm/haul-startup}
export BENCH_DATA=${BENCH_DATA:-/tmp/bench-data}

rm -rf "$BENCH_WORK" && mkdir -p "$BENCH_WORK"
(cd "$HERE" && swift build -c release --product haul >/dev/null && bash scripts/install.sh "$BENCH_WORK/prefix" >/dev/null)
cp "$HERE/.build/release/haul" "$BENCH_WORK/haul-dynamic"
dynamic=$BENCH_WORK/haul-dynamic static=$BENCH_WORK/prefix/bin/haul before=${BEFORE:-}
names="dynamic static"
[ -z "$before" ] || names="before $names"
strip -o "$BENCH_WORK/haul-dynamic-stripped" "$dynamic"

# The large corpus, synced once from files on disk: the runs below find both files in place.
python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" large >/dev/null
python3 "$BENCH/manifest.py" "$BENCH_DATA/corpus/large" "http://127.0.0.1:9/large/files" "$BENCH_WORK" --root ./dl >/dev/null
mkdir -p "$BENCH_WORK/dl" && cp -r "$BENCH_DATA/corpus/large/files/." "$BENCH_WORK/dl/"
"$static" sync "$BENCH_WORK/manifest.yaml" --quiet --rehash

loop() { # binary count arguments...
  local binary=$1 count=$2; shift 2
  python3 "$HERE/benchmarks/lib/timed.py" "$BENCH_WORK" bash -c \
    'binary=$1 count=$2; shift 2; for _ in $(seq "$count"); do "$binary" "$@" >/dev/null || exit 1; done' \
    loop "$binary" "$count" "$@"
}
results=$BENCH_WORK/runs.txt
for run in $(seq 1 "$RUNS"); do
  for name in $names; do
    binary=${!name}
    echo "$name version $(loop "$binary" 100 --version)" >> "$results"
    echo "$name noop $(loop "$binary" 20 sync manifest.yaml --quiet)" >> "$results"
  done
done

python3 - "$results" "$RUNS" "$dynamic" "$BENCH_WORK/haul-dynamic-stripped" "$static" "$before" <<'PY'
import os, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, what, wall, cpu = line.split()
    rows.setdefault((name, what), []).append(float(wall))
mib = lambda path: os.path.getsize(path) / 1048576
print(f"\nstartup.sh: medians of {sys.argv[2]} runs; per invocation in ms")
print("| binary | size (stripped) | needs the toolchain | `haul --version` | no-op sync of `large` |")
print("|---|---|---|---|---|")
if sys.argv[6]:
    print(f"| BEFORE ({sys.argv[6]}) | {mib(sys.argv[6]):.1f} MiB | yes | "
          f"{statistics.median(rows[('before', 'version')]) * 10:.1f} | {statistics.median(rows[('before', 'noop')]) * 50:.1f} |")
print(f"| swift build -c release | {mib(sys.argv[3]):.1f} MiB ({mib(sys.argv[4]):.1f} MiB) | yes | "
      f"{statistics.median(rows[('dynamic', 'version')]) * 10:.1f} | {statistics.median(rows[('dynamic', 'noop')]) * 50:.1f} |")
print(f"| scripts/install.sh (static) | {mib(sys.argv[5]):.1f} MiB (installed stripped) | no | "
      f"{statistics.median(rows[('static', 'version')]) * 10:.1f} | {statistics.median(rows[('static', 'noop')]) * 50:.1f} |")
PY
rm -rf "$BENCH_WORK"
