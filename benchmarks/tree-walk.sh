#!/usr/bin/env bash
# What the no-op's walk of an extracted tree costs next to find: `TreeWalk.nodes` (readdir + lstat of every node,
# as the no-op compares them with the state) against `find DIR -printf '%s %T@\n' >/dev/null`, over the same tree
# of 50,000 files (500 folders of 100) on tmpfs.
#
#   benchmarks/tree-walk.sh
#
# Builds the tests in release (with testable imports: the store's benchmarks are XCTests), makes the tree, and runs
# StoreBenchmarks.testTreeWalkOfFiftyThousandFilesBesideFind, which times both interleaved and prints their medians
# and the ratio TreeWalk / find.
#
# Env: BENCH_WORK (default /dev/shm/haul-tree-walk), RUNS (7), KEEP=1 to keep BENCH_WORK afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH_WORK=${BENCH_WORK:-/dev/shm/haul-tree-walk}
RUNS=${RUNS:-7}

cd "$HERE"
echo "tree-walk.sh: swift build -c release --build-tests"
swift build -c release --build-tests -Xswiftc -enable-testing >/dev/null

rm -rf "$BENCH_WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$BENCH_WORK"' EXIT
TREE=$BENCH_WORK/tree
for folder in $(seq 0 499); do
  mkdir -p "$TREE/d$folder"
  for file in $(seq 0 99); do echo "$folder/$file" > "$TREE/d$folder/f$file"; done
done

HAUL_STORE_BENCH=1 HAUL_TREE_WALK_DIR=$TREE HAUL_TREE_WALK_RUNS=$RUNS \
  swift test -c release --skip-build --filter 'StoreBenchmarks/testTreeWalkOfFiftyThousandFilesBesideFind' 2>&1 \
  | grep -E '^tree walk|error' || { echo "tree-walk.sh: the benchmark did not run" >&2; exit 1; }
