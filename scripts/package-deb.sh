#!/usr/bin/env bash
# Builds a Debian package of haul: the self-contained binary, its manual page and shell completions, as
# scripts/install.sh installs them under /usr. It depends on the runtime packages of the C libraries the binary
# links (libcurl, libyaml, OpenSSL's libcrypto, the C library; found by dpkg-shlibdeps), never on a -dev package or
# on Swift. lintian checks it; any lintian error fails the build.
#
#   bash scripts/package-deb.sh [OUTPUT-FOLDER]       default dist/; prints the .deb's path last
#
# Env: MAINTAINER ("Name <address>", written into the package's control file).
set -euo pipefail
cd "$(dirname "$0")/.."
output=${1:-dist}
mkdir -p "$output"
output=$(cd "$output" && pwd)
MAINTAINER=${MAINTAINER:-haul maintainers <maintainers@haul.invalid>}
for tool in dpkg-deb dpkg-shlibdeps fakeroot lintian; do
  command -v "$tool" >/dev/null || { echo "package-deb: $tool is missing (apt-get install dpkg-dev fakeroot lintian)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
DESTDIR=$root ZSH_COMPLETIONS=zsh/vendor-completions bash scripts/install.sh /usr >/dev/null
version=$("$root/usr/bin/haul" --version | sed -n '1s/^haul //p')
architecture=$(dpkg --print-architecture)

gzip -9n "$root/usr/share/man/man1/haul.1"
install -d "$root/usr/share/doc/haul"
cat > "$root/usr/share/doc/haul/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: haul
Comment: a declarative manifest sync tool.

Files: *
Copyright: 2026 the haul authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 is in
 /usr/share/common-licenses/Apache-2.0; it is also the file LICENSE of haul's source.
EOF
changed=$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")
printf 'haul (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' "$version" "$version" "$MAINTAINER" "$changed" \
  | gzip -9n > "$root/usr/share/doc/haul/changelog.gz"
chmod 0644 "$root/usr/share/doc/haul/copyright" "$root/usr/share/doc/haul/changelog.gz"

# dpkg-shlibdeps reads a source package's control file: a minimal one, in the work folder.
mkdir -p "$work/debian"
printf 'Source: haul\n\nPackage: haul\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O "-e$root/usr/bin/haul" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package-deb: dpkg-shlibdeps found no dependencies for the binary" >&2; exit 1; }

install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<EOF
Package: haul
Version: $version
Architecture: $architecture
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Section: net
Priority: optional
Description: declarative manifest sync: download, verify, place atomically
 haul reads a YAML manifest of files (URLs with mirrors, destination paths,
 checksums), looks at what is on disk, and downloads only what is missing or
 wrong, concurrently, verifying each hash while the bytes arrive. Each file is
 moved into place atomically once verified: a destination is always its old
 content or its new verified content. For CI jobs, asset mirrors and cron.
EOF

deb=$output/haul_${version}_${architecture}.deb
fakeroot dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
# Errors fail the package; warnings and notes are printed for whoever builds it.
lintian --fail-on error --tag-display-limit 0 "$deb" >&2
echo "$deb"
