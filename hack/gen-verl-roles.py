"""Generate the role of every key of a verl release's configuration (issue 34, item 1).

    .venv/bin/python hack/gen-verl-roles.py [--check] [VERSION ...]

For each supported release (operator/argus/verl-releases.txt; its tree cached by
hack/fetch-verl.sh), every entry point's primary config (the modules with ``@hydra.main``,
and ppo_megatron_trainer for main_ppo) is composed as verl composes it (Argus's own
HydraComposer: Hydra's compose, no import of verl), and every leaf key is classified by
``argus.core.verlconfig.roles.classify``: the reviewed tables of keys.py (ROLES, PLAIN, the
shell rules, FREE_FORM), then the value's type (verl's default, or the field's type in
verl's config dataclasses, read as text with Python's parser). What it cannot classify is
written as ``unknown``; the review classifies it by hand in keys.py and runs this again.

Written to operator/argus/verlroles/<version>.tsv (key, role, why). ``--check``: fail when
a written table differs from what this generates (tests/unit/test_verl_roles.py runs it).
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from argus.adapters.verlcompose import HydraComposer, find_tree, pinned_releases  # noqa: E402
from argus.core.config import PlatformConfig  # noqa: E402
from argus.core.verlconfig import ComposeRequest  # noqa: E402
from argus.core.verlconfig.roles import BLOCK, classify, free_form, render  # noqa: E402

OUT = REPO / "operator" / "argus" / "verlroles"
_EXTRA_CONFIGS = {"verl.trainer.main_ppo": ("ppo_megatron_trainer",)}


def entry_points(root: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for folder, _, files in sorted(os.walk(os.path.join(root, "verl"))):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            if "hydra.main" not in text:
                continue
            module = os.path.relpath(path, root).removesuffix(".py").replace(os.sep, ".")
            out.append((module, None))
            out += [(module, name) for name in _EXTRA_CONFIGS.get(module, ())]
    return out


def field_types(root: str) -> dict[str, str]:
    """Field name -> its annotation in verl's config dataclasses (``verl/**/config*``), as
    text; a name annotated differently in two places is left out."""
    seen: dict[str, set[str]] = {}
    for folder, _, files in os.walk(os.path.join(root, "verl")):
        for f in files:
            path = os.path.join(folder, f)
            if not f.endswith(".py") or "config" not in path.removeprefix(root):
                continue
            try:
                tree = ast.parse(Path(path).read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            seen.setdefault(item.target.id, set()).add(ast.unparse(item.annotation))
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def leaves(raw: object, base: object, parts: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    if isinstance(raw, dict) and parts and free_form(".".join(parts)):
        yield parts, BLOCK, base
    elif isinstance(raw, dict):
        if not raw and parts:
            yield parts, raw, base
        for k, v in raw.items():
            yield from leaves(v, base.get(k) if isinstance(base, dict) else None, (*parts, str(k)))
    else:
        yield parts, raw, base


def generate(version: str) -> str:
    tree = find_tree(version, PlatformConfig())
    composer = HydraComposer(tree, fast=False)
    types = field_types(tree.root)
    rows: dict[str, tuple[str, str]] = {}
    for module, name in entry_points(tree.root):
        composed = composer.compose(ComposeRequest(module=module, overrides=(), env={}, job_dir="/job", config_name=name))
        if composed.error is not None:
            print(f"verl {version}: {module} ({name or 'its primary config'}): not composed: {composed.error}", file=sys.stderr)
            continue
        for parts, raw, value in leaves(composed.raw, composed.base):
            key = ".".join(parts)
            if key not in rows:
                rows[key] = (BLOCK, "reviewed free-form block (keys.FREE_FORM)") if raw is BLOCK \
                    else classify(key, raw, value, types.get(parts[-1]))
    return render(version, rows)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    versions = [a for a in argv if not a.startswith("--")] or [r.version for r in pinned_releases()]
    stale = []
    for version in versions:
        text = generate(version)
        path = OUT / f"{version}.tsv"
        if check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.write_text(text, encoding="utf-8")
        unknown = sum(1 for line in text.splitlines() if "\tunknown\t" in line)
        print(f"verl {version}: {path.relative_to(REPO)}: {text.count(chr(10)) - 2} keys, {unknown} unknown")
    if stale:
        print(f"not current (run hack/gen-verl-roles.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
