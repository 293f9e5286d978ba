"""Walking the plain containers of a composed configuration: the checks in ``check.py`` read
every node of it, several times, on every validation.

    check._Check -> **walk** / **walk_over** (the base's walk reused) / **walk_changed** (what differs from verl's defaults) / **get** / **role_at**

A composition on the fast path shares every subtree the command left alone with verl's
defaults (the base, composed once per release and config name). ``Walked`` keeps the base's
walk once, with where each container's subtree lies in it, so ``walk_over`` walks only what
the command changed and copies the rest of the walk from the base's (a typical command
changes about 60 of a PPO config's 1,100 nodes).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .keys import role_of

MISSING = object()
# The leaves of a composed configuration: tested by type before Mapping, whose isinstance goes
# through the ABC machinery (about half a validation's walk, when every leaf paid it).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def get(tree: Any, parts: tuple[Any, ...]) -> Any:
    for p in parts:
        if isinstance(tree, Mapping) and p in tree:
            tree = tree[p]
        elif isinstance(tree, list) and isinstance(p, int) and 0 <= p < len(tree):
            tree = tree[p]
        else:
            return MISSING
    return tree


def declared(config: Mapping[str, Any], key: str) -> bool:
    """Whether the dotted ``key`` is in ``config``."""
    return get(config, tuple(key.split("."))) is not MISSING


def walk(tree: Any, parts: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every node, parents before children, in order (a loop, not a
    recursion of generators: a validation walks a thousand nodes several times)."""
    out = []
    stack = [(parts, tree)]
    while stack:
        here, node = stack.pop()
        out.append((here, node))
        t = type(node)
        if t in _SCALARS:
            continue
        if t is dict or (t is not list and isinstance(node, Mapping)):
            stack.extend(reversed([((*here, k), v) for k, v in node.items()]))
        elif t is list or isinstance(node, list):
            stack.extend(reversed([((*here, i), v) for i, v in enumerate(node)]))
    return out


class Walked:
    """A tree's ``walk``, with the span of each container's subtree in it (a walk lists a
    subtree's nodes together, right after the container). The tree must not change after."""

    def __init__(self, tree: Any):
        self.tree = tree
        self.nodes = walk(tree)
        self.spans: dict[tuple[Any, ...], tuple[int, int]] = {}
        open_: list[int] = []  # containers whose subtree has not ended yet, deepest last
        nodes = self.nodes
        for i, (parts, _) in enumerate(nodes):
            while open_ and len(nodes[open_[-1]][0]) >= len(parts):
                start = open_.pop()
                self.spans[nodes[start][0]] = (start, i)
            if type(nodes[i][1]) not in _SCALARS:
                open_.append(i)
        for start in open_:
            self.spans[nodes[start][0]] = (start, len(nodes))


def walk_over(tree: Any, walked: Walked) -> list[tuple[tuple[Any, ...], Any]]:
    """``walk(tree)``, where each subtree that is the very object ``walked.tree`` has at the
    same place is copied from ``walked``'s walk instead of walked again."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    nodes, spans = walked.nodes, walked.spans
    stack: list[tuple[tuple[Any, ...], Any, Any]] = [((), tree, walked.tree)]
    while stack:
        here, node, was = stack.pop()
        t = type(node)
        if t in _SCALARS:
            out.append((here, node))
            continue
        if node is was:
            span = spans.get(here)
            if span is not None:
                out.extend(nodes[span[0]:span[1]])
                continue
        out.append((here, node))
        children = _paired(here, node, t, was)
        if children:
            stack.extend(reversed(children))
    return out


def walk_changed(tree: Any, base: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """``walk(tree)`` without the subtrees that are the very object ``base`` has at the same
    place (a composition shares what the command left alone with verl's defaults: what is
    equal to verl's default gets no check of the strings and instantiation rules)."""
    out = []
    stack: list[tuple[tuple[Any, ...], Any, Any]] = [((), tree, base)]
    while stack:
        here, node, was = stack.pop()
        out.append((here, node))
        t = type(node)
        children = None if t in _SCALARS else _paired(here, node, t, was)
        if children is not None:
            stack.extend(reversed([c for c in children if c[1] is not c[2]]))
    return out


def _paired(here: tuple[Any, ...], node: Any, t: type, was: Any) -> list[tuple[tuple[Any, ...], Any, Any]] | None:
    """A container's children, each with the node ``was`` (the base's at ``here``) has at the
    same place (MISSING where it has none); None for a leaf."""
    if t is dict or (t is not list and isinstance(node, Mapping)):
        olds: Mapping[Any, Any] = was if type(was) is dict or isinstance(was, Mapping) else {}
        return [((*here, k), v, olds.get(k, MISSING)) for k, v in node.items()]
    if t is list or isinstance(node, list):
        items: list[Any] = was if isinstance(was, list) else []
        return [((*here, i), v, items[i] if i < len(items) else MISSING) for i, v in enumerate(node)]
    return None


@functools.lru_cache(maxsize=65536)
def role_at(parts: tuple[Any, ...]) -> str | None:
    """role_of the key at ``parts`` (the same paths come back in every validation)."""
    return role_of(key_of(parts))


def shown(parts: tuple[Any, ...]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def key_of(parts: tuple[Any, ...]) -> str:
    """The dotted key without list indices (the roles table's spelling)."""
    return ".".join(str(p) for p in parts if not isinstance(p, int))
