#!/usr/bin/env bash
# The release test (run by scripts/test.sh, after test-package.sh): builds a release with scripts/release.sh into a
# temporary folder served on 127.0.0.1 (RELEASE_URL), checks SHA256SUMS and the archive's members, builds it again for
# a github.com remote without RELEASE_URL (the manifest names the release asset; the archive is the same bytes) and
# checks the refusal without either; then, in a private mount namespace with the Swift toolchain's libraries hidden
# (an empty tmpfs over them), unpacks the archive and runs the bundled example (examples/run.sh) with the unpacked
# haul, and has that haul install haul with the release's manifest: the installed haul runs, a second sync makes no
# request and changes nothing, and an archive tampered with on the server is refused (exit 1) with the installed haul
# left as it was.
# Needs root (mount). Without it the test fails, unless HAUL_REQUIRE_ALL_TESTS=0 lets it skip.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  [ "${HAUL_REQUIRE_ALL_TESTS:-1}" = 0 ] && { echo "test-release: skipped (needs root)"; exit 0; }
  echo "test-release: needs root to hide the toolchain (HAUL_REQUIRE_ALL_TESTS=0 skips it)" >&2
  exit 1
fi
fail() { echo "test-release: $*" >&2; exit 1; }
work=$(mktemp -d)
server=""
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

# Without RELEASE_URL, a remote that is not on github.com gives no default: refused before anything is built, and
# the remote's token is not shown.
git init -q --bare "$work/elsewhere.git"
git --git-dir="$work/elsewhere.git" remote add origin https://user:s3cret@gitlab.example.com/team/haul.git
status=0
env -u RELEASE_URL GIT_DIR="$work/elsewhere.git" bash scripts/release.sh "$work/refused" >"$work/refused.txt" 2>&1 || status=$?
[ "$status" = 1 ] || { cat "$work/refused.txt" >&2; fail "release.sh without RELEASE_URL exited $status, not 1"; }
grep -q "set RELEASE_URL" "$work/refused.txt" && grep -qF "https://***@gitlab.example.com/team/haul.git" "$work/refused.txt" \
  || { cat "$work/refused.txt" >&2; fail "release.sh without RELEASE_URL does not say to set it, naming the remote"; }
! grep -q s3cret "$work/refused.txt" || fail "release.sh printed the remote's password"
[ ! -e "$work/refused" ] || fail "release.sh without RELEASE_URL made its output folder"
echo "test-release: without RELEASE_URL and a github.com remote, release.sh refuses: $(cat "$work/refused.txt")"

# The server runs first, so the release can name its port; its log counts the requests each sync makes.
install -d "$work/www/download"
source scripts/serve-folder.sh
serve_folder "$work/www" "$work/requests.log"
release=$work/www/download
release_url=http://127.0.0.1:$port/download
RELEASE_URL=$release_url bash scripts/release.sh "$release" >"$work/release.txt" 2>&1 \
  || { cat "$work/release.txt" >&2; fail "scripts/release.sh failed"; }

version=$(.build/static/release/haul --version | sed -n '1s/^haul //p')
name=haul-$version-linux-$(uname -m)
archive=$name.tar.gz
deb=haul_${version}_$(dpkg --print-architecture).deb
manifest=haul-$version.haul.yaml
expected=$(printf '%s\n' "$archive" "$deb" "$manifest" SHA256SUMS | sort)
[ "$(ls "$release" | sort)" = "$expected" ] || fail "the release holds $(ls "$release" | tr '\n' ' '), not $(echo $expected)"
[ "$(cut -d' ' -f3 "$release/SHA256SUMS" | sort)" = "$(printf '%s\n' "$archive" "$deb" "$manifest" | sort)" ] \
  || fail "SHA256SUMS does not list exactly the three artifacts: $(cat "$release/SHA256SUMS")"
(cd "$release" && sha256sum --check --strict --quiet SHA256SUMS) || fail "SHA256SUMS does not match the files"
echo "test-release: SHA256SUMS checks $archive, $deb and $manifest"

members=$(tar -tzf "$release/$archive" | grep -v '/$' | sort)
expected_members=$(printf "$name/%s\n" LICENSE README.md bin/haul share/bash-completion/completions/haul \
  share/fish/vendor_completions.d/haul.fish share/man/man1/haul.1 share/zsh/site-functions/_haul | sort)
[ "$members" = "$expected_members" ] || fail "the archive's files are
$members
not
$expected_members"
[ -z "$(tar -tzf "$release/$archive" | grep -v "^$name/")" ] || fail "the archive has members outside $name/"
[ -z "$(tar --numeric-owner -tvzf "$release/$archive" | awk '$2 != "0/0"')" ] || fail "the archive has members not owned by 0:0"
tar -xzOf "$release/$archive" "$name/LICENSE" | cmp -s - LICENSE || fail "the archive's LICENSE is not the repository's"
tar -xzOf "$release/$archive" "$name/README.md" | cmp -s - README.md || fail "the archive's README.md is not the repository's"
grep -qx "  - url: $release_url/$archive" "$release/$manifest" || fail "$manifest does not download $release_url/$archive"
grep -qx "    sha256: $(sha256sum "$release/$archive" | cut -d' ' -f1)" "$release/$manifest" \
  && grep -qx "      strip: 1" "$release/$manifest" && grep -qE "^      tree: sha256-[A-Za-z0-9+/]{43}=$" "$release/$manifest" \
  || fail "$manifest does not pin the archive's sha256, strip: 1 and the tree: $(cat "$release/$manifest")"
echo "test-release: $archive holds the binary, the manual, three completions, LICENSE and README.md"

# Without RELEASE_URL, a github.com remote names the release's assets; the same commit gives the same archive.
git init -q --bare "$work/github.git"
git --git-dir="$work/github.git" remote add origin git@github.com:example/haul.git
env -u RELEASE_URL GIT_DIR="$work/github.git" SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" \
  bash scripts/release.sh "$work/github" >"$work/github.txt" 2>&1 || { cat "$work/github.txt" >&2; fail "the release for a github.com remote failed"; }
grep -qx "  - url: https://github.com/example/haul/releases/download/v$version/$archive" "$work/github/$manifest" \
  || fail "the manifest for a github.com remote does not download its release asset: $(cat "$work/github/$manifest")"
cmp -s "$work/github/$archive" "$release/$archive" || fail "two builds of one commit gave two different archives"
[ "$(grep tree: "$work/github/$manifest")" = "$(grep tree: "$release/$manifest")" ] || fail "two builds pinned two trees"
rm -rf "$work/github"
echo "test-release: with a github.com remote the manifest names its release asset, and the archive is reproducible"

# A tampered archive: README.md cut short, and the gzip header's file name padded so that the archive has exactly
# the pinned size, which leaves only the digests to tell it from the release's.
mkdir "$work/tampered"
tar -xzf "$release/$archive" -C "$work/tampered"
head -c 1000 README.md > "$work/tampered/$name/README.md"
tar -C "$work/tampered" --sort=name --owner=0 --group=0 --numeric-owner -cf "$work/tampered.tar" "$name"
python3 - "$release/$archive" "$work/tampered.tar" "$work/tampered.tar.gz" <<'EOF'
import gzip, io, os, sys
size = os.path.getsize(sys.argv[1])
data = open(sys.argv[2], "rb").read()
padding = size - len(gzip.compress(data, compresslevel=9, mtime=0)) - 1
if padding < 1:
    sys.exit("test-release: the tampered archive is not smaller than the release's")
tampered = io.BytesIO()
with gzip.GzipFile(filename="x" * padding, mode="wb", fileobj=tampered, compresslevel=9, mtime=0) as stream:
    stream.write(data)
if len(tampered.getvalue()) != size:
    sys.exit("test-release: the tampered archive does not have the release's size")
open(sys.argv[3], "wb").write(tampered.getvalue())
EOF

toolchain_libraries=$(cd "$(dirname "$(readlink -f "$(command -v swift)")")/../lib" && pwd)
unshare -m bash -euo pipefail -c '
  libraries=$1 work=$2 release=$3 archive=$4 name=$5 manifest=$6 version=$7 release_url=$8
  fail() { echo "test-release: $*" >&2; exit 1; }
  requests() { grep -cE "\"[A-Z]+ /" "$work/requests.log" || true; }
  # What a folder is, member by member: any change to a name, an inode, a time or a byte shows.
  snapshot() { (cd "$1" && find . -printf "%p %y %i %m %s %T@ %l\n" | sort && find . -type f -exec sha256sum {} + | sort); }
  mount -t tmpfs empty "$libraries"
  [ -z "$(ls -A "$libraries")" ]
  mkdir "$work/unpacked"
  tar -xzf "$release/$archive" -C "$work/unpacked"
  haul=$work/unpacked/$name/bin/haul
  if ldd "$haul" | grep -E "not found|$libraries"; then fail "the unpacked binary needs the toolchain"; fi
  [ "$("$haul" --version | head -1)" = "haul $version" ] || fail "the unpacked haul is not haul $version"
  echo "test-release: the unpacked $("$haul" --version | head -1) runs without $libraries"
  HAUL=$haul bash examples/run.sh >"$work/example.txt" 2>&1 || { cat "$work/example.txt" >&2; fail "examples/run.sh failed"; }
  echo "test-release: the bundled example passes with the unpacked haul"

  # A user pins haul with haul: the manifest alone, in a new folder, with no config or cache of the machine.
  export XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache
  unset HAUL_CONFIG HAUL_CACHE
  mkdir "$work/home"
  cp "$release/$manifest" "$work/home/"
  "$haul" sync "$work/home/$manifest" >"$work/sync1.txt" 2>&1 || { cat "$work/sync1.txt" >&2; fail "the first sync failed"; }
  installed=$work/home/haul/bin/haul
  [ "$("$installed" --version | head -1)" = "haul $version" ] || fail "the installed haul does not run as haul $version"
  cmp -s "$installed" "$haul" || fail "the installed binary is not the archive'"'"'s"
  [ -f "$work/home/haul/share/man/man1/haul.1" ] || fail "the install has no manual page"
  echo "test-release: haul sync $manifest installed $("$installed" --version | head -1) into a new folder"

  before=$(snapshot "$work/home/haul") count=$(requests)
  "$haul" sync "$work/home/$manifest" >"$work/sync2.txt" 2>&1 || { cat "$work/sync2.txt" >&2; fail "the second sync failed"; }
  [ "$(requests)" = "$count" ] || fail "the second sync made a request"
  [ "$(snapshot "$work/home/haul")" = "$before" ] || fail "the second sync changed the install"
  echo "test-release: a second sync makes no request and changes nothing"

  # The server now sends the tampered archive under the release'"'"'s name.
  mv "$work/tampered.tar.gz" "$release/$archive"
  # A member removed makes the next sync unpack the archive again, and so download it.
  rm "$work/home/haul/README.md"
  before=$(snapshot "$work/home/haul") count=$(requests)
  status=0
  "$haul" sync "$work/home/$manifest" >"$work/sync3.txt" 2>&1 || status=$?
  [ "$status" = 1 ] || { cat "$work/sync3.txt" >&2; fail "a tampered archive made sync exit $status, not 1"; }
  [ "$(requests)" -gt "$count" ] || fail "the sync after a member was removed made no request"
  grep -qF "$release_url/$archive: the server'"'"'s bytes differ from the pinned checksum" "$work/sync3.txt" || { cat "$work/sync3.txt" >&2; fail "the refusal does not name the archive'"'"'s URL and its checksum"; }
  [ "$(snapshot "$work/home/haul")" = "$before" ] || fail "a refused archive changed the install"
  [ "$("$installed" --version | head -1)" = "haul $version" ] || fail "the installed haul no longer runs"
  echo "test-release: a tampered archive is refused (exit 1), the installed haul left as it was: $(grep -m1 error "$work/sync3.txt")"
' test-release "$toolchain_libraries" "$work" "$release" "$archive" "$name" "$manifest" "$version" "$release_url"
