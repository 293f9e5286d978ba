"""Unit-tier setup: Hydra's composition of a config tree is done once per worker (issue 35).

Hydra's ``ConfigLoaderImpl.load_configuration`` reads and merges a verl release's whole
config tree (half a second to a second of CPU); the unit tier asked it for the same
composition of the same files again and again: every ``argus validate`` a CLI test runs
builds a new composer, as the CLI does, and so do the tests that need a cold one. It is
memoized here, for the tests only (the product keeps one composer per tree and its own
caches): the same arguments, the same process-wide state Hydra reads (the job's name, the
working folder, the version base, the variables ``hydra.job.env_copy`` names) and the same
bytes in every file of every folder the composition searched give the same composition, and
each caller gets a copy of its own (a pickled one, as the composer itself keeps). Anything
else is composed by Hydra as before: a search path with a source of another kind than a
folder or Hydra's own package, and any composition that raises (its error is Hydra's own
each time).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
from collections import OrderedDict
from typing import Any

_SIZE = 256


def _fingerprint(sources: list[tuple[str, str]]) -> tuple[Any, ...] | None:
    """Every file under the composition's folders, with its bytes' digest; None when a
    source is not a folder or Hydra's own package (not memoized)."""
    out: list[Any] = []
    for scheme, path in sources:
        if scheme == "structured" or (scheme == "pkg" and (path == "hydra.conf" or path.startswith("hydra."))):
            out.append((scheme, path))
            continue
        if scheme != "file":
            return None
        root = os.path.abspath(path)
        files: list[tuple[str, str]] = []
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                full = os.path.join(folder, name)
                try:
                    with open(full, "rb") as f:
                        files.append((full, hashlib.blake2b(f.read(), digest_size=16).hexdigest()))
                except OSError:
                    files.append((full, "?"))
        out.append((scheme, root, os.path.isdir(root), tuple(files)))
    return tuple(out)


def _memoize_hydra_loads() -> None:
    try:
        from hydra import version
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.utils import JobRuntime
    except ImportError:  # pragma: no cover - the test extras install Hydra
        return
    if getattr(ConfigLoaderImpl.load_configuration, "_argus_memo", False):
        return
    original = ConfigLoaderImpl.load_configuration
    memo: OrderedDict[tuple[Any, ...], tuple[bytes, tuple[Any, ...], list[tuple[str, str]], dict[str, str | None]]] = OrderedDict()
    lock = threading.Lock()

    def state(env_copy: Any) -> dict[str, str | None]:
        return {k: os.environ.get(k) for k in env_copy}

    def load_configuration(self: Any, config_name: str | None, overrides: list[str], run_mode: Any,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> Any:
        runtime = JobRuntime.instance()
        key = (tuple((p.provider, p.path) for p in self.config_search_path.get_path()), config_name, tuple(overrides),
               run_mode, from_shell, validate_sweep_overrides,
               runtime.conf.get("name"), os.getcwd(), version.getbase())
        with lock:
            hit = memo.get(key)
        if hit is not None:
            blob, fingerprint, sources, env = hit
            if _fingerprint(sources) == fingerprint and state(env) == env:
                return pickle.loads(blob)
        cfg = original(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        sources = [(str(s.schema), str(s.path)) for s in cfg.hydra.runtime.config_sources]
        fingerprint = _fingerprint(sources)
        if fingerprint is not None:
            entry = (pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL), fingerprint, sources, state(list(cfg.hydra.job.env_copy)))
            with lock:
                memo[key] = entry
                while len(memo) > _SIZE:
                    memo.popitem(last=False)
        return cfg

    load_configuration._argus_memo = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.load_configuration = load_configuration  # type: ignore[method-assign]


_memoize_hydra_loads()
