#!/usr/bin/env python3
"""Runs a composite GitHub Action (action.yml) as a GitHub runner would, on this machine.

    action_runner.py --action DIR --workspace DIR --temp DIR --cache-store DIR --summary FILE
                     [--input NAME=VALUE]... [--repository OWNER/NAME] [--server-url URL] [--outputs FILE]

Each `run:` step runs with `bash --noprofile --norc -eo pipefail FILE` in the workspace, with the runner's
variables (GITHUB_ACTIONS, GITHUB_WORKSPACE, GITHUB_ACTION_PATH, RUNNER_TEMP, RUNNER_OS, RUNNER_ARCH, …) and a fresh
GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH and GITHUB_STEP_SUMMARY file each, read back after the step as the runner
does (outputs, variables and PATH for later steps; the step summaries appended to --summary). `uses:
actions/cache@v4` is emulated with a folder: restored by exact key, then by restore-keys prefix (newest first),
and saved after the last step when every step succeeded and the key was not hit, as its post step does.

Expressions `${{ … }}` are evaluated for the subset the action uses: inputs.*, github.*, runner.*,
steps.ID.outputs.*, 'literals', `==`, `!=` and hashFiles(…). Anything else is an error: this runner must never guess.
Exit status: 0 when every step succeeded, else 1; the action's outputs are written to --outputs as JSON.
"""
import argparse
import hashlib
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

import yaml


class Unsupported(Exception):
    pass


TOKEN = re.compile(r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<op>==|!=|\(|\)|,)|(?P<name>[A-Za-z_][A-Za-z0-9_.-]*))")


class Evaluator:
    def __init__(self, contexts, workspace):
        self.contexts = contexts
        self.workspace = workspace

    def interpolate(self, text):
        if not isinstance(text, str):
            return "" if text is None else str(text).lower() if isinstance(text, bool) else str(text)
        result, position = [], 0
        for match in re.finditer(r"\$\{\{(.*?)\}\}", text, re.S):
            result.append(text[position:match.start()])
            result.append(str(self.evaluate(match.group(1))))
            position = match.end()
        result.append(text[position:])
        return "".join(result)

    def condition(self, text):
        if text is None:
            return True
        text = str(text).strip()
        match = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
        value = self.evaluate(match.group(1) if match else text)
        return value not in ("", "false", "0", None, False)

    def evaluate(self, expression):
        tokens = self.tokenize(expression)
        value, rest = self.comparison(tokens)
        if rest:
            raise Unsupported(f"unsupported expression: {expression.strip()!r}")
        return value

    @staticmethod
    def tokenize(expression):
        tokens, position = [], 0
        expression = expression.strip()
        while position < len(expression):
            match = TOKEN.match(expression, position)
            if not match or match.end() == position:
                raise Unsupported(f"unsupported expression: {expression!r}")
            kind = match.lastgroup
            tokens.append((kind, match.group(kind)))
            position = match.end()
            while position < len(expression) and expression[position].isspace():
                position += 1
        return tokens

    def comparison(self, tokens):
        left, tokens = self.operand(tokens)
        if tokens and tokens[0] == ("op", "=="):
            right, tokens = self.operand(tokens[1:])
            return ("true" if str(left).lower() == str(right).lower() else "false"), tokens
        if tokens and tokens[0] == ("op", "!="):
            right, tokens = self.operand(tokens[1:])
            return ("true" if str(left).lower() != str(right).lower() else "false"), tokens
        return left, tokens

    def operand(self, tokens):
        if not tokens:
            raise Unsupported("unsupported expression: missing operand")
        kind, text = tokens[0]
        if kind == "string":
            return text[1:-1].replace("''", "'"), tokens[1:]
        if kind == "name" and text == "hashFiles" and len(tokens) > 1 and tokens[1] == ("op", "("):
            argument, rest = self.operand(tokens[2:])
            if not rest or rest[0] != ("op", ")"):
                raise Unsupported("unsupported expression: hashFiles takes one pattern here")
            return self.hash_files(argument), rest[1:]
        if kind == "name":
            return self.lookup(text), tokens[1:]
        raise Unsupported(f"unsupported expression token: {text!r}")

    def lookup(self, path):
        parts = path.split(".")
        if parts[0] not in ("inputs", "github", "runner", "steps"):
            raise Unsupported(f"unsupported context: {path}")
        if parts[0] == "steps" and (len(parts) != 4 or parts[2] != "outputs"):
            raise Unsupported(f"unsupported steps expression: {path}")
        value = self.contexts
        for part in parts:
            if not isinstance(value, dict):
                raise Unsupported(f"unsupported expression: {path}")
            if part not in value:
                if parts[0] in ("inputs", "github", "runner"):
                    raise Unsupported(f"unknown {parts[0]} value: {path}")
                return ""  # a step that did not run, or an output it did not set: empty, as GitHub has it
            value = value[part]
        return value

    def hash_files(self, pattern):
        files = sorted(path for path in glob.glob(os.path.join(self.workspace, pattern), recursive=True)
                       if os.path.isfile(path))
        if not files:
            return ""
        outer = hashlib.sha256()
        for path in files:
            with open(path, "rb") as handle:
                outer.update(hashlib.sha256(handle.read()).digest())
        return outer.hexdigest()


def read_pairs(path):
    """name=value lines and name<<DELIMITER heredocs, as GITHUB_OUTPUT and GITHUB_ENV hold them."""
    pairs = {}
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value = []
            while index < len(lines) and lines[index] != delimiter:
                value.append(lines[index])
                index += 1
            if index >= len(lines):
                raise Unsupported(f"{path}: no closing {delimiter} for {name}")
            index += 1
            pairs[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            pairs[name] = value
        else:
            raise Unsupported(f"{path}: unreadable line {line!r}")
    return pairs


class Cache:
    """actions/cache@v4 with a folder of saved entries: STORE/KEY/N holds the Nth path."""

    def __init__(self, store):
        self.store = store
        os.makedirs(store, exist_ok=True)

    @staticmethod
    def paths(text, workspace):
        return [os.path.join(workspace, os.path.expanduser(line.strip())) for line in text.split("\n") if line.strip()]

    def restore(self, key, restore_keys, paths):
        found = key if os.path.isdir(os.path.join(self.store, key)) else None
        if found is None:
            saved = sorted(os.listdir(self.store), key=lambda name: os.path.getmtime(os.path.join(self.store, name)),
                           reverse=True)
            for prefix in restore_keys:
                found = next((name for name in saved if name.startswith(prefix)), None)
                if found:
                    break
        if found is None:
            print(f"cache: no entry for {key}")
            return None
        for index, path in enumerate(paths):
            saved_path = os.path.join(self.store, found, str(index))
            if os.path.exists(saved_path):
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                shutil.copytree(saved_path, path, symlinks=True)
        print(f"cache: restored {found}")
        return found

    def save(self, key, paths):
        target = os.path.join(self.store, key)
        if os.path.exists(target):
            return
        os.makedirs(target)
        for index, path in enumerate(paths):
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(target, str(index)), symlinks=True)
        print(f"cache: saved {key}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--action", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--temp", required=True)
    parser.add_argument("--cache-store", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--repository", default="")
    parser.add_argument("--server-url", default="https://github.com", help="github.server_url (GitHub Enterprise's own)")
    parser.add_argument("--outputs")
    options = parser.parse_args()

    action_path = os.path.abspath(options.action)
    with open(os.path.join(action_path, "action.yml"), encoding="utf-8") as handle:
        action = yaml.safe_load(handle)
    if action.get("runs", {}).get("using") != "composite":
        raise Unsupported("only composite actions run here")

    declared = action.get("inputs") or {}
    inputs = {name: str((spec or {}).get("default", "")) for name, spec in declared.items()}
    for pair in options.input:
        name, value = pair.split("=", 1)
        if name not in declared:
            raise Unsupported(f"the action has no input {name}")
        inputs[name] = value

    machine = platform.machine()
    environment = dict(os.environ)
    environment.update({
        "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": options.workspace,
        "GITHUB_ACTION_PATH": action_path, "GITHUB_ACTION_REPOSITORY": options.repository,
        "GITHUB_SERVER_URL": options.server_url, "RUNNER_TEMP": options.temp, "RUNNER_OS": "Linux",
        "RUNNER_ARCH": {"x86_64": "X64", "aarch64": "ARM64"}.get(machine, machine),
    })
    contexts = {
        "inputs": inputs,
        "github": {"workspace": options.workspace, "action_path": action_path,
                   "action_repository": options.repository, "server_url": options.server_url},
        "runner": {"os": "Linux", "arch": environment["RUNNER_ARCH"], "temp": options.temp},
        "steps": {},
    }
    evaluator = Evaluator(contexts, options.workspace)
    cache = Cache(options.cache_store)
    saves = []
    failed = False

    for number, step in enumerate(action["runs"]["steps"]):
        known = {"id", "name", "if", "shell", "env", "run", "uses", "with"}
        if set(step) - known:
            raise Unsupported(f"step {number}: unsupported keys {sorted(set(step) - known)}")
        if failed or not evaluator.condition(step.get("if")):
            continue
        if "uses" in step:
            if step["uses"] != "actions/cache@v4":
                raise Unsupported(f"step {number}: no emulation of {step['uses']}")
            settings = {name: evaluator.interpolate(value) for name, value in (step.get("with") or {}).items()}
            if set(settings) - {"path", "key", "restore-keys"}:
                raise Unsupported(f"step {number}: unsupported actions/cache settings {sorted(settings)}")
            paths = Cache.paths(settings["path"], options.workspace)
            restore_keys = [line.strip() for line in settings.get("restore-keys", "").split("\n") if line.strip()]
            found = cache.restore(settings["key"], restore_keys, paths)
            if "id" in step:
                contexts["steps"][step["id"]] = {"outputs": {"cache-hit": "true" if found == settings["key"] else "false"}}
            if found != settings["key"]:
                saves.append((settings["key"], paths))
            continue
        if step.get("shell") != "bash":
            raise Unsupported(f"step {number}: only shell: bash runs here")
        files = {}
        with tempfile.TemporaryDirectory(dir=options.temp) as scratch:
            for name in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY"):
                files[name] = os.path.join(scratch, name.lower())
                open(files[name], "w").close()
            script = os.path.join(scratch, "step.sh")
            with open(script, "w", encoding="utf-8") as handle:
                handle.write(evaluator.interpolate(step["run"]))
            step_environment = dict(environment, **files)
            for name, value in (step.get("env") or {}).items():
                step_environment[name] = evaluator.interpolate(value)
            status = subprocess.call(["bash", "--noprofile", "--norc", "-eo", "pipefail", script],
                                     env=step_environment, cwd=options.workspace)
            outputs = read_pairs(files["GITHUB_OUTPUT"])
            environment.update(read_pairs(files["GITHUB_ENV"]))
            with open(files["GITHUB_PATH"], encoding="utf-8") as handle:
                for line in handle.read().splitlines():
                    if line.strip():
                        environment["PATH"] = line.strip() + os.pathsep + environment.get("PATH", "")
            with open(files["GITHUB_STEP_SUMMARY"], encoding="utf-8") as source, \
                    open(options.summary, "a", encoding="utf-8") as target:
                target.write(source.read())
        if "id" in step:
            contexts["steps"][step["id"]] = {"outputs": outputs}
        if status != 0:
            print(f"action_runner: step {step.get('id', number)} failed with exit status {status}", file=sys.stderr)
            failed = True

    if not failed:
        for key, paths in reversed(saves):
            cache.save(key, paths)
    if options.outputs:
        values = {name: evaluator.interpolate((spec or {}).get("value", "")) for name, spec in
                  (action.get("outputs") or {}).items()}
        with open(options.outputs, "w", encoding="utf-8") as handle:
            json.dump(values, handle)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Unsupported as error:
        print(f"action_runner: {error}", file=sys.stderr)
        sys.exit(2)
