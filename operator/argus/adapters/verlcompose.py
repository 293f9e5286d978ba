"""Composing a task's configuration with verl's own config tree, as verl's entry point will
(issue 21): Hydra's compose, then OmegaConf's resolution. The core's ``Composer`` protocol
(argus.core.verlconfig) is what the rest of Argus sees.

    verltree.find_tree -> ConfigTree -> **HydraComposer**(tree).compose(request) -> Composed -> core.verlconfig's checks

Where the tree comes from (``find_tree``, the pinned releases): ``argus.adapters.verltree``
(its names are importable from here too). The cached composition of the files and the
incremental resolution (steps 3 and 5's fast path): ``argus.adapters.verlresolve``. The
entry point's own names: ``argus.adapters.verlentry``. The caches' keys follow the config
folders' files (``argus.adapters.verlstamp``: an edited file is read again).

Composition at the speed of a lookup (issue 39): when the command selects no config group,
sets nothing of Hydra's and reads verl's own folder, steps 4-5 run on plain containers
(``argus.adapters.verlfast``, with ``verlinterp``'s restatement of OmegaConf's
interpolations), a fraction of a millisecond; whatever that path cannot restate exactly
(a config group, hydra.*, --config-dir, an interpolation in a value, an override Hydra
refuses ...) is composed as below, so refusals are in Hydra's own words.

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

tests/unit/test_verl_compose.py proves step 3-4 equal to a full compose on a corpus of
overrides; tests/unit/test_verl_compose_fast.py proves the fast path equal to steps 3-5
on every corpus of commands in the repository and on generated overrides.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import posixpath
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, cast

from ..core.command.hydra import fast_override
from ..core.verlconfig import Composed, ComposeRequest, ConfigTree
from .verlentry import Entry, hydra_main, searchpath_dirs, verl_parent
from .verlfast import FastBase
from .verlresolve import BaseComposition, hydra_settings, resolve_incremental
from .verlstamp import FolderStamps
from .verltree import ConfigTreeError, Release, _tree_version, cache_dir, fetch_release, find_tree, pinned_releases, present_releases, release_dirs

# The composer, and where its tree comes from (the CLI, the platform settings and the tests
# import them from here).
__all__ = ["ConfigTreeError", "HydraComposer", "Release", "cache_dir", "fetch_release", "find_tree", "pinned_releases", "present_releases",
           "release_dirs"]

# The resolvers a config may use: OmegaConf's own (oc.env replaced, see _resolution)
# and Hydra's 'now'. verl's trees use only oc.select.
_ALLOWED_RESOLVERS = ("oc.select", "oc.create", "oc.decode", "oc.deprecated", "oc.dict.keys", "oc.dict.values", "now")


# --- composition -----------------------------------------------------------------------

_ABSENT = object()


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


def _is_group(groups: frozenset[str], o: Any) -> bool:
    # As Hydra's defaults list splits them (hydra/_internal/defaults_list.py, Overrides).
    return o.key_or_group in groups and not isinstance(o.value(), dict)


def _fast(composer: HydraComposer, base: BaseComposition, parser: Any, request: ComposeRequest,
          config_name: str) -> Composed | None:
    """The command's key overrides on the cached composition without Hydra and OmegaConf
    (verlfast), or None where it cannot be restated exactly (or fails in any way: the full
    compose is then the answer)."""
    fast = base.fast
    if fast is None:
        try:
            fast = FastBase(pickle.loads(base.blob), base)
        except Exception:  # noqa: BLE001 - a tree it does not read: every command composed with Hydra
            fast = False
        base.fast = fast
    if not fast or not fast.usable:
        return None
    try:
        defaults = [composer._override(parser, t) for t in request.defaults]
        config, raw, hydra, applied = fast.compose([composer._override(parser, t) for t in request.overrides], defaults,
                                                   request.env, request.job_dir)
    except Exception:  # noqa: BLE001 - Unsupported, or anything unforeseen: the full compose decides
        return None
    composer.fast_composes += 1
    return Composed(primary=config_name, config=config, raw=raw, hydra=hydra, base=base.base,
                    base_hydra=base.base_hydra, defaults_applied=applied, base_walk=base.walked)


class HydraComposer:
    """``Composer`` over one verl config tree, with Hydra's compose API."""

    def __init__(self, tree: ConfigTree, *, cache_size: int = 32, fast: bool = True):
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
        self._bases: OrderedDict[tuple[Any, ...], BaseComposition] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._entries: dict[str, Entry | None] = {}
        self._loaders: dict[tuple[Any, ...], Any] = {}
        self._overrides: dict[str, Any] = {}
        self._repos: OrderedDict[tuple[Any, ...], tuple[Any, dict[str, bool]]] = OrderedDict()
        self._stamps = FolderStamps()
        self._parser: Any = None
        # False: every composition with Hydra and OmegaConf, resolved whole (the tests' reference).
        self._fast_path = fast
        # How many compositions took the fast path (verlfast) and how many Hydra's own.
        self.fast_composes = 0
        self.full_composes = 0
        from omegaconf.grammar_parser import parse  # noqa: PLC0415

        # OmegaConf's grammar parse of one string is a pure function whose tree is only read.
        self._parse = functools.lru_cache(maxsize=16384)(parse)

    @property
    def tree(self) -> ConfigTree:
        return self._tree

    def code_version(self, root: str) -> str | None:
        return _tree_version(root)

    # -- the module and its search path --

    def entry(self, module: str) -> Entry | None:
        if module not in self._entries:
            path = os.path.join(self._tree.root, *module.split(".")) + ".py"
            try:
                with open(path, encoding="utf-8") as f:
                    self._entries[module] = hydra_main(f.read())
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
        except Exception as exc:  # noqa: BLE001 - Hydra or OmegaConf refusing in a way not met before: still a verdict
            return Composed(primary=config_name, error=f"{type(exc).__name__}: {_words(exc)}")

    def _compose(self, request: ComposeRequest, entry: Entry, config_name: str) -> Composed:
        from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415

        search_dir = self._search_dir(request.module, request.config_path if request.config_path is not None else entry.config_path)
        config_dir = os.path.abspath(request.config_dir) if request.config_dir else None
        for own in (config_dir, search_dir if request.config_path is not None and os.path.isabs(request.config_path) else None):
            if own is not None and not os.path.isdir(own) and request.home and not os.path.isdir(request.home):
                return Composed(primary=config_name, unreadable=own)
        if config_dir is not None and not os.path.isdir(config_dir):
            raise _Refused(f"Additional config directory '{config_dir}' not found (Argus reads it through the shared tree)")
        parser = self._parser
        if parser is None:
            parser = self._parser = OverridesParser.create()
        parsed = [self._override(parser, text) for text in request.overrides]
        loader = self._loader_for(search_dir, config_dir)
        # The files' state is part of every cache key: an edited config file is read again.
        stamp = self._stamps.stamp((search_dir, config_dir, *searchpath_dirs(parsed)))
        groups = self._groups(loader, config_name, parsed, (search_dir, config_dir, stamp))
        group_lines = tuple(o.input_line for o in parsed if o.key_or_group == "hydra.searchpath" or _is_group(groups, o))
        # The module too: Hydra names the job after it (hydra.job.name), so sft_trainer_ray
        # and sft_trainer share a primary config but not a composition.
        key = (search_dir, config_dir, config_name, group_lines, stamp, request.module)
        base = self._base(key, loader, config_name, list(group_lines), request.module)
        verl = self._verl_defaults(request, entry, parsed, base, (search_dir, config_dir, config_name))
        if self._fast_path and verl is base and not group_lines and config_dir is None \
                and search_dir == self._search_dir(request.module, entry.config_path):
            fast = _fast(self, base, parser, request, config_name)
            if fast is not None:
                return fast
        return self._full(request, parsed, base, verl, group_lines, config_name)

    def _full(self, request: ComposeRequest, parsed: list[Any], base: BaseComposition, verl: BaseComposition,
              group_lines: tuple[str, ...], config_name: str) -> Composed:
        """Steps 4-5 with Hydra's and OmegaConf's own code, on a copy of the cached composition."""
        from hydra._internal.config_loader_impl import (
            ConfigLoaderImpl,  # noqa: PLC0415
            get_overrides_dirname,  # noqa: PLC0415
        )
        from omegaconf import OmegaConf, open_dict  # noqa: PLC0415

        parser = self._parser
        self.full_composes += 1
        cfg = pickle.loads(base.blob)
        app = []
        for o in parsed:
            if o.input_line in group_lines:
                continue
            try:
                ConfigLoaderImpl._apply_overrides_to_config([o], cfg)
            except Exception as exc:  # noqa: BLE001 - Hydra's own words
                raise _Refused(_words(exc), o.input_line) from None
            try:  # OmegaConf reads the line as a string that may interpolate, as Hydra's own run does
                (cfg.hydra.overrides.hydra if o.is_hydra_override() else cfg.hydra.overrides.task).append(o.input_line)
            except Exception as exc:  # noqa: BLE001 - OmegaConf's own words
                raise _Refused(_words(exc), o.input_line) from None
            if not o.is_hydra_override():
                app.append(o)
        applied = []
        for text in request.defaults:
            o = self._override(parser, text)
            if OmegaConf.select(cfg, o.key_or_group, default=_ABSENT) is _ABSENT:
                continue  # the config does not declare it (verl's evaluation.yaml has no trainer block)
            try:
                ConfigLoaderImpl._apply_overrides_to_config([o], cfg)
            except Exception as exc:  # noqa: BLE001 - Hydra's own words
                raise _Refused(_words(exc), o.input_line) from None
            cfg.hydra.overrides.task.append(o.input_line)
            app.append(o)
            applied.append(text)
        task = [o for o in (self._override(parser, t) for t in group_lines) if not o.is_hydra_override()] + app
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=task, kv_sep=cfg.hydra.job.config.override_dirname.kv_sep,
            item_sep=cfg.hydra.job.config.override_dirname.item_sep,
            exclude_keys=cfg.hydra.job.config.override_dirname.exclude_keys)
        cfg.hydra.runtime.cwd = request.job_dir
        with self._resolution(request.env, cfg.hydra):
            try:
                hydra = hydra_settings(cfg, request.job_dir)
            except Exception as exc:  # noqa: BLE001 - OmegaConf's own words
                raise _Refused(f"resolving Hydra's settings: {_words(exc)}") from None
            with open_dict(cfg):
                del cfg["hydra"]  # as Hydra's run_job hands the task its config
            try:
                try:
                    incremental = resolve_incremental(cfg, base, app) if self._fast_path else None
                except Exception:  # noqa: BLE001 - resolved whole below: OmegaConf's first error, in the config's order
                    incremental = None
                if incremental is not None:
                    config, raw = incremental
                else:
                    raw = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=False))
                    config = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
            except Exception as exc:  # noqa: BLE001 - OmegaConf's own words
                raise _Refused(f"resolving the configuration: {_words(exc)}") from None
        return Composed(primary=config_name, config=config, raw=raw, hydra=hydra, base=verl.base,
                        base_hydra=verl.base_hydra, defaults_applied=tuple(applied), base_walk=verl.walked)

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

    def _verl_defaults(self, request: ComposeRequest, entry: Entry, parsed: list[Any], base: BaseComposition,
                       where: tuple[Any, ...]) -> BaseComposition:
        """verl's own defaults for the entry point: its own primary config in verl's own tree
        (or the config the command names, when verl's own config folder has one of that
        name), with the command's config-group choices that verl's tree has (a config of the
        user's own is the user's, not verl's defaults)."""
        verl_dir = self._search_dir(request.module, entry.config_path)
        verl_name = entry.config_name
        # The same config name at the same verl version (ppo_megatron_trainer's _target_s
        # are not ppo_trainer's), when verl's own config folder has it.
        asked = request.config_name.removesuffix(".yaml") if request.config_name else None
        if asked and asked != verl_name and os.path.isfile(os.path.join(verl_dir, f"{asked}.yaml")):
            verl_name = asked
        elif asked and asked != verl_name:
            # A config of the user's own built on one of verl's (defaults: [ppo_megatron_trainer, ...]).
            # (Not verl's own primary config named again: its defaults list names its parts.)
            verl_name = verl_parent(where[:2], asked, verl_dir) or verl_name
        if where == (verl_dir, None, verl_name) or verl_name is None:
            return base
        loader = self._loader_for(verl_dir, None)
        stamp = self._stamps.stamp((verl_dir, None))
        groups = self._groups(loader, verl_name, [o for o in parsed if o.key_or_group != "hydra.searchpath"], (verl_dir, None, stamp))
        lines = tuple(o.input_line for o in parsed if o.key_or_group != "hydra.searchpath" and _is_group(groups, o))
        try:
            return self._base((verl_dir, None, verl_name, lines, stamp), loader, verl_name, list(lines), request.module)
        except _Refused:
            return self._base((verl_dir, None, verl_name, (), stamp), loader, verl_name, [], request.module)

    def _loader(self, search_dir: str, config_dir: str | None) -> Any:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl  # noqa: PLC0415
        from hydra._internal.utils import create_config_search_path  # noqa: PLC0415
        from hydra.core.config_search_path import SearchPathQuery  # noqa: PLC0415

        search_path = create_config_search_path(search_dir)
        if config_dir is not None:
            search_path.prepend(provider="command-line", path=f"file://{config_dir}", anchor=SearchPathQuery(provider="schema"))
        return ConfigLoaderImpl(config_search_path=search_path)

    def _groups(self, loader: Any, config_name: str, parsed: list[Any], where: tuple[Any, ...]) -> frozenset[str]:
        """The override keys that are config groups of this search path (Hydra's repository
        of it, with the primary config's and the command's hydra.searchpath, kept per search
        path: building it reads the primary config)."""
        from hydra._internal.config_repository import CachingConfigRepository  # noqa: PLC0415

        searchpath = [o for o in parsed if o.key_or_group == "hydra.searchpath"]
        key = (*where, config_name, tuple(o.input_line for o in searchpath))
        cached = self._repos.get(key)
        if cached is None:
            repo = CachingConfigRepository(loader.repository)
            try:
                loader._process_config_searchpath(config_name, searchpath, repo)
            except Exception as exc:  # noqa: BLE001 - Hydra's own words
                raise _Refused(_words(exc)) from None
            cached = self._repos[key] = (repo, {})
            while len(self._repos) > self._cache_size:
                self._repos.popitem(last=False)
        repo, known = cached  # group_exists asks the file system: each key once per stamp
        found = set()
        for o in parsed:
            k = o.key_or_group
            exists = known.get(k)
            if exists is None:
                exists = known[k] = repo.group_exists(k)
            if exists:
                found.add(k)
        return frozenset(found)

    def _base(self, key: tuple[Any, ...], loader: Any, config_name: str, group_lines: list[str], module: str) -> BaseComposition:
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
                base_hydra = hydra_settings(copy, "")
                with open_dict(copy):
                    del copy["hydra"]
                base = OmegaConf.to_container(copy, resolve=True, throw_on_missing=False)
                raw = OmegaConf.to_container(copy, resolve=False)
            except Exception as exc:  # noqa: BLE001
                raise _Refused(f"resolving verl's own configuration: {_words(exc)}") from None
        entry = BaseComposition(blob, base, base_hydra, raw)  # type: ignore[arg-type]
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

            def oc_env(key: str, default: Any = _ABSENT) -> str | None:
                # As OmegaConf's own oc.env: the variable, else the default (None stays None).
                if key in env:
                    return env[key]
                if default is not _ABSENT:
                    return None if default is None else str(default)
                raise ValueError(f"oc.env:{key} reads {key}, which verl's TaskRunner (the Ray actor where verl resolves the "
                                 f"config) does not have: it has what Argus sets ({', '.join(sorted(env)) or 'nothing'}); the "
                                 "command's own exports reach the driver only: write the value")

            OmegaConf.register_new_resolver("oc.env", oc_env)
            OmegaConf.register_new_resolver("hydra", lambda path: OmegaConf.select(hydra_node, path))
            omegaconf_base.parse = self._parse
            yield
        finally:
            omegaconf_base.parse = saved_parse
            BaseContainer._resolvers.clear()
            BaseContainer._resolvers.update(saved)

