#!/usr/bin/env bash
# What durability costs: haul sync (default durability, and --durability none) next to curl --parallel, which flushes
# nothing, and next to the durable floor of the disk, on several file systems. One command:
#
#   benchmarks/durability.sh [SCENARIO ...]        default: large small huge-manifest
#
# File systems (FILESYSTEMS, "name:folder" pairs): tmpfs (/dev/shm), a journaled ext4 on a loop device (made and
# mounted at /mnt/haul-durability-ext4 when run as root and none is given), and the root file system (/var/tmp).
# Per scenario and file system, RUNS times (default 3), interleaved so that the machine's drift hits all alike, each
# after an untimed `rm -rf` of its target and a `sync`:
#   curl    curl --parallel --parallel-max JOBS --create-dirs -K curl.cfg  (no hash check, no flush)
#   floor   dd if=/dev/zero bs=1M count=<the scenario's MiB> conv=fdatasync   (large only: the disk's durable floor)
#   haul    haul sync --jobs JOBS --quiet                                    (default durability)
#   none    haul sync --jobs JOBS --quiet --durability none
# Every haul root is checked against the corpus (sha256sum -c) once, untimed. Prints medians of wall and CPU (user +
# system of the command and its children) and the ratios the targets are judged by:
#   large: haul / max(curl, floor) <= 1.1;  small, huge-manifest: haul / curl <= 1.0;  none / curl <= 1.05.
#
# Env: BENCH (benchmarks/harness), BENCH_DATA (corpora; /tmp/bench-data), FILESYSTEMS, RUNS (3), JOBS (16),
# PORT (18480), HAUL (a binary to measure instead of building the release one).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
. "$HERE/benchmarks/harness/tools.sh"
bench_tools nginx curl python3 sha256sum
[ $# -gt 0 ] || set -- large small huge-manifest
RUNS=${RUNS:-3} JOBS=${JOBS:-16} PORT=${PORT:-18480}
export BENCH_DATA=${BENCH_DATA:-/tmp/bench-data} TLS_PORT=0
export BENCH_STATE=${TMPDIR:-/tmp}/haul-durability-nginx-$PORT

if [ -z "${HAUL:-}" ]; then
  (cd "$HERE" && swift build -c release --product haul >/dev/null)
  HAUL=$HERE/.build/release/haul
fi

LOOP_MOUNT=/mnt/haul-durability-ext4
LOOP_IMAGE=/var/tmp/haul-durability-ext4.img
if [ -z "${FILESYSTEMS:-}" ]; then
  FILESYSTEMS="tmpfs:/dev/shm/haul-durability"
  if [ "$(id -u)" = 0 ]; then
    if ! mountpoint -q "$LOOP_MOUNT"; then
      mkdir -p "$LOOP_MOUNT"
      [ -f "$LOOP_IMAGE" ] || { truncate -s 12G "$LOOP_IMAGE" && mkfs.ext4 -q -F -I 256 "$LOOP_IMAGE"; }
      mount -o loop "$LOOP_IMAGE" "$LOOP_MOUNT"
    fi
    FILESYSTEMS+=" ext4-journal:$LOOP_MOUNT/work"
  fi
  FILESYSTEMS+=" root:/var/tmp/haul-durability"
fi

python3 "$BENCH/corpus.py" "$BENCH_DATA/corpus" "$@" >/dev/null
"$BENCH/server.sh" start "$BENCH_DATA/corpus" "$PORT" >/dev/null
trap '"$BENCH/server.sh" stop "$PORT" >/dev/null 2>&1 || true' EXIT

RESULTS=$(mktemp -d)
measure() { python3 "$HERE/benchmarks/lib/timed.py" "$@"; }

for fs in $FILESYSTEMS; do
  name=${fs%%:*} folder=${fs#*:}
  for scenario in "$@"; do
    work=$folder/$scenario
    rm -rf "$work" && mkdir -p "$work"
    python3 "$BENCH/manifest.py" "$BENCH_DATA/corpus/$scenario" "http://127.0.0.1:$PORT/$scenario/files" "$work" \
      --root ./dl >/dev/null
    mib=$(( ($(du -sb "$BENCH_DATA/corpus/$scenario/files" | cut -f1) + 1048575) / 1048576 ))
    for run in $(seq 1 "$RUNS"); do
      line="$name $scenario run $run:"
      # Each run starts with another tool, so that what the previous one left (its deletions, the disk's queue)
      # does not always fall on the same one.
      order=(curl floor haul none)
      shift_by=$(( (run - 1) % ${#order[@]} ))
      for tool in "${order[@]:shift_by}" "${order[@]:0:shift_by}"; do
        [ "$tool" = floor ] && [ "$scenario" != large ] && continue
        rm -rf "$work/dl" "$work/dd.bin" && mkdir -p "$work/dl" && sync
        case $tool in
          curl)  result=$(measure "$work/dl" curl -S --no-progress-meter --fail --create-dirs -K ../curl.cfg --parallel --parallel-max "$JOBS") ;;
          floor) result=$(measure "$work" dd if=/dev/zero of=dd.bin bs=1M count="$mib" conv=fdatasync status=none) ;;
          haul)  result=$(measure "$work" "$HAUL" sync manifest.yaml --jobs "$JOBS" --quiet) ;;
          none)  result=$(measure "$work" "$HAUL" sync manifest.yaml --jobs "$JOBS" --quiet --durability none) ;;
        esac
        echo "$name $scenario $tool $result" >> "$RESULTS/runs.txt"
        line+=" $tool $result"
        if [ "$tool" = haul ] && [ "$run" = 1 ]; then
          (cd "$work/dl" && sha256sum -c --quiet "$BENCH_DATA/corpus/$scenario/SHA256SUMS") \
            || { echo "durability.sh: $name $scenario: haul's root does not match the corpus" >&2; exit 1; }
        fi
      done
      echo "$line"
    done
    rm -rf "$work/dl" "$work/dd.bin"
  done
done

python3 - "$RESULTS/runs.txt" "$RUNS" "$(cd "$HERE" && git rev-parse --short HEAD 2>/dev/null || echo '?')" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    fs, scenario, tool, wall, cpu = line.split()
    rows.setdefault((fs, scenario), {}).setdefault(tool, []).append((float(wall), float(cpu)))
print(f"\ndurability.sh: medians of {sys.argv[2]} runs (wall s / CPU s), haul {sys.argv[3]}")
print("| file system | corpus | curl | floor (dd fdatasync) | haul | haul --durability none | haul / target | none / curl |")
print("|---|---|---|---|---|---|---|---|")
for (fs, scenario), tools in rows.items():
    med = {t: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for t, v in tools.items()}
    cell = lambda t: f"{med[t][0]:.2f} / {med[t][1]:.2f}" if t in med else "—"
    target = max(med["curl"][0], med["floor"][0]) if "floor" in med else med["curl"][0]
    bound = "1.1" if "floor" in med else "1.0"
    print(f"| {fs} | {scenario} | {cell('curl')} | {cell('floor')} | {cell('haul')} | {cell('none')} "
          f"| {med['haul'][0] / target:.2f}× (≤ {bound}) | {med['none'][0] / med['curl'][0]:.2f}× (≤ 1.05) |")
EOF
rm -rf "$RESULTS"
