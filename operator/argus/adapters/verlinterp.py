"""OmegaConf's interpolations, restated for the fast path of composing (issue 39): the forms
verl's config trees and Hydra's own node use, compiled once per string, and evaluated on
plain containers (dicts, lists, scalars) as OmegaConf resolves them on its nodes. Anything
else (escapes, other resolvers, a reference through a list, a missing value, a cycle) is
``Unsupported``, and the composer composes with Hydra and OmegaConf instead.

    verlfast.FastBase -> **compile_interpolation**(text) -> Program -> **Resolver**.value(...)

The forms: ``${key}``, ``${.key}``/``${..key}`` (relative to the node's parent), text around
them (``a/${x}/${y}``, each piece ``str()``-ed), ``${oc.select:key}``, ``${oc.select:key,default}``
(the default a literal, read by OmegaConf's own grammar once, or another of these forms),
``${oc.env:NAME,default}`` (the job's environment), ``${hydra:key}`` and ``${now:format}``.
tests/unit/test_verl_compose_fast.py proves the fast path equal to the full compose.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .verlresolve import copy_plain

_KEY = re.compile(r"(\.*)([A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*)")
_RESOLVER = re.compile(r"(oc\.select|oc\.env|hydra|now):(.*)", re.S)
_NO_DEFAULT = object()


class Unsupported(Exception):
    """What the fast path cannot prove equal to Hydra's and OmegaConf's own result."""


@dataclass(frozen=True)
class Ref:
    """One ``${...}``: ``op`` is node, oc.select, oc.env, hydra or now; ``dots`` how many leading
    dots (relative) its key has; ``key`` the key's parts (the variable's name for env, the
    format for now); ``default`` a literal value, a nested Ref, or _NO_DEFAULT."""

    op: str
    dots: int
    key: tuple[str, ...]
    default: Any = _NO_DEFAULT


# A compiled string: its pieces, literal text or Ref; None when a form is not supported.
Program = tuple[Any, ...]


def _closing(text: str, start: int) -> int:
    """The index of the '}' closing the '${' whose body starts at ``start`` (-1: none)."""
    depth, i = 1, start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


@functools.lru_cache(maxsize=4096)
def compile_interpolation(text: str, literal: Callable[[str], Any] | None = None) -> Program | None:
    """The pieces of an interpolation string, or None when a form is not supported.
    ``literal`` reads a resolver's default with OmegaConf's grammar (None: no literal
    defaults)."""
    if "\\" in text:
        return None
    pieces: list[Any] = []
    i = 0
    while i < len(text):
        j = text.find("${", i)
        if j < 0:
            pieces.append(text[i:])
            break
        if j > i:
            pieces.append(text[i:j])
        end = _closing(text, j + 2)
        if end < 0:
            return None
        ref = _compile_ref(text[j + 2:end], literal)
        if ref is None:
            return None
        pieces.append(ref)
        i = end + 1
    return tuple(pieces)


def _compile_ref(body: str, literal: Callable[[str], Any] | None) -> Ref | None:
    m = _KEY.fullmatch(body)
    if m is not None:
        return Ref("node", len(m.group(1)), tuple(m.group(2).split(".")))
    m = _RESOLVER.fullmatch(body)
    if m is None:
        return None
    op, args = m.group(1), m.group(2)
    if op == "now":
        plain = args == args.strip() and args and not any(c in args for c in "${},'\"[]\\")
        return Ref("now", 0, (args,)) if plain else None
    key_text, comma, default_text = args.partition(",")
    k = _KEY.fullmatch(key_text)
    if k is None or (op != "oc.select" and k.group(1)):
        return None
    default: Any = _NO_DEFAULT
    if comma:
        if op == "hydra":
            return None
        nested = default_text.strip()
        if nested.startswith("${") and _closing(nested, 2) == len(nested) - 1:
            inner = _compile_ref(nested[2:-1], literal)
            if inner is None or inner.op == "now":
                return None
            default = inner
        elif literal is None or any(c in default_text for c in "${}\\"):
            return None
        else:
            try:
                default = literal(default_text)
            except Exception:  # noqa: BLE001 - not a literal OmegaConf reads: not supported
                return None
    if op == "oc.env" and (default is not _NO_DEFAULT and isinstance(default, Ref)):
        return None
    return Ref(op, len(k.group(1)), tuple(k.group(2).split(".")), default)


def absolute(ref: Ref, path: tuple[Any, ...]) -> tuple[Any, ...]:
    """The parts of the key ``ref`` reads, for the node at ``path``."""
    if ref.op == "hydra":
        return ("hydra", *ref.key)
    if ref.dots == 0:
        return ref.key
    parent = path[:-1]
    up = ref.dots - 1
    if up > len(parent):
        raise Unsupported("a relative key above the root")
    return (*parent[:len(parent) - up], *ref.key)


def references(program: Program, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every key a program may read (defaults' keys included)."""
    out = []
    for piece in program:
        ref = piece
        while isinstance(ref, Ref):
            if ref.op in ("node", "oc.select", "hydra"):
                out.append(absolute(ref, path))
            ref = ref.default
    return out


_MISSING = object()


class Resolver:
    """Evaluates programs over one plain tree (the root config), as OmegaConf resolves."""

    def __init__(self, root: Mapping[str, Any], env: Mapping[str, str], programs: Callable[[tuple[Any, ...], str], Program | None]):
        self.root = root
        self.env = env
        self.programs = programs
        self._active: set[tuple[Any, ...]] = set()

    def resolved(self, node: Any, path: tuple[Any, ...]) -> Any:
        """A resolved copy of ``node`` (at ``path``), as OmegaConf.to_container(resolve=True)."""
        if type(node) is dict:
            return {k: self.resolved(v, (*path, k)) for k, v in node.items()}
        if type(node) is list:
            return [self.resolved(v, (*path, i)) for i, v in enumerate(node)]
        if type(node) is str and "${" in node:
            return self.value(node, path)
        return node

    def value(self, text: str, path: tuple[Any, ...]) -> Any:
        """The value of the interpolation string ``text`` at ``path``."""
        program = self.programs(path, text)
        if program is None:
            raise Unsupported(text)
        if path in self._active:
            raise Unsupported("a cycle")
        self._active.add(path)
        try:
            if len(program) == 1 and isinstance(program[0], Ref):
                return self._ref(program[0], path)
            out = []
            for piece in program:
                if isinstance(piece, Ref):
                    v = self._ref(piece, path)
                    if isinstance(v, (dict, list)):
                        raise Unsupported("a container in a string")
                    out.append(str(v))
                else:
                    out.append(piece)
            return "".join(out)
        finally:
            self._active.discard(path)

    def _ref(self, ref: Ref, path: tuple[Any, ...]) -> Any:
        if ref.op == "now":
            return datetime.datetime.now().strftime(ref.key[0])
        if ref.op == "oc.env":
            name = ".".join(ref.key)
            if name in self.env:
                return self.env[name]
            if ref.default is _NO_DEFAULT:
                raise Unsupported("oc.env without the variable")
            return None if ref.default is None else str(ref.default)
        parts = absolute(ref, path)
        found = self._lookup(parts)
        if type(found) is str and found == "???":  # MISSING: oc.select's default, an error for ${key}
            if ref.op == "node":
                raise Unsupported("a missing value")
            found = _MISSING
        if found is _MISSING:
            if ref.op == "node":
                raise Unsupported("a missing key")
            if isinstance(ref.default, Ref):
                return self._ref(ref.default, path)
            return None if ref.default is _NO_DEFAULT else copy_plain(ref.default)
        return self.resolved(found, parts)

    def _lookup(self, parts: tuple[Any, ...]) -> Any:
        node: Any = self.root
        for p in parts:
            if type(node) is not dict:  # a value, a list or an interpolation on the way
                raise Unsupported("a key through a value or a list")
            if p not in node:
                return _MISSING
            node = node[p]
        return node

