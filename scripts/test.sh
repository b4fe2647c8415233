#!/usr/bin/env bash
# Sets up a fresh Debian machine (apt packages, if missing) and runs the whole test suite.
# Every test that touches the network starts its own server on 127.0.0.1 and stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-debian.sh
swift build --build-tests
swift test --skip-build
