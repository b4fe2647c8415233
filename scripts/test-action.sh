#!/usr/bin/env bash
# The GitHub Action (action.yml) with neither version nor source: it builds haul from its own checkout with
# scripts/install.sh (incremental after scripts/test-package.sh) into a prefix under RUNNER_TEMP, caches that build
# by commit, and syncs; a second run on a fresh runner restores the build from the cache instead of building.
# Run by Tests/Tools/action_runner.py as a runner would, against a server on 127.0.0.1. The release-archive path is
# tested by ActionTests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-debian.sh test
work=$(mktemp -d)
server=""
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

install -d "$work/served" "$work/store"
printf 'built from the checkout\n' > "$work/served/asset.txt"
source scripts/serve-folder.sh
serve_folder "$work/served"

# A runner with a Swift toolchain and no haul.
path=$(dirname "$(command -v swift)"):/usr/bin:/bin
if PATH=$path command -v haul >/dev/null; then echo "test-action: a haul is on the runner's PATH already" >&2; exit 1; fi
run() {
  install -d "$work/$1/workspace" "$work/$1/temp"
  printf 'version: 1\nroot: out\nfiles:\n  - { url: "http://127.0.0.1:%s/asset.txt", dest: asset.txt, sha256: %s }\n' \
    "$port" "$(sha256sum "$work/served/asset.txt" | cut -d' ' -f1)" > "$work/$1/workspace/haul.yaml"
  env -i PATH="$path" HOME="$HOME" python3 Tests/Tools/action_runner.py --action . --workspace "$work/$1/workspace" \
    --temp "$work/$1/temp" --cache-store "$work/store" --summary "$work/$1/summary.md" --outputs "$work/$1/outputs.json" \
    > "$work/$1/log" 2>&1 || { cat "$work/$1/log" >&2; echo "test-action: the action failed ($1)" >&2; exit 1; }
  cmp -s "$work/served/asset.txt" "$work/$1/workspace/out/asset.txt" || { echo "test-action: nothing synced ($1)" >&2; exit 1; }
  grep -q '^### haul sync haul\\\.yaml$' "$work/$1/summary.md" || { echo "test-action: no step summary ($1)" >&2; exit 1; }
  grep -q '"exit-code": "0"' "$work/$1/outputs.json" || { echo "test-action: no exit-code output ($1)" >&2; exit 1; }
}
run first
grep -q '^install: haul ' "$work/first/log" || { cat "$work/first/log" >&2; echo "test-action: haul was not built" >&2; exit 1; }
run second
grep -q '^haul: the build of this checkout was restored from the cache$' "$work/second/log" \
  || { cat "$work/second/log" >&2; echo "test-action: the cached build was not used" >&2; exit 1; }
if grep -q '^install: haul ' "$work/second/log"; then echo "test-action: built again despite the cache" >&2; exit 1; fi
echo "test-action: the action built haul from its checkout, synced, and the next run used the cached build"
