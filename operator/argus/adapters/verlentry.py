"""How a verl entry point names its configuration (issue 21), read without importing it:
the module's ``@hydra.main`` (Python's parser), the verl config a user's own primary config
is built on, and the folders a command's ``hydra.searchpath`` adds.

    HydraComposer -> **hydra_main**(module source) / **verl_parent**(own config) / **searchpath_dirs**(overrides)
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Any


def verl_parent(folders: tuple[str | None, ...], name: str, verl_dir: str) -> str | None:
    """The verl primary config a user's own config ``name`` names first in its defaults list
    (a name verl's own config folder has), or None."""
    import yaml  # noqa: PLC0415

    for folder in folders:
        path = os.path.join(folder, f"{name}.yaml") if folder else None
        if path is None or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            return None
        defaults = data.get("defaults") if isinstance(data, dict) else None
        for item in defaults if isinstance(defaults, list) else ():
            if isinstance(item, str) and item != "_self_" and "/" not in item and ".." not in item \
                    and os.path.isfile(os.path.join(verl_dir, f"{item.removesuffix('.yaml')}.yaml")):
                return item.removesuffix(".yaml")
        return None
    return None


def searchpath_dirs(parsed: list[Any]) -> list[str]:
    """The folders a command's ``hydra.searchpath`` adds (file:// entries)."""
    out: list[str] = []
    for o in parsed:
        if o.key_or_group == "hydra.searchpath":
            value = o.value()
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item.startswith("file://"):
                    out.append(item.removeprefix("file://"))
    return out


@dataclass(frozen=True)
class Entry:
    config_path: str | None
    config_name: str | None


def hydra_main(source: str) -> Entry | None:
    """``@hydra.main(config_path=..., config_name=...)`` of a module's source, read with
    Python's parser."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and ast.unparse(d.func) in ("hydra.main", "main"):
                return Entry(_string_argument(d, "config_path", 0), _string_argument(d, "config_name", 1))
    return None


def _string_argument(call: ast.Call, name: str, position: int) -> str | None:
    """A call's string constant argument, by keyword or position (None: absent or not a constant)."""
    keywords = {k.arg: k.value for k in call.keywords}
    v = keywords.get(name, call.args[position] if len(call.args) > position else None)
    return v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None
