# Sourced by the benchmark scripts: makes sure the programs they run are there.
#
#   bench_tools REQUIRED ... [-- OPTIONAL ...]
#
# Names are commands (nginx, curl, aria2c, wget, openssl, time for GNU /usr/bin/time, strace, ...). When some are
# missing and the script runs as root on a machine with apt-get, they are installed (BENCH_INSTALL=0 turns that off);
# otherwise the script stops on a missing REQUIRED one with the apt-get line to run, and goes on without an OPTIONAL
# one (its rows are left out). Everything the benchmarks use, on Debian or Ubuntu:
#
#   apt-get install nginx curl aria2 wget time openssl zstd
BENCH_PACKAGES="nginx curl aria2 wget time openssl zstd"

bench_package() {  # the Debian package that provides a command
  case $1 in
    aria2c) echo aria2 ;;
    mkfs.ext4) echo e2fsprogs ;;
    strip) echo binutils ;;
    sha256sum) echo coreutils ;;
    find) echo findutils ;;
    nix-hash) echo nix-bin ;;
    *) echo "$1" ;;
  esac
}

bench_have() {
  case $1 in
    time) /usr/bin/time --version 2>&1 | grep -q GNU ;;
    nginx) [ -n "${NGINX:-}" ] || command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

bench_missing() {  # the given commands that are not there
  local tool
  for tool in "$@"; do [ "$tool" = -- ] || bench_have "$tool" || printf '%s ' "$tool"; done
}

bench_tools() {
  local missing packages required=() tool
  missing=$(bench_missing "$@")
  [ -n "$missing" ] || return 0
  packages=$(for tool in $missing; do bench_package "$tool"; done | sort -u | tr '\n' ' ')
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${BENCH_INSTALL:-1}" != 0 ]; then
    echo "benchmarks: installing ${packages% } (apt-get; BENCH_INSTALL=0 turns this off)" >&2
    # No service is started by the install: the packaged nginx would listen on every address, on port 80.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && made_policy=1; fi
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages >&2 \
      || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages >&2; } \
      || true
    [ "$made_policy" = 0 ] || rm -f "$policy"
    missing=$(bench_missing "$@")
    [ -n "$missing" ] || return 0
    packages=$(for tool in $missing; do bench_package "$tool"; done | sort -u | tr '\n' ' ')
  fi
  for tool in "$@"; do
    [ "$tool" = -- ] && break
    [[ " $missing " == *" $tool "* ]] && required+=("$tool")
  done
  if [ ${#required[@]} -gt 0 ]; then
    echo "benchmarks: missing ${required[*]}; install with: apt-get install ${packages% }" >&2
    echo "  (everything the benchmarks use: apt-get install $BENCH_PACKAGES)" >&2
    exit 1
  fi
  echo "benchmarks: going on without ${missing% } (its rows are left out); install with: apt-get install ${packages% }" >&2
}
