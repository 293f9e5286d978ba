"""The package's size limits (issue #25): no function over 80 lines, no class over 15
methods, no module over 500 lines, measured on operator/argus with Python's parser. A piece
over its limit is named with its file, line and size; the allow-list below says why the few
that stay over are not split, and an entry that is no longer over its limit fails too (so the
list only shrinks)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "operator" / "argus"

MAX_FUNCTION_LINES = 80
MAX_CLASS_METHODS = 15
MAX_MODULE_LINES = 500

# "path (from the repository's root)" or "path:Qualified.name" -> why it stays over its limit.
ALLOWED: dict[str, str] = {
    # Nothing is over its limit. An entry names a module ("path") or a function or class in it
    # ("path:Name") and says why it may stay over; the test fails when an entry is stale.
}


class Oversize(NamedTuple):
    key: str   # as ALLOWED names it
    line: int
    what: str  # e.g. "function of 81 lines (limit 80)"

    def __str__(self) -> str:
        path, _, name = self.key.partition(":")
        return f"{path}:{self.line}: {name} is a {self.what}" if name else f"{path}: a {self.what}"


def oversize(path: str, source: str) -> list[Oversize]:
    """What in one module's ``source`` is over its limit (``path`` names the module)."""
    found: list[Oversize] = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(Oversize(path, 1, f"module of {lines} lines (limit {MAX_MODULE_LINES})"))

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                if isinstance(child, ast.ClassDef):
                    methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in child.body)
                    if methods > MAX_CLASS_METHODS:
                        found.append(Oversize(f"{path}:{name}", child.lineno, f"class of {methods} methods (limit {MAX_CLASS_METHODS})"))
                else:
                    length = child.end_lineno - child.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(Oversize(f"{path}:{name}", child.lineno, f"function of {length} lines (limit {MAX_FUNCTION_LINES})"))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def package_oversize() -> list[Oversize]:
    found: list[Oversize] = []
    for file in sorted(PACKAGE.rglob("*.py")):
        found += oversize(file.relative_to(REPO).as_posix(), file.read_text(encoding="utf-8"))
    return found


def test_no_function_class_or_module_is_over_its_limit() -> None:
    over = [o for o in package_oversize() if o.key not in ALLOWED]
    assert not over, "over the size limits (split them into well-named pieces):\n" + "\n".join(map(str, over))


def test_every_allowed_piece_is_still_over_its_limit() -> None:
    still = {o.key for o in package_oversize()}
    stale = sorted(set(ALLOWED) - still)
    assert not stale, f"no longer over the size limits: remove from ALLOWED in {Path(__file__).name}: {', '.join(stale)}"


# --------------------------------------------------------------------------- negative controls

def _function(name: str, lines: int, indent: str = "") -> list[str]:
    body = [f"{indent}    x = {i}" for i in range(lines - 2)]
    return [f"{indent}def {name}() -> int:", *body, f"{indent}    return 0"]


def test_an_oversize_function_class_and_module_are_each_named() -> None:
    methods = [line for k in range(MAX_CLASS_METHODS + 1) for line in _function(f"m{k}", 2, "    ")]
    source = "\n".join([
        *_function("long", MAX_FUNCTION_LINES + 1),
        "class Wide:",
        *methods,
        "def outer() -> None:",
        *_function("inner", MAX_FUNCTION_LINES + 1, "    "),
        "    pass",
        *[f"y{i} = {i}" for i in range(MAX_MODULE_LINES)],
    ]) + "\n"
    found = oversize("pkg/big.py", source)
    assert [(o.key, o.line) for o in found] == [
        ("pkg/big.py", 1),
        ("pkg/big.py:long", 1),
        ("pkg/big.py:Wide", MAX_FUNCTION_LINES + 2),
        ("pkg/big.py:outer", MAX_FUNCTION_LINES + 2 + 1 + 2 * (MAX_CLASS_METHODS + 1)),
        ("pkg/big.py:outer.inner", MAX_FUNCTION_LINES + 2 + 1 + 2 * (MAX_CLASS_METHODS + 1) + 1),
    ]
    assert str(found[1]) == f"pkg/big.py:1: long is a function of {MAX_FUNCTION_LINES + 1} lines (limit {MAX_FUNCTION_LINES})"
    assert f"Wide is a class of {MAX_CLASS_METHODS + 1} methods" in str(found[2])
    assert found[0].what.startswith("module of ")


def test_pieces_at_their_limits_pass() -> None:
    methods = [line for k in range(MAX_CLASS_METHODS) for line in _function(f"m{k}", 2, "    ")]
    source = "\n".join([*_function("exact", MAX_FUNCTION_LINES), "class Full:", *methods])
    source += "\n" + "\n".join(f"y{i} = {i}" for i in range(MAX_MODULE_LINES - len(source.splitlines()))) + "\n"
    assert len(source.splitlines()) == MAX_MODULE_LINES
    assert oversize("pkg/ok.py", source) == []
