#!/usr/bin/env python3
"""Deterministic corpora for haul's benchmarks.

usage: corpus.py DIR [SCENARIO ...|all] [--seed N] [--force]
       corpus.py --list

Per scenario, DIR/<scenario>/ receives:
  files/<path>   the corpus, as the server publishes it
  SHA256SUMS     coreutils format, paths relative to files/ (and so to any download folder)
  index.tsv      sha256 <TAB> size <TAB> path
  .complete      what was generated; a scenario whose .complete matches is left as it is
and an archive scenario (archive-large, archive-small) also
  <scenario>.<format>         files/ as one archive (GNU tar, members in name order, owner 0:0, mode 0644/0755,
                              the same mtime), compressed by zstd or gzip at their default levels
  <scenario>.<format>.sha256  its digest, coreutils format (check it with sha256sum -c in this folder)

A file's bytes depend only on (seed, scenario, path): SHAKE128(key || 8-byte big-endian i) for each
1 MiB chunk i, cut to the file's size, with key = SHA-256("haul-bench/v1/<seed>/<scenario>/<path>").
Every file and folder gets the mtime 2024-01-01T00:00:00Z, so ETag and Last-Modified are the same on
every machine. Without SCENARIO: small medium large huge-manifest.

SHAKE output does not compress: zstd and gzip store it as it is, so an archive is about as large as its files and
unpacking it spends little CPU on decompression. That is realistic for content already compressed (jars, media,
packed binaries and model weights); a tree of sources or plain executables would shrink 2-4x and cost more to inflate.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess

KiB, MiB = 1024, 1024 * 1024
MTIME = 1704067200  # 2024-01-01T00:00:00Z
FORMAT = 1


def spread(sizes, per_folder, folder, name):
    """(path, size) pairs, per_folder files to a folder."""
    return [(f"{folder.format(i // per_folder)}/{name.format(i)}", size) for i, size in enumerate(sizes)]


def sized(count, total, spread_exponent, rng):
    """count sizes log-uniform over 2**spread_exponent (largest / smallest), summing to exactly total."""
    weights = [2 ** rng.uniform(0, spread_exponent) for _ in range(count)]
    scale = total / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    sizes[-1] += total - sum(sizes)
    return sizes


# What an archive scenario's files/ is published as: the compressor and its file name's suffix.
ARCHIVES = {"archive-large": ("zstd", "tar.zst"), "archive-small": ("gzip", "tar.gz")}


def scenario(name, seed):
    if name == "small":          # 5000 × 16 KiB = 80 MiB
        return spread([16 * KiB] * 5000, 100, "d{:03d}", "f{:05d}.bin")
    if name == "medium":         # 200 × 1 MiB
        return spread([MiB] * 200, 100, "d{:02d}", "m{:03d}.bin")
    if name == "large":          # 2 × 512 MiB
        return [("l0.bin", 512 * MiB), ("l1.bin", 512 * MiB)]
    if name == "mixed":          # 1000 files of 1 KiB..2 MiB (log-uniform) and one of 128 MiB
        rng = random.Random(f"{seed}/mixed")
        sizes = [int(2 ** rng.uniform(10, 21)) for _ in range(1000)]
        return spread(sizes, 100, "d{:02d}", "x{:04d}.bin") + [("big/b0.bin", 128 * MiB)]
    if name == "huge-manifest":  # 100,000 × 256 B
        return spread([256] * 100_000, 1000, "d{:03d}", "t{:06d}.bin")
    if name == "archive-large":  # 10,000 files of ~200 B..900 KiB, 1 GiB in all, as one .tar.zst
        rng = random.Random(f"{seed}/archive-large")
        return spread(sized(10_000, 1024 * MiB, 12, rng), 100, "d{:03d}", "a{:05d}.bin")
    if name == "archive-small":  # 50,000 files of ~140 B..35 KiB, 300 MiB in all, as one .tar.gz
        rng = random.Random(f"{seed}/archive-small")
        return spread(sized(50_000, 300 * MiB, 8, rng), 100, "d{:03d}", "s{:05d}.bin")
    raise SystemExit(f"corpus.py: unknown scenario {name!r}; known: {' '.join(SCENARIOS)}")


SCENARIOS = ["small", "medium", "large", "mixed", "huge-manifest", "archive-large", "archive-small"]
DEFAULT = ["small", "medium", "large", "huge-manifest"]


def write(path, key, size):
    """Write one file; return its SHA-256."""
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for i in range((size + MiB - 1) // MiB):
            chunk = hashlib.shake_128(key + i.to_bytes(8, "big")).digest(min(MiB, size - i * MiB))
            out.write(chunk)
            digest.update(chunk)
    os.utime(path, (MTIME, MTIME))
    return digest.hexdigest()


def archive(folder, name):
    """Pack folder/files into folder/<name>.<suffix> and write its .sha256 beside it."""
    compressor, suffix = ARCHIVES[name]
    out_name = f"{name}.{suffix}"
    top = os.path.join(folder, "files")
    tar = ["tar", "-C", top, "--create", "--file=-", "--format=gnu", "--sort=name", f"--mtime=@{MTIME}",
           "--owner=0", "--group=0", "--numeric-owner", "--mode=u+rwX,go+rX,go-w", "--"] + sorted(os.listdir(top))
    digest = hashlib.sha256()
    with open(os.path.join(folder, out_name), "wb") as out:
        packer = subprocess.Popen(tar, stdout=subprocess.PIPE)
        squeezer = subprocess.Popen([compressor, "-c", "-n" if compressor == "gzip" else "-q"],
                                    stdin=packer.stdout, stdout=subprocess.PIPE)
        packer.stdout.close()
        while block := squeezer.stdout.read(1 << 20):
            out.write(block)
            digest.update(block)
        if squeezer.wait() or packer.wait():
            raise SystemExit(f"corpus.py: {' '.join(tar[:2])} | {compressor} failed for {name}")
    os.utime(os.path.join(folder, out_name), (MTIME, MTIME))
    with open(os.path.join(folder, f"{out_name}.sha256"), "w") as f:
        f.write(f"{digest.hexdigest()}  {out_name}\n")


def build(root, name, seed, force):
    files = scenario(name, seed)
    spec = {"gen": FORMAT, "seed": seed, "scenario": name, "count": len(files),
            "bytes": sum(size for _, size in files),
            "digest": hashlib.sha256(json.dumps(files).encode()).hexdigest()}
    if name in ARCHIVES:
        spec["archive"] = ARCHIVES[name][1]
    folder = os.path.join(root, name)
    stamp = os.path.join(folder, ".complete")
    if not force and os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == spec:
                print(f"corpus {name}: up to date ({spec['count']} files, {spec['bytes']} bytes) in {folder}")
                return
    shutil.rmtree(folder, ignore_errors=True)
    top = os.path.join(folder, "files")
    print(f"corpus {name}: generating {spec['count']} files, {spec['bytes']} bytes in {folder}", flush=True)
    os.makedirs(top)
    rows, folders = [], {""}
    for path, size in files:
        sub = os.path.dirname(path)
        if sub not in folders:
            os.makedirs(os.path.join(top, sub))
            folders.add(sub)
        key = hashlib.sha256(f"haul-bench/v1/{seed}/{name}/{path}".encode()).digest()
        rows.append((write(os.path.join(top, path), key, size), size, path))
    for sub in sorted(folders, key=len, reverse=True):  # deepest first: setting a child's mtime touches no parent
        os.utime(os.path.join(top, sub), (MTIME, MTIME))
    with open(os.path.join(folder, "SHA256SUMS"), "w") as f:
        f.writelines(f"{digest}  {path}\n" for digest, _, path in rows)
    with open(os.path.join(folder, "index.tsv"), "w") as f:
        f.writelines(f"{digest}\t{size}\t{path}\n" for digest, size, path in rows)
    if name in ARCHIVES:
        print(f"corpus {name}: packing files/ into one {ARCHIVES[name][1]}", flush=True)
        archive(folder, name)
    with open(stamp, "w") as f:
        json.dump(spec, f)
    print(f"corpus {name}: done", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", nargs="?")
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="generate again even when .complete matches")
    ap.add_argument("--list", action="store_true", help="print the scenarios and exit")
    a = ap.parse_args()
    if a.list:
        for name in SCENARIOS:
            files = scenario(name, a.seed)
            print(f"{name}\t{len(files)} files\t{sum(size for _, size in files)} bytes")
        return
    if not a.dir:
        ap.error("DIR is required")
    names = SCENARIOS if a.scenarios == ["all"] else a.scenarios or DEFAULT
    for name in names:
        scenario(name, a.seed)  # refuses an unknown name before anything is written
    for name in names:
        build(os.path.abspath(a.dir), name, a.seed, a.force)


if __name__ == "__main__":
    main()
