"""Composition at the speed of a lookup (issue 39): a command's key overrides applied to the
cached composition of verl's files on plain containers, as Hydra's
``ConfigLoaderImpl._apply_overrides_to_config`` applies them with ``OmegaConf.update`` on
its nodes, and resolved again only where they change something (``verlinterp``).

    HydraComposer.compose -> **FastBase**(the cached composition).compose(overrides) -> Composed's parts
                          -> Unsupported: Hydra's and OmegaConf's own path (verlcompose)

The fast path takes only what it can restate exactly, and raises ``Unsupported`` for the
rest, which the composer then composes with Hydra and OmegaConf (so every refusal is in
their own words):

* the cached tree must be plain: struct mode on its root only, untyped nodes (verl's YAML);
* an override is ``key=value``, ``+key=value``, ``++key=value`` or ``~key`` on a dotted key of
  identifiers (no list index, no ``hydra.`` key, no config group), its value a plain element
  (int, float, bool, null, a string without ``${``, lists and dicts of them), and it applies
  without an error (an unknown key without ``+``, ``+`` on a set key, ``~`` of what is not
  there, a merge Hydra would refuse: all Unsupported);
* every interpolation the overrides change the value of is one of verlinterp's forms.

tests/unit/test_verl_compose_fast.py proves it equal to the full compose on every corpus of
commands in the repository and on generated overrides over verl's real keys.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any, cast

from .verlinterp import Program, Ref, Resolver, Unsupported, compile_interpolation, references
from .verlresolve import HYDRA_READ, copy_plain

_KEY = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*")
_SCALARS = (str, int, float, bool, type(None))


def _literal(text: str) -> Any:
    """A resolver's default as OmegaConf's grammar reads it."""
    from omegaconf import OmegaConf  # noqa: PLC0415

    container = cast(dict[str, Any], OmegaConf.to_container(OmegaConf.create({"v": f"${{oc.select:__argus_absent__,{text}}}"}), resolve=True))
    return container["v"]


def _program(path: tuple[Any, ...], text: str) -> Program | None:
    return compile_interpolation(text, _literal)


def _plain_value(value: Any) -> bool:
    """An override's value that OmegaConf stores as written (no interpolation, no MISSING)."""
    t = type(value)
    if t is str:
        return "${" not in value and value != "???"
    if t is list:
        return all(_plain_value(v) for v in value)
    if t is dict:
        return all(type(k) is str and _plain_value(v) for k, v in value.items())
    return t in (int, float, bool, type(None))


def _plain_tree(cfg: Any) -> bool:
    """Whether an OmegaConf tree (the task's part) is what the fast path restates: struct on
    its root only, untyped nodes, no special containers."""
    from omegaconf import DictConfig, ListConfig  # noqa: PLC0415
    from omegaconf.nodes import AnyNode  # noqa: PLC0415

    if cfg._metadata.flags != {"struct": True}:
        return False
    stack = [cfg]
    while stack:
        node = stack.pop()
        for k in node.keys() if isinstance(node, DictConfig) else range(len(node)):
            child = node._get_node(k)
            if child._metadata.flags or (isinstance(node, DictConfig) and type(k) is not str):
                return False
            if type(child) is AnyNode:
                if type(child._value()) not in _SCALARS:
                    return False
            elif type(child) in (DictConfig, ListConfig):
                meta = child._metadata
                if child._is_none() or child._is_missing() or child._is_interpolation() \
                        or meta.object_type not in (None, dict, list) or meta.ref_type not in (Any, None):
                    return False
                stack.append(child)
            else:
                return False
    return True


def _interpolations(tree: Any, prefix: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    out = []
    stack = [(prefix, tree)]
    while stack:
        parts, node = stack.pop()
        if type(node) is dict:
            stack.extend(((*parts, k), v) for k, v in node.items())
        elif type(node) is list:
            stack.extend(((*parts, i), v) for i, v in enumerate(node))
        elif type(node) is str and "${" in node:
            out.append((parts, node))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1, 1.0 and True are not the same value)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _at(tree: Any, parts: tuple[Any, ...]) -> Any:
    for p in parts:
        tree = tree[p]
    return tree


class FastBase:
    """The fast path over one cached composition (``BaseComposition``)."""

    def __init__(self, cfg: Any, base: Any):
        from omegaconf import OmegaConf, open_dict  # noqa: PLC0415

        self.base = base
        self.usable = False
        hydra_node = cfg.hydra
        self.hydra_raw = cast(dict[str, Any], OmegaConf.to_container(hydra_node, resolve=False, enum_to_str=True))
        with open_dict(cfg):
            del cfg["hydra"]
        if not _plain_tree(cfg):
            return
        # Every interpolation of the task's tree, compiled and checked against OmegaConf's
        # own resolution of the base (a form read wrongly is not used).
        self.programs: dict[tuple[Any, ...], Program | None] = {}
        self.always: list[tuple[Any, ...]] = []  # read the job's environment: resolved for each command
        self.by_key: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}  # a key read -> the interpolations reading it
        self.under: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}  # a prefix of a key read -> the same
        check = Resolver(base.raw, {}, self._program)
        for parts, text in _interpolations(base.raw, ()):
            program = _program(parts, text)
            try:
                if program is None or not _same(check.value(text, parts), _at(base.base, parts)):
                    program = None
            except Unsupported:
                program = None
            if program is None and re.search(r"\$\{\s*(?!oc\.select:)[\w.]+:", text):
                return  # a resolver whose value does not follow the keys (oc.env, now ...): not restated
            ops = _ops(program) if program is not None else set()
            if ops & {"hydra", "now"}:
                return  # Hydra's node or the clock, from the task's config: not restated
            self.programs[parts] = program
            if "oc.env" in ops:
                self.always.append(parts)
            for ref in references(program, parts) if program is not None else _rough_references(text):
                self.by_key.setdefault(ref, []).append(parts)
                for i in range(len(ref)):
                    self.under.setdefault(ref[:i], []).append(parts)
        self.usable = self._hydra_checks(base)

    def _program(self, path: tuple[Any, ...], text: str) -> Program | None:
        if path in self.programs:
            return self.programs[path]
        return _program(path, text)

    def _hydra_checks(self, base: Any) -> bool:
        """Whether Hydra's node resolves here as OmegaConf resolves it (the base's, with no job
        folder), and reads nothing that a command's overrides change."""
        for parts, text in _interpolations(self.hydra_raw, ("hydra",)):
            program = _program(parts, text)
            if program is None:
                return False
            for ref in references(program, parts):
                # What the command changes in Hydra's node (its overrides, override_dirname),
                # or a node holding it.
                for changed in (("hydra", "job", "override_dirname"), ("hydra", "overrides")):
                    if changed[:len(ref)] == ref or ref[:len(changed)] == changed:
                        return False
        try:
            settings = self.hydra_settings(base.raw, {}, "", base.base_hydra["run"]["dir"])
        except (Unsupported, KeyError, TypeError):
            return False
        return _without_times(settings) == _without_times(base.base_hydra)

    def hydra_settings(self, raw: Mapping[str, Any], env: Mapping[str, str], job_dir: str, run_dir: str | None = None) -> dict[str, Any]:
        """verlresolve.hydra_settings, on the plain tree."""
        hydra = dict(self.hydra_raw)
        runtime = dict(hydra["runtime"])
        hydra["runtime"] = runtime
        root = {**raw, "hydra": hydra}
        resolver = Resolver(root, env, _program)
        if run_dir is None:
            run_dir = str(resolver.resolved(hydra["run"]["dir"], ("hydra", "run", "dir")))
        runtime["cwd"] = job_dir
        runtime["output_dir"] = posixpath.normpath(posixpath.join(job_dir, run_dir)) if job_dir else run_dir
        out: dict[str, Any] = {}
        for key in HYDRA_READ:
            parts = tuple(key.split("."))
            try:
                node = _at(hydra, parts)
            except (KeyError, TypeError):
                node = None
            *parents, last = parts
            target = out
            for p in parents:
                target = target.setdefault(p, {})
            target[last] = resolver.resolved(node, ("hydra", *parts))
        return out

    # -- a command --

    def compose(self, overrides: list[Any], defaults: list[Any], env: Mapping[str, str],
                job_dir: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], tuple[str, ...]]:
        """(config, raw, Hydra's settings, the defaults applied) for the overrides (Hydra's
        ``Override``s) and the request's defaults; Unsupported when not restated."""
        if not self.usable:
            raise Unsupported("the cached composition is not plain")
        tree = _Tree(self.base.raw)
        for o in overrides:
            tree.apply(o)
        applied = []
        for o in defaults:
            if tree.declared(o.key_or_group):
                tree.apply(o)
                applied.append(o.input_line)
        config = self._resolve(tree, env)
        hydra = self.hydra_settings(tree.root, env, job_dir)
        return config, tree.root, hydra, tuple(applied)

    def _resolve(self, tree: _Tree, env: Mapping[str, str]) -> dict[str, Any]:
        """The resolved config: the base's, with what the overrides changed and the
        interpolations that read it resolved again."""
        resolver = Resolver(tree.root, env, self._program)
        out = _Tree(self.base.base)
        changed = sorted(tree.changed, key=len)
        done: set[tuple[Any, ...]] = set()
        for parts in changed:
            if any(parts[:i] in done for i in range(len(parts))):
                continue
            done.add(parts)
            found = tree.get(parts)
            if found is _GONE:
                out.delete(parts)
            else:
                out.put(parts, resolver.resolved(found, parts))
        pending = list(self.always)
        for parts in changed:
            pending += self._readers(parts)
        while pending:
            q = pending.pop()
            if q in done or any(q[:i] in done for i in range(len(q))):
                continue
            if self.programs.get(q) is None:
                raise Unsupported(f"an interpolation at {q} that the overrides change")
            done.add(q)
            out.put(q, resolver.value(_at(tree.root, q), q))
            pending += self._readers(q)
        # A key deleted and made again (~a then +a.b=1) goes last, as in the raw tree: the
        # resolved containers take the raw tree's key order wherever an override changed one.
        # Only a deletion can make the orders differ (a key set in place keeps its place, a
        # new one goes last in both).
        for parent in {parts[:-1] for parts in changed} if tree.deleted else ():
            raw = tree.get(parent)
            if type(raw) is dict and type(out.get(parent)) is dict and list(out.get(parent)) != list(raw):
                container = out.container(parent)
                ordered = {k: container[k] for k in raw if k in container}
                container.clear()
                container.update(ordered)
        return out.root

    def _readers(self, parts: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The interpolations that read ``parts``, a key above it or a key under it."""
        found = list(self.under.get(parts, ()))
        for i in range(len(parts) + 1):
            found += self.by_key.get(parts[:i], ())
        return found


def _ops(program: Program) -> set[str]:
    out = set()
    for piece in program:
        while isinstance(piece, Ref):
            out.add(piece.op)
            piece = piece.default
    return out


def _rough_references(text: str) -> list[tuple[Any, ...]]:
    """Every dotted word of an interpolation not compiled (an over-approximation of what it reads)."""
    return [tuple(w.split(".")) for w in _KEY.findall(text)]


def _without_times(settings: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(settings)
    for key in ("run", "sweep", "job_logging"):  # ${now:...}, and the log file in the run folder
        out.pop(key, None)
    return out


_GONE = object()


class _Tree:
    """A copy-on-write plain tree: the containers on a changed path are copied, the rest is
    the cached base's (read only)."""

    def __init__(self, root: dict[str, Any]):
        self.root = dict(root)
        self._own: set[int] = {id(self.root)}
        self.changed: list[tuple[Any, ...]] = []
        self.deleted = False  # whether an override deleted a key (~)

    def get(self, parts: tuple[Any, ...]) -> Any:
        node: Any = self.root
        for p in parts:
            if type(node) is not dict or p not in node:
                return _GONE
            node = node[p]
        return node

    def _owned(self, parent: Any, key: Any) -> Any:
        child = parent[key]
        if id(child) not in self._own:
            child = dict(child) if type(child) is dict else list(child)
            parent[key] = child
            self._own.add(id(child))
        return child

    def container(self, parts: tuple[Any, ...]) -> dict[str, Any]:
        node: Any = self.root
        for p in parts:
            node = self._owned(node, p)
        return node

    def put(self, parts: tuple[Any, ...], value: Any) -> None:
        self.container(parts[:-1])[parts[-1]] = value

    def delete(self, parts: tuple[Any, ...]) -> None:
        self.container(parts[:-1]).pop(parts[-1], None)

    def declared(self, key: str) -> bool:
        """OmegaConf.select(cfg, key, default=ABSENT) is not ABSENT, for a request's default."""
        parts = _parts(key)
        node: Any = self.root
        for p in parts:
            if type(node) is not dict:
                raise Unsupported("a key through a value")
            if p not in node:
                return False
            node = node[p]
            if type(node) is str and "${" in node:
                raise Unsupported("a key through an interpolation")
        return not (type(node) is str and node == "???")  # MISSING: select's default

    def apply(self, o: Any) -> None:
        """One override, as _apply_overrides_to_config (Unsupported where it would differ or refuse)."""
        from hydra.core.override_parser.types import OverrideType, ValueType  # noqa: PLC0415

        element = o.value_type is ValueType.ELEMENT or o.type is OverrideType.DEL and o.value_type is None
        if o.package is not None or not element or "${" in (o.input_line or "${"):
            raise Unsupported("not a plain override")
        parts = _parts(o.key_or_group)
        value = o.value()
        if not _plain_value(value):
            raise Unsupported("not a plain value")
        kind = o.type
        if kind is OverrideType.DEL:
            self._delete(parts, value)
            return
        force = kind in (OverrideType.ADD, OverrideType.FORCE_ADD)
        parent = self._parent(parts, kind is OverrideType.ADD, kind is OverrideType.FORCE_ADD)
        last = parts[-1]
        current = parent.get(last, _GONE)
        if kind is OverrideType.ADD and current is not _GONE and current is not None and type(value) not in (dict, list):
            raise Unsupported("+ on a key that is set")  # Hydra refuses it
        if kind is OverrideType.ADD and type(current) is str and "${" in current:
            raise Unsupported("+ on an interpolation")
        if current is _GONE and not force:
            raise Unsupported("an unknown key without +")  # Hydra refuses it
        if type(value) in (dict, list) and type(current) in (dict, list):
            parent[last] = self._merge(current, value, force, (*parts,))
        elif value is None and type(current) in (dict, list):
            raise Unsupported("null on a container")
        else:
            parent[last] = copy_plain(value)
        self.changed.append(parts)

    def _parent(self, parts: tuple[str, ...], add: bool, force_add: bool) -> dict[str, Any]:
        """The container of the last key, made on the way as OmegaConf.update makes it."""
        node = self.root
        for i, p in enumerate(parts[:-1]):
            child = node.get(p, _GONE)
            if type(child) is dict:
                node = self._owned(node, p)
                continue
            # A missing key: made with + and ++; a value: replaced with ++ (+ selects through
            # it first, which OmegaConf refuses); a list or an interpolation: not restated.
            if not (force_add or add and child is _GONE) or type(child) is list:
                raise Unsupported("a key through a value, a list or a missing key")  # Hydra refuses it
            if type(child) is str and "${" in child:
                raise Unsupported("a key through an interpolation")
            new: dict[str, Any] = {}
            node[p] = new
            self._own.add(id(new))
            self.changed.append(parts[:i + 1])
            node = new
        return node

    def _merge(self, current: Any, value: Any, force: bool, parts: tuple[Any, ...]) -> Any:
        """OmegaConf's merge_with of a plain container into a node (struct off when ``force``)."""
        if type(current) is list:
            if type(value) is not list:
                raise Unsupported("a dict merged into a list")
            return copy_plain(value)
        if type(value) is not dict:
            raise Unsupported("a list merged into a dict")
        out = dict(current)
        self._own.add(id(out))
        for k, v in value.items():
            if k not in out:
                if not force:
                    raise Unsupported("a new key merged in struct mode")
                out[k] = copy_plain(v)
                continue
            d = out[k]
            if type(d) in (dict, list) and type(v) in (dict, list):
                out[k] = self._merge(d, v, force, (*parts, k))
            elif v is None and type(d) in (dict, list):
                raise Unsupported("null on a container")
            else:
                out[k] = copy_plain(v)
        return out

    def _delete(self, parts: tuple[str, ...], value: Any) -> None:
        if value is not None:
            raise Unsupported("~key=value")
        node: Any = self.root
        for p in parts[:-1]:
            node = node.get(p, _GONE) if type(node) is dict else _GONE
            if type(node) is not dict:
                raise Unsupported("a key through a value or a missing key")
        current = node.get(parts[-1], _GONE)
        if current is _GONE or current is None or (type(current) is str and ("${" in current or current == "???")):
            raise Unsupported("~ of a missing key, a null, MISSING or an interpolation")  # Hydra refuses the first three
        del self.container(parts[:-1])[parts[-1]]
        self.deleted = True
        self.changed.append(parts)


def _parts(key: str) -> tuple[str, ...]:
    if not _KEY.fullmatch(key) or key == "hydra" or key.startswith("hydra."):
        raise Unsupported("not a plain key")
    return tuple(key.split("."))

