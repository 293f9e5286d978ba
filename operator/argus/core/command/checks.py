"""Step 5 of the command checks: the path policy and the counts, on the parsed program.

    spec.command -> check_text -> expand -> syntax.parse -> resolve -> launchers -> hydra -> **checks** -> emit

Every value is read as what it is, never as text scanned for bad substrings:

* Hydra settings (dict values flattened into their keys): data files under the data roots,
  the reward function (and ``data.custom_cls.path``) a ``.py`` under ``$HOME/code``, outputs
  in the home, models a hub id or under the model roots, ``trainer.nnodes`` /
  ``trainer.n_gpus_per_node`` equal to the spec, project and experiment names one folder
  name each (verl's default checkpoint path is built from them). A key set twice, a block
  that holds checked keys replaced or deleted, part of a checked value set alone, a sweep,
  a config group or package override, a Hydra ``_target_`` and Hydra's own settings other
  than its output folders and search path are refused. Interpolations in checked keys that
  name keys the command sets are resolved here; any other (verl's defaults, resolvers such
  as ``${oc.env:...}``) is left to the check of the resolved configuration, or refused
  when there is none.
* torchrun's counts equal to the spec, its log folder in the home.
* Environment values (assignments, exports, prefixes) and every other override value get
  the general path checks (``PathPolicy.check_string``); ``PYTHONPATH`` entries must sit in
  the home or the shared roots.
* ``$(date +FORMAT)`` only in a non-path value.

The counts the command leaves out are added with the spec's values, and say so in a
warning: verl and torchrun would otherwise use their defaults while the queue reserves
the spec's GPUs.

These checks read what the command says. What verl will see (the configuration composed
with verl's tree and resolved, a config file of the user's own included) is checked after
them by ``argus.core.verlconfig.check``, which is the authority on the resolved values;
the rules here that it also applies (instantiation keys, the separate GPU pools, the path
roles of the checked keys) refuse early, in terms of the words the user wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..policy import Findings, PathPolicy, climbs
from .environment import PATH, REFUSED, URL, env_rule, env_value_rule
from .hydra import HydraArgs, Setting
from .launchers import Launch, Option, plain_int
from .program import Assign, Run, Script, Word

DATA_KEYS = ("data.train_files", "data.val_files")
REWARD_PATH_KEY = "custom_reward_function.path"
REWARD_NAME_KEY = "custom_reward_function.name"
REWARD_KWARGS_PREFIX = "custom_reward_function.reward_kwargs."
CODE_FILE_KEYS = (REWARD_PATH_KEY, "data.custom_cls.path")
RAY_ADDRESS_KEY = "ray_kwargs.ray_init.address"
# verl keys that name where a run writes (checkpoints, dumps).
OUTPUT_KEYS = ("trainer.default_local_dir", "trainer.default_hdfs_dir", "trainer.rollout_data_dir", "trainer.validation_data_dir")
# verl keys that name a model (or its tokenizer) to load.
MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "critic.model.tokenizer_path", "model.partial_pretrain",
              "reward_model.model.path", "reward_model.model.input_tokenizer")
NNODES_KEY = "trainer.nnodes"
GPUS_KEY = "trainer.n_gpus_per_node"
# verl's default checkpoint folder is checkpoints/<project_name>/<experiment_name>.
NAME_KEYS = ("trainer.project_name", "trainer.experiment_name")
HYDRA_DIR_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
HYDRA_SEARCHPATH_KEY = "hydra.searchpath"
HYDRA_KEYS_ALLOWED = frozenset((*HYDRA_DIR_KEYS, HYDRA_SEARCHPATH_KEY, "hydra.job.chdir", "hydra.output_subdir", "hydra.verbose", "hydra.job.name"))
HYDRA_GROUPS_ALLOWED = {"hydra/job_logging": {"default", "disabled", "none", "stdout"},
                        "hydra/hydra_logging": {"default", "disabled", "none"}}
PATH_KEYS = frozenset((*DATA_KEYS, *CODE_FILE_KEYS, *OUTPUT_KEYS, *MODEL_KEYS, *HYDRA_DIR_KEYS, HYDRA_SEARCHPATH_KEY))
CHECKED_KEYS = frozenset((*PATH_KEYS, NNODES_KEY, GPUS_KEY, *NAME_KEYS))
# Every block that holds a checked key: replacing or deleting it would hide the key.
_MAX_CHECKED_DEPTH = max(k.count(".") for k in CHECKED_KEYS)
BLOCKS = frozenset(k.rsplit(".", i)[0] for k in CHECKED_KEYS for i in range(1, k.count(".") + 1))
# verl's other GPU counts (e.g. reward_model.n_gpus_per_node for a separate resource pool).
_COUNT_NAMES = frozenset(("nnodes", "n_gpus_per_node"))
_INSTANTIATE_KEYS = frozenset(("_target_", "_args_", "_partial_", "_recursive_", "_convert_"))
_KEY_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*")
_INTERPOLATION = re.compile(r"\$\{([^{}]*)\}")
_DEFAULT_COUNTS = "1 node, 8 GPUs per node"
# Why a torchrun launch has one node, and the way out (one text for every place that says it).
TORCHRUN_ONE_NODE = ("a torchrun launch runs inside one Ray job, on the one node Ray reserves its GPUs on: use nnodes: 1; "
                     "to train on several nodes run python3 -m verl.trainer.sft_trainer_ray (verl 0.9 and later), "
                     "whose workers Ray places on every node")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)


class _Unresolvable(Exception):
    pass


class Checker:
    def __init__(self, field_: str, policy: PathPolicy, nnodes: int | None, gpus: int | None, findings: Findings,
                 *, resolved_later: bool = False, job_dir: str | None = None):
        self.field = field_
        # The task's job folder: a relative path an environment variable names goes there.
        self.job_dir = job_dir
        self.env_rewritten: list[str] = []
        # The composed, resolved configuration is checked after this (verlconfig.check): it
        # resolves what this text check cannot (verl's defaults, ${oc.env:...} of the job's
        # environment, ${now:...}) and applies the same path roles to the result.
        self.resolved_later = resolved_later
        self.policy = policy
        self.nnodes = nnodes
        self.gpus = gpus
        self.findings = findings
        self.leaves: dict[str, tuple[Any, Setting]] = {}
        # The spec's counts the command leaves out, when the composition decides whether the
        # config has them (resolved_later): Argus adds them there (plan._compose_and_check).
        self.count_defaults: list[str] = []
        # Warnings about a key the command leaves out, which apply only when the composed
        # config declares the key: (key, value shown, rule).
        self.deferred: list[tuple[str, str, str]] = []

    def error(self, value: object, rule: str, key: str | None = None) -> None:
        self.findings.error(f"{self.field} ({key})" if key else self.field, value, rule)

    def warn(self, value: object, rule: str) -> None:
        self.findings.warn(self.field, value, rule)

    # --- environment, tee -----------------------------------------------------------

    def environment(self, a: Assign) -> Assign:
        """Check one variable the command sets; return it as it will run (a relative path
        of a ``path`` or ``url`` variable made absolute under the job folder)."""
        text = "".join(p if type(p) is str else "\0" for p in a.value.parts)
        shown = f"{a.name}={a.value.shown()}"
        if a.name == "PYTHONPATH":
            for entry in text.split(":"):
                if entry == "\0":
                    continue  # the inherited value: Argus's own runtime PYTHONPATH
                if not entry:
                    self.error(shown, "an empty PYTHONPATH entry is the current folder: write absolute paths under $HOME")
                else:
                    self.policy.check_under(self.field, entry, (self.policy.home, *self.policy.shared_roots), "a PYTHONPATH entry", self.findings)
        for piece in text.split("\0"):
            self.policy.check_string(self.field, piece, self.findings)
        rule = env_rule(a.name)
        if rule is None or rule.role not in (PATH, URL, REFUSED):
            return a
        if "\0" in text:
            if rule.role != REFUSED:
                self.error(shown, f"{a.name} names a file, a folder or a URL: write it out (not from an inherited value)")
            return a
        problem, value = env_value_rule(a.name, text, self.policy, self.job_dir)
        if problem is not None:
            self.error(text if rule.role == PATH else shown, problem)
            return a
        if value == text:
            return a
        self.env_rewritten.append(f"{a.name}={text}")
        return Assign(a.name, Word((value,), True, a.value.line, a.value.source), a.export, a.line)

    def tee(self, w: Word) -> None:
        if w.literal is None:
            self.error(w.shown(), "the tee file must be written out ($(date ...) is allowed only in non-path values)")
            return
        path = w.literal
        if path.startswith("-"):
            self.error(path, "the tee file must not start with '-' (tee would read it as an option)")
            return
        self.policy.check_string(self.field, path, self.findings)
        self.policy.check_output(self.field, path, "the tee file", self.findings)

    # --- torchrun -------------------------------------------------------------------

    def torchrun(self, launch: Launch) -> None:
        if self.nnodes is not None and self.nnodes > 1:
            self.findings.error("spec.nnodes", self.nnodes, TORCHRUN_ONE_NODE)
        for o in launch.options:
            if o.value is None:
                continue
            token = f"{o.spelling}={o.value}"
            if o.dest in ("nnodes", "nproc_per_node"):
                want, spec_field = (self.nnodes, "nnodes") if o.dest == "nnodes" else (self.gpus, "nGpusPerNode")
                got = plain_int(o.value)
                if o.dest == "nnodes" and got is not None and got > 1:
                    if not (self.nnodes is not None and self.nnodes > 1):  # else said once, on spec.nnodes
                        self.error(token, TORCHRUN_ONE_NODE)
                elif got is None:
                    self.error(token, f"must be a plain integer equal to spec.{spec_field}" + (f" ({want})" if want is not None else ""))
                elif want is not None and got != want:
                    self.error(token, f"must equal spec.{spec_field} ({want}); the queue counts GPUs from the spec")
            elif o.dest == "log_dir":
                self.policy.check_output(f"{self.field} (torchrun --log-dir)", o.value, "torchrun's log folder", self.findings)
            self.policy.check_string(self.field, o.value, self.findings)
        missing = []
        for dest, spelling, want in (("nnodes", "--nnodes", self.nnodes), ("nproc_per_node", "--nproc_per_node", self.gpus)):
            if launch.option(dest) is None and want is not None:
                launch.added_options.append(Option(spelling, dest, str(want)))
                missing.append(f"{spelling}={want}")
        if missing:
            self.warn(" ".join(missing), f"{'is' if len(missing) == 1 else 'are'} not set: torchrun would use its defaults "
                      "(1 node, 1 process) while the queue reserves the spec's GPUs; Argus adds "
                      f"{'it' if len(missing) == 1 else 'them'} to the command (see status.command)")

    # --- Hydra ----------------------------------------------------------------------

    def hydra_options(self, args: HydraArgs) -> bool:
        """Returns True when the run reads a config Argus cannot see."""
        seen: set[str] = set()
        custom = False
        for dest, spelling, value in args.options:
            token = f"{spelling}={value}"
            if dest in seen:
                self.error(token, f"Hydra's {spelling} is given twice: give it once")
                continue
            seen.add(dest)
            if "://" in value:
                self.error(token, f"{spelling} must be a folder, not a URL")
            elif dest == "config_name":
                if value.startswith("/") or ".." in value.split("/"):
                    self.error(token, "--config-name must name a config inside the config path (no '/' at the start, no '..')")
            elif dest == "config_path" and not value.startswith("/"):
                if climbs(value) or ".." in value.split("/"):
                    self.error(token, "a relative --config-path is read inside verl's own package and must not climb out of it")
            else:
                self.policy.check_string(self.field, value, self.findings)
                self.policy.check_output(self.field, value, f"Hydra's {spelling}", self.findings)
                custom = True
        return custom

    def flatten(self, key: str, value: Any) -> Iterator[tuple[str, Any]]:
        """A dict value merges into the config: its leaves are the keys it sets."""
        if isinstance(value, dict) and value and key not in CHECKED_KEYS:
            for k, v in value.items():
                yield from self.flatten(f"{key}.{k}", v)
        else:
            yield key, value

    def settings(self, args: HydraArgs) -> None:
        leaves: list[tuple[str, Any, Setting]] = []
        for s in args.settings:
            if s.sweep:
                self.error(s.text, "is a Hydra sweep (it would run one job per value): give one value; write a list as [a,b]")
                continue
            if not s.key:
                self.error(s.text, "names no key: write key=value")
                continue
            if s.package is not None:
                self.error(s.text, f"a package override (@{s.package}) is not allowed: set the keys themselves (a.b=...)")
                continue
            if "/" in s.key:
                allowed = HYDRA_GROUPS_ALLOWED.get(s.key)
                if s.op == "~" or allowed is None or s.value not in allowed:
                    self.error(s.text, f"selects a Hydra config group ({s.key}), which the check cannot read: set the keys themselves (a.b=...)")
                continue
            if s.op == "~":
                if s.key in CHECKED_KEYS or s.key in BLOCKS or self._checked_part(s.key) or s.key == "hydra" or s.key.startswith("hydra."):
                    self.error(s.text, f"deleting {s.key} is not allowed: the checks read it (or keys inside it); set it instead")
                continue
            if type(s.value) is dict:
                leaves.extend((key, value, s) for key, value in self.flatten(s.key, s.value))
            else:
                leaves.append((s.key, s.value, s))
        seen = self.leaves
        for key, value, s in leaves:
            if key in seen:
                self.error(s.text, f"sets {key} a second time (also in {seen[key][1].text!r}): set each key once")
                continue
            seen[key] = (value, s)
        for key, (value, s) in self.leaves.items():
            self.leaf(key, value, s)

    def _checked_part(self, key: str) -> str | None:
        """The checked key that ``key`` is a part of (``data.train_files.0``), if any."""
        i = key.find(".")
        for _ in range(_MAX_CHECKED_DEPTH):
            if i < 0:
                return None
            i = key.find(".", i + 1)
            if i > 0 and key[:i] in CHECKED_KEYS:
                return key[:i]
        return None

    def leaf(self, key: str, value: Any, s: Setting) -> None:
        text = s.text
        if (key[:1] == "_" or "._" in key) and any(part in _INSTANTIATE_KEYS for part in key.split(".")):
            self.error(text, "Hydra instantiation keys (_target_ and the like) name Python code to run: not allowed")
            return
        if key in BLOCKS and not isinstance(value, dict):
            self.error(text, f"replaces the whole {key} block, which holds keys the checks read: set its keys one by one ({key}.x=...)")
            return
        part_of = self._checked_part(key)
        if part_of is not None:
            self.error(text, f"sets part of {part_of}: give the whole value ({part_of}=...)")
            return
        if key.startswith("hydra") and (key == "hydra" or key.startswith("hydra.")) and key not in HYDRA_KEYS_ALLOWED:
            self.error(text, f"{key} is a Hydra setting Argus does not allow: only hydra.run.dir, hydra.sweep.dir, "
                       "hydra.searchpath, hydra.job.chdir, hydra.output_subdir, hydra.verbose and hydra.job.name")
            return
        if s.has_date:
            if (key in CHECKED_KEYS and key not in NAME_KEYS) or any("/" in x for x in _strings(value)) or key.startswith("hydra."):
                self.error(text, "$(date ...) may stand only in a non-path value such as trainer.experiment_name: write the path out")
                return
        if type(value) is str:
            self.policy.check_string(self.field, value, self.findings)
        else:
            for string in _strings(value):
                self.policy.check_string(self.field, string, self.findings)
        if key in CHECKED_KEYS:
            self.checked(key, value, s)
        elif key.rsplit(".", 1)[-1] in _COUNT_NAMES:
            self.error(text, "asks for GPUs beyond trainer.nnodes x trainer.n_gpus_per_node (a separate pool), which the queue "
                       "does not count: the task gets the spec's nnodes x nGpusPerNode GPUs; share them instead")
        elif key == RAY_ADDRESS_KEY and value != "auto":
            self.warn(text, "joins or starts a Ray other than the cluster's: a private Ray instance on the worker would take "
                      f"the node's GPUs outside the queue; write +{RAY_ADDRESS_KEY}=auto")
        elif key.startswith(REWARD_KWARGS_PREFIX) and not s.op:
            self.warn(text, f"verl does not declare custom_reward_function.reward_kwargs, so Hydra refuses this key: write '+{text}'")

    def interpolated(self, key: str, value: str, s: Setting) -> str | None:
        """``value`` with its interpolations of other keys the command sets replaced."""
        if "${" not in value:
            return value
        if "\\" in value:
            self.error(s.text, "a backslash is not allowed in a checked value: write the path without one", key)
            return None

        def substitute(m: re.Match[str]) -> str:
            name = m.group(1)
            if not _KEY_PATH.fullmatch(name):
                raise _Unresolvable(f"{m.group()} is a resolver or an expression, which the check cannot read: write the value out")
            target = self.leaves.get(name)
            if target is None or isinstance(target[0], (list, dict)):
                raise _Unresolvable(f"{m.group()} names {name}, which the command does not set: set it, or write the value out")
            return str(target[0])

        try:
            for _ in range(8):
                value = _INTERPOLATION.sub(substitute, value)
                if "${" not in value:
                    return value
        except _Unresolvable as exc:
            if not self.resolved_later:
                self.error(s.text, str(exc), key)
            return None
        if not self.resolved_later:
            self.error(s.text, "holds interpolations the check cannot resolve: write the value out", key)
        return None

    def checked(self, key: str, value: Any, s: Setting) -> None:
        policy, findings, field_ = self.policy, self.findings, f"{self.field} ({key})"
        if key in (NNODES_KEY, GPUS_KEY):
            want, spec_field = (self.nnodes, "nnodes") if key == NNODES_KEY else (self.gpus, "nGpusPerNode")
            if type(value) is not int:
                self.error(s.text, f"must be a plain integer equal to spec.{spec_field}" + (f" ({want})" if want is not None else ""))
            elif want is not None and value != want:
                self.error(s.text, f"must equal spec.{spec_field} ({want}); the queue counts GPUs from the spec")
            return
        if value is None:
            return  # null: verl's "not set"
        if key == HYDRA_SEARCHPATH_KEY:
            for item in value if isinstance(value, list) else [value]:
                if not isinstance(item, str) or not item.startswith("file://") and "://" in item:
                    self.error(s.text, "hydra.searchpath may only hold folders (file://...) in your home", key)
                    continue
                path = self.interpolated(key, item.removeprefix("file://"), s)
                if path is not None:
                    policy.check_output(field_, path, "a Hydra search path", findings)
            return
        if key in DATA_KEYS:
            items = value if isinstance(value, list) else [value]
        else:
            items = [value]
        for item in items:
            if isinstance(item, (bool, int, float)) and key in NAME_KEYS:
                item = str(item)
            if not isinstance(item, str):
                self.error(s.text, "must be a path" + (" or a list of paths" if key in DATA_KEYS else ""), key)
                continue
            path = self.interpolated(key, item, s)
            if path is None:
                continue
            if key in NAME_KEYS:
                if "/" in path or path in (".", ".."):
                    self.error(s.text, "becomes a folder name in verl's default checkpoint path (checkpoints/<project>/<experiment>): "
                               "no '/', and not '.' or '..'", key)
            elif key in DATA_KEYS:
                policy.check_under(field_, path, policy.data_roots, "a data file", findings)
            elif key in CODE_FILE_KEYS:
                what = "the reward function file" if key == REWARD_PATH_KEY else "a Python file verl loads"
                policy.check_under(field_, path, (policy.code_root,), what, findings, suffix=".py")
            elif key in MODEL_KEYS:
                policy.check_model(field_, path, findings)
            elif key == "trainer.default_hdfs_dir" and not path.startswith("/"):
                pass  # an HDFS URL, not a path of this file system
            else:
                policy.check_output(field_, path, "an output folder", findings)
            if path != item:
                policy.check_string(self.field, path, findings)

    # --- the whole entrypoint -------------------------------------------------------

    def launch(self, launch: Launch, args: HydraArgs) -> list[Word]:
        """Check the entrypoint; return the overrides to add to it."""
        if launch.kind == "torchrun":
            self.torchrun(launch)
        custom_config = self.hydra_options(args)
        self.settings(args)
        keys = set(self.leaves)
        if HYDRA_SEARCHPATH_KEY in keys:
            custom_config = True
        if custom_config:
            self.warn(" ".join(f"{sp}={v}" for _, sp, v in args.options) or HYDRA_SEARCHPATH_KEY,
                      "makes verl read a config file of your own: Argus composes and checks it as it is now, verl reads it "
                      "as it is when the task starts; set data, model, reward and output paths on the command line")
        added: list[Word] = []
        if launch.kind != "torchrun":
            missing = [f"{k}={want}" for k, want in ((NNODES_KEY, self.nnodes), (GPUS_KEY, self.gpus))
                       if k not in keys and want is not None]
            if missing and self.resolved_later:
                self.count_defaults = missing  # added where the composed config declares them
            elif missing:
                added = [Word((m,), True, launch.line) for m in missing]
                self.warn(" ".join(missing), missing_counts_rule(len(missing)))
        for key in DATA_KEYS:
            if key not in keys:
                rule = "is not set: verl falls back to its default data files, which are likely not yours"
                if self.resolved_later:
                    self.deferred.append((key, f"{key}=", rule))
                else:
                    self.warn(f"{key}=", rule)
        if launch.kind != "torchrun" and RAY_ADDRESS_KEY not in keys:
            self.warn(f"+{RAY_ADDRESS_KEY}=auto", "is not set: verl may start its own local Ray instead of joining the cluster")
        if REWARD_PATH_KEY in keys and REWARD_NAME_KEY not in keys:
            self.warn(f"{REWARD_NAME_KEY}=", "is not set: verl will look for a function named compute_score in the reward file")
        return added


def missing_counts_rule(n: int) -> str:
    """The warning on the spec's counts Argus adds to a command that leaves ``n`` of them out."""
    return (f"{'is' if n == 1 else 'are'} not set: verl would use its defaults ({_DEFAULT_COUNTS}) while the queue reserves "
            f"the spec's GPUs; Argus adds {'it' if n == 1 else 'them'} to the command (see status.command)")


def check_environment(checker: Checker, script: Script) -> Script:
    """Check what the script puts into the environment (and its tee file); return the
    script with the variables as they will run (``Checker.environment``)."""
    statements: list[Any] = []
    for s in script.statements:
        if type(s) is Assign:
            s = checker.environment(s)
        elif type(s) is Run:
            env = tuple(checker.environment(a) for a in s.env)
            if s.tee is not None:
                checker.tee(s.tee.file)
            if env != s.env:
                s = Run(env, s.argv, s.tee, s.line)
        statements.append(s)
    if checker.env_rewritten:
        many = len(checker.env_rewritten) > 1
        checker.warn(" ".join(checker.env_rewritten), f"{'are relative paths' if many else 'is a relative path'}: verl's Ray "
                     f"actors run in the raylet's folder, not the job's, so Argus makes {'them' if many else 'it'} absolute "
                     f"under the job folder {checker.job_dir} in the generated command (see status.command); set an "
                     "absolute path under $HOME to choose")
        return Script(tuple(statements))
    return script
