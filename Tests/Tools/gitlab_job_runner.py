#!/usr/bin/env python3
"""Runs a job of a GitLab CI/CD component (`spec: inputs:`, `---`, jobs) as a GitLab runner would, on this machine.

    gitlab_job_runner.py --template FILE --job NAME --project DIR --cache-store DIR
                         [--input NAME=VALUE]... [--variable NAME=VALUE]...

`$[[ inputs.NAME ]]` is replaced by the input's value (or its default; a missing input without one, an unknown
input or any other `$[[ … ]]` is an error). The job's variables are expanded against GitLab's (CI=true,
GITLAB_CI=true, CI_PROJECT_DIR, CI_JOB_NAME, CI_JOB_NAME_SLUG, and each --variable), its cache (key: files and
prefix, paths) restored from and, when the job succeeds, saved to a folder; before_script and script run as one
`sh -e` script in the project folder, as the runner concatenates them. Exit status: the script's.
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

import yaml


class Unsupported(Exception):
    pass


def expand(text, variables):
    """$NAME and ${NAME}, as GitLab expands variables in variables: and cache keys; unknown names become empty."""
    return re.sub(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))",
                  lambda match: variables.get(match.group(1) or match.group(2), ""), str(text))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--template", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--cache-store", required=True)
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--variable", action="append", default=[])
    options = parser.parse_args()

    with open(options.template, encoding="utf-8") as handle:
        header, separator, body = handle.read().partition("\n---\n")
    if not separator:
        raise Unsupported("the template has no `---` between spec: and its jobs")
    declared = (yaml.safe_load(header) or {}).get("spec", {}).get("inputs", {}) or {}
    given = dict(pair.split("=", 1) for pair in options.input)
    for name in given:
        if name not in declared:
            raise Unsupported(f"the component has no input {name}")
    values = {}
    for name, spec in declared.items():
        if name in given:
            values[name] = given[name]
        elif "default" in (spec or {}):
            values[name] = str(spec["default"])
        else:
            raise Unsupported(f"the input {name} is required")

    def substitute(match):
        name = match.group(1)
        if name not in values:
            raise Unsupported(f"unknown input in $[[ inputs.{name} ]]")
        return values[name]

    body = re.sub(r"\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]", substitute, body)
    if "$[[" in body:
        raise Unsupported("unsupported $[[ … ]] interpolation: " + body[body.index("$[["):].split("\n")[0])
    job = (yaml.safe_load(body) or {}).get(options.job)
    if job is None:
        raise Unsupported(f"no job {options.job}")
    unknown = set(job) - {"stage", "variables", "cache", "before_script", "script"}
    if unknown:
        raise Unsupported(f"unsupported job keys {sorted(unknown)}")

    project = os.path.abspath(options.project)
    slug = re.sub(r"[^a-z0-9]+", "-", options.job.lower()).strip("-")[:63]
    variables = dict(os.environ)
    variables.update({"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": project, "CI_JOB_NAME": options.job,
                      "CI_JOB_NAME_SLUG": slug, "CI_SERVER_FQDN": "gitlab.invalid"})
    variables.update(dict(pair.split("=", 1) for pair in options.variable))
    for name, value in (job.get("variables") or {}).items():
        variables[name] = expand(value, variables)

    cache = job.get("cache")
    key = None
    if cache:
        if set(cache) - {"key", "paths"} or set(cache["key"]) - {"files", "prefix"}:
            raise Unsupported(f"unsupported cache settings {cache}")
        digest = hashlib.sha256()
        for name in cache["key"]["files"]:
            path = os.path.join(project, expand(name, variables))
            if os.path.isfile(path):
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
        key = expand(cache["key"].get("prefix", ""), variables) + "-" + digest.hexdigest()[:40]
        saved = os.path.join(options.cache_store, key)
        if os.path.isdir(saved):
            for path in cache["paths"]:
                source = os.path.join(saved, path.strip("/"))
                if os.path.exists(source):
                    shutil.copytree(source, os.path.join(project, path.strip("/")), dirs_exist_ok=True, symlinks=True)
            print(f"cache: restored {key}")
        else:
            print(f"cache: no entry for {key}")

    lines = list(job.get("before_script") or []) + list(job.get("script") or [])
    status = subprocess.call(["sh", "-e", "-c", "\n".join(lines)], env=variables, cwd=project)
    if status == 0 and key is not None:
        saved = os.path.join(options.cache_store, key)
        shutil.rmtree(saved, ignore_errors=True)
        for path in cache["paths"]:
            source = os.path.join(project, path.strip("/"))
            if os.path.exists(source):
                shutil.copytree(source, os.path.join(saved, path.strip("/")), symlinks=True)
        print(f"cache: saved {key}")
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Unsupported as error:
        print(f"gitlab_job_runner: {error}", file=sys.stderr)
        sys.exit(2)
