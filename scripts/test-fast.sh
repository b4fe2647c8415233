#!/usr/bin/env bash
# The fast tier: every test target but HaulCommandTests, whose tests run the built `haul`. Values, output built in
# process, the engine and the store against real files and servers the tests start on 127.0.0.1; nothing needs
# root (a test that makes a fault as root skips without it, unless HAUL_REQUIRE_ALL_TESTS=1). About a minute on two
# cores after the build. Run it on every change; scripts/test.sh runs it, then the system tier.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-debian.sh test
# The sources keep the one format `.swift-format` gives them (swift-format ships with the toolchain): run
# `swift format format --in-place --recursive Sources Tests Package.swift` after an edit.
swift format lint --strict --parallel --recursive Sources Tests Package.swift
swift build --build-tests
HAUL_REQUIRE_ALL_TESTS="${HAUL_REQUIRE_ALL_TESTS:-0}" swift test --skip-build --parallel --num-workers 2 --skip '^HaulCommandTests\.'
