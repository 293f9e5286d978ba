"""Composing a task's configuration with verl's own config tree, as verl's entry point will
(issue 21): Hydra's compose, then OmegaConf's resolution. The core's ``Composer`` protocol
(argus.core.verlconfig) is what the rest of Argus sees.

Where the tree comes from (``find_tree``): the verl snapshot the cluster runs
(``PlatformConfig.verl_code()``, read through the shared tree where the operator mounts it),
else a pinned release from the cache (``~/.cache/argus/verl/<version>``, filled by
hack/fetch-verl.sh; baked into the image), or what ``--verl-config VERSION|DIR`` names.
The pinned releases are listed once, in the package's ``verl-releases.txt``.

How a command is composed (``HydraComposer.compose``), step for step as ``@hydra.main``:

1. the module's primary config: read from the module's own ``@hydra.main(config_path=...,
   config_name=...)`` in the tree (Python's parser, no import), or ``--config-name``;
   ``--config-path``/``--config-dir`` change the search path as Hydra's ``run_hydra`` does;
2. the overrides, parsed by Hydra's parser, split as Hydra's defaults list splits them:
   config-group overrides (and ``hydra.searchpath``) select files; the rest set keys;
3. the config composed from the files (``ConfigLoaderImpl.load_configuration``) is cached per
   (search path, primary config, group overrides): composing ppo_trainer reads ~100 YAML
   files (about 0.5 s), a typical command then costs an unpickle;
4. the key overrides applied with Hydra's own ``ConfigLoaderImpl._apply_overrides_to_config``
   (one at a time, so an error names its override), and Hydra's bookkeeping
   (``hydra.overrides``, ``job.override_dirname``, ``job.name``, ``runtime.output_dir``);
5. resolution with the resolvers Hydra and OmegaConf register, but only those: ``oc.env``
   reads the job's environment as Argus will set it (not this process's), ``hydra:`` reads
   the composed Hydra node, any other resolver is refused. OmegaConf's interpolation
   grammar is parsed by ANTLR in pure Python; the parse of each interpolation string is
   cached (the strings of verl's tree repeat in every command).

tests/integration/test_verl_compose.py proves step 3-4 equal to a full compose on a corpus
of overrides.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import functools
import os
import pickle
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
import zipfile
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, cast

from ..core.command.hydra import fast_override
from ..core.config import PlatformConfig
from ..core.verlconfig import Composed, ComposeRequest, ConfigTree

RELEASES_RESOURCE = "verl-releases.txt"
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){1,3}([a-z0-9.+-]*)?$")
# The resolvers a config may use: OmegaConf's own (oc.env replaced, see _job_resolvers)
# and Hydra's 'now'. verl's trees use only oc.select.
_ALLOWED_RESOLVERS = ("oc.select", "oc.create", "oc.decode", "oc.deprecated", "oc.dict.keys", "oc.dict.values", "now")


# The parts of an interpolation the incremental resolution reads (an over-approximation:
# a word that is not a key only makes it resolve one node more).
_RESOLVER_NAME = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:")
_KEY_TOKEN = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_0-9][\w\-]*)*")


class ConfigTreeError(Exception):
    """No verl config tree could be found or fetched: one line that says where to get one."""


# --- the pinned releases and where trees come from ------------------------------------


@dataclass(frozen=True)
class Release:
    version: str
    sha256: str


def pinned_releases() -> list[Release]:
    """The verl releases Argus composes against, newest (the default) first."""
    text = resources.files("argus").joinpath(RELEASES_RESOURCE).read_text(encoding="utf-8")
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            out.append(Release(words[0], words[1]))
    return out


def cache_dir() -> str:
    base = os.environ.get("ARGUS_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "argus")
    return os.path.join(base, "verl")


def release_dirs() -> list[str]:
    """Where a pinned release's tree may be: the cache, then the image's copy."""
    return [cache_dir(), "/opt/argus/verl"]


def _tree_version(root: str) -> str | None:
    try:
        with open(os.path.join(root, "verl", "version", "version"), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _has_config(root: str) -> bool:
    return os.path.isdir(os.path.join(root, "verl", "trainer", "config"))


def find_tree(choice: str | None, platform: PlatformConfig, *, fetch: bool = False) -> ConfigTree:
    """The config tree to compose with. ``choice``: None (the cluster's verl snapshot if it
    is readable here, else the default pinned release), a version, or a folder."""
    if choice is None:
        snapshot = platform.verl_code()
        if _has_config(snapshot):
            return ConfigTree(_tree_version(snapshot) or "unknown", snapshot, "cluster")
        choice = pinned_releases()[0].version
    if _VERSION.match(choice):
        for base in release_dirs():
            root = os.path.join(base, choice)
            if _has_config(root):
                return ConfigTree(_tree_version(root) or choice, root, "release")
        if fetch:
            return ConfigTree(choice, fetch_release(choice), "release")
        raise ConfigTreeError(f"verl {choice}'s config tree is not in {cache_dir()}: run hack/fetch-verl.sh {choice} "
                              "(or argus validate, which fetches a pinned release from the package index)")
    root = os.path.abspath(choice)
    for candidate in (root, os.path.dirname(root), os.path.dirname(os.path.dirname(os.path.dirname(root)))):
        if _has_config(candidate):
            return ConfigTree(_tree_version(candidate) or "unknown", candidate, "folder")
    raise ConfigTreeError(f"--verl-config {choice}: neither a pinned verl version nor a folder holding verl/trainer/config")


def fetch_release(version: str) -> str:
    """Fetch a pinned release's wheel from the package index into the cache (sha256-checked,
    as hack/fetch-verl.sh does); return its folder."""
    pinned = {r.version: r for r in pinned_releases()}
    if version not in pinned:
        raise ConfigTreeError(f"verl {version} is not a pinned release ({', '.join(pinned)}); give a folder with --verl-config DIR")
    dest = os.path.join(cache_dir(), version)
    os.makedirs(cache_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=f".fetch-{version}.") as tmp:
        print(f"fetching verl {version}'s config tree from the package index into {dest}", file=sys.stderr)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                               "--only-binary=:all:", "-d", tmp, f"verl=={version}"], capture_output=True, text=True)
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise ConfigTreeError(f"cannot fetch verl {version} from the package index ({last}); offline, run "
                                  f"hack/fetch-verl.sh {version} where the index is reachable, or give --verl-config DIR")
        import hashlib  # noqa: PLC0415

        wheel = os.path.join(tmp, wheels[0])
        with open(wheel, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != pinned[version].sha256:
            raise ConfigTreeError(f"verl {version}: the wheel's sha256 is {got}, not the pinned {pinned[version].sha256}")
        tree = os.path.join(tmp, "tree")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tree)
        if not os.path.isdir(dest):
            shutil.move(tree, dest)
    return dest


# --- composition -----------------------------------------------------------------------


class _Refused(Exception):
    """A composition or resolution the check refuses, in Hydra's or OmegaConf's words."""

    def __init__(self, message: str, line: str | None = None):
        super().__init__(message)
        self.line = line


def _words(exc: BaseException) -> str:
    """Hydra's and OmegaConf's message without its 'full_key:' / 'object_type' trailer."""
    lines = [x.rstrip() for x in str(exc).splitlines()]
    kept = [x.strip() for x in lines if x.strip() and not x.strip().startswith(("full_key:", "object_type=", "reference_type="))]
    return " ".join(kept) or type(exc).__name__


@dataclass(frozen=True)
class _Entry:
    config_path: str | None
    config_name: str | None


def _hydra_main(source: str) -> _Entry | None:
    """``@hydra.main(config_path=..., config_name=...)`` of a module's source, read with
    Python's parser."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and ast.unparse(d.func) in ("hydra.main", "main"):
                return _Entry(_string_argument(d, "config_path", 0), _string_argument(d, "config_name", 1))
    return None


def _string_argument(call: ast.Call, name: str, position: int) -> str | None:
    """A call's string constant argument, by keyword or position (None: absent or not a constant)."""
    keywords = {k.arg: k.value for k in call.keywords}
    v = keywords.get(name, call.args[position] if len(call.args) > position else None)
    return v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None


class _Base:
    """One cached composition of the files: the config with its group overrides, pickled
    (a fresh copy per command), and verl's defaults resolved."""

    def __init__(self, blob: bytes, base: dict[str, Any], base_hydra: dict[str, Any], raw: dict[str, Any]):
        self.blob = blob
        self.base = base
        self.base_hydra = base_hydra
        self.raw = raw
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
                always = bool(resolvers - {"oc.select"}) or "${." in node or "${ ." in node
                self.interpolations.append((parts, frozenset(_KEY_TOKEN.findall(node)), always))


# What Hydra reads of its own node when it runs one job (hydra/core/utils.py run_job,
# hydra/_internal/hydra.py): only these are resolved (the rest, such as sweep.subdir's
# ${hydra.job.num}, exists only in a multirun, which Argus refuses).
_HYDRA_READ = ("mode", "searchpath", "run", "sweep.dir", "output_subdir", "verbose", "callbacks", "job.name", "job.chdir",
               "job.env_set", "job.env_copy", "job_logging", "hydra_logging")


def _hydra_settings(cfg: Any, job_dir: str) -> dict[str, Any]:
    """The parts of the composed Hydra node that Hydra reads for one run, resolved, in
    their nested shape; ``runtime.output_dir`` set as Hydra sets it (the run folder,
    absolute: relative to the driver's folder, the job folder)."""
    from omegaconf import OmegaConf  # noqa: PLC0415

    h = cfg.hydra
    run_dir = str(OmegaConf.select(h, "run.dir"))
    h.runtime.output_dir = posixpath.normpath(posixpath.join(job_dir, run_dir)) if job_dir else run_dir
    out: dict[str, Any] = {}
    for key in _HYDRA_READ:
        node = OmegaConf.select(h, key, throw_on_missing=False)
        value = OmegaConf.to_container(node, resolve=True, enum_to_str=True) if OmegaConf.is_config(node) else node
        value = getattr(value, "name", value) if isinstance(value, enum.Enum) else value  # plain containers for the core
        *parents, last = key.split(".")
        target = out
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
    return out


def _copy(node: Any) -> Any:
    """A copy of plain containers (faster than copy.deepcopy, which the check's budget needs)."""
    if type(node) is dict:
        return {k: _copy(v) for k, v in node.items()}
    if type(node) is list:
        return [_copy(v) for v in node]
    return node


def _plain_value(value: Any) -> bool:
    """True when an override's value holds no interpolation."""
    if isinstance(value, str):
        return "${" not in value
    if isinstance(value, dict):
        return all(_plain_value(k) and _plain_value(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_value(v) for v in value)
    return True


def _put(tree: dict[str, Any], parts: tuple[Any, ...], value: Any) -> None:
    for p in parts[:-1]:
        tree = tree.setdefault(p, {}) if isinstance(tree, dict) else tree[p]
    tree[parts[-1]] = value


def _untyped_list(node: Any) -> bool:
    """True for a ListConfig whose elements have no declared type (a YAML list, not a
    structured config's typed field)."""
    metadata = getattr(node, "_metadata", None)
    return metadata is not None and getattr(metadata, "element_type", None) is Any and getattr(metadata, "object_type", None) in (None, list)


def _incremental(cfg: Any, base: _Base, applied: list[Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The resolved config (and the unresolved one) from the cached base's, resolving again
    only what the key overrides changed and the interpolations that may read it; None when
    the overrides are not plain key settings (a deletion, an interpolation, a list index),
    for which the whole config is resolved. tests/unit/test_verl_compose.py proves the
    result equal to OmegaConf's whole resolution on a corpus."""
    from omegaconf import OmegaConf  # noqa: PLC0415

    keys = []
    for o in applied:
        key = o.key_or_group
        if o.is_delete() or not _plain_value(o.value()) or any(p.isdigit() for p in key.split(".")):
            return None
        keys.append(key)
    config, raw = _copy(base.base), _copy(base.raw)
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


class HydraComposer:
    """``Composer`` over one verl config tree, with Hydra's compose API."""

    def __init__(self, tree: ConfigTree, *, cache_size: int = 32):
        # Imported here: Hydra and OmegaConf take a while to import, and the CLI's other
        # commands do not need them.
        from hydra.core.utils import setup_globals  # noqa: PLC0415

        setup_globals()  # Hydra's own resolvers ('now'), as @hydra.main registers them
        # Hydra warns on stderr of a search path folder that does not exist here, and goes on;
        # the folder is checked by the path policy, and a user's CLI output or the operator's
        # log is no place for the warning. (A process-wide filter: warnings' own context
        # manager is not thread-safe, and validations run in threads.)
        warnings.filterwarnings("ignore", message=r"provider=hydra\.searchpath in command-line, path=.* is not available",
                                category=UserWarning)
        self._tree = tree
        self._bases: OrderedDict[tuple[Any, ...], _Base] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry | None] = {}
        self._loaders: dict[tuple[Any, ...], Any] = {}
        self._overrides: dict[str, Any] = {}
        self._repos: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        from omegaconf.grammar_parser import parse  # noqa: PLC0415

        # OmegaConf's grammar parse of one string is a pure function whose tree is only read.
        self._parse = functools.lru_cache(maxsize=16384)(parse)

    @property
    def tree(self) -> ConfigTree:
        return self._tree

    # -- the module and its search path --

    def entry(self, module: str) -> _Entry | None:
        if module not in self._entries:
            path = os.path.join(self._tree.root, *module.split(".")) + ".py"
            try:
                with open(path, encoding="utf-8") as f:
                    self._entries[module] = _hydra_main(f.read())
            except (OSError, SyntaxError, ValueError):
                self._entries[module] = None
        return self._entries[module]

    def _search_dir(self, module: str, config_path: str | None) -> str:
        """Hydra's create_automatic_config_search_path for ``python -m module``, on the tree's files."""
        if config_path is not None and os.path.isabs(config_path):
            return config_path
        package = module.split(".")[:-1]
        path = (config_path or "").replace(os.sep, "/")
        while path.startswith("../"):
            path = path[3:]
            package = package[:-1]
        return posixpath.normpath(posixpath.join(self._tree.root, *package, path)) if path else posixpath.join(self._tree.root, *package)

    # -- compose --

    def compose(self, request: ComposeRequest) -> Composed:
        entry = self.entry(request.module)
        if entry is None:
            return Composed(error=f"verl {self._tree.version} has no module {request.module} with a Hydra entry point "
                                  f"(@hydra.main) in {self._tree.root}")
        config_name = request.config_name or entry.config_name
        if config_name is None:
            return Composed(error=f"{request.module} names no primary config: give --config-name")
        try:
            with self._lock:
                return self._compose(request, entry, config_name)
        except _Refused as exc:
            return Composed(primary=config_name, error=str(exc) if exc.line is None else f"{exc.line}: {exc}")

    def _compose(self, request: ComposeRequest, entry: _Entry, config_name: str) -> Composed:
        from hydra._internal.config_loader_impl import (
            ConfigLoaderImpl,  # noqa: PLC0415
            get_overrides_dirname,  # noqa: PLC0415
        )
        from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415
        from omegaconf import OmegaConf, open_dict  # noqa: PLC0415

        search_dir = self._search_dir(request.module, request.config_path if request.config_path is not None else entry.config_path)
        config_dir = os.path.abspath(request.config_dir) if request.config_dir else None
        if config_dir is not None and not os.path.isdir(config_dir):
            raise _Refused(f"Additional config directory '{config_dir}' not found (Argus reads it through the shared tree)")
        parser = OverridesParser.create()
        parsed = [self._override(parser, text) for text in request.overrides]
        loader = self._loader_for(search_dir, config_dir)
        groups = self._groups(loader, config_name, parsed, (search_dir, config_dir))
        group_lines = tuple(o.input_line for o in parsed if o.key_or_group == "hydra.searchpath" or self._is_group(groups, o))
        key = (search_dir, config_dir, config_name, group_lines)
        base = self._base(key, loader, config_name, list(group_lines), request.module)
        verl = self._verl_defaults(request, entry, parsed, base, (search_dir, config_dir, config_name))
        cfg = pickle.loads(base.blob)
        app = []
        for o in parsed:
            if o.input_line in group_lines:
                continue
            try:
                ConfigLoaderImpl._apply_overrides_to_config([o], cfg)
            except Exception as exc:  # noqa: BLE001 - Hydra's own words
                raise _Refused(_words(exc), o.input_line) from None
            (cfg.hydra.overrides.hydra if o.is_hydra_override() else cfg.hydra.overrides.task).append(o.input_line)
            if not o.is_hydra_override():
                app.append(o)
        task = [o for o in (self._override(parser, t) for t in group_lines) if not o.is_hydra_override()] + app
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=task, kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
            item_sep=cfg.hydra.job.config.override_dirname.item_sep,
            exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys)
        cfg.hydra.runtime.cwd = request.job_dir
        with self._resolution(request.env, cfg.hydra):
            try:
                hydra = _hydra_settings(cfg, request.job_dir)
            except Exception as exc:  # noqa: BLE001 - OmegaConf's own words
                raise _Refused(f"resolving Hydra's settings: {_words(exc)}") from None
            with open_dict(cfg):
                del cfg["hydra"]  # as Hydra's run_job hands the task its config
            try:
                incremental = _incremental(cfg, base, app)
                if incremental is not None:
                    config, raw = incremental
                else:
                    raw = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=False))
                    config = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
            except Exception as exc:  # noqa: BLE001 - OmegaConf's own words
                raise _Refused(f"resolving the configuration: {_words(exc)}") from None
        return Composed(primary=config_name, config=config, raw=raw, hydra=hydra,
                        base=verl.base, base_hydra=verl.base_hydra)

    def _override(self, parser: Any, text: str) -> Any:
        """Hydra's ``Override`` for one override. A trivially simple unquoted one (the text
        checks' ``fast_override``, property-tested equal to Hydra's parser) is built
        directly: Hydra's ANTLR parser takes about half a millisecond an override, and a
        64 KiB command holds hundreds. Each is kept (the operator and the webhook validate
        the same tasks)."""
        cached = self._overrides.get(text)
        if cached is not None:
            return cached
        from hydra.core.override_parser.types import Override, OverrideType, ValueType  # noqa: PLC0415

        fast = fast_override(text) if "'" not in text and '"' not in text else None
        if fast is not None:
            op, key, value = fast
            override = Override(type={"": OverrideType.CHANGE, "+": OverrideType.ADD, "++": OverrideType.FORCE_ADD}[op],
                                key_or_group=key, _value=value, value_type=ValueType.ELEMENT, package=None, input_line=text)
        else:
            try:
                override = parser.parse_override(text)
            except Exception as exc:  # noqa: BLE001 - Hydra's own words
                raise _Refused(_words(exc), text) from None
            override.input_line = text
        if len(self._overrides) >= 65536:
            self._overrides.clear()
        self._overrides[text] = override
        return override

    def _loader_for(self, search_dir: str, config_dir: str | None) -> Any:
        loader = self._loaders.get((search_dir, config_dir))
        if loader is None:
            loader = self._loaders[(search_dir, config_dir)] = self._loader(search_dir, config_dir)
        return loader

    def _verl_defaults(self, request: ComposeRequest, entry: _Entry, parsed: list[Any], base: _Base,
                       where: tuple[Any, ...]) -> _Base:
        """verl's own defaults for the entry point: its own primary config in verl's own tree,
        with the command's config-group choices that verl's tree has (a config of the
        user's own is the user's, not verl's defaults)."""
        verl_dir = self._search_dir(request.module, entry.config_path)
        verl_name = entry.config_name
        if where == (verl_dir, None, verl_name) or verl_name is None:
            return base
        loader = self._loader_for(verl_dir, None)
        groups = self._groups(loader, verl_name, [o for o in parsed if o.key_or_group != "hydra.searchpath"], (verl_dir, None))
        lines = tuple(o.input_line for o in parsed if o.key_or_group != "hydra.searchpath" and self._is_group(groups, o))
        try:
            return self._base((verl_dir, None, verl_name, lines), loader, verl_name, list(lines), request.module)
        except _Refused:
            return self._base((verl_dir, None, verl_name, ()), loader, verl_name, [], request.module)

    def _loader(self, search_dir: str, config_dir: str | None) -> Any:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl  # noqa: PLC0415
        from hydra._internal.utils import create_config_search_path  # noqa: PLC0415
        from hydra.core.config_search_path import SearchPathQuery  # noqa: PLC0415

        search_path = create_config_search_path(search_dir)
        if config_dir is not None:
            search_path.prepend(provider="command-line", path=f"file://{config_dir}", anchor=SearchPathQuery(provider="schema"))
        return ConfigLoaderImpl(config_search_path=search_path)

    @staticmethod
    def _is_group(groups: frozenset[str], o: Any) -> bool:
        # As Hydra's defaults list splits them (hydra/_internal/defaults_list.py, Overrides).
        return o.key_or_group in groups and not isinstance(o.value(), dict)

    def _groups(self, loader: Any, config_name: str, parsed: list[Any], where: tuple[Any, ...]) -> frozenset[str]:
        """The override keys that are config groups of this search path (Hydra's repository
        of it, with the primary config's and the command's hydra.searchpath, kept per search
        path: building it reads the primary config)."""
        from hydra._internal.config_repository import CachingConfigRepository  # noqa: PLC0415

        searchpath = [o for o in parsed if o.key_or_group == "hydra.searchpath"]
        key = (*where, config_name, tuple(o.input_line for o in searchpath))
        repo = self._repos.get(key)
        if repo is None:
            repo = CachingConfigRepository(loader.repository)
            try:
                loader._process_config_searchpath(config_name, searchpath, repo)
            except Exception as exc:  # noqa: BLE001 - Hydra's own words
                raise _Refused(_words(exc)) from None
            self._repos[key] = repo
            while len(self._repos) > self._cache_size:
                self._repos.popitem(last=False)
        return frozenset(o.key_or_group for o in parsed if repo.group_exists(o.key_or_group))

    def _base(self, key: tuple[Any, ...], loader: Any, config_name: str, group_lines: list[str], module: str) -> _Base:
        cached = self._bases.get(key)
        if cached is not None:
            self._bases.move_to_end(key)
            return cached
        from hydra.types import RunMode  # noqa: PLC0415
        from omegaconf import OmegaConf, open_dict  # noqa: PLC0415

        try:
            cfg = loader.load_configuration(config_name=config_name, overrides=group_lines, run_mode=RunMode.RUN)
        except Exception as exc:  # noqa: BLE001 - Hydra's own words
            raise _Refused(_words(exc)) from None
        from hydra.core.utils import JobRuntime  # noqa: PLC0415

        # Hydra names the job after the module (detect_task_name, for python -m) unless a
        # config names it: load_configuration took the name from its JobRuntime, unset here.
        runtime_name = JobRuntime.instance().get("name")
        with open_dict(cfg.hydra):
            if cfg.hydra.job.get("name") == runtime_name:
                cfg.hydra.job.name = module.rsplit(".", 1)[-1]
        blob = pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL)
        copy = pickle.loads(blob)
        with self._resolution({}, copy.hydra):
            try:
                base_hydra = _hydra_settings(copy, "")
                with open_dict(copy):
                    del copy["hydra"]
                base = OmegaConf.to_container(copy, resolve=True, throw_on_missing=False)
                raw = OmegaConf.to_container(copy, resolve=False)
            except Exception as exc:  # noqa: BLE001
                raise _Refused(f"resolving verl's own configuration: {_words(exc)}") from None
        entry = _Base(blob, base, base_hydra, raw)  # type: ignore[arg-type]
        self._bases[key] = entry
        while len(self._bases) > self._cache_size:
            self._bases.popitem(last=False)
        return entry

    @contextlib.contextmanager
    def _resolution(self, env: Mapping[str, str], hydra_node: Any) -> Iterator[None]:
        """Only the allowed resolvers, ``oc.env`` reading the job's environment, ``hydra:``
        reading this composition's Hydra node, and OmegaConf's grammar parse cached."""
        from omegaconf import OmegaConf  # noqa: PLC0415
        from omegaconf import base as omegaconf_base  # noqa: PLC0415
        from omegaconf.basecontainer import BaseContainer  # noqa: PLC0415

        saved = dict(BaseContainer._resolvers)
        saved_parse = omegaconf_base.parse
        try:
            BaseContainer._resolvers.clear()
            for name in _ALLOWED_RESOLVERS:
                if name in saved:
                    BaseContainer._resolvers[name] = saved[name]

            def oc_env(key: str, default: Any = None) -> str:
                if key not in env:
                    raise ValueError(f"oc.env:{key} reads {key}, which the job's environment does not hold as Argus sets it "
                                     f"(it holds {', '.join(sorted(env)) or 'nothing'}): write the value, or export it in the command")
                return env[key]

            OmegaConf.register_new_resolver("oc.env", oc_env)
            OmegaConf.register_new_resolver("hydra", lambda path: OmegaConf.select(hydra_node, path))
            omegaconf_base.parse = self._parse
            yield
        finally:
            omegaconf_base.parse = saved_parse
            BaseContainer._resolvers.clear()
            BaseContainer._resolvers.update(saved)

