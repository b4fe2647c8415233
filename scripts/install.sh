#!/usr/bin/env bash
# Builds haul as one self-contained binary and installs it with its manual page and shell completions.
#
#   bash scripts/install.sh [PREFIX]          default /usr/local
#
# Installs PREFIX/bin/haul, PREFIX/share/man/man1/haul.1, and completions for bash
# (PREFIX/share/bash-completion/completions/haul), zsh (PREFIX/share/zsh/site-functions/_haul) and fish
# (PREFIX/share/fish/vendor_completions.d/haul.fish). The binary carries the Swift runtime inside it
# (--static-swift-stdlib): it needs only the C library, libcurl, libyaml and libcrypto of the system, not the
# toolchain it was built with. Missing build packages are installed with apt-get (scripts/setup-debian.sh).
#
# Env: DESTDIR (prepended to every installed path, as `make install` does; for packaging), ZSH_COMPLETIONS (the zsh
# folder under PREFIX/share, default zsh/site-functions).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local}
case $PREFIX in /*) ;; *) PREFIX=$PWD/$PREFIX ;; esac
DESTDIR=${DESTDIR:-}
source scripts/setup-debian.sh build

# The toolchain's lld links the static runtime without GNU ld's warnings about what Foundation's archive contains.
linker=()
[ -x "$(dirname "$(command -v swift)")/ld.lld" ] && linker=(-Xswiftc -use-ld=lld)
swift build -c release --product haul --static-swift-stdlib "${linker[@]}" --scratch-path .build/static
binary=.build/static/release/haul
version=$("$binary" --version | sed -n '1s/^haul //p')

install -d "$DESTDIR$PREFIX/bin" "$DESTDIR$PREFIX/share/man/man1" "$DESTDIR$PREFIX/share/bash-completion/completions" \
  "$DESTDIR$PREFIX/share/${ZSH_COMPLETIONS:-zsh/site-functions}" "$DESTDIR$PREFIX/share/fish/vendor_completions.d"
install -m 0755 -s "$binary" "$DESTDIR$PREFIX/bin/haul"
"$binary" --experimental-dump-help | python3 scripts/manpage.py "$version" > "$DESTDIR$PREFIX/share/man/man1/haul.1"
chmod 0644 "$DESTDIR$PREFIX/share/man/man1/haul.1"
# bash-completion sources the script: it is not run, so it carries no #! line.
"$binary" --generate-completion-script bash | sed '1{/^#!/d}' > "$DESTDIR$PREFIX/share/bash-completion/completions/haul"
"$binary" --generate-completion-script zsh > "$DESTDIR$PREFIX/share/${ZSH_COMPLETIONS:-zsh/site-functions}/_haul"
"$binary" --generate-completion-script fish > "$DESTDIR$PREFIX/share/fish/vendor_completions.d/haul.fish"
chmod 0644 "$DESTDIR$PREFIX/share/bash-completion/completions/haul" \
  "$DESTDIR$PREFIX/share/${ZSH_COMPLETIONS:-zsh/site-functions}/_haul" "$DESTDIR$PREFIX/share/fish/vendor_completions.d/haul.fish"
echo "install: haul $version in $DESTDIR$PREFIX/bin, its manual (man haul) and bash, zsh and fish completions"
