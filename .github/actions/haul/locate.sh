#!/usr/bin/env bash
# Decides where haul comes from: a release archive (the `source` input, or the `version` input's release on the
# action's own repository) or a build of the action's checkout, and for a build the cache key it is kept under.
# Outputs: from (archive or checkout), archive (URL or absolute path), prefix and build-key (checkout only).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/workflow.sh"
[ "${RUNNER_OS:-Linux}" = Linux ] || fail "haul runs on Linux runners only, not ${RUNNER_OS}"
arch=$(uname -m)

if [ -n "${HAUL_SOURCE:-}" ]; then
  # One line: it becomes a line of GITHUB_OUTPUT.
  case $HAUL_SOURCE in *$'\n'*|*$'\r'*) fail "source must be one line" ;; esac
  case $HAUL_SOURCE in
    http://*|https://*|file://*) archive=$HAUL_SOURCE ;;
    *://*) fail "source must be an http, https or file URL or a path, not $HAUL_SOURCE" ;;
    /*) archive=$HAUL_SOURCE ;;
    *) archive=$GITHUB_WORKSPACE/$HAUL_SOURCE ;;
  esac
  echo "from=archive" >> "$GITHUB_OUTPUT"
  echo "archive=$archive" >> "$GITHUB_OUTPUT"
elif [ -n "${HAUL_VERSION:-}" ]; then
  version=${HAUL_VERSION#v}
  [[ $version =~ ^[0-9A-Za-z.+~-]+$ ]] || fail "version must be a release's version such as 0.2.0, not $HAUL_VERSION"
  # github.action_repository is empty when the action is used from the workflow's own checkout (uses: ./).
  [ -n "${HAUL_ACTION_REPOSITORY:-}" ] \
    || fail "version needs the action used from its repository (uses: OWNER/haul@REF); give source instead"
  echo "from=archive" >> "$GITHUB_OUTPUT"
  echo "archive=${HAUL_SERVER_URL:-https://github.com}/$HAUL_ACTION_REPOSITORY/releases/download/v$version/haul-$version-linux-$arch.tar.gz" \
    >> "$GITHUB_OUTPUT"
else
  [ -x /opt/swift/usr/bin/swift ] && PATH=/opt/swift/usr/bin:$PATH
  command -v swift >/dev/null 2>&1 \
    || fail "no Swift toolchain on this runner to build haul from the action's checkout: give version or source"
  # The commit when the checkout is a git one; else (a downloaded action) the digest of the sources themselves.
  sources=$(git -C "$GITHUB_ACTION_PATH" rev-parse HEAD 2>/dev/null \
    || (cd "$GITHUB_ACTION_PATH" && find Package.swift Package.resolved Sources scripts -type f 2>/dev/null \
          | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -c1-40))
  toolchain=$(swift --version 2>/dev/null | sha256sum | cut -c1-12)
  echo "from=checkout" >> "$GITHUB_OUTPUT"
  echo "prefix=$RUNNER_TEMP/haul-build" >> "$GITHUB_OUTPUT"
  echo "build-key=haul-build-Linux-$arch-$sources-$toolchain" >> "$GITHUB_OUTPUT"
fi
