#!/usr/bin/env bash
# Large manifests: `haul plan`'s time and peak memory from 10,000 to 1,000,000 entries (as a multiple of the
# manifest's bytes, to show the curve is linear), and the no-op sync of 100,000 files against the stat floor
# (`find -printf '%s %T@ %C@ %i\n'` of the same tree), side by side in one run. No network: every URL names a
# closed port on 127.0.0.1 and nothing needs fetching.
#
#   benchmarks/million.sh                       SIZES="10000 100000 1000000" NOOP_FILES=100000 RUNS=3
#   WORK=/var/tmp/m benchmarks/million.sh       the root file system instead of tmpfs
#
# Builds haul (release) first; HAUL=/path/to/haul measures another binary. WORK (default a folder under /dev/shm)
# holds the manifests and the no-op tree, removed afterwards unless KEEP=1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${HAUL:-}" ]; then
  echo "million.sh: swift build -c release --product haul" >&2
  (cd "$HERE" && swift build -c release --product haul >/dev/null)
  HAUL=$HERE/.build/release/haul
fi
WORK=${WORK:-/dev/shm}
WORK=$(mktemp -d "$WORK/haul-million.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
echo "haul: $HAUL ($("$HAUL" --version | head -1)); work in $WORK"
python3 "$HERE/benchmarks/lib/million.py" "$HAUL" "$WORK" "${RUNS:-3}" "${SIZES:-10000 100000 1000000}" "${NOOP_FILES:-100000}"
