#!/usr/bin/env bash
# One command for haul's transfer benchmark: builds haul (release), then measures it side by side with the peers
# of benchmarks/harness/peers.sh (aria2c, curl --parallel) on the same corpus and the same private nginx on
# 127.0.0.1, and adds what that script does not: haul over HTTP/2 + TLS next to curl over the same.
#
#   benchmarks/peers.sh [SCENARIO ...]        default: small large
#
# Env: BENCH (default benchmarks/harness), BENCH_WORK (default /dev/shm/haul-bench: tmpfs, see
# benchmarks/harness/README.md on ext4 without a journal), RUNS (3), PEERS (default "aria2c curl haul"), HAUL (a
# binary to measure instead of building the release one), and any variable the harness's peers.sh reads.
# Needs nginx, curl, openssl, GNU time and aria2c (installed when missing and run as root with apt; otherwise the
# script says what to install).
# The report is the last thing printed; results/ holds the raw runs.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
[ $# -gt 0 ] || set -- small large
export PEERS=${PEERS:-aria2c curl haul}
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx curl python3 sha256sum -- openssl time $([[ " $PEERS " != *" aria2c "* ]] || echo aria2c)

cd "$HERE"
if [ -z "${HAUL:-}" ]; then
  echo "peers.sh: swift build -c release --product haul"
  build=$(swift build -c release --product haul 2>&1) || { printf '%s\n' "$build" >&2; exit 1; }
  HAUL_BIN=$HERE/.build/release/haul
else
  HAUL_BIN=$(realpath "$HAUL")
fi

export BENCH_DATA=${BENCH_DATA:-${TMPDIR:-/tmp}/bench-data}
export BENCH_WORK=${BENCH_WORK:-/dev/shm/haul-bench}
export RUNS=${RUNS:-3} JOBS=${JOBS:-16} PORT=${PORT:-18080}
export TLS_PORT=$((PORT + 1))
export CURL_SCALE=${CURL_SCALE-}
export QUIET_WAIT=${QUIET_WAIT:-30}
export RESULTS=${RESULTS:-$HERE/benchmarks/results/$(date +%Y%m%d-%H%M%S)}
export BENCH_STATE=${BENCH_STATE:-${TMPDIR:-/tmp}/haul-bench-nginx-$(id -u)-$PORT}
mkdir -p "$RESULTS" "$BENCH_WORK"

# Keep one nginx up for both halves (the harness's peers.sh uses a running one and leaves it running).
python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" "$@"
"$BENCH/server.sh" start "$BENCH_DATA/corpus" "$PORT"
trap '"$BENCH/server.sh" stop "$PORT" >/dev/null || true' EXIT

HAUL=$HAUL_BIN "$BENCH/peers.sh" "$@"

# haul over HTTP/2 + TLS, beside curl over the same (the second nginx port, its self-signed cert as CA bundle).
for sc in "$@"; do
  W=$BENCH_WORK/$sc
  NF=$(wc -l < "$BENCH_DATA/corpus/$sc/index.tsv")
  NB=$(awk -F'\t' '{s += $2} END {printf "%d", s}' "$BENCH_DATA/corpus/$sc/index.tsv")
  python3 "$BENCH/lib/measure.py" --scenario "$sc" --dir "$W/h2" --files "$NF" --bytes "$NB" --runs "$RUNS" \
    --server-pidfile "$BENCH_STATE/nginx.pid" --results "$RESULTS/results.jsonl" \
    --label "haul sync --jobs $JOBS, h2+TLS" --prepare 'rm -rf dl && mkdir dl && sync' --run-dir dl \
    --verify "$W/SHA256SUMS" --expect-files "$NF" \
    -- "$HAUL_BIN" sync ../manifest.yaml --jobs "$JOBS" --ca-file "$BENCH_STATE/cert.pem" || true
done
python3 "$BENCH/lib/report.py" "$RESULTS/results.jsonl" > "$RESULTS/report.md"
echo
cat "$RESULTS/report.md"
