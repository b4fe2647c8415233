#!/usr/bin/env bash
# Installs what haul needs to build and test on Debian, if it is missing. Idempotent; needs root (or sudo)
# only when something must be installed.
set -euo pipefail

#   source scripts/setup-debian.sh test     what building and testing need
#   source scripts/setup-debian.sh build    what building and installing need (scripts/install.sh, package-deb.sh)
#
# Build: the C libraries haul links (libcurl pulls in libssl-dev for libcrypto; libarchive-dev brings the runtime
# libarchive13 that unpacks archives), pkg-config to find them, python3 to write the manual page. Tests: python3 with
# jsonschema and PyYAML validate the examples against the JSON Schema; nginx and openssl give the TLS and HTTP/2
# tests a real server with a test CA; gcc builds the crash tests' LD_PRELOAD kill switch, e2fsprogs (chattr,
# mkfs.ext4) and util-linux (setpriv, mount, losetup, unshare) let the local-fault tests make real faults, fuse and
# python3-fusepy mount the I/O-error file system (Tests/Tools/faultfs.py), tmux gives the live-progress test a real
# terminal, faketime runs haul with its clock moved (freshness when the clock was wrong), nix-bin's nix-hash and nix
# hash path give the NAR digests a tree's digest is checked against, dpkg-dev, fakeroot and lintian build and check
# the .deb that the package test installs, bzip2, xz-utils, zstd, zip and p7zip-full make the archives the
# unpacking tests read, zsh and fish (with bash) load the completion scripts the completion tests try, and
# mmdebstrap and umoci build the container image that podman (with runc: crun refuses hybrid cgroups) runs in the
# image test; minisign, signify-openbsd, openssh-client (ssh-keygen) and gnupg make the signatures the signature
# tests check, and sqv and gpgv check the OpenPGP ones as haul will.
packages=(pkg-config libcurl4-openssl-dev libyaml-dev libssl-dev libarchive-dev python3)
if [ "${1:-test}" != build ]; then
  packages+=(python3-jsonschema python3-yaml ca-certificates openssl nginx-light gcc libc6-dev e2fsprogs util-linux mount
             tmux faketime fuse python3-fusepy nix-bin dpkg-dev fakeroot lintian man-db bzip2 xz-utils zstd zip p7zip-full
             zsh fish mmdebstrap umoci podman runc minisign signify-openbsd openssh-client gnupg gpgv sqv)
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Swift lives in /opt/swift on these machines; make it reachable for the scripts that source this one.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="/opt/swift/usr/bin:$PATH"
fi
command -v swift >/dev/null 2>&1 || { echo "setup: swift not found (expected a Swift 6 toolchain on PATH or in /opt/swift)" >&2; exit 1; }
