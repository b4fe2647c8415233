#!/usr/bin/env bash
# Installs haul: a release archive, checked against the SHA256SUMS published beside it before anything is unpacked,
# or a build of the action's checkout (skipped when actions/cache restored it). Adds haul's folder to PATH.
# Outputs: haul-path, version, cache (the folder haul's content cache is kept in).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/workflow.sh"

case $HAUL_FROM in
  archive)
    name=${HAUL_ARCHIVE%%\?*}
    name=${name##*/}
    [[ $name =~ ^haul-[^/]+-linux-[^/]+\.tar\.gz$ ]] || fail "$HAUL_ARCHIVE is not a haul release archive (haul-VERSION-linux-ARCH.tar.gz)"
    [[ $name == *-linux-$(uname -m).tar.gz ]] || fail "$name is not for this runner's architecture, $(uname -m)"
    work=$(mktemp -d "$RUNNER_TEMP/haul-download.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    sums=${HAUL_ARCHIVE%/*}/SHA256SUMS
    fetch() {
      case $1 in
        *://*) curl --fail --silent --show-error --location --proto '=https,http,file' --retry 3 --output "$2" "$1" \
                 || fail "could not download $1" ;;
        *) cp -- "$1" "$2" 2>/dev/null || fail "no file at $1" ;;
      esac
    }
    fetch "$HAUL_ARCHIVE" "$work/$name"
    fetch "$sums" "$work/SHA256SUMS"
    expected=$(awk -v name="$name" '$2 == name || $2 == "*" name { print $1; exit }' "$work/SHA256SUMS")
    [ -n "$expected" ] || fail "$sums lists no $name"
    actual=$(sha256sum "$work/$name" | cut -d' ' -f1)
    [ "$actual" = "$expected" ] || fail "$name does not match $sums: its sha256 is $actual, the list says $expected"
    top=${name%.tar.gz}
    prefix=$RUNNER_TEMP/haul/$top
    rm -rf "$prefix"
    mkdir -p "$RUNNER_TEMP/haul"
    tar -xzf "$work/$name" -C "$work" --no-same-owner || fail "$name could not be unpacked"
    [ -f "$work/$top/bin/haul" ] || fail "$name holds no $top/bin/haul"
    mv "$work/$top" "$prefix"
    ;;
  checkout)
    prefix=$HAUL_PREFIX
    if [ -x "$prefix/bin/haul" ]; then
      echo "haul: the build of this checkout was restored from the cache"
    else
      bash "$GITHUB_ACTION_PATH/scripts/install.sh" "$prefix"
    fi
    ;;
  *) fail "unknown source of haul: $HAUL_FROM" ;;
esac

binary=$prefix/bin/haul
version=$("$binary" --version | sed -n '1s/^haul //p')
[ -n "$version" ] || fail "$binary does not run here"
if [ "$HAUL_FROM" = archive ] && [ -n "${HAUL_VERSION:-}" ] && [ "$version" != "${HAUL_VERSION#v}" ]; then
  fail "the archive holds haul $version, not the version asked for, ${HAUL_VERSION#v}"
fi
echo "haul: installed haul $version at $binary"
echo "$prefix/bin" >> "$GITHUB_PATH"
{
  echo "haul-path=$binary"
  echo "version=$version"
  echo "cache=${HAUL_CACHE:-$RUNNER_TEMP/haul-cache}"
} >> "$GITHUB_OUTPUT"
