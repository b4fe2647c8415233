#!/usr/bin/env bash
# What turning an archive into a tree costs: haul's first sync of an `extract:` entry (download, verify, unpack,
# durable commit) next to the two ways scripts do it today, and haul's no-op of the unpacked tree next to `find`, on
# several file systems, in one command:
#
#   benchmarks/archives.sh [CORPUS ...]        default: archive-large archive-small
#
# Corpora (benchmarks/harness/corpus.py, served by the harness's private nginx on 127.0.0.1):
#   archive-large   10,000 files, 1 GiB in all, as one .tar.zst
#   archive-small   50,000 files, 300 MiB in all, as one .tar.gz
# Per file system and corpus, RUNS times each (the harness's lib/measure.py: median wall time, CPU s = user + system
# of the command and its children, nginx's CPU; runs disturbed by other load are repeated), each into an empty
# folder made after an untimed `rm -rf` and `sync`:
#   pipe       curl -sS --fail URL | tar -x --zstd (or -z), under pipefail: verifies nothing, not atomic
#   careful    curl -o ARCHIVE URL && sha256sum -c ARCHIVE.sha256 && tar -xf ARCHIVE -C tree: what careful scripts do
#   haul       haul sync of a manifest of one entry {url, dest: tree, sha256: <the archive's>, extract: ...} with the
#              tree's digest pinned too (extract: {tree: sha256-...}, computed by nix-hash); without nix-hash,
#              extract: true (the row says which). This is the row the targets judge.
#   unpinned   with UNPINNED=1 and a pinned haul row: the same with extract: true, what checking the tree costs
#   noop       haul sync of the same manifest again, the tree unchanged (a run that rewrites a file fails)
#   find       find TREE -printf '%s %T@\n' >/dev/null: the floor the no-op is judged by, on haul's tree (on
#              pipe's when haul is not measured)
# haul's rows need a haul that knows `extract:` (`haul schema` mentions it, or `haul plan` of the manifest exits 0
# or 2 rather than 3: invalid): HAUL names one, else the script builds this checkout's (swift build -c release);
# HAUL=none measures the peers only. Pinning the tree needs nix-hash (Debian's nix-bin). A row left out is said so
# under the table. Every tree is checked once per row, untimed: each corpus file's SHA-256 (the
# corpus's SHA256SUMS) and no other file in it.
# File systems (FS, some of "tmpfs ext4 root"): tmpfs (/dev/shm, else one the script mounts as root), a journaled
# ext4 on a loop device (mkfs.ext4 -I 256 in EXT4_IMAGE, mounted at EXT4_MOUNT, made, mounted and removed by the
# script as root; one already mounted there is used and left as it is), and the root file
# system (BENCH_WORK, default /var/tmp/haul-archives: /var/tmp is disk-backed where /tmp may be tmpfs).
# Prints, and writes to summary.md, per file system and corpus each row's wall s / CPU s and the ratios the targets
# are judged by (of wall time, with the CPU ratio beside): haul / (curl | tar) <= 1.1, haul / (curl -o + sha256sum
# -c + tar -xf) <= 0.6, no-op / find <= 1.5.
#
# Env: FS ("tmpfs ext4 root"), RUNS (3), PORT (18580), HAUL (a haul binary; none: the peers only), UNPINNED (0), BENCH
# (benchmarks/harness), BENCH_DATA (corpora; ${TMPDIR:-/tmp}/bench-data), BENCH_WORK, RESULTS (default
# benchmarks/results/archives-<timestamp>, git-ignored: results.jsonl, report.md, summary.md, commands.log, env.txt,
# the haul manifests),
# TIMEOUT (300 s per run), QUIET_WAIT (30), NOISY_RETRIES (4), EXT4_SIZE (12G), EXT4_IMAGE
# (/var/tmp/haul-archives-ext4.img), EXT4_MOUNT (/mnt/haul-archives-ext4). As root with apt, installs what is
# missing (nginx, curl, zstd, GNU time, e2fsprogs, and nix-bin unless HAUL=none; BENCH_INSTALL=0 turns that off).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$(cd "${BENCH:-$HERE/benchmarks/harness}" && pwd)
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2; exit 2; }
[ $# -gt 0 ] || set -- archive-large archive-small
for corpus in "$@"; do
  case $corpus in archive-large|archive-small) ;; *) echo "archives.sh: unknown corpus '$corpus'" >&2; usage ;; esac
done

FS=${FS:-tmpfs ext4 root} RUNS=${RUNS:-3} PORT=${PORT:-18580} TIMEOUT=${TIMEOUT:-300} EXT4_SIZE=${EXT4_SIZE:-12G}
UNPINNED=${UNPINNED:-0}
export QUIET_WAIT=${QUIET_WAIT:-30} NOISY_RETRIES=${NOISY_RETRIES:-4}
export BENCH_DATA=${BENCH_DATA:-${TMPDIR:-/tmp}/bench-data} TLS_PORT=0
export BENCH_STATE=${TMPDIR:-/tmp}/haul-archives-nginx-$PORT
ROOT_WORK=${BENCH_WORK:-/var/tmp/haul-archives}
TMPFS_MOUNT=/mnt/haul-archives-tmpfs
EXT4_MOUNT=${EXT4_MOUNT:-/mnt/haul-archives-ext4} EXT4_IMAGE=${EXT4_IMAGE:-/var/tmp/haul-archives-ext4.img}
CORPUS=$BENCH_DATA/corpus
RESULTS=${RESULTS:-$HERE/benchmarks/results/archives-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
JSONL=$RESULTS/results.jsonl LOG=$RESULTS/commands.log NOTES=$RESULTS/notes.txt
: > "$NOTES"
note() { echo "archives.sh: $*" >&2; echo "- $*" >> "$NOTES"; }
quote() { printf '%q ' "$@"; }
root() { [ "$(id -u)" = 0 ]; }

. "$BENCH/tools.sh"
bench_tools nginx curl python3 sha256sum tar zstd gzip find $([[ " $FS " == *" ext4 "* ]] && root && echo mkfs.ext4) \
  -- time $([ "${HAUL:-}" != none ] && echo nix-hash)
if [ -z "${HAUL:-}" ]; then
  (cd "$HERE" && swift build -c release --product haul >/dev/null)
  HAUL=$HERE/.build/release/haul
fi

# The file systems measured: "name:folder" pairs. What this script mounts it unmounts (and removes) at the end.
MOUNTED=() MADE_IMAGE=0 TARGETS=()
cleanup() {
  "$BENCH/server.sh" stop "$PORT" >/dev/null 2>&1 || true
  for target in "${TARGETS[@]}"; do
    rm -rf "${target#*:}/archive-large" "${target#*:}/archive-small"
    rmdir "${target#*:}" 2>/dev/null || true
  done
  for mount in "${MOUNTED[@]}"; do umount "$mount" && rmdir "$mount" || true; done
  [ "$MADE_IMAGE" = 0 ] || rm -f "$EXT4_IMAGE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for fs in $FS; do
  case $fs in
    tmpfs)
      if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
        TARGETS+=("tmpfs:/dev/shm/haul-archives")
      elif root; then
        mkdir -p "$TMPFS_MOUNT"
        mountpoint -q "$TMPFS_MOUNT" || { mount -t tmpfs -o size=8G tmpfs "$TMPFS_MOUNT" && MOUNTED+=("$TMPFS_MOUNT"); }
        TARGETS+=("tmpfs:$TMPFS_MOUNT/work")
      else
        note "tmpfs left out: /dev/shm is not a tmpfs and mounting one needs root"
      fi ;;
    ext4)
      if ! root; then note "ext4 left out: making and mounting a loop device needs root"; continue; fi
      if ! mountpoint -q "$EXT4_MOUNT"; then
        mkdir -p "$EXT4_MOUNT"
        rm -f "$EXT4_IMAGE" && truncate -s "$EXT4_SIZE" "$EXT4_IMAGE" && MADE_IMAGE=1
        mkfs.ext4 -q -F -I 256 "$EXT4_IMAGE"   # the default features: a journal, ordered data
        mount -o loop "$EXT4_IMAGE" "$EXT4_MOUNT" && MOUNTED+=("$EXT4_MOUNT")
      fi
      TARGETS+=("ext4:$EXT4_MOUNT/work") ;;
    root)
      mkdir -p "$ROOT_WORK"
      [ "$(stat -f -c %T "$ROOT_WORK")" != tmpfs ] || note "root: $ROOT_WORK is on a tmpfs, not on a disk"
      TARGETS+=("root:$ROOT_WORK") ;;
    *) echo "archives.sh: unknown file system '$fs' in FS (tmpfs ext4 root)" >&2; exit 2 ;;
  esac
done

# The tree's NAR digest in SRI form, as `tree:` pins it: the corpus's files are the tree the archive holds.
tree_digest() {
  local hex
  hex=$(nix-hash --type sha256 "$CORPUS/$1/files")
  python3 -c 'import base64, sys; print("sha256-" + base64.b64encode(bytes.fromhex(sys.argv[1])).decode())' "$hex"
}
# A manifest of one extract: entry; the fifth argument, when given, is the tree digest to pin.
write_manifest() {  # FILE ROOT URL SHA256 [TREE]
  {
    printf 'version: 1\nroot: %s\nfiles:\n  - url: %s\n    dest: tree\n    sha256: %s\n' "$2" "$3" "$4"
    if [ -n "${5:-}" ]; then printf '    extract:\n      tree: %s\n' "$5"; else printf '    extract: true\n'; fi
  } > "$1"
}

python3 "$BENCH/corpus.py" "$CORPUS" "$@"
"$BENCH/server.sh" start "$CORPUS" "$PORT"

# haul is measured when it knows extract: (its schema says so, or plan takes such a manifest: 0 or 2, not 3).
HAUL_BIN=""
if [ "$HAUL" != none ]; then
  HAUL_BIN=$(command -v "$HAUL" || true)
  [ -x "$HAUL_BIN" ] || { echo "archives.sh: HAUL=$HAUL is not an executable" >&2; exit 1; }
  HAUL_BIN=$(realpath "$HAUL_BIN")
  probe=$(mktemp -d) sums=$(cd "$CORPUS/$1" && echo *.sha256)
  write_manifest "$probe/manifest.yaml" ./root "http://127.0.0.1:$PORT/$1/${sums%.sha256}" "$(cut -d' ' -f1 "$CORPUS/$1/$sums")"
  code=0
  "$HAUL_BIN" schema 2>/dev/null | grep '"extract"' >/dev/null || (cd "$probe" && "$HAUL_BIN" plan manifest.yaml) >> "$LOG" 2>&1 || code=$?
  rm -rf "$probe"
  if [ "$code" != 0 ] && [ "$code" != 2 ]; then
    note "haul left out: $HAUL_BIN does not know extract: (its schema does not name it; plan exits $code)"
    HAUL_BIN=""
  fi
else
  note "haul left out: HAUL=none"
fi
if [ -n "$HAUL_BIN" ] && ! command -v nix-hash >/dev/null; then
  note "haul syncs with extract: true: no nix-hash (Debian's nix-bin) to compute the tree's digest for tree:"
fi

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm); cpus: $(nproc); mem: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
  for target in "${TARGETS[@]}"; do
    mkdir -p "${target#*:}"
    echo "fs ${target%%:*}: ${target#*:} on $(df -T "${target#*:}" | awk 'NR == 2 {print $2 " " $1}')"
  done
  echo "nginx: $("${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}" -v 2>&1 | head -1)"
  echo "curl: $(curl --version | head -1)"
  echo "tar: $(tar --version | head -1); zstd: $(zstd --version); gzip: $(gzip --version | head -1)"
  echo "haul: ${HAUL_BIN:-not measured}"
  echo "RUNS=$RUNS TIMEOUT=$TIMEOUT QUIET_WAIT=$QUIET_WAIT NOISY_RETRIES=$NOISY_RETRIES"
} > "$RESULTS/env.txt" 2>&1
cat "$RESULTS/env.txt"

for corpus in "$@"; do
  C=$CORPUS/$corpus
  SUMS=$(cd "$C" && echo *.sha256)
  ARCHIVE=${SUMS%.sha256}
  URL=http://127.0.0.1:$PORT/$corpus/$ARCHIVE
  DIGEST=$(cut -d' ' -f1 "$C/$SUMS")
  NF=$(wc -l < "$C/index.tsv")
  NB=$(awk -F'\t' '{s += $2} END {printf "%d", s}' "$C/index.tsv")
  case $ARCHIVE in *.tar.zst) UNPACK=--zstd ;; *.tar.gz) UNPACK=-z ;; esac
  TREE=""
  if [ -n "$HAUL_BIN" ] && command -v nix-hash >/dev/null; then TREE=$(tree_digest "$corpus"); fi

  for target in "${TARGETS[@]}"; do
    fs=${target%%:*} W=${target#*:}/$corpus
    rm -rf "$W" && mkdir -p "$W"
    cp "$C/SHA256SUMS" "$C/$SUMS" "$W/"
    write_manifest "$W/haul.yaml" ./haul "$URL" "$DIGEST" "$TREE"
    [ -z "$TREE" ] || write_manifest "$W/haul-unpinned.yaml" ./haul-unpinned "$URL" "$DIGEST"
    cp "$W/haul.yaml" "$RESULTS/haul-$corpus.yaml"
    echo "== $fs $corpus: $ARCHIVE, $NF files, $NB bytes; in $W"

    m() {  # measure.py with this configuration's settings; a failed measurement is reported and the rest goes on
      python3 "$BENCH/lib/measure.py" --scenario "$corpus" --field fs="$fs" --dir "$W" --files "$NF" --bytes "$NB" \
        --runs "$RUNS" --timeout "$TIMEOUT" --server-pidfile "$BENCH_STATE/nginx.pid" --results "$JSONL" --log "$LOG" \
        "$@" || true
    }
    CHECK=(--verify "$W/SHA256SUMS" --expect-files "$NF" --exact --check-once)
    m --field peer=pipe --label "curl | tar -x $UNPACK (no check)" "${CHECK[@]}" \
      --prepare 'rm -rf pipe && mkdir pipe && sync' --run-dir pipe \
      -- bash -o pipefail -c "curl -sS --fail $URL | tar -x $UNPACK -f -"
    m --field peer=careful --label "curl -o, sha256sum -c, tar -xf" "${CHECK[@]}" \
      --prepare "rm -rf careful && mkdir careful && cp $SUMS careful/ && sync" --run-dir careful \
      --check-dir careful/tree \
      -- bash -c "curl -sS --fail -o $ARCHIVE $URL && sha256sum -c --quiet $SUMS && mkdir tree && tar -xf $ARCHIVE -C tree"
    rm -rf "$W/careful"
    FLOOR_TREE=pipe
    if [ -n "$HAUL_BIN" ]; then
      if [ -n "$TREE" ] && [ "$UNPINNED" = 1 ]; then
        m --field peer=unpinned --label "haul sync (extract: true)" "${CHECK[@]}" \
          --prepare 'rm -rf haul-unpinned && mkdir haul-unpinned && sync' --check-dir haul-unpinned/tree \
          -- "$HAUL_BIN" sync haul-unpinned.yaml
        rm -rf "$W/haul-unpinned"
      fi
      m --field peer=haul --field pinned=$([ -n "$TREE" ] && echo yes || echo no) \
        --label "haul sync (extract: $([ -n "$TREE" ] && echo 'tree: pinned' || echo true))" "${CHECK[@]}" \
        --prepare 'rm -rf haul && mkdir haul && sync' --check-dir haul/tree -- "$HAUL_BIN" sync haul.yaml
      # The setup brings haul's tree to the manifest's state (after the row above, itself a no-op).
      m --field peer=noop --kind noop --label "haul no-op: sync again" "${CHECK[@]}" --noop \
        --setup "$(quote "$HAUL_BIN") sync haul.yaml" --prepare sync --check-dir haul/tree \
        -- "$HAUL_BIN" sync haul.yaml
      FLOOR_TREE=haul/tree
    fi
    m --field peer=find --kind limit --label "find $FLOOR_TREE -printf '%s %T@\\n' >/dev/null" --bytes 0 --prepare sync \
      -- bash -c "find $FLOOR_TREE -printf '%s %T@\\n' >/dev/null"
    rm -rf "$W"
  done
done

python3 "$BENCH/lib/report.py" "$JSONL" > "$RESULTS/report.md"
{
  echo "archives.sh: medians of $RUNS runs; haul ${HAUL_BIN:-not measured}"
  echo
  python3 "$HERE/benchmarks/lib/archives_report.py" "$JSONL"
  [ ! -s "$NOTES" ] || { echo; cat "$NOTES"; }
} > "$RESULTS/summary.md"
rm -f "$NOTES"
echo
cat "$RESULTS/report.md"
echo
cat "$RESULTS/summary.md"
echo
echo "archives.sh: results in $RESULTS (summary.md, report.md, results.jsonl, commands.log, env.txt, haul*.yaml)"
