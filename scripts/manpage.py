#!/usr/bin/env python3
"""Writes haul(1), the manual page, from what the binary says of itself, the manifest's schema and README.

    haul --experimental-dump-help | python3 scripts/manpage.py VERSION > haul.1

Every command, argument and option comes from the argument parser's own description of the command tree (the
JSON of `--experimental-dump-help`), so the manual lists exactly what `--help` lists. The EXIT STATUS and
ENVIRONMENT sections are the two blocks of the root command's help ("Exit status:", "Environment:", one aligned
item a line; see Sources/HaulCommand/ManualFacts.swift). Nothing here knows an option by name.

The MANIFEST section is the JSON Schema's (schema/haul-manifest.schema.json, which `haul schema` prints): each key
with its type and the schema's description of it. CONFIG FILE and JSON EVENTS are README.md's own text, the parts
between `<!-- manual: TITLE -->` and `<!-- /manual -->`, so the user's guide and the manual say the same words.
"""
import json
import re
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
SCHEMA = REPOSITORY / "schema" / "haul-manifest.schema.json"
README = REPOSITORY / "README.md"
README_SECTIONS = ["CONFIG FILE", "JSON EVENTS"]

FACT_BLOCKS = {"Exit status": "EXIT STATUS", "Environment": "ENVIRONMENT"}


def roff(text):
    """Text as roff reads it literally: backslashes and hyphens escaped, no line starting with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def bold(text):
    return "\\fB" + roff(text) + "\\fR"


def italic(text):
    return "\\fI" + roff(text) + "\\fR"


def inline(text):
    """Markdown's inline forms as roff: `code` and **strong** in bold, a link as its text; the rest literal."""
    out = []
    for match in re.finditer(r"`([^`]+)`|\*\*(.+?)\*\*|\[([^\]]+)\]\([^)]*\)|([^`*\[]+|.)", text):
        code, strong, link, plain = match.groups()
        if code is not None:
            out.append(bold(code))
        elif strong is not None:
            out.append(bold(strong.replace("`", "")))
        elif link is not None:
            out.append(inline(link))
        else:
            out.append(roff(plain))
    return "".join(out)


def markdown(text):
    """The few block forms README uses, as roff: paragraphs, fenced code, and tables (a row: its first cell as the
    term, the others after their column's name)."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        if lines[0].startswith("```"):
            out += [".RS 2", ".nf"] + [roff(line) for line in lines[1:-1]] + [".fi", ".RE"]
        elif lines[0].startswith("|"):
            rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]
            header, body = rows[0], rows[2:]
            for row in body:
                rest = "; ".join(f"{name}: {cell}" for name, cell in zip(header[1:], row[1:]))
                out += [".TP", inline(row[0]), inline(rest)]
        else:
            out += [".PP", inline(" ".join(line.strip() for line in lines))]
    return out


def readme_section(readme, title):
    """README's text between `<!-- manual: TITLE -->` and the next `<!-- /manual -->`, as roff."""
    match = re.search(r"<!-- manual: " + re.escape(title) + r" -->\n(.*?)<!-- /manual -->", readme, re.S)
    if not match:
        sys.exit(f"manpage.py: README.md marks no part for the manual's {title} section")
    return markdown(match.group(1))


def schema_type(node, defs):
    """A schema node's type in a reader's words: "string", "integer or string", "list of mappings"."""
    if "$ref" in node:
        return schema_type(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(value) for value in node["enum"])
    if "oneOf" in node or "anyOf" in node:
        kinds = []
        for kind in (schema_type(option, defs) for option in node.get("oneOf", node.get("anyOf"))):
            if kind not in kinds:
                kinds.append(kind)
        return " or ".join(kinds)
    kind = node.get("type")
    if kind == "array":
        return "list of " + schema_type(node.get("items", {}), defs)
    if kind == "object":
        keys = list(node.get("properties", {}))
        return "mapping (" + ", ".join(keys) + ")" if keys else "mapping"
    return {"number": "number", None: "any value"}.get(kind, kind)


def schema_keys(title, node, defs):
    """One subsection: each key of `node` (a schema object), its type, whether it is required, and what it is."""
    out = [".SS " + json.dumps(title)]
    required = set(node.get("required", []))
    for key, property_node in node.get("properties", {}).items():
        target = defs[property_node["$ref"].rsplit("/", 1)[1]] if "$ref" in property_node else property_node
        kind = schema_type(property_node, defs)
        description = property_node.get("description") or target.get("description", "")
        term = bold(key) + " " + italic(kind) + (" (required)" if key in required else "")
        out += [".TP", term, roff(description)]
    return out


def manifest_section(schema):
    """MANIFEST: what the schema says of every key, at the top level, under defaults:, in an entry, under extract:,
    in a list under lists:."""
    defs = schema["$defs"]
    out = [".SH MANIFEST", ".PP", roff("A manifest is a YAML file (version 1; the JSON Schema that editors and CI can check it against "
                       "is what haul schema prints). Unknown keys are errors. ${VAR} and ${VAR:-default} expand from "
                       "the environment in root, url, mirrors and header values, nowhere else.")]
    out += schema_keys("Top level", schema, defs)
    out += schema_keys("defaults:", defs["defaults"], defs)
    out += schema_keys("files: (each entry)", defs["file"], defs)
    out += schema_keys("extract: (an entry's archive)", defs["extract"], defs)
    out += schema_keys("lists: (each signed checksum list)", defs["list"], defs)
    return out


def split_discussion(discussion):
    """The discussion's paragraphs, and the fact blocks taken out of it: {title: [(term, meaning), ...]}."""
    prose, facts = [], {}
    for paragraph in discussion.strip().split("\n\n"):
        lines = paragraph.split("\n")
        title = lines[0].rstrip(":")
        if lines[0].endswith(":") and title in FACT_BLOCKS:
            items = []
            for line in lines[1:]:
                match = re.match(r"^  (\S(?:.*?\S)?)\s{2,}(\S.*)$", line)
                if not match:
                    sys.exit(f"manpage.py: cannot read the {title!r} line {line!r} of the root command's help")
                items.append((match.group(1), match.group(2)))
            facts[title] = items
        else:
            prose.append(paragraph)
    return prose, facts


def paragraphs(prose):
    """Prose paragraphs as roff: wrapped text as .PP; indented lines (examples) kept as they are, under the line
    that introduces them ("Examples:")."""
    out = []
    for paragraph in prose:
        lines = paragraph.split("\n")
        first_indented = next((index for index, line in enumerate(lines) if line.startswith("  ")), len(lines))
        text, heading = lines[:max(first_indented - 1, 0)], lines[max(first_indented - 1, 0):first_indented]
        if first_indented == len(lines):
            text, heading = lines, []
        if text:
            out += [".PP", roff(" ".join(line.strip() for line in text))]
        if heading:
            out += [".PP", roff(heading[0])]
        if first_indented < len(lines):
            out += [".RS 2", ".nf"] + [roff(line.strip()) for line in lines[first_indented:]] + [".fi", ".RE"]
    return out


def argument_names(argument):
    names = argument.get("names") or []
    if not names:
        return italic(argument.get("valueName", "value"))
    spelled = ", ".join(bold(("-" if name["kind"] == "short" else "--") + name["name"])
                        for name in sorted(names, key=lambda name: name["kind"] != "short"))
    if argument["kind"] == "option":
        spelled += " " + italic(argument.get("valueName", "value"))
    return spelled


def argument_entry(argument):
    text = argument.get("abstract", "").strip()
    default = argument.get("defaultValue")
    if default not in (None, "", "false") and argument["kind"] != "flag":
        text += f" (default: {default})"
    if argument.get("isRepeating") and argument["kind"] != "positional":
        text += " May be given more than once."
    return [".TP", argument_names(argument), roff(text)]


def usage(path, command):
    words = [bold(path)]
    for argument in command.get("arguments", []):
        if argument.get("kind") == "positional" and argument.get("shouldDisplay", True):
            word = italic(argument.get("valueName", "value"))
            words.append(f"[{word}]" if argument.get("isOptional") else word)
    if any(a.get("kind") != "positional" and not is_common(a) for a in command.get("arguments", [])):
        words.append("[" + italic("options") + "]")
    return " ".join(words)


def visible(commands):
    return [c for c in commands if c.get("shouldDisplay", True) and c["commandName"] != "help"]


def leaves(path, command):
    """Each runnable command under `command` (itself when it has no subcommands), with its full name."""
    subcommands = visible(command.get("subcommands", []))
    if not subcommands:
        return [(path, command)]
    return [leaf for sub in subcommands for leaf in leaves(path + " " + sub["commandName"], sub)]


COMMON = {"help", "version"}


def is_common(argument):
    """--help and --version: every command takes them, and OPTIONS lists them once."""
    return any(name["kind"] == "long" and name["name"] in COMMON for name in argument.get("names") or [])


def command_section(path, command):
    out = [".SS " + json.dumps(path), ".PP", usage(path, command)]
    if command.get("abstract"):
        out += [".PP", roff(command["abstract"])]
    prose, _ = split_discussion(command.get("discussion", ""))
    out += paragraphs(prose)
    arguments = [a for a in command.get("arguments", []) if a.get("shouldDisplay", True) and not is_common(a)]
    if arguments:
        out += [".PP", "Arguments and options:", ".RS 2"]
        for argument in arguments:
            out += argument_entry(argument)
        out += [".RE"]
    for sub in visible(command.get("subcommands", [])):
        out += command_section(path + " " + sub["commandName"], sub)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: haul --experimental-dump-help | python3 scripts/manpage.py VERSION > haul.1")
    version = sys.argv[1]
    root = json.load(sys.stdin)["command"]
    name = root["commandName"]
    prose, facts = split_discussion(root.get("discussion", ""))
    missing = [title for title in FACT_BLOCKS if title not in facts]
    if missing:
        sys.exit(f"manpage.py: the root command's help has no {', '.join(missing)} block")
    abstract = root.get("abstract", "").rstrip(".")
    out = [
        f'.TH {name.upper()} 1 "" "{name} {version}" "User Commands"',
        ".SH NAME",
        f"{name} \\- {roff(abstract[:1].lower() + abstract[1:])}",
        ".SH SYNOPSIS",
    ]
    for path, command in leaves(name, root):
        out += [".PP", usage(path, command)]
    out += [".PP", bold(f"{name} --version"), ".br", bold(f"{name} --help") + " | " + bold(f"{name} help") + " " + italic("command")]
    out += [".SH DESCRIPTION"] + paragraphs(prose)
    out += [".SH COMMANDS"]
    for command in visible(root.get("subcommands", [])):
        out += command_section(f"{name} {command['commandName']}", command)
    out += [".SH OPTIONS", "Every command also takes:", ".RS 2"]
    for argument in root.get("arguments", []):
        if argument.get("shouldDisplay", True):
            out += argument_entry(argument)
    out += [".RE"]
    for title, section in FACT_BLOCKS.items():
        out += [f".SH {section}"]
        for term, meaning in facts[title]:
            out += [".TP", bold(term), roff(meaning)]
    out += manifest_section(json.loads(SCHEMA.read_text(encoding="utf-8")))
    readme = README.read_text(encoding="utf-8")
    for section in README_SECTIONS:
        out += [f".SH {section}"] + readme_section(readme, section)
    out += [".SH FILES", ".TP", bold("ROOT/.haul/"),
            roff("haul's own folder in each root: the record of what haul wrote there (what --prune may delete), "
                 "the run lock, and staged and partial downloads. Keep it out of version control."),
            ".SH COPYRIGHT", roff("Copyright 2026 the haul authors. Licensed under the Apache License, Version 2.0 "
                                  "(SPDX: Apache-2.0); see /usr/share/doc/haul/copyright."),
            ".SH SEE ALSO", "curl(1), sha256sum(1), rsync(1)"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
