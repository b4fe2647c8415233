#!/usr/bin/env bash
# Builds a release of haul: every file a release publishes, in one folder.
#
#   bash scripts/release.sh [OUTPUT-FOLDER]       default dist/
#
# Writes, for <version> (`haul --version`) and this machine's architecture:
#   haul-<version>-linux-<arch>.tar.gz   the self-contained binary, its manual page, bash, zsh and fish completions,
#                                        LICENSE and README.md, under one folder haul-<version>-linux-<arch>/
#                                        (bin/haul, share/…: the layout scripts/install.sh gives a prefix)
#   haul_<version>_<debarch>.deb         scripts/package-deb.sh's package
#   haul-<version>.haul.yaml             a haul manifest that installs this archive: the archive's sha256 and its
#                                        unpacked tree pinned (extract: strip: 1, tree:), so a user pins haul with haul
#   SHA256SUMS                           sha256sum's lines for the three files above
# The archive is reproducible: members sorted, owned by 0:0, dated at the last commit (or SOURCE_DATE_EPOCH), gzip
# without a name or time. The binary is built once: package-deb.sh's own install.sh run finds it built.
#
# Env: RELEASE_URL, the folder the release's files will be published at, which the manifest's url names (default,
# when the remote origin is on github.com: https://github.com/OWNER/REPO/releases/download/v<version>).
# Nothing is requested from it: the manifest's pins are computed from the archive served on 127.0.0.1 (a config
# rewrite of RELEASE_URL, as users' mirrors are). MAINTAINER as for package-deb.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
output=${1:-dist}

# The manifest names where the archive will be downloaded from; without a place, there is no manifest to write.
release_url=${RELEASE_URL:-}
github_repository=""
if [ -z "$release_url" ]; then
  # As configured: a local url.*.insteadOf (a mirror of github.com) does not change where the release is published.
  origin=$(git config --get remote.origin.url 2>/dev/null || true)
  github_repository=$(printf '%s\n' "$origin" \
    | sed -nE 's#^(https://([^/@]+@)?github\.com/|ssh://git@github\.com/|git@github\.com:)([^/]+/[^/]+)/?$#\3#p' \
    | sed 's/\.git$//')
  if [ -z "$github_repository" ]; then
    origin=$(printf '%s' "$origin" | sed -E 's#^([a-z+]+://)[^/@]*@#\1***@#')   # a token in the URL is not shown
    echo "release: set RELEASE_URL to the folder the release's files will be published at (the manifest" \
         "haul-<version>.haul.yaml downloads the archive from it); the remote origin (${origin:-none}) is not on" \
         "github.com, so no default can be derived" >&2
    exit 1
  fi
fi
case $release_url in
  ''|http://*|https://*) ;;
  *) echo "release: RELEASE_URL must be an http:// or https:// URL, not $release_url" >&2; exit 1 ;;
esac

mkdir -p "$output"
output=$(cd "$output" && pwd)
work=$(mktemp -d)
server=""
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

root=$work/root
DESTDIR=$root bash scripts/install.sh / >/dev/null
version=$("$root/bin/haul" --version | sed -n '1s/^haul //p')
[ -n "$version" ] || { echo "release: the built haul prints no version" >&2; exit 1; }
[ -n "$release_url" ] || release_url=https://github.com/$github_repository/releases/download/v$version
release_url=${release_url%/}
arch=$(uname -m)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

name=haul-$version-linux-$arch
archive=$name.tar.gz
install -d -m 0755 "$work/stage"
mv "$root" "$work/stage/$name"
install -m 0644 LICENSE README.md "$work/stage/$name/"
chmod -R u+rwX,go+rX,go-w "$work/stage/$name"
tar -C "$work/stage" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu -cf - "$name" \
  | gzip -9n > "$work/$archive"

deb=$(bash scripts/package-deb.sh "$work" | tail -1)

# haul add pins the archive as sync will check it; the config rewrite sends its request to the archive on loopback.
install -d "$work/served"
ln "$work/$archive" "$work/served/$archive"
source scripts/serve-folder.sh
serve_folder "$work/served"
yaml_quoted() { printf "'%s'" "${1//\'/\'\'}"; }
printf 'rewrites:\n  - prefix: %s\n    to: %s\n' "$(yaml_quoted "$release_url/")" "$(yaml_quoted "http://127.0.0.1:$port/")" \
  > "$work/config.yaml"
manifest=haul-$version.haul.yaml
{
  printf '# haul %s for Linux %s. `haul sync %s` installs it into haul/ beside this file\n' "$version" "$arch" "$manifest"
  echo "# (haul/bin/haul, haul/share/man/man1/haul.1, completions in haul/share), once the archive's sha256 and"
  echo "# the unpacked tree's digest both match; a later sync makes no request while they still do."
  printf 'version: 1\nfiles:\n'
  env -u HAUL_CACHE "$work/stage/$name/bin/haul" add --config "$work/config.yaml" --extract --strip 1 --dest haul \
    --print "$release_url/$archive" | sed 's/^/  /'
} > "$work/$manifest"
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
server=""
grep -q '^      tree: sha256-' "$work/$manifest" || { echo "release: haul add pinned no tree for $archive" >&2; exit 1; }

artifacts=("$archive" "$(basename "$deb")" "$manifest")
for artifact in "${artifacts[@]}"; do
  chmod 0644 "$work/$artifact"
  mv -f "$work/$artifact" "$output/$artifact"
done
(cd "$output" && sha256sum "${artifacts[@]}" > SHA256SUMS.tmp && mv -f SHA256SUMS.tmp SHA256SUMS)
echo "release: haul $version for $arch in $output, to be published at $release_url/:"
for artifact in "${artifacts[@]}" SHA256SUMS; do echo "  $artifact"; done
