#!/usr/bin/env bash
# What putting a small file in place costs the file system, by the way it is placed: one thread, COUNT files of
# 256 bytes spread over 100 folders, no network and no hashing, so that only the file-system calls are measured.
#
#   benchmarks/commit-ops.sh [FOLDER ...]        default: /dev/shm and /var/tmp (and the loop-device ext4 of
#                                                durability.sh when it is mounted)
#
# Ways, interleaved RUNS times, each into a fresh empty folder after a `sync`:
#   direct       openat(destination, O_CREAT) + pwrite + close              (curl: not atomic)
#   staged       the same in one staging folder, then renameat into place  (haul)
#   beside       the same beside the destination, then renameat            (rsync)
#   linked       O_TMPFILE in the staging folder, linkat(AT_EMPTY_PATH)     (needs Linux >= 6.10 unprivileged)
#   linked-proc  O_TMPFILE, linkat of /proc/self/fd/N                       (older kernels)
# Prints medians of wall and CPU seconds per way and folder, and each way's ratio to direct.
#
# Env: RUNS (3), COUNT (100000), CC (cc).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-3} COUNT=${COUNT:-100000}
[ $# -gt 0 ] || { set -- /dev/shm /var/tmp; ! mountpoint -q /mnt/haul-durability-ext4 || set -- "$@" /mnt/haul-durability-ext4; }
BINARY=$(mktemp -d)/commit_ops
trap 'rm -rf "$(dirname "$BINARY")"' EXIT
"${CC:-cc}" -O2 -o "$BINARY" "$HERE/lib/commit_ops.c"
WAYS="direct staged beside linked linked-proc"
RESULTS=$(dirname "$BINARY")/runs.txt
for folder in "$@"; do
  work=$folder/haul-commit-ops
  for run in $(seq 1 "$RUNS"); do
    for way in $WAYS; do
      rm -rf "$work" && mkdir -p "$work" && sync
      echo "$folder $way $("$BINARY" "$way" "$work" "$COUNT")" | tee -a "$RESULTS"
    done
  done
  rm -rf "$work"
done
python3 - "$RESULTS" "$RUNS" "$COUNT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    folder, way, wall, cpu = line.split()
    rows.setdefault(folder, {}).setdefault(way, []).append((float(wall), float(cpu)))
print(f"\ncommit-ops.sh: {sys.argv[3]} files of 256 B, medians of {sys.argv[2]} runs (wall s / CPU s, ratio to direct)")
ways = ["direct", "staged", "beside", "linked", "linked-proc"]
print("| folder | " + " | ".join(ways) + " |")
print("|---" * (len(ways) + 1) + "|")
for folder, by_way in rows.items():
    med = {w: (statistics.median(x for x, _ in v), statistics.median(y for _, y in v)) for w, v in by_way.items()}
    cells = [f"{med[w][0]:.2f} / {med[w][1]:.2f} ({med[w][0] / med['direct'][0]:.2f}×)" for w in ways if w in med]
    print(f"| {folder} | " + " | ".join(cells) + " |")
PY
