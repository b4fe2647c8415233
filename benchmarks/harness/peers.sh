#!/usr/bin/env bash
# peers.sh SCENARIO [SCENARIO ...]
# Downloads each scenario's corpus from a private nginx on 127.0.0.1 with every peer in turn and reports, per
# measurement, the median wall time of RUNS runs, files/s, MB/s, CPU and peak RSS; also no-op second runs and this
# machine's limits (copying, writing, hashing the same files). Every download is checked with sha256sum -c.
# Scenarios (corpus.py --list): small medium large mixed huge-manifest. Makes the corpus (corpus.py) and starts
# and stops nginx (server.sh) itself; an nginx this script's server.sh already runs on PORT is used and left running.
#
# Env (all optional):
#   BENCH_DATA  corpora (default ${TMPDIR:-/tmp}/bench-data)
#   BENCH_WORK  download folders (default $BENCH_DATA/work): the file system measured
#   RESULTS     output folder (default benchmarks/results/<timestamp>, git-ignored)
#   PORT        nginx's HTTP port (18080); TLS_PORT its HTTP/2 + TLS port (PORT+1)
#   RUNS        runs per measurement (3); JOBS parallel transfers (16); TIMEOUT s per run (300)
#   PEERS       some of "limits aria2c curl wget haul" (default: all)
#   HAUL        a haul binary; without it haul is left out
#   CURL_SCALE  further --parallel-max values for curl (default "1 4 64"; "" for none)
#   NOOP        0 leaves out the no-op second runs (default 1)
#   QUIET_WAIT  s to wait for an idle machine before each run (120); NOISY_RETRIES (2)
set -euo pipefail
HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 1 ] || { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2; exit 2; }

BENCH_DATA=${BENCH_DATA:-${TMPDIR:-/tmp}/bench-data}
PORT=${PORT:-18080}
export TLS_PORT=${TLS_PORT:-$((PORT + 1))}
RUNS=${RUNS:-3} JOBS=${JOBS:-16} TIMEOUT=${TIMEOUT:-300} NOOP=${NOOP:-1}
PEERS=${PEERS:-limits aria2c curl wget haul}
CURL_SCALE=${CURL_SCALE-1 4 64}
RESULTS=${RESULTS:-$HARNESS/../results/$(date +%Y%m%d-%H%M%S)}
export BENCH_STATE=${BENCH_STATE:-${TMPDIR:-/tmp}/haul-bench-nginx-$(id -u)-$PORT}
PIDFILE=$BENCH_STATE/nginx.pid
CORPUS=$BENCH_DATA/corpus
BENCH_WORK=${BENCH_WORK:-$BENCH_DATA/work}
mkdir -p "$RESULTS" "$BENCH_WORK"
RESULTS=$(cd "$RESULTS" && pwd)
JSONL=$RESULTS/results.jsonl

want() { [[ " $PEERS " == *" $1 "* ]]; }
have() { command -v "$1" >/dev/null 2>&1; }
quote() { printf '%q ' "$@"; }
for sc in "$@"; do [ "$sc" != all ] || { echo "peers.sh: name the scenarios" >&2; exit 2; }; done

# shellcheck source=tools.sh
. "$HARNESS/tools.sh"
bench_tools nginx curl python3 sha256sum -- openssl time $(want aria2c && echo aria2c) $(want wget && echo wget)

python3 "$HARNESS/corpus.py" "$CORPUS" "$@"
STARTED=0
if "$HARNESS/server.sh" status "$PORT" >/dev/null 2>&1; then
  echo "peers.sh: using the nginx already running for port $PORT"
else
  "$HARNESS/server.sh" start "$CORPUS" "$PORT"
  STARTED=1
fi
cleanup() { [ "$STARTED" = 0 ] || "$HARNESS/server.sh" stop "$PORT" >/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm); cpus: $(nproc); mem: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  echo "fs of BENCH_DATA ($BENCH_DATA): $(df -T "$BENCH_DATA" | awk 'NR == 2 {print $2 " " $1}')"
  echo "fs of BENCH_WORK ($BENCH_WORK): $(df -T "$BENCH_WORK" | awk 'NR == 2 {print $2 " " $1}')"
  echo "nginx: $("${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}" -v 2>&1 | head -1)"
  for tool in aria2c curl wget; do ! have "$tool" || echo "$tool: $("$tool" --version 2>&1 | head -1)"; done
  [ -z "${HAUL:-}" ] || echo "haul: $HAUL"
  echo "RUNS=$RUNS JOBS=$JOBS TIMEOUT=$TIMEOUT PEERS=$PEERS"
} > "$RESULTS/env.txt" 2>&1 || true
cat "$RESULTS/env.txt"

for sc in "$@"; do
  W=$BENCH_WORK/$sc
  rm -rf "$W" && mkdir -p "$W"
  python3 "$HARNESS/manifest.py" "$CORPUS/$sc" "http://127.0.0.1:$PORT/$sc/files" "$W" >/dev/null
  python3 "$HARNESS/manifest.py" "$CORPUS/$sc" "https://127.0.0.1:$TLS_PORT/$sc/files" "$W/h2" >/dev/null
  NF=$(wc -l < "$CORPUS/$sc/index.tsv")
  NB=$(awk -F'\t' '{s += $2} END {printf "%d", s}' "$CORPUS/$sc/index.tsv")
  FRESH='rm -rf dl && mkdir dl && sync'
  echo "== $sc: $NF files, $NB bytes; work folder $W"

  m() {  # measure.py with this scenario's settings; a failed measurement is reported and the rest goes on
    python3 "$HARNESS/lib/measure.py" --scenario "$sc" --dir "$W" --files "$NF" --bytes "$NB" --runs "$RUNS" \
      --timeout "$TIMEOUT" --server-pidfile "$PIDFILE" --results "$JSONL" "$@" || true
  }
  DL=(--prepare "$FRESH" --run-dir dl --verify "$W/SHA256SUMS" --expect-files "$NF")
  NOOP_RUN=(--kind noop --prepare sync --run-dir dl --verify "$W/SHA256SUMS" --expect-files "$NF" --noop)
  WRITE=(python3 "$HARNESS/lib/writefiles.py" "$CORPUS/$sc/index.tsv" . --rename)

  if want limits; then
    m --kind limit --label "limit: cp -r corpus (local, no network)" "${DL[@]}" -- cp -r "$CORPUS/$sc/files/." .
    m --kind limit --label "limit: write .part+rename, no fsync" --prepare "$FRESH" --run-dir dl -- "${WRITE[@]}"
    m --kind limit --label "limit: write .part+fsync+rename" --prepare "$FRESH" --run-dir dl -- "${WRITE[@]}" --fsync
    m --kind limit --label "limit: write .part+fsync+rename, $JOBS threads" --prepare "$FRESH" --run-dir dl \
      -- "${WRITE[@]}" --fsync --threads "$JOBS"
    m --kind limit --label "limit: write .part+rename, one sync() at end" --prepare "$FRESH" --run-dir dl \
      -- "${WRITE[@]}" --sync-at-end
    m --kind limit --label "limit: sha256sum -c (coreutils, page cache)" --dir "$CORPUS/$sc/files" \
      --setup "find . -type f -print0 | xargs -0 cat > /dev/null" -- sha256sum -c --quiet ../SHA256SUMS
    if have openssl; then  # OpenSSL uses the CPU's SHA extensions where there are some; coreutils does not
      m --kind limit --label "limit: openssl dgst -sha256 (page cache)" --dir "$CORPUS/$sc/files" \
        -- bash -c "cut -c67- ../SHA256SUMS | tr '\\n' '\\0' | xargs -0 openssl dgst -sha256 > /dev/null"
    fi
    if [ "$NF" -ge 1000 ]; then
      m --kind limit --label "limit: stat every file, check size" --setup "$FRESH && cp -r $(quote "$CORPUS/$sc/files/.") dl" \
        -- python3 "$HARNESS/lib/statwalk.py" "$CORPUS/$sc/index.tsv" dl
    fi
    if [ "$sc" = large ]; then
      IFS=$'\t' read -r _ size first < "$CORPUS/$sc/index.tsv"
      m --kind limit --label "limit: curl -o /dev/null 1 file (loopback)" --files 1 --bytes "$size" \
        -- curl -sS --fail -o /dev/null "http://127.0.0.1:$PORT/$sc/files/$first"
      m --kind limit --label "limit: curl -o /dev/null 1 file h2+TLS" --files 1 --bytes "$size" \
        -- curl -sS --fail -k --http2 -o /dev/null "https://127.0.0.1:$TLS_PORT/$sc/files/$first"
      m --kind limit --label "limit: dd 1 GiB zero -> file (page cache)" --files 1 --bytes 1073741824 \
        --prepare "$FRESH" --run-dir dl -- dd if=/dev/zero of=zero.bin bs=1M count=1024 status=none
      m --kind limit --label "limit: dd 1 GiB zero -> file + fdatasync" --files 1 --bytes 1073741824 \
        --prepare "$FRESH" --run-dir dl -- dd if=/dev/zero of=zero.bin bs=1M count=1024 conv=fdatasync status=none
    fi
  fi

  if want aria2c && have aria2c; then
    ARIA=(aria2c -i ../aria2.txt -j "$JOBS" --console-log-level=warn --summary-interval=0
          --show-console-readout=false --download-result=hide)
    m --label "aria2c -j$JOBS (sha-256 checked)" "${DL[@]}" -- "${ARIA[@]}"
    # By default aria2c flushes three times per file (the empty file, its .aria2 control file, the data); with no
    # control file saved, once: the setting that matters, shown apart.
    m --label "aria2c -j$JOBS --auto-save-interval=0" "${DL[@]}" -- "${ARIA[@]}" --auto-save-interval=0
    if [ "$sc" = large ]; then
      m --label "aria2c -j$JOBS -x8 -s8 (segmented)" "${DL[@]}" -- "${ARIA[@]}" -x 8 -s 8 -k 1M
    fi
    if [ "$NOOP" = 1 ]; then
      SETUP="$FRESH && cd dl && $(quote "${ARIA[@]}")"
      m --label "aria2c no-op: --check-integrity=true" --setup "$SETUP" "${NOOP_RUN[@]}" -- "${ARIA[@]}" --check-integrity=true
      m --label "aria2c no-op: --conditional-get=true" --setup "$SETUP" "${NOOP_RUN[@]}" \
        -- "${ARIA[@]}" --conditional-get=true --allow-overwrite=true
    fi
  fi

  if want curl && have curl; then
    CURL=(curl -S --no-progress-meter --fail --create-dirs -K ../curl.cfg --parallel)
    m --label "curl --parallel-max $JOBS (no hash check)" "${DL[@]}" -- "${CURL[@]}" --parallel-max "$JOBS"
    m --label "curl --parallel-max $JOBS + sha256sum -c" "${DL[@]}" \
      -- bash -c "$(quote "${CURL[@]}" --parallel-max "$JOBS") && sha256sum -c --quiet ../SHA256SUMS"
    m --label "curl --parallel-max $JOBS, h2+TLS (1 conn)" "${DL[@]}" \
      -- curl -S --no-progress-meter --fail --create-dirs -k --http2 -K ../h2/curl.cfg --parallel --parallel-max "$JOBS"
    if [ "$NF" -gt 2 ]; then
      for parallel in $CURL_SCALE; do
        m --label "curl --parallel-max $parallel" "${DL[@]}" -- "${CURL[@]}" --parallel-max "$parallel"
      done
    fi
  fi

  if want wget && have wget; then
    WGET=(wget -q -i ../wget.txt -x -nH --cut-dirs=2)  # strips <scenario>/files/
    m --label "wget -i (sequential)" "${DL[@]}" -- "${WGET[@]}"
    if [ "$NOOP" = 1 ]; then
      m --label "wget no-op: -N (If-Modified-Since)" --setup "$FRESH && cd dl && $(quote "${WGET[@]}")" "${NOOP_RUN[@]}" \
        -- "${WGET[@]}" -N
    fi
  fi

  if want haul && [ -n "${HAUL:-}" ]; then
    HAUL_BIN=$(command -v "$HAUL" || true)
    [ -x "$HAUL_BIN" ] || { echo "peers.sh: HAUL=$HAUL is not an executable" >&2; exit 1; }
    HAUL_BIN=$(cd "$(dirname "$HAUL_BIN")" && pwd)/$(basename "$HAUL_BIN")
    # manifest.yaml lies in $W with root ./dl: haul writes to $W/dl, as the other peers do.
    SYNC=("$HAUL_BIN" sync ../manifest.yaml --jobs "$JOBS")
    m --label "haul sync --jobs $JOBS" "${DL[@]}" -- "${SYNC[@]}"
    if [ "$NOOP" = 1 ]; then
      SETUP="$FRESH && cd dl && $(quote "${SYNC[@]}")"
      m --label "haul no-op: sync again" --setup "$SETUP" "${NOOP_RUN[@]}" -- "${SYNC[@]}"
      m --label "haul no-op: plan (exit 0)" --setup "$SETUP" --kind noop --prepare sync --run-dir dl --noop \
        -- "$HAUL_BIN" plan ../manifest.yaml
    fi
  elif want haul; then
    echo "peers.sh: HAUL is not set, haul left out"
  fi
done

python3 "$HARNESS/lib/report.py" "$JSONL" > "$RESULTS/report.md"
echo
cat "$RESULTS/report.md"
echo
echo "peers.sh: results in $RESULTS (results.jsonl, report.md, commands.log, env.txt)"
