#!/usr/bin/env bash
# Two builds of haul side by side on the corpora of benchmarks/harness (private nginx on 127.0.0.1),
# runs interleaved, medians and ratios: how a change moved the figures users see.
#
#   benchmarks/compare-builds.sh OLD_HAUL NEW_HAUL [SCENARIO ...]     default: small large huge-manifest
#
# Env: BENCH (default benchmarks/harness), BENCH_WORK (default /dev/shm/haul-compare: tmpfs; point it at a journaled
# ext4 to measure there), RUNS (5), PORT (18280).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
OLD=$(realpath "$1"); NEW=$(realpath "$2"); shift 2
[ $# -gt 0 ] || set -- small large huge-manifest
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx python3
export BENCH_DATA=${BENCH_DATA:-${TMPDIR:-/tmp}/bench-data}
WORK=${BENCH_WORK:-/dev/shm/haul-compare}
RUNS=${RUNS:-5}
PORT=${PORT:-18280}
export TLS_PORT=0 BENCH_STATE=${TMPDIR:-/tmp}/haul-compare-nginx-$PORT
python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" "$@" >/dev/null
"$BENCH/server.sh" start "$BENCH_DATA/corpus" "$PORT" >/dev/null
trap '"$BENCH/server.sh" stop "$PORT" >/dev/null || true' EXIT
echo "| scenario | old ($OLD) | new ($NEW) | wall new/old | CPU new/old |"
echo "|---|---|---|---|---|"
for sc in "$@"; do
  mkdir -p "$WORK/$sc"
  python3 "$BENCH/manifest.py" "$BENCH_DATA/corpus/$sc" "http://127.0.0.1:$PORT/$sc/files" "$WORK/$sc" >/dev/null
  python3 "$HERE/benchmarks/lib/compare_builds.py" --a "$OLD" --b "$NEW" --manifest manifest.yaml --work "$WORK/$sc" \
    --runs "$RUNS" --kind first --label "$sc"
  if [ "$sc" = huge-manifest ] || [ "$sc" = large ]; then
    python3 "$HERE/benchmarks/lib/compare_builds.py" --a "$OLD" --b "$NEW" --manifest manifest.yaml --work "$WORK/$sc" \
      --runs "$RUNS" --kind noop --label "$sc"
    # The plan a CI job's next step runs right after the sync (plan saves no state: it pays for any record the
    # sync left untrusted, every time).
    python3 "$HERE/benchmarks/lib/compare_builds.py" --a "$OLD" --b "$NEW" --manifest manifest.yaml --work "$WORK/$sc" \
      --runs "$RUNS" --kind next --command plan --label "$sc"
  fi
  rm -rf "$WORK/$sc/dl"
done
