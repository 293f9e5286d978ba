"""Platform settings the pure core needs: where the data lives, which entrypoints may run,
which Ray resource marks a worker. The operator fills this from flags and environment;
the CLI from its own flags; tests from a temp dir.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field

DEFAULT_ROOT = "/private"
DEFAULT_WORKER_RESOURCE = "worker_node"
DEFAULT_ENTRYPOINT_SHELL = "bash -lc"
# Each entry: "<program> -m <module glob>". The program is matched as written (looked up
# on the worker's PATH); its options are read by argus.core.command.launchers.
DEFAULT_ENTRYPOINT_ALLOWLIST = (
    "python3 -m verl.trainer.*",
    "torchrun -m verl.trainer.*",
)


@dataclass(frozen=True)
class Entrypoint:
    """One allowlist entry: a program and the module glob it may run with ``-m``."""

    program: str
    module_glob: str

    @classmethod
    def parse(cls, text: str) -> Entrypoint:
        words = text.split()
        if len(words) != 3 or words[1] != "-m":
            raise ValueError(f"entrypoint allowlist entry {text!r} must look like '<program> -m <module glob>'")
        return cls(program=words[0], module_glob=words[2])

    def allows(self, program: str, module: str) -> bool:
        # The program as written, not its basename: /home/x/bin/python3 is another program.
        return program == self.program and fnmatch.fnmatchcase(module, self.module_glob)

    def __str__(self) -> str:
        return f"{self.program} -m {self.module_glob}"


@dataclass(frozen=True)
class PlatformConfig:
    root: str = DEFAULT_ROOT
    worker_resource: str = DEFAULT_WORKER_RESOURCE
    verl_code_path: str | None = None  # default: <root>/common/code/verl/verl_repo
    entrypoint_shell: str = DEFAULT_ENTRYPOINT_SHELL
    entrypoints: tuple[Entrypoint, ...] = field(
        default_factory=lambda: tuple(Entrypoint.parse(e) for e in DEFAULT_ENTRYPOINT_ALLOWLIST)
    )
    # The shared Hugging Face cache every job gets as HF_HOME (unless its command sets
    # HF_HOME): None is <root>/hf, the empty string is none (jobs get no HF_HOME from Argus).
    hf_home: str | None = None
    # Rollout engines (actor_rollout_ref.rollout.name) that the cluster's verl plugins
    # register beside verl's own (verl's RolloutReplicaRegistry is open to plugins loaded
    # through VERL_USE_EXTERNAL_MODULES): the start-up check accepts them too.
    verl_plugin_rollouts: tuple[str, ...] = ()
    # Whether a task may opt out of preemption (spec.preemptible: false): a platform that
    # preempts may refuse it, so that no task holds GPUs beyond the reach of urgent work.
    preemption_opt_out: bool = True

    def __post_init__(self) -> None:
        if not posixpath.isabs(self.root):
            raise ValueError(f"paths root {self.root!r} must be an absolute path")
        object.__setattr__(self, "root", posixpath.normpath(self.root))
        if self.hf_home and not posixpath.isabs(self.hf_home):
            raise ValueError(f"HF_HOME {self.hf_home!r} must be an absolute path (or empty: none)")

    @classmethod
    def from_allowlist(cls, allowlist: list[str] | tuple[str, ...] | None = None, **kwargs: object) -> PlatformConfig:
        entries = tuple(Entrypoint.parse(e) for e in (allowlist or DEFAULT_ENTRYPOINT_ALLOWLIST))
        return cls(entrypoints=entries, **kwargs)  # type: ignore[arg-type]

    # The layout of the shared file system, derived from the root.
    def users_root(self) -> str:
        return posixpath.join(self.root, "users")

    def home(self, user: str) -> str:
        return posixpath.join(self.root, "users", user)

    def shared(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def hf_cache(self) -> str | None:
        """The HF_HOME jobs get (None: none)."""
        if self.hf_home is None:
            return posixpath.join(self.root, "hf")
        return posixpath.normpath(self.hf_home) if self.hf_home else None

    def verl_code(self) -> str:
        return self.verl_code_path or posixpath.join(self.root, "common", "code", "verl", "verl_repo")
