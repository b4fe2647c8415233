#!/usr/bin/env bash
# Loading a manifest is linear in its size, whatever it holds: `haul plan` on manifests with N, 10N and 100N
# unknown top-level keys, headers in one entry, entries, and invalid entries, with the ratios of the times.
#
#   benchmarks/manifest-scaling.sh            N=4000 RUNS=5 by default (100N = 400,000)
#   N=2000 RUNS=9 benchmarks/manifest-scaling.sh
#
# Builds haul (release) first. HAUL=/path/to/haul measures another binary instead (e.g. an older build, to see
# the quadratic steps this guards against). WORK (default a temporary folder) receives the manifests.
# Each time is the fastest of RUNS runs. The ratios 10N/N and 100N/N must stay at or below 12 and 120 (a
# quadratic step makes them hundreds); "net" ratios, the time of `haul plan` on an empty manifest (process start)
# subtracted, show the loading work alone.
# Exit status 1 when a kind grows faster than that. Speed lives here, not in timed unit tests.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-4000}
RUNS=${RUNS:-5}
if [ -z "${HAUL:-}" ]; then
  echo "manifest-scaling.sh: swift build -c release --product haul" >&2
  (cd "$HERE" && swift build -c release --product haul >/dev/null)
  HAUL=$HERE/.build/release/haul
fi
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/haul-manifest-scaling.XXXXXX")}
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
echo "haul: $HAUL; manifests in $WORK"
python3 "$HERE/benchmarks/lib/manifest_scaling.py" "$HAUL" "$WORK" "$N" "$RUNS"
