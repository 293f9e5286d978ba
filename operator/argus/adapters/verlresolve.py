"""The fast path of composing a command (``verlcompose.HydraComposer``): the composition of
the config files, kept per (search path, primary config, group overrides) as a
``BaseComposition`` (pickled, with verl's defaults resolved and its interpolations indexed),
and the resolution of a command's key overrides on it that resolves again only what they
change (``resolve_incremental``); ``hydra_settings``, what Hydra reads of its own node.

    HydraComposer.compose -> (files composed once: **BaseComposition**) -> key overrides -> **resolve_incremental** -> Composed
"""

from __future__ import annotations

import enum
import posixpath
import re
from typing import Any

from ..core.verlconfig.tree import Walked

# The parts of an interpolation the incremental resolution reads (an over-approximation:
# a word that is not a key only makes it resolve one node more).
_RESOLVER_NAME = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:")
_RELATIVE = re.compile(r"[{:,]\s*\.")
_KEY_TOKEN = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_0-9][\w\-]*)*")


class BaseComposition:
    """One cached composition of the files: the config with its group overrides, pickled
    (a fresh copy per command), and verl's defaults resolved."""

    def __init__(self, blob: bytes, base: dict[str, Any], base_hydra: dict[str, Any], raw: dict[str, Any]):
        self.blob = blob
        self.base = base
        self.base_hydra = base_hydra
        self.raw = raw
        self.fast: Any = None  # verlfast.FastBase, made on first use
        self._walked: Walked | None = None
        # Every interpolation of the base: (path, the keys it may read, whether it must be
        # resolved again whatever changed: a resolver other than oc.select, a relative key).
        self.interpolations: list[tuple[tuple[Any, ...], frozenset[str], bool]] = []
        stack: list[tuple[tuple[Any, ...], Any]] = [((), raw)]
        while stack:
            parts, node = stack.pop()
            if isinstance(node, dict):
                stack.extend(((*parts, k), v) for k, v in node.items())
            elif isinstance(node, list):
                stack.extend(((*parts, i), v) for i, v in enumerate(node))
            elif isinstance(node, str) and "${" in node:
                resolvers = set(_RESOLVER_NAME.findall(node))
                # A relative key (${.x}, ${oc.select:..x,d}) is not a token of the keys it reads.
                always = bool(resolvers - {"oc.select"}) or _RELATIVE.search(node) is not None
                self.interpolations.append((parts, frozenset(_KEY_TOKEN.findall(node)), always))

    @property
    def walked(self) -> Walked:
        """verl's defaults walked (core.verlconfig.tree), made on first use: the checks of
        every composition on this base copy from it what the command left alone."""
        if self._walked is None:
            self._walked = Walked(self.base)
        return self._walked


# What Hydra reads of its own node when it runs one job (hydra/core/utils.py run_job,
# hydra/_internal/hydra.py): only these are resolved (the rest, such as sweep.subdir's
# ${hydra.job.num}, exists only in a multirun, which Argus refuses).
HYDRA_READ = ("mode", "searchpath", "run", "sweep.dir", "output_subdir", "verbose", "callbacks", "job.name", "job.chdir",
              "job.env_set", "job.env_copy", "job_logging", "hydra_logging")


def hydra_settings(cfg: Any, job_dir: str) -> dict[str, Any]:
    """The parts of the composed Hydra node that Hydra reads for one run, resolved, in
    their nested shape; ``runtime.output_dir`` set as Hydra sets it (the run folder,
    absolute: relative to the driver's folder, the job folder)."""
    from omegaconf import OmegaConf  # noqa: PLC0415

    h = cfg.hydra
    run_dir = str(OmegaConf.select(h, "run.dir"))
    h.runtime.output_dir = posixpath.normpath(posixpath.join(job_dir, run_dir)) if job_dir else run_dir
    out: dict[str, Any] = {}
    for key in HYDRA_READ:
        node = OmegaConf.select(h, key, throw_on_missing=False)
        value = OmegaConf.to_container(node, resolve=True, enum_to_str=True) if OmegaConf.is_config(node) else node
        value = getattr(value, "name", value) if isinstance(value, enum.Enum) else value  # plain containers for the core
        *parents, last = key.split(".")
        target = out
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
    return out


def copy_plain(node: Any) -> Any:
    """A copy of plain containers (faster than copy.deepcopy, which the check's budget needs)."""
    if type(node) is dict:
        return {k: copy_plain(v) for k, v in node.items()}
    if type(node) is list:
        return [copy_plain(v) for v in node]
    return node


def _plain_value(value: Any) -> bool:
    """True when an override's value holds no interpolation."""
    if isinstance(value, str):
        return "${" not in value and value != "???"  # MISSING: OmegaConf's select reads it as None
    if isinstance(value, dict):
        return all(_plain_value(k) and _plain_value(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_value(v) for v in value)
    return True


def _put(tree: dict[str, Any], parts: tuple[Any, ...], value: Any) -> None:
    for p in parts[:-1]:
        if not isinstance(tree, (dict, list)):
            raise _Whole
        tree = tree.setdefault(p, {}) if isinstance(tree, dict) else tree[p]
    if not isinstance(tree, (dict, list)):
        raise _Whole  # a key through a value the override replaced (+a.b=1 on a string a)
    tree[parts[-1]] = value


class _Whole(Exception):
    """What the incremental resolution does not follow: the whole config is resolved."""


def _untyped_list(node: Any) -> bool:
    """True for a ListConfig whose elements have no declared type (a YAML list, not a
    structured config's typed field)."""
    metadata = getattr(node, "_metadata", None)
    return metadata is not None and getattr(metadata, "element_type", None) is Any and getattr(metadata, "object_type", None) in (None, list)


def resolve_incremental(cfg: Any, base: BaseComposition, applied: list[Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The resolved config (and the unresolved one) from the cached base's, resolving again
    only what the key overrides changed and the interpolations that may read it; None when
    the overrides are not plain key settings (a deletion, an interpolation, a list index),
    for which the whole config is resolved. tests/unit/test_verl_compose.py proves the
    result equal to OmegaConf's whole resolution on a corpus."""
    try:
        return _incremental(cfg, base, applied)
    except _Whole:
        return None


def _incremental(cfg: Any, base: BaseComposition, applied: list[Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    from omegaconf import OmegaConf  # noqa: PLC0415

    keys = []
    for o in applied:
        key = o.key_or_group
        if o.is_delete() or not _plain_value(o.value()) or any(p.isdigit() for p in key.split(".")):
            return None
        keys.append(key)
    config, raw = copy_plain(base.base), copy_plain(base.raw)
    changed: set[str] = set()
    values = {o.key_or_group: o.value() for o in applied}
    for key in keys:
        node = OmegaConf.select(cfg, key, throw_on_missing=False)
        parts = tuple(key.split("."))
        value = values[key]
        if OmegaConf.is_list(node) and type(value) is list and _untyped_list(node) and \
                all(v is None or type(v) in (str, int, float, bool) for v in value):
            # A list of plain values in a list without a schema holds exactly those values
            # (a long data.train_files list is most of a 64 KiB command).
            _put(config, parts, list(value))
            _put(raw, parts, list(value))
        elif OmegaConf.is_config(node):
            _put(config, parts, OmegaConf.to_container(node, resolve=True))
            _put(raw, parts, OmegaConf.to_container(node, resolve=False))
        else:
            _put(config, parts, node)
            _put(raw, parts, node)  # a plain value: as written
        changed.add(key)
    prefixes = {key.rsplit(".", i)[0] for key in changed for i in range(key.count(".") + 1)}
    done: set[tuple[Any, ...]] = set()
    while True:
        more = []
        for parts, tokens, always in base.interpolations:
            if parts in done:
                continue
            dotted = ".".join(str(p) for p in parts)
            if any(dotted == k or dotted.startswith(k + ".") for k in changed):
                done.add(parts)  # inside a subtree resolved whole above
                continue
            if always or any(t in prefixes or any(".".join(t.split(".")[:i]) in changed for i in range(1, t.count(".") + 2))
                             for t in tokens):
                more.append((parts, dotted))
        if not more:
            return config, raw
        for parts, dotted in more:
            done.add(parts)
            branch: Any = cfg
            for p in parts:
                branch = branch[p]
            _put(config, parts, OmegaConf.to_container(branch, resolve=True) if OmegaConf.is_config(branch) else branch)
            changed.add(dotted)
            prefixes.update(dotted.rsplit(".", i)[0] for i in range(dotted.count(".") + 1))
