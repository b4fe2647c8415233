#!/usr/bin/env bash
# Sets up a fresh Debian machine (apt packages, if missing), builds haul, serves examples/basic/served/ on a
# loopback port, and syncs examples/basic/haul.yaml twice: the first run fetches and verifies every file, the
# second finds nothing to do. Nothing leaves 127.0.0.1.
#
# Env: HAUL, a haul binary to run instead of building one (an installed haul: HAUL=/usr/bin/haul).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${HAUL:-}" ]; then
  haul=$HAUL
else
  source scripts/setup-debian.sh build
  swift build -c release --product haul
  haul=.build/release/haul
fi

source scripts/serve-folder.sh
serve_folder examples/basic/served
trap 'kill $server 2>/dev/null || true' EXIT
export HAUL_EXAMPLE_BASE="http://127.0.0.1:$port"

rm -rf examples/basic/downloaded
echo "== haul sync examples/basic/haul.yaml (first run)"
"$haul" sync examples/basic/haul.yaml --verbose
echo
echo "== haul sync examples/basic/haul.yaml (second run: nothing to fetch)"
"$haul" sync examples/basic/haul.yaml
echo
echo "== haul verify examples/basic/haul.yaml"
"$haul" verify examples/basic/haul.yaml
