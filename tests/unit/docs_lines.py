"""What the user docs document: chart values (``operator.rayAddress``, ``--set
webhook.enabled=true``) and ``argus ...`` command lines, found in the README, docs/, the
chart's README and NOTES.txt and the examples' README. tests/unit/test_docs.py holds each to
the chart's schema and the CLI's parser; tests/integration/test_docs_chart_values.py renders
each documented ``value=setting`` with ``helm template``."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "argus"


def doc_files() -> list[Path]:
    return [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md")), CHART / "README.md",
            CHART / "templates" / "NOTES.txt", REPO / "examples" / "README.md"]


@dataclass(frozen=True)
class Documented:
    where: str  # file:line
    text: str


def top_level_values() -> set[str]:
    return set(yaml.safe_load((CHART / "values.yaml").read_text()))


# A chart value as the docs write it: `operator.rayAddress`, `webhook.enabled=true`,
# `--set logsApi.enabled=true`; the first segment must be a top-level key of values.yaml.
_VALUE = re.compile(r"(?<![\w./-])([a-z][A-Za-z0-9]*(?:\.[a-zA-Z][A-Za-z0-9]*)+)(?:=([^\s`'\"),;]+))?")


FILE_SUFFIXES = {"py", "yaml", "yml", "md", "json", "txt", "sh", "tpl", "tgz"}  # `operator/.../clusters.py` is a file


def placeholder(setting: str) -> bool:
    """A setting the docs leave for the reader to fill in (``sha256:...``, ``<your registry>``)."""
    return "..." in setting or "<" in setting or setting.isupper()


def chart_values() -> list[tuple[Documented, str, str | None]]:
    """(where, value path, the setting given or None) for each chart value a doc names,
    in backticks or after --set."""
    tops = top_level_values()
    found = []
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            spans = re.findall(r"`([^`]+)`", line) + re.findall(r"--set[= ](\S+)", line)
            for span in spans:
                for m in _VALUE.finditer(span):
                    name, setting = m.group(1), m.group(2)
                    if name.split(".")[0] in tops and name.rsplit(".", 1)[1] not in FILE_SUFFIXES:
                        found.append((Documented(f"{path.relative_to(REPO)}:{n}", line.strip()), name, setting))
    return found


def schema_has(path: str) -> bool:
    """Whether values.schema.json accepts the value path (every segment a property, or under
    an object that takes any property)."""
    node: Any = json.loads((CHART / "values.schema.json").read_text())
    for segment in path.split("."):
        if "$ref" in node:
            return True
        props = node.get("properties") or {}
        if segment in props:
            node = props[segment]
            continue
        extra = node.get("additionalProperties", True)
        if extra is False or (node.get("type") not in (None, "object") and "properties" not in node):
            return False
        node = extra if isinstance(extra, dict) else {}
    return True


def _shell_lines(text: str) -> list[tuple[int, str]]:
    """The commands of the docs' ```sh blocks (continuations joined), with their first line."""
    out: list[tuple[int, str]] = []
    in_block, pending, start = False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            in_block = not in_block and line.strip() in ("```sh", "```bash", "```shell", "```console")
            pending = ""
            continue
        if not in_block:
            continue
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def _argus_words(command: str) -> list[list[str]]:
    """Each ``argus ...`` / ``kubectl argus ...`` in one shell command, as its words after
    ``argus`` (pipes, ``;``, ``&&`` and ``<( )`` split commands)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars="|;&<>()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return []
    found, current = [], []
    for w in [*words, ";"]:
        if w and set(w) <= set("|;&<>()"):
            if current:
                found.append(current)
            current = []
        else:
            current.append(w)
    out = []
    for c in found:
        if c[:1] == ["argus"]:
            out.append(c[1:])
        elif c[:2] == ["kubectl", "argus"]:
            out.append(c[2:])
    return out


def cli_lines() -> list[tuple[Documented, list[str]]]:
    """Concrete ``argus`` command lines of the docs' shell blocks: they must parse."""
    found = []
    for path in doc_files():
        if path.suffix != ".md":
            continue
        for n, command in _shell_lines(path.read_text()):
            for argv in _argus_words(command):
                argv = [w.strip("[]") for w in argv]  # a synopsis's optional flags: [--root DIR]
                found.append((Documented(f"{path.relative_to(REPO)}:{n}", command.strip()), argv))
    return found


def cli_mentions() -> list[tuple[Documented, str, list[str]]]:
    """Every ``argus SUBCOMMAND ...`` a doc mentions in backticks (NOTES.txt: in its
    indented lines): the subcommand and the flags it names (synopses such as ``[--user U]``
    included)."""
    found = []
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            spans = re.findall(r"`([^`]+)`", line) if path.suffix == ".md" else [line.strip()]
            for span in spans:
                for m in re.finditer(r"(?:^|[\s(])(?:kubectl )?argus ([a-z][a-z-]*)((?:\\\||[^|`])*)", span):
                    sub, rest = m.group(1), m.group(2)
                    flags = [f.split("=")[0].rstrip(".,:;") for f in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*(?:=\S*)?)", rest)]
                    found.append((Documented(f"{path.relative_to(REPO)}:{n}", span), sub, flags))
    return found


def operator_mentions() -> list[tuple[Documented, list[str]]]:
    """Every ``argus-operator --flag ...`` a doc shows (in backticks or a shell block): the
    flags it names."""
    found = []
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"(?<![\w/.:-])argus-operator((?:\s+(?:--?[a-zA-Z][\w-]*(?:[= ](?!-)[^\s`]+)?|\[[^\]]*\]|[^\s`-][^\s`]*))*)", line):
                flags = [f.split("=")[0] for f in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", m.group(1))]
                if flags:
                    found.append((Documented(f"{path.relative_to(REPO)}:{n}", line.strip()), flags))
    return found
