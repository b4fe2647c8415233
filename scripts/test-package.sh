#!/usr/bin/env bash
# The packaging test (run by scripts/test.sh): builds the .deb (scripts/package-deb.sh, lintian included), installs
# it with dpkg, and runs the installed /usr/bin/haul with the Swift toolchain's libraries hidden (an empty tmpfs
# over them, in a private mount namespace): `haul --version`, its manual, and the bundled example
# (examples/run.sh). Proves that the package needs nothing from the toolchain. The package is removed afterwards.
# Needs root (dpkg, mount). Without it the test fails, unless HAUL_REQUIRE_ALL_TESTS=0 lets it skip.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  [ "${HAUL_REQUIRE_ALL_TESTS:-1}" = 0 ] && { echo "test-package: skipped (needs root)"; exit 0; }
  echo "test-package: needs root to install the package (HAUL_REQUIRE_ALL_TESTS=0 skips it)" >&2
  exit 1
fi
if dpkg-query -W -f='${Status}' haul 2>/dev/null | grep -q "install ok installed"; then
  echo "test-package: a haul package is installed already; not replacing it" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'dpkg -r haul >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
deb=$(bash scripts/package-deb.sh "$work" 2>"$work/lintian.txt" | tail -1) || { cat "$work/lintian.txt" >&2; exit 1; }
dpkg -i "$deb" >/dev/null

toolchain_libraries=$(cd "$(dirname "$(readlink -f "$(command -v swift)")")/../lib" && pwd)
unshare -m bash -euo pipefail -c '
  mount -t tmpfs empty "$1"
  [ -z "$(ls -A "$1")" ]
  if ldd /usr/bin/haul | grep -E "not found|$1"; then echo "test-package: the binary needs the toolchain" >&2; exit 1; fi
  echo "test-package: $(/usr/bin/haul --version | head -1) runs without $1"
  MANPAGER=cat man haul 2>/dev/null | grep -q "EXIT STATUS" || { echo "test-package: man haul shows no manual" >&2; exit 1; }
  MANWIDTH=400 MANPAGER=cat man haul 2>/dev/null | grep -q "Apache License, Version 2.0" || { echo "test-package: the manual names no licence" >&2; exit 1; }
  grep -qx "License: Apache-2.0" /usr/share/doc/haul/copyright || { echo "test-package: the copyright file names no licence" >&2; exit 1; }
  HAUL=/usr/bin/haul bash examples/run.sh >"$2/example.txt" 2>&1 || { cat "$2/example.txt" >&2; exit 1; }
  grep -q "Nothing to do\|nothing to do\|up to date" "$2/example.txt"
  echo "test-package: the bundled example passes with the installed package"
' test-package "$toolchain_libraries" "$work"
