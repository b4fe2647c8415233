#!/usr/bin/env bash
# Sets up a fresh Debian machine (apt packages, if missing) and runs the whole test suite: both tiers, then the
# package, release, action and image tests.
# Every test that touches the network starts its own server on 127.0.0.1 and stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every crash and fault test must run: one that cannot (no root, no mount, no chattr, no gcc) fails instead of
# skipping. HAUL_REQUIRE_ALL_TESTS=0 bash scripts/test.sh lets them skip on a machine that cannot make faults.
export HAUL_REQUIRE_ALL_TESTS="${HAUL_REQUIRE_ALL_TESTS:-1}"
# The fast tier (setup, build, every target but HaulCommandTests), then the system tier: the built `haul` run as
# users run it.
bash scripts/test-fast.sh
source scripts/setup-debian.sh test  # again in this shell, for the PATH it sets
swift test --skip-build --filter '^HaulCommandTests\.'
# The .deb: built, checked by lintian, installed, and run with the toolchain's libraries hidden.
bash scripts/test-package.sh
# The release: archive, .deb, SHA256SUMS and the manifest that installs haul, run with the toolchain's libraries hidden.
bash scripts/test-release.sh
# The GitHub Action building haul from its checkout (incremental after the package test's build), and its cache.
bash scripts/test-action.sh
# The container image: built from Debian's packages and the .deb, run against a loopback server (podman, or chroot).
bash scripts/test-image.sh
