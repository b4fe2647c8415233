#!/usr/bin/env python3
"""Download lists for one corpus scenario, one per tool.

usage: manifest.py SCENARIO_DIR BASE_URL OUT_DIR [--root ./dl] [--dir .]

SCENARIO_DIR  a folder made by corpus.py (it holds index.tsv), e.g. $BENCH_DATA/corpus/small
BASE_URL      where SCENARIO_DIR/files is served, e.g. http://127.0.0.1:18080/small/files
OUT_DIR       receives
  manifest.yaml  haul manifest (version 1: root, files with url, dest, sha256, size)
  aria2.txt      for `aria2c -i`: URL, then out=, dir=, checksum=sha-256=
  curl.cfg       for `curl --parallel --create-dirs -K curl.cfg`: url/output pairs, relative to curl's folder
  wget.txt       for `wget -i wget.txt -x -nH --cut-dirs=N` (N is printed)
  SHA256SUMS     the scenario's checksums (check a download folder with sha256sum -c)

--root  the manifest's `root:`, relative to the manifest's folder (default ./dl)
--dir   `dir=` of every aria2c entry (default ., aria2c's working folder)
"""
import argparse
import os
import shutil
import sys
from urllib.parse import quote, urlsplit

PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:%~")


def yaml_scalar(text):
    """A YAML scalar, double-quoted unless plain is unambiguous."""
    if text and set(text) <= PLAIN and text[0] not in "-:%~" and not text.endswith(":"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def curl_value(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario_dir")
    ap.add_argument("base_url")
    ap.add_argument("out_dir")
    ap.add_argument("--root", default="./dl")
    ap.add_argument("--dir", default=".")
    a = ap.parse_args()

    index = os.path.join(a.scenario_dir, "index.tsv")
    if not os.path.exists(index):
        sys.exit(f"manifest.py: no {index} (corpus.py makes it)")
    with open(index) as f:
        rows = [(digest, int(size), path) for digest, size, path in
                (line.rstrip("\n").split("\t", 2) for line in f)]
    base = a.base_url.rstrip("/")
    os.makedirs(a.out_dir, exist_ok=True)

    def out(name):
        return open(os.path.join(a.out_dir, name), "w")

    with out("manifest.yaml") as manifest, out("aria2.txt") as aria2, out("curl.cfg") as curl, out("wget.txt") as wget:
        manifest.write(f"# {len(rows)} files, {sum(size for _, size, _ in rows)} bytes, from {base}\n")
        manifest.write(f"version: 1\nroot: {yaml_scalar(a.root)}\nfiles:\n")
        curl.write(f"# {len(rows)} files; use with --parallel --create-dirs\n")
        for digest, size, path in rows:
            url = f"{base}/{quote(path)}"
            manifest.write(f"  - url: {yaml_scalar(url)}\n    dest: {yaml_scalar(path)}\n"
                           f"    sha256: {digest}\n    size: {size}\n")
            aria2.write(f"{url}\n  out={path}\n  dir={a.dir}\n  checksum=sha-256={digest}\n")
            curl.write(f"url = {curl_value(url)}\noutput = {curl_value(path)}\n")
            wget.write(url + "\n")
    shutil.copyfile(os.path.join(a.scenario_dir, "SHA256SUMS"), os.path.join(a.out_dir, "SHA256SUMS"))
    cut = len([part for part in urlsplit(base).path.split("/") if part])
    print(f"manifest.py: {len(rows)} files -> {a.out_dir} (wget: -x -nH --cut-dirs={cut})")


if __name__ == "__main__":
    main()
