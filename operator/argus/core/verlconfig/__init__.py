"""What verl will see: the task's configuration composed with verl's own config tree, resolved
and checked; issue 21.

The command checks (``argus.core.command``) read the command's text: its program, its
environment and its overrides as Hydra's parser reads them. verl does not act on that
text: it acts on the configuration Hydra composes from verl's config tree plus the
overrides, that OmegaConf resolves. So after the text checks, the pipeline composes and
resolves the configuration as verl's entry point will, and checks the result::

    plan.validate_spec
      -> command.check_command           the text (program, environment, overrides)
      -> Composer.compose                Hydra's compose + OmegaConf's resolution (an adapter:
                                         argus.adapters.verlcompose; this package holds its types)
      -> verlconfig.check.check_composed path policy by role on every string, instantiation
                                         keys, Ray runtime env, Hydra's folders, GPU pools,
                                         the keys this verl version reads, relative outputs
      -> verlconfig.startup              verl's own start-up checks, restated

Composition reads YAML files, so it is I/O and lives in an adapter behind ``Composer``;
the core sees only plain containers (dicts, lists, scalars). ``tests/unit/fakes.py`` has an
in-memory composer for the core's unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .tree import Walked


@dataclass(frozen=True)
class ConfigTree:
    """The verl config tree a composer reads, and where it came from.

    ``root`` holds the ``verl`` package (``<root>/verl/trainer/config``); ``source`` says how
    it was chosen: ``cluster`` (the verl snapshot the cluster runs, ``--verl-code-path``),
    ``release`` (a pinned release from the cache) or ``folder`` (a folder given with
    ``--verl-config``)."""

    version: str
    root: str
    source: str

    @property
    def cluster_own(self) -> bool:
        return self.source == "cluster"

    def describe(self) -> str:
        where = {"cluster": "the cluster's verl snapshot", "release": "the pinned release",
                 "folder": "a folder given with --verl-config"}.get(self.source, self.source)
        return f"verl {self.version} ({where}, {self.root})"


@dataclass(frozen=True)
class ComposeRequest:
    """One entry point's configuration as verl will compose it.

    ``overrides`` are the module's Hydra overrides as Hydra receives them (a ``$(date ...)``
    stands as a sample of its output); ``config_name``/``config_path``/``config_dir`` are the
    command's Hydra options (None: the module's own); ``env`` is the environment the job
    will have (what Argus sets plus the command's own exported and prefixed variables):
    ``${oc.env:NAME}`` reads it, and nothing else; ``job_dir`` is the driver's working
    folder (Hydra's relative run folder lands there)."""

    module: str
    overrides: tuple[str, ...]
    env: Mapping[str, str]
    job_dir: str
    config_name: str | None = None
    config_path: str | None = None
    config_dir: str | None = None
    # key=value overrides Argus adds for keys the command leaves out (the spec's GPU
    # counts), applied after the command's only where the composed config declares the key
    # (verl's evaluation.yaml has no trainer block).
    defaults: tuple[str, ...] = ()
    # The user's home as the job sees it: a config folder of the user's own that is missing
    # while the home itself is not readable here (argus validate without the shared tree) is
    # reported as not checked (Composed.unreadable), not as a composition error.
    home: str = ""


@dataclass(frozen=True)
class Composed:
    """The result of one composition.

    ``error``: Hydra's or OmegaConf's own words when composition or resolution failed (then
    the configs are empty); ``config``: the job's configuration, resolved, without the
    ``hydra`` node; ``raw``: the same before resolution (interpolations as written);
    ``hydra``: Hydra's own node, resolved; ``base``: verl's primary config composed without
    the command's key overrides, resolved (verl's defaults: what the command did not
    change); ``primary``: the primary config's name; ``defaults_applied``: the request's
    ``defaults`` that were applied; ``base_walk``: the base's walk, kept with the cached
    base (None: the checks walk the whole config)."""

    primary: str = ""
    error: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    hydra: Mapping[str, Any] = field(default_factory=dict)
    base: Mapping[str, Any] = field(default_factory=dict)
    base_hydra: Mapping[str, Any] = field(default_factory=dict)
    defaults_applied: tuple[str, ...] = ()  # the request's defaults the config declares, applied
    unreadable: str | None = None  # a config folder of the user's own this machine cannot read (nothing composed)
    base_walk: Walked | None = None


# Each key an override adds (``+``/``++``) costs Hydra's composition more than the one
# before it (OmegaConf re-reads the flags of the block it grows): a thousand take seconds,
# verl's start-up included. A real command adds a handful (ray_kwargs.ray_init.address,
# reward_kwargs ...); more than this is refused before composing, which keeps a
# validation (and the admission webhook) within its time.
MAX_ADDED_KEYS = 256


class Composer(Protocol):
    """Composes and resolves a command's configuration with one verl config tree."""

    @property
    def tree(self) -> ConfigTree: ...

    def compose(self, request: ComposeRequest) -> Composed: ...

    def code_version(self, root: str) -> str | None:
        """The verl release of the code at ``root`` (its ``verl/version/version``), None
        when it cannot be read here."""
        ...


__all__ = ["MAX_ADDED_KEYS", "ComposeRequest", "Composed", "Composer", "ConfigTree"]
