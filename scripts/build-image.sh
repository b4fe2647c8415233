#!/usr/bin/env bash
# Builds a container image of haul without a container registry or daemon: a minimal Debian root file system
# (mmdebstrap, the essential set) holding haul's .deb, its runtime C libraries and ca-certificates, assembled by
# umoci into an OCI image and written as an oci-archive tarball (an OCI image layout in a tar). Podman loads it
# (`podman load -i`, as haul:<version>), skopeo copies it to a registry (`skopeo copy oci-archive:FILE docker://…`).
#
#   bash scripts/build-image.sh [OUTPUT]     default dist/haul-<version>-linux-<arch>.oci.tar; prints its path last
#
# The image: Entrypoint /usr/bin/haul (Cmd --help), runs as the unprivileged user haul (uid and gid 10001, numeric
# so that Kubernetes' runAsNonRoot can check it), working dir /work. Volumes: /work for the manifest and what it
# syncs, /cache for a content cache (haul uses it only when told: -e HAUL_CACHE=/cache or --cache /cache).
#
# Packages come from the Debian mirror the host's apt sources name for the host's release (its -updates and
# -security suites included), so the image's libraries are the ones the .deb was built against.
# Needs root (mmdebstrap's root mode, umoci's unpack and repack).
#
# Env: DEB, a haul .deb to install instead of building one with scripts/package-deb.sh;
#      SOURCE, the repository's address for the org.opencontainers.image.source label (default: the repository a
#      GitHub Actions run builds, else git's origin).
set -euo pipefail
# DEB and OUTPUT are relative to where the script is run from.
given_deb=${DEB:+$(realpath -m "$DEB")}
given_output=${1:+$(realpath -m "$1")}
cd "$(dirname "$0")/.."
for tool in mmdebstrap umoci dpkg-deb apt-get; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing (apt-get install mmdebstrap umoci)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build-image: needs root (mmdebstrap and umoci lay out files owned by root)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "$given_deb" ]; then
  deb=$given_deb
else
  deb=$(bash scripts/package-deb.sh "$work/deb" 2>"$work/lintian.txt" | tail -1) || { cat "$work/lintian.txt" >&2; exit 1; }
fi
[ -f "$deb" ] || { echo "build-image: no .deb at $deb" >&2; exit 1; }
version=$(dpkg-deb -f "$deb" Version)
debian_architecture=$(dpkg-deb -f "$deb" Architecture)
output=${given_output:-dist/haul-$version-linux-$(uname -m).oci.tar}
mkdir -p "$(dirname "$output")"
output=$(cd "$(dirname "$output")" && pwd)/$(basename "$output")

# The host's release and the Debian mirrors its apt sources use for it (main only; other repositories are left out).
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || { echo "build-image: /etc/os-release names no VERSION_CODENAME" >&2; exit 1; }
mirrors=()
while read -r site release; do
  mirrors+=("deb $site $release main")
done < <(apt-get indextargets --format '$(SITE) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' \
           | awk -v c="$codename" '$3 == "main" && ($2 == c || $2 == c "-updates" || $2 == c "-security") { print $1, $2 }' \
           | sort -u)
[ ${#mirrors[@]} -gt 0 ] || { echo "build-image: the host's apt sources name no Debian mirror for $codename main" >&2; exit 1; }

# The .deb's own dependencies come from the mirror; the .deb itself is installed with dpkg in the new root.
depends=$(dpkg-deb -f "$deb" Depends | sed 's/([^)]*)//g; s/|[^,]*//g; s/[[:space:]]//g')
cp "$deb" "$work/haul.deb"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
source_url=${SOURCE:-}
[ -n "$source_url" ] || [ -z "${GITHUB_REPOSITORY:-}" ] || source_url=${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY
# An origin's address may carry credentials (https://user:token@host/…); the label never does.
[ -n "$source_url" ] || source_url=$(git remote get-url origin 2>/dev/null | sed 's#://[^/@]*@#://#' || true)

umoci init --layout "$work/oci"
umoci new --image "$work/oci:haul:$version"
umoci unpack --image "$work/oci:haul:$version" "$work/bundle" >/dev/null
# Documentation, manuals and translations are left out (the licences in /usr/share/doc/*/copyright stay). The
# merged-usr hook lays out the merged /usr itself; the usrmerge package would pull in the whole of perl.
mmdebstrap --quiet --variant=essential --architectures="$debian_architecture" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="ca-certificates,$depends" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook="copy-in $work/haul.deb /tmp" \
  --customize-hook='chroot "$1" dpkg --install /tmp/haul.deb >/dev/null && rm "$1/tmp/haul.deb"' \
  --customize-hook='echo "haul:x:10001:" >> "$1/etc/group"' \
  --customize-hook='echo "haul:x:10001:10001:haul:/home/haul:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "haul:*:0:0:99999:7:::" >> "$1/etc/shadow"' \
  --customize-hook='install -d -o 10001 -g 10001 -m 0755 "$1/home/haul" "$1/work" "$1/cache"' \
  --customize-hook='rm -rf "$1"/var/cache/apt "$1"/var/lib/apt "$1"/var/log/* "$1"/var/cache/debconf/*-old' \
  "$codename" "$work/bundle/rootfs" "${mirrors[@]}"
[ -x "$work/bundle/rootfs/usr/bin/haul" ] || { echo "build-image: haul is not in the image's root" >&2; exit 1; }

created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
umoci repack --image "$work/oci:haul:$version" --history.created "$created" \
  --history.created_by "mmdebstrap --variant=essential $codename; dpkg --install $(basename "$deb")" "$work/bundle"
labels=(--config.label "org.opencontainers.image.title=haul"
        --config.label "org.opencontainers.image.description=declarative manifest sync: download, verify, place atomically"
        --config.label "org.opencontainers.image.version=$version"
        --config.label "org.opencontainers.image.licenses=Apache-2.0"
        --config.label "org.opencontainers.image.created=$created")
if [ -n "$source_url" ]; then
  labels+=(--config.label "org.opencontainers.image.source=$source_url")
else
  echo "build-image: no SOURCE and no git origin; the image has no org.opencontainers.image.source label" >&2
fi
revision=$(git rev-parse HEAD 2>/dev/null || true)
[ -z "$revision" ] || labels+=(--config.label "org.opencontainers.image.revision=$revision")
umoci config --image "$work/oci:haul:$version" --created "$created" --author "haul maintainers" \
  --architecture "$debian_architecture" --os linux \
  --config.entrypoint /usr/bin/haul --config.cmd=--help \
  --config.user 10001:10001 --config.workingdir /work \
  --config.volume /work --config.volume /cache \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  "${labels[@]}" --history.created "$created" --history.created_by "haul image configuration"
umoci gc --layout "$work/oci"

tar --create --file "$output" --directory "$work/oci" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$SOURCE_DATE_EPOCH" .
echo "build-image: haul $version, $(du -h "$output" | cut -f1) ($(du -sh "$work/bundle/rootfs" | cut -f1) unpacked), tag haul:$version" >&2
echo "$output"
