#!/usr/bin/env bash
# Streaming start: how soon the first request of a first sync of a large manifest leaves (nothing on disk), for
# each build of haul given and curl reading the same URLs from a config file, side by side; and how long an
# invalid manifest of the largest size takes to be refused, with how many requests left before it was (they write
# nothing in the root: see docs/ARCHITECTURE.md, "The head start").
#
#   benchmarks/streaming-start.sh HAUL [HAUL ...]        SIZES="100000 1000000" RUNS=5 WORK=/dev/shm
#
# A loopback server (Python) notes when each run's first request arrives and serves what the entries pin.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
. "$HERE/benchmarks/harness/tools.sh"
bench_tools python3 curl
WORK=$(mktemp -d "${WORK:-/dev/shm}/haul-streaming.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
builds=()
for haul in "$@"; do builds+=("$(realpath "$haul")"); done
python3 "$HERE/benchmarks/lib/streaming_start.py" "$WORK" "${RUNS:-5}" "${SIZES:-100000 1000000}" "${builds[@]}"
