#!/usr/bin/env bash
# A dead host costs one connect, not a minute per file: 200 entries whose first URL refuses connections and whose
# mirror works, against the same 200 entries fetched from the working URL alone. Builds haul (release), serves
# 200 files with the private nginx of benchmarks/harness on 127.0.0.1, holds a port that refuses connections (a socket
# bound and never listening), and times both manifests alternately (fresh root each run; median of RUNS).
#
#   benchmarks/dead-mirror.sh
#
# Prints both medians and the ratio; exits 1 when the dead-first manifest takes more than 1.5x the live one.
# Env: BENCH (default benchmarks/harness), RUNS (5), FILES (200), SIZE (16384 bytes each), JOBS (16), PORT (18280),
# WORK (default /dev/shm/haul-dead-mirror: tmpfs), HAUL (a haul binary to measure instead of building one).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx python3 bc sha256sum
RUNS=${RUNS:-5} FILES=${FILES:-200} SIZE=${SIZE:-16384} JOBS=${JOBS:-16} PORT=${PORT:-18280}
WORK=${WORK:-/dev/shm/haul-dead-mirror}
export BENCH_STATE=${BENCH_STATE:-${TMPDIR:-/tmp}/haul-dead-mirror-nginx-$(id -u)-$PORT}

cd "$HERE"
if [ -z "${HAUL:-}" ]; then
  echo "dead-mirror.sh: swift build -c release --product haul"
  swift build -c release --product haul >/dev/null
  HAUL=$HERE/.build/release/haul
fi

rm -rf "$WORK"
mkdir -p "$WORK/served"
python3 - "$WORK/served" "$FILES" "$SIZE" <<'EOF'
import hashlib, os, sys
served, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(os.path.join(served, "..", "sums.tsv"), "w") as sums:
    for index in range(count):
        data = hashlib.shake_128(b"dead-mirror %d" % index).digest(size)
        with open(os.path.join(served, "f%d.bin" % index), "wb") as out:
            out.write(data)
        sums.write("f%d.bin\t%s\n" % (index, hashlib.sha256(data).hexdigest()))
EOF

# The refusing port: a TCP socket bound to 127.0.0.1 and never listening, held for the whole run.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1], flush=True)
while True: time.sleep(3600)
' > "$WORK/dead.port" &
DEAD_PID=$!
TLS_PORT=0 "$BENCH/server.sh" start "$WORK/served" "$PORT" >/dev/null
cleanup() {
  kill "$DEAD_PID" 2>/dev/null || true
  TLS_PORT=0 "$BENCH/server.sh" stop "$PORT" >/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do [ -s "$WORK/dead.port" ] && break; sleep 0.1; done
DEAD=$(cat "$WORK/dead.port")
LIVE="http://127.0.0.1:$PORT"

# Two manifests over the same files: the live URL alone, and a dead first URL with the live one as mirror.
{
  printf 'version: 1\nroot: dl\nfiles:\n'
  while IFS=$'\t' read -r name sum; do printf '  - {url: "%s/%s", dest: "%s", sha256: %s}\n' "$LIVE" "$name" "$name" "$sum"; done < "$WORK/sums.tsv"
} > "$WORK/live.yaml"
{
  printf 'version: 1\nroot: dl\nfiles:\n'
  while IFS=$'\t' read -r name sum; do
    printf '  - {url: "http://127.0.0.1:%s/%s", mirrors: ["%s/%s"], dest: "%s", sha256: %s}\n' "$DEAD" "$name" "$LIVE" "$name" "$name" "$sum"
  done < "$WORK/sums.tsv"
} > "$WORK/dead-first.yaml"

# One timed sync into a fresh root; prints seconds. A run that fails, or leaves a file wrong, stops the benchmark.
run() {
  rm -rf "$WORK/dl"
  local start end
  start=$(date +%s.%N)
  "$HAUL" sync "$WORK/$1.yaml" --jobs "$JOBS" --progress none --quiet
  end=$(date +%s.%N)
  (cd "$WORK/dl" && awk -F'\t' '{print $2 "  " $1}' ../sums.tsv | sha256sum -c --quiet -)
  echo "$end - $start" | bc -l
}

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

run live >/dev/null; run dead-first >/dev/null   # warm-up: page cache, nginx workers
: > "$WORK/live.times"; : > "$WORK/dead-first.times"
for _ in $(seq "$RUNS"); do
  run live >> "$WORK/live.times"
  run dead-first >> "$WORK/dead-first.times"
done
LIVE_S=$(median < "$WORK/live.times")
DEAD_S=$(median < "$WORK/dead-first.times")
RATIO=$(echo "$DEAD_S / $LIVE_S" | bc -l)
printf '%d files of %d bytes, --jobs %d, median of %d alternating runs\n' "$FILES" "$SIZE" "$JOBS" "$RUNS"
printf '  live URL alone:               %.3f s  (%s)\n' "$LIVE_S" "$(tr '\n' ' ' < "$WORK/live.times")"
printf '  dead first URL, live mirror:  %.3f s  (%s)\n' "$DEAD_S" "$(tr '\n' ' ' < "$WORK/dead-first.times")"
printf '  ratio: %.2f (must be <= 1.5)\n' "$RATIO"
awk -v r="$RATIO" 'BEGIN { exit !(r <= 1.5) }'
