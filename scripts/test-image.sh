#!/usr/bin/env bash
# The container image test (run by scripts/test.sh): builds the image (scripts/build-image.sh, which builds the .deb),
# and runs it against a loopback server: a `haul sync` into a bind-mounted folder writes the file's bytes as the
# image's unprivileged user and exits 0, a second sync changes nothing, a wrong checksum exits 1 and writes nothing.
#
# Two routes, named in the output. podman, when it can start a container on this machine (rootful, in a private
# storage folder, vfs driver, host network); else the image unpacked with umoci and run in a private mount and PID
# namespace with chroot, honouring the image's entrypoint, user, working dir and environment.
# Needs root. Without it the test fails, unless HAUL_REQUIRE_ALL_TESTS=0 lets it skip.
#
# Env: HAUL_IMAGE_ROUTE=podman or chroot forces a route; HAUL_IMAGE, an oci-archive to test instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  [ "${HAUL_REQUIRE_ALL_TESTS:-1}" = 0 ] && { echo "test-image: skipped (needs root)"; exit 0; }
  echo "test-image: needs root to build and run the image (HAUL_REQUIRE_ALL_TESTS=0 skips it)" >&2
  exit 1
fi
fail() { echo "test-image: $*" >&2; exit 1; }

work=$(mktemp -d)
server=""
podman=(podman --root "$work/storage" --runroot "$work/run" --storage-driver vfs --runtime runc --cgroup-manager cgroupfs)
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  [ ! -d "$work/storage" ] || "${podman[@]}" system reset --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

started=$SECONDS
if [ -n "${HAUL_IMAGE:-}" ]; then
  image=$HAUL_IMAGE
else
  image=$(bash scripts/build-image.sh "$work/haul.oci.tar" 2>"$work/build.txt" | tail -1) || { cat "$work/build.txt" >&2; exit 1; }
fi
mkdir "$work/oci"
tar --extract --file "$image" --directory "$work/oci"
tag=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])' "$work/oci/index.json")
echo "test-image: built $tag ($(du -h "$image" | cut -f1)) in $((SECONDS - started))s"

# The served file, and manifests that pin it right and wrong; the data folder is the image's user's, as a volume is.
mkdir -p "$work/served" "$work/data"
head -c 100000 /dev/urandom > "$work/served/payload.bin"
digest=$(sha256sum "$work/served/payload.bin" | cut -d' ' -f1)
source scripts/serve-folder.sh
serve_folder "$work/served" "$work/server.txt" || fail "the loopback server did not start"
manifest() {
  printf 'version: 1\nroot: ./assets\nfiles:\n  - url: http://127.0.0.1:%s/payload.bin\n    dest: %s\n    sha256: %s\n' "$port" "$1" "$2"
}
manifest payload.bin "$digest" > "$work/data/haul.yaml"
manifest wrong.bin "$(printf '%064d' 0)" > "$work/data/wrong.yaml"

route=${HAUL_IMAGE_ROUTE:-}
if [ -z "$route" ] || [ "$route" = podman ]; then
  # Lowered limits: crun and runc set them, and raising one needs a capability this machine may not grant.
  run_podman=("${podman[@]}" run --network=host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
  if command -v podman >/dev/null && command -v runc >/dev/null \
     && "${podman[@]}" load --quiet --input "$image" >"$work/podman.txt" 2>&1 \
     && "${run_podman[@]}" --rm "$tag" --version >>"$work/podman.txt" 2>&1; then
    route=podman
  elif [ "$route" = podman ]; then
    fail "podman cannot start the image here: $(cat "$work/podman.txt")"
  else
    route=chroot
    reason=$(tail -1 "$work/podman.txt" 2>/dev/null) || reason="podman or runc is missing"
    echo "test-image: podman cannot start a container here (${reason:-podman or runc is missing}); using unshare and chroot"
  fi
fi

if [ "$route" = podman ]; then
  user=$("${podman[@]}" image inspect --format '{{.Config.User}}' "$tag")
  # The run's status is haul's; the container is removed apart, since podman's own removal can fail on a busy
  # mount and then stand in for haul's status (seen: a sync that exited 1 reported as 0).
  container() {
    local name=haul-test-$RANDOM$RANDOM status=0
    "${run_podman[@]}" --name "$name" --volume "$work/data:/work" "$tag" "$@" || status=$?
    "${podman[@]}" rm --force "$name" >/dev/null 2>&1 || true
    return $status
  }
else
  [ "$route" = chroot ] || fail "HAUL_IMAGE_ROUTE is podman or chroot, not $route"
  umoci unpack --image "$work/oci:$tag" "$work/bundle" >/dev/null
  # The image's configuration (entrypoint, working dir, environment) from the layout; the user as umoci resolved it
  # against the image's /etc/passwd. A run's own arguments replace the image's Cmd, as a container runtime's do.
  python3 - "$work/oci" "$tag" "$work/bundle/config.json" > "$work/process.sh" <<'EOF'
import json, shlex, sys
layout, tag, bundle = sys.argv[1:]
def blob(digest):
    return json.load(open("%s/blobs/%s" % (layout, digest.replace(":", "/"))))
index = json.load(open(layout + "/index.json"))
manifest = next(m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == tag)
config = blob(blob(manifest["digest"])["config"]["digest"])["config"]
user = json.load(open(bundle))["process"]["user"]
words = lambda values: " ".join(shlex.quote(v) for v in values)
print("entrypoint=(%s)" % words(config["Entrypoint"]))
print("user=%d:%d" % (user["uid"], user["gid"]))
print("cwd=%s" % shlex.quote(config.get("WorkingDir") or "/"))
print("environment=(%s)" % words(config.get("Env", [])))
EOF
  source "$work/process.sh"
  container() {
    unshare --mount --pid --fork --propagation private bash -euo pipefail -c '
      root=$1/rootfs data=$2 user=$3 cwd=$4; shift 4
      mount --bind "$data" "$root/work"
      mount -t proc proc "$root/proc"
      mount -t tmpfs -o mode=1777 tmp "$root/tmp"
      for device in null zero random urandom; do
        touch "$root/dev/$device"; mount --bind "/dev/$device" "$root/dev/$device"
      done
      exec chroot --userspec="$user" "$root" /usr/bin/env -i "${@}"
    ' container "$work/bundle" "$work/data" "$user" "$cwd" \
      /bin/sh -c 'cd "$1" && shift && exec "$@"' cd "$cwd" /usr/bin/env "${environment[@]}" "${entrypoint[@]}" "$@"
  }
fi
# Numeric, so that Kubernetes' runAsNonRoot can check it, and not root.
[[ $user =~ ^[1-9][0-9]*:[0-9]+$ ]] || fail "the image runs as user '$user', not as a numeric non-root uid:gid"
echo "test-image: running the image with $route, as user $user"
chown -R "$user" "$work/data"

set +e
container sync haul.yaml >"$work/first.txt" 2>&1; first=$?
set -e
[ $first = 0 ] || fail "the first sync exited $first, not 0: $(cat "$work/first.txt")"
cmp "$work/served/payload.bin" "$work/data/assets/payload.bin" || fail "the synced file differs from the served one"
[ "$(stat -c %u:%g "$work/data/assets/payload.bin")" = "$user" ] || fail "the synced file is not owned by the image's user $user"
before=$(stat -c %i:%Y "$work/data/assets/payload.bin")
requests=$(grep -c '"GET /payload.bin' "$work/server.txt" || true)

set +e
container sync haul.yaml >"$work/second.txt" 2>&1; second=$?
set -e
[ $second = 0 ] || fail "the second sync exited $second, not 0: $(cat "$work/second.txt")"
grep -q "Nothing to do: 1 file up to date" "$work/second.txt" || fail "the second sync changed something: $(cat "$work/second.txt")"
[ "$(stat -c %i:%Y "$work/data/assets/payload.bin")" = "$before" ] || fail "the second sync rewrote the file"
[ "$(grep -c '"GET /payload.bin' "$work/server.txt" || true)" = "$requests" ] || fail "the second sync asked the server again"

set +e
container sync wrong.yaml >"$work/wrong.txt" 2>&1; wrong=$?
set -e
[ $wrong = 1 ] || fail "a wrong checksum exited $wrong, not 1: $(cat "$work/wrong.txt")"
grep -q "$digest" "$work/wrong.txt" || fail "the checksum failure does not name the served digest: $(cat "$work/wrong.txt")"
[ ! -e "$work/data/assets/wrong.bin" ] || fail "a file that failed its checksum was put in place"
echo "test-image: the image ($route) syncs, finds nothing to do the second time, and refuses a wrong checksum ($((SECONDS - started))s)"
