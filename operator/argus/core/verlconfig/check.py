"""The checks of the composed, resolved configuration: what verl will see (issue 21).

Default deny, on the values verl will read, wherever they sit:

* every string of the resolved config and of Hydra's own node gets the path policy; a
  key with a role (``keys.py``: code, code-config, data, model, write) holds an absolute,
  normalised path under the roots of its role (no ``..`` segment, no ``~``); a string equal
  to verl's own default at the same place (composed without the command's overrides) is
  verl's, and only the roles that verl always reads are held to their rule there;
* instantiation keys (``_target_`` and friends; ``class``/``()`` in Hydra's logging) only
  where verl's (or Hydra's) base config has them, with the same value: lists and
  ``${oc.create:...}`` included, since the check runs after resolution;
* ``ray_kwargs.ray_init``: only the keys verl's base has plus ``address``; its
  ``runtime_env`` may hold only ``env_vars``, under the environment allowlist;
* Hydra's run and sweep folders, ``output_subdir`` and ``job.name`` stay in the home or
  the job folder; ``hydra.job.env_set`` names are under the environment allowlist;
* GPU pools: a block with ``nnodes`` and ``n_gpus_per_node`` other than ``trainer`` that
  is switched on and asks for GPUs is a pool the queue does not count: refused;
* the keys this verl version reads: on a version whose ``main_ppo`` reads
  ``reward.custom_reward_function``, the legacy top-level ``custom_reward_function`` is
  pointed at it (as verl's ``migrate_legacy_reward_impl`` does), with a warning;
* a relative output path (``write`` role), the command's or verl's default, becomes an
  absolute path under the job folder in the generated command, with a warning.

``check_composed`` returns the overrides Argus adds to the command.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from ..command.environment import env_value_rule, environment_reason
from ..inputs import InputPath, is_input
from ..policy import Findings, PathPolicy
from . import Composed, ConfigTree
from .keys import (
    CLASS,
    CODE,
    CODE_CONFIG,
    DATA,
    INSTANTIATE_KEYS,
    LEGACY_REWARD_BLOCK,
    LOGGING_FACTORY_KEYS,
    MODEL,
    RAY_INIT,
    READ,
    REWARD_BLOCK,
    RUNTIME_ENV,
    SHELL_BLOCK_SUFFIX,
    SHELL_LEAVES,
    SHELL_URL_SCHEMES,
    URL,
    WRITE,
    role_of,
)
from .roles import BLOCK, UNKNOWN, free_form, table
from .tree import MISSING, get, key_of, role_at, shown, walk, walk_changed, walk_over

_LEAVES = (str, int, float, bool, type(None), list)
# The value of an override Argus writes: Hydra reads these characters unquoted.
_PLAIN_OVERRIDE_VALUE = re.compile(r"[A-Za-z0-9_./\-+:%@${}]+")
# A value that only follows another key: ${key} or ${oc.select:key,default}.
_FOLLOWS = re.compile(r"\$\{(?:oc\.select:)?\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:,[^{}]*)?\}")


class _Check:
    def __init__(self, field_: str, composed: Composed, policy: PathPolicy, tree: ConfigTree, findings: Findings):
        self.field = field_
        self.c = composed
        self.policy = policy
        self.tree = tree
        self.findings = findings
        self.version = f"verl {tree.version}"
        # Every node of the composed config, walked once for all the checks (what the command
        # left alone copied from the base's walk, where the composition kept one).
        walked = composed.base_walk
        self.nodes = walk_over(composed.config, walked) if walked is not None and walked.tree is composed.base else walk(composed.config)
        self.changed = walk_changed(composed.config, composed.base)
        self.refused: set[tuple[Any, ...]] = set()  # the keys refused already: one line a key

    def error(self, parts: tuple[Any, ...], value: object, rule: str, where: str = "") -> None:
        self.refused.add(parts)
        self.findings.error(f"{self.field} ({where}{shown(parts)})", value, rule)

    # --- strings -------------------------------------------------------------------

    def role_path(self, parts: tuple[Any, ...], value: str, role: str) -> None:
        policy = self.policy
        if value.startswith("~"):
            self.error(parts, value, "'~' is the worker's home, not yours: write an absolute path under $HOME")
            return
        if ".." in value.split("/"):
            self.error(parts, value, "a path after resolution must not hold '..' segments: write it normalised")
            return
        if role == MODEL:
            policy.check_model(f"{self.field} ({shown(parts)})", value, self.findings)
            return
        if role == CLASS:
            self.error(parts, value, f"{self.version} imports the module or class this names, by its name: only verl's "
                       "own default is allowed (put code in your reward function or custom classes under $HOME/code)")
            return
        if role == URL:
            if not value.startswith(("http://", "https://")):
                self.error(parts, value, "must be an http(s):// URL of a server")
            return
        if not value.startswith("/"):
            if role == WRITE:
                return  # made absolute under the job folder (rewrite_outputs)
            self.error(parts, value, f"must be an absolute path after resolution ({role} key)")
            return
        f = f"{self.field} ({shown(parts)})"
        if role == CODE:
            policy.check_under(f, value, (policy.code_root,), "a Python file verl imports", self.findings, suffix=".py")
        elif role == CODE_CONFIG:
            policy.check_under(f, value, (policy.code_root,), "a file that names code verl loads", self.findings)
        elif role == DATA:
            policy.check_under(f, value, policy.data_roots, "a data file", self.findings)
        elif role == WRITE:
            policy.check_under(f, value, (policy.home,), "an output path", self.findings)
        elif role == READ:
            policy.check_under(f, value, (policy.home, *policy.shared_roots), "a file verl reads", self.findings)

    def strings(self) -> None:
        base = self.c.base
        for parts, value in self.changed:
            if parts and isinstance(parts[-1], str) and parts[-1].endswith(SHELL_BLOCK_SUFFIX):
                self.shell_block(parts, value)
                continue
            if not isinstance(value, str):
                continue
            if get(base, parts) == value:
                continue  # verl's own default (a relative output among them: rewrite_outputs)
            if "${" in value:
                self.error(parts, value, "is still an interpolation after resolution: verl resolves the config again "
                           "(OmegaConf.resolve in its TaskRunner, Hydra's instantiate), which would read it; write the value out")
                continue
            if parts and parts[-1] in SHELL_LEAVES:
                self.error(parts, value, f"{self.version} runs {parts[-1]} under /bin/sh -c, past every check: leave it unset")
                continue
            if value.startswith(SHELL_URL_SCHEMES):
                self.error(parts, value, f"{self.version} copies {value.split('://', 1)[0]}:// paths with a shell command "
                           "(os.system) the checks cannot read: use a path in your home or the shared roots")
                continue
            role = role_of(key_of(parts))
            before = len(self.findings.errors)
            if role is not None:
                self.role_path(parts, value, role)
            if len(self.findings.errors) == before:
                self.policy.check_string(f"{self.field} ({shown(parts)})", value, self.findings)
            if len(self.findings.errors) > before:
                self.refused.add(parts)
            elif is_input(role, value):
                self.findings.inputs.append(InputPath(shown(parts), value, role or ""))

    def shell_block(self, parts: tuple[Any, ...], node: Any) -> None:
        """A block whose keys and values verl pastes into a shell command (Nsight's options):
        only verl's own, unchanged."""
        if node != get(self.c.base, parts):
            self.error(parts, node, f"{self.version} pastes these options unquoted into the bash -c that starts every "
                       "Ray worker: only its own defaults are allowed")

    # --- instantiation -------------------------------------------------------------

    def instantiation(self, config: Mapping[str, Any], base: Mapping[str, Any], keys: frozenset[str], where: str) -> None:
        for parts, value in walk_changed(config, base):
            if not parts or not isinstance(parts[-1], str) or parts[-1] not in keys:
                continue
            was = get(base, parts)
            if was is MISSING:
                self.error(parts, value, f"{parts[-1]} makes Hydra or verl instantiate Python code; {self.version}'s own "
                           "config has none here, so it is not allowed", where)
            elif was != value:
                self.error(parts, value, f"{parts[-1]} makes Hydra or verl instantiate Python code; {self.version}'s own "
                           f"config has {was!r} here, and only that is allowed", where)

    # --- Ray -----------------------------------------------------------------------

    def ray_init(self) -> None:
        parts = tuple(RAY_INIT.split("."))
        init = get(self.c.config, parts)
        if not isinstance(init, Mapping):
            return
        base = get(self.c.base, parts)
        known = set(base) if isinstance(base, Mapping) else set()
        for k, v in init.items():
            if k == "runtime_env":
                self.runtime_env(v)
            elif k not in known and k != "address":
                self.error((*parts, k), v, "verl passes ray_kwargs.ray_init to ray.init: only address and the keys "
                           f"{self.version} declares there ({', '.join(sorted(known)) or 'none'}) are allowed")

    def runtime_env(self, env: Any) -> None:
        parts = tuple(RUNTIME_ENV.split("."))
        if env is None or env == {}:
            return
        if not isinstance(env, Mapping):
            self.error(parts, env, "must be a mapping holding only env_vars")
            return
        base = get(self.c.base, parts)
        for k, v in env.items():
            if k != "env_vars" and (v is None or isinstance(base, Mapping) and base.get(k, MISSING) == v):
                continue  # not set, or verl's own default
            if k != "env_vars":
                self.error((*parts, k), v, "Ray applies the runtime env to every worker of the job: only env_vars is "
                           "allowed (working_dir, py_modules, pip, py_executable ... would run or load code Argus does not check)")
                continue
            if v is None:
                continue
            if not isinstance(v, Mapping):
                self.error((*parts, k), v, "must be a mapping of NAME: value")
                continue
            for name, value in v.items():
                reason = environment_reason(str(name))
                if reason is not None:
                    self.error((*parts, k, name), value, f"setting {name} is not allowed: {reason}")
                elif isinstance(value, str):
                    self.env_value((*parts, k, name), str(name), value)

    def env_value(self, parts: tuple[Any, ...], name: str, value: str) -> None:
        f = f"{self.field} ({shown(parts)})"
        self.policy.check_string(f, value, self.findings)
        # No job folder to put a relative path in (verl's Ray actors would read it in the
        # raylet's folder): a relative one is refused as not in the home.
        problem, _ = env_value_rule(name, value, self.policy, "")
        if problem is not None:
            self.findings.error(f, value, problem)

    # --- Hydra ---------------------------------------------------------------------

    def hydra(self, job_dir: str) -> None:
        h, base = self.c.hydra, self.c.base_hydra
        if not h:
            return
        root = ("hydra",)
        own_rules = (("run", "dir"), ("sweep", "dir"), ("output_subdir",), ("job", "name"), ("searchpath",), ("job", "env_set"))
        for parts, value in walk(h):
            if isinstance(value, str) and value != get(base, parts) and not any(parts[:len(r)] == r for r in own_rules):
                self.policy.check_string(f"{self.field} (hydra.{shown(parts)})", value, self.findings)
        for sub in (("run", "dir"), ("sweep", "dir"), ("output_subdir",)):
            value = get(h, sub)
            if not isinstance(value, str) or value == get(base, sub):
                continue
            parts = (*root, *sub)
            before = len(self.findings.errors)
            if value.startswith("~") or ".." in value.split("/"):
                self.error(parts, value, "Hydra writes its files there: no '~' and no '..' (it stays in your home or the job folder)")
            elif value.startswith("/"):
                self.policy.check_under(f"{self.field} ({shown(parts)})", value, (self.policy.home,), "Hydra's output folder", self.findings)
            if len(self.findings.errors) == before:
                self.policy.check_string(f"{self.field} ({shown(parts)})", value, self.findings)
        mode = get(h, ("mode",))
        if mode not in (None, "RUN", get(base, ("mode",))):
            self.error((*root, "mode"), mode, "Hydra would run a multirun (one job per value of a sweep): one run only")
        name = get(h, ("job", "name"))
        if isinstance(name, str) and ("/" in name or name in ("", ".", "..") or name.startswith("~")):
            self.error((*root, "job", "name"), name, "Hydra names its log file after it, inside its run folder: one file name (no '/', not '.' or '..')")
        for key in ("env_set", "env_copy"):
            names = get(h, ("job", key))
            items = names.items() if isinstance(names, Mapping) else ((n, None) for n in names) if isinstance(names, list) else ()
            for n, v in items:
                if n in (get(base, ("job", key)) or ()):
                    continue
                reason = environment_reason(str(n))
                if reason is not None:
                    self.error((*root, "job", key, n), v if v is not None else n, f"Hydra sets {n} in the job's environment: {reason}")
                elif isinstance(v, str):
                    self.env_value((*root, "job", key, n), str(n), v)
        searchpath = get(h, ("searchpath",))
        base_search = get(base, ("searchpath",))
        for i, item in enumerate(searchpath if isinstance(searchpath, list) else ()):
            if isinstance(base_search, list) and item in base_search:
                continue
            parts = (*root, "searchpath", i)
            if not isinstance(item, str) or not item.startswith("file://"):
                self.error(parts, item, "hydra.searchpath may only add folders (file://...) in your home")
            else:
                self.policy.check_under(f"{self.field} ({shown(parts)})", item.removeprefix("file://"),
                                        (self.policy.home, *self.policy.shared_roots), "a Hydra search path", self.findings)
        self.instantiation(h, base, INSTANTIATE_KEYS | LOGGING_FACTORY_KEYS, "hydra.")

    # --- GPUs ----------------------------------------------------------------------

    def pools(self, nnodes: int | None, gpus: int | None, trainer_counts: bool) -> None:
        config = self.c.config
        trainer = config.get("trainer") if isinstance(config, Mapping) else None
        if isinstance(trainer, Mapping) and trainer_counts:
            for k, want, spec_field in (("nnodes", nnodes, "nnodes"), ("n_gpus_per_node", gpus, "nGpusPerNode")):
                got = trainer.get(k, MISSING)
                if want is not None and got is not MISSING and got != want:
                    self.error(("trainer", k), got, f"must equal spec.{spec_field} ({want}) after resolution; the queue counts GPUs from the spec")
        for parts, node in self.nodes:
            if type(node) in _LEAVES or not isinstance(node, Mapping) or parts == ("trainer",) or "n_gpus_per_node" not in node \
                    or "nnodes" not in node:
                continue
            n, g = node.get("nnodes"), node.get("n_gpus_per_node")
            if node.get("enable_resource_pool") in (False, None) and "enable_resource_pool" in node:
                continue  # verl colocates it on the trainer's GPUs
            if node.get("enabled") is False or node.get("enable") is False and "enable_resource_pool" not in node:
                continue
            if type(n) is int and type(g) is int and n * g > 0:
                self.error(parts, f"nnodes={n} n_gpus_per_node={g}", f"asks for {n * g} GPUs in a pool of its own, which the "
                           "queue does not count: the task gets spec.nnodes x spec.nGpusPerNode GPUs; share them instead")

    # --- which keys this version reads ---------------------------------------------

    def legacy_reward(self, module: str) -> list[str]:
        """On a version whose main_ppo reads reward.custom_reward_function, point it at the
        legacy top-level block the command set (as migrate_legacy_reward_impl does)."""
        config, base = self.c.config, self.c.base
        if module.rsplit(".", 1)[-1] != "main_ppo":
            return []
        new_parts, old_parts = tuple(REWARD_BLOCK.split(".")), (LEGACY_REWARD_BLOCK,)
        if not isinstance(get(base, new_parts), Mapping) or not isinstance(get(base, old_parts), Mapping):
            return []  # this version reads the top-level block itself
        old = get(config, old_parts)
        if not isinstance(old, Mapping) or all(v is None for v in old.values()):
            return []
        new = get(config, new_parts)
        if isinstance(new, Mapping) and new != get(base, new_parts):
            self.error(old_parts, dict(old), f"{self.version}'s main_ppo reads {REWARD_BLOCK}.*, and the command sets it too: "
                       f"set only {REWARD_BLOCK}.* (the top-level {LEGACY_REWARD_BLOCK}.* is kept only for backward compatibility)")
            return []
        path = old.get("path")
        if isinstance(path, str):
            self.role_path((*new_parts, "path"), path, CODE)
        # Key by key (migrate_legacy_reward_impl copies the whole block, null name included,
        # which main_ppo's reward loader would refuse; verl's default name stays).
        added = [f"++{REWARD_BLOCK}.{k}=${{{LEGACY_REWARD_BLOCK}.{k}}}" for k, v in old.items() if v is not None]
        self.findings.warn(self.field, ", ".join(f"{LEGACY_REWARD_BLOCK}.{k}" for k, v in old.items() if v is not None),
                           f"{self.version}'s main_ppo reads {REWARD_BLOCK}.* and ignores the top-level {LEGACY_REWARD_BLOCK}.* "
                           f"(kept for backward compatibility): Argus adds {' '.join(added)} to the command, as verl's own "
                           "migrate_legacy_reward_impl does for its fully-async entry point, so your reward function runs; "
                           f"write {REWARD_BLOCK}.* to say it yourself")
        return added

    def storage_on_workers(self, worker_resource: str) -> list[str]:
        """verl 0.9's main_ppo starts TransferQueue's storage actors before training, one a
        node in turn over every alive node sorted by id, the head included, unless
        ``transfer_queue.backend.SimpleStorage.required_node_resource`` names a resource
        that only some nodes have. On a cluster whose head runs no work (no CPUs, no worker
        resource: Argus's) the storage actor then lands on the head or, with no CPU there,
        is unschedulable (ActorUnschedulableError), depending on the node ids. Argus pins it
        to the worker nodes, with the resource that marks them, as it pins the driver;
        a value the command sets itself is kept."""
        parts = ("transfer_queue", "backend", "SimpleStorage")
        block = get(self.c.config, parts)
        if not isinstance(block, Mapping) or block.get("required_node_resource") is not None:
            return []
        declared = isinstance(get(self.c.base, parts), Mapping) and "required_node_resource" in get(self.c.base, parts)
        return [f"{'' if declared else '+'}{'.'.join(parts)}.required_node_resource={worker_resource}"]

    def turned_on(self, block: tuple[Any, ...]) -> bool:
        """Whether the command switches ``block`` on (its enable/enabled key true, verl's not)."""
        for flag in ("enable", "enabled"):
            on = get(self.c.config, (*block, flag))
            if on is not MISSING:
                return on is True and get(self.c.base, (*block, flag)) is not True
        return False

    def rewrite_outputs(self, job_dir: str) -> list[str]:
        """A relative output path becomes absolute under the job folder: ``key=<job>/<raw>``
        (the value as written, so that its interpolations, a $(date ...) among them, are
        still verl's to resolve). A value that only follows another key (``${key}``,
        ``${oc.select:key,...}``) follows that key's rewrite."""
        candidates: dict[str, tuple[tuple[Any, ...], str, str]] = {}
        needed: list[str] = []
        follows: list[tuple[tuple[Any, ...], str, str]] = []
        for parts, value in self.nodes:
            if not isinstance(value, str) or not value or role_at(parts) != WRITE:
                continue
            if value.startswith(("/", "~")):
                # verl's own default outside the home (~/.verl/rollout_dump in the worker's
                # home, /tmp/ray/... on every node): shared by every user's tasks; refused
                # when the command turns its block on.
                shared = value.startswith("~") or not (value + "/").startswith(self.policy.home + "/")
                if shared and value == get(self.c.base, parts) and self.turned_on(parts[:-1]):
                    self.error(parts, value, f"is {self.version}'s default, outside your home and shared by every user's "
                               "tasks, and the command turns it on: set it to a path under $HOME")
                continue
            if ".." in value.split("/") or any(isinstance(p, int) for p in parts):
                continue  # refused by the path rules, or not a key an override can name
            raw = get(self.c.raw, parts)
            text = raw if isinstance(raw, str) else value
            key = ".".join(str(p) for p in parts)
            # verl writes an output when its block is in use: the command changed the
            # block (trainer.* always), or the output itself.
            in_use = get(self.c.base, parts) != value or get(self.c.config, parts[:-1]) != get(self.c.base, parts[:-1])
            follow = _FOLLOWS.fullmatch(text)
            if follow is not None:
                if in_use:
                    follows.append((parts, value, follow.group(1)))
                continue
            candidates[key] = (parts, value, text)
            if in_use:
                needed.append(key)
        needed += [t for _, _, t in follows if t in candidates]
        added, shown, rewritten = [], [], set()
        for key in dict.fromkeys(needed):
            parts, value, text = candidates[key]
            absolute = posixpath.join(job_dir, text)
            if not _PLAIN_OVERRIDE_VALUE.fullmatch(absolute):
                self.error(parts, value, "is relative, and verl's Ray actors would write it in the raylet's folder: write an "
                           "absolute path under $HOME")
                continue
            added.append(f"{key}={absolute}")
            shown.append(f"{key}={value}")
            rewritten.add(key)
        for parts, value, target in follows:
            if target not in rewritten:
                self.error(parts, value, f"is relative (through {target}), and verl's Ray actors would write it in the "
                           "raylet's folder: write an absolute path under $HOME")
        if added:
            self.findings.warn(self.field, ", ".join(shown), f"{'is a relative path' if len(added) == 1 else 'are relative paths'}: "
                               "verl's Ray actors run in the raylet's folder, not the job's, so Argus makes "
                               f"{'it' if len(added) == 1 else 'them'} absolute under the job folder {job_dir} in the generated "
                               "command (see status.command); set an absolute path under $HOME to choose")
        return added


def _undeclared(c: _Check) -> None:
    """Keys with no reviewed role (roles.py): a key the release's table calls ``unknown``,
    or one verl's config does not declare (added with '+') outside a free-form block, is
    refused when it differs from verl's own default. A tree of a version with no table
    (a cluster snapshot of another release) is not held to it."""
    roles = table(c.tree.version)
    if roles is None:
        return
    base = c.c.base
    for parts, value in c.changed:
        if not parts or any(type(p) is not str for p in parts) or parts in c.refused:
            continue
        key = ".".join(parts)
        role = roles.get(key)
        if role is None:
            if isinstance(value, Mapping) or get(base, parts) is not MISSING:
                continue  # a block (its leaves decide), or a key of a tree the table does not describe
            if any(roles.get(".".join(parts[:i])) == BLOCK or free_form(".".join(parts[:i])) for i in range(1, len(parts))):
                continue
            c.error(parts, value, f"is not a key of {c.version}'s configuration (added with '+'), nor under one of "
                "its free-form blocks: Argus cannot tell what verl does with it; set only the keys verl declares")
        elif role == UNKNOWN and get(base, parts) != value:
            c.error(parts, value, f"has no reviewed role in {c.version}'s table of keys (argus/verlroles): only "
                "verl's own default is allowed")


def check_composed(
    field_: str,
    composed: Composed,
    *,
    tree: ConfigTree,
    module: str,
    policy: PathPolicy,
    nnodes: int | None,
    gpus: int | None,
    job_dir: str,
    findings: Findings,
    command_line: str = "",
    trainer_counts: bool = True,
) -> list[str]:
    """Check what verl will see; return the overrides Argus adds to the command (each
    announced by a warning). Composition errors are reported in Hydra's own words.
    ``trainer_counts``: verl takes its GPUs from ``trainer.nnodes``/``n_gpus_per_node`` (a
    python3 launch); a torchrun launch's come from torchrun's own options, checked on the
    command line."""
    if composed.error is not None:
        findings.error(field_, command_line or module, f"{tree.describe()} cannot compose this configuration: {composed.error}")
        return []
    c = _Check(field_, composed, policy, tree, findings)
    c.strings()  # and the blocks verl pastes into a shell (shell_block)
    _undeclared(c)
    c.instantiation(composed.config, composed.base, INSTANTIATE_KEYS, "")
    c.ray_init()
    c.hydra(job_dir)
    c.pools(nnodes, gpus, trainer_counts)
    added = c.legacy_reward(module)
    added += c.rewrite_outputs(job_dir)
    added += c.storage_on_workers(policy.config.worker_resource)
    return added
