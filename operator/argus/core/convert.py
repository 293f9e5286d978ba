"""v3.x TaskSpec files into ArgusTask manifests, so existing task files keep working:
snake_case, no apiVersion, no ``kind`` meaning basic.

What v3.x left implicit is made explicit, or named as the field to add: an advanced spec
without ``workload`` gets it from the module its command runs (read by the command
language's own parser, as the checks read it: ``verl.trainer.main_ppo`` with
``algorithm.adv_estimator=grpo`` is grpo, without it ppo, a ``*sft_trainer*`` module sft);
v3.0's ``$COMMON`` is rewritten ``$HOME/common``. Each such change is a note."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic.alias_generators import to_camel

from .command.hydra import read_hydra_args
from .command.launchers import read_launch
from .command.resolve import resolve
from .command.syntax import parse
from .config import PlatformConfig
from .expand import expand, uses_common, without_common
from .problems import Problem
from .spec import API_VERSION, KIND, ArgusTaskSpec

_SPEC_FIELDS = {f.alias or n for n, f in ArgusTaskSpec.model_fields.items()}
# v3.x spellings that are not simply the snake_case of the new name.
_RENAMED = {"type": "kind", "task_kind": "kind", "n_gpus": "nGpusPerNode", "gpus_per_node": "nGpusPerNode", "model": "modelId", "model_path": "modelId"}
WORKLOADS = "ppo, grpo or sft"
_ESTIMATOR_KEY = "algorithm.adv_estimator"


class ConversionError(ValueError):
    def __init__(self, problems: list[Problem]):
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


def workload_of(command: str, config: PlatformConfig | None = None) -> tuple[str | None, str]:
    """(workload, why) read from the module ``command`` runs; (None, why not) when the
    command does not say. The command is read by the command language (parse, resolve,
    the launcher, Hydra's override parser), never scanned as text."""
    config = config or PlatformConfig()
    # $HOME only matters to paths, which this reading ignores; any user expands it.
    script, _, words_intact, _ = parse(expand(command, "convert", config), {e.program for e in config.entrypoints})
    run = resolve(script)[0].run if words_intact else None
    if run is None:
        return None, "the command does not run an entrypoint Argus can read"
    launch, _ = read_launch(list(run.argv), config.entrypoints, run.line)
    if launch is None:
        return None, "the command's entrypoint is not one Argus allows"
    module = launch.module
    if "sft_trainer" in module.rsplit(".", 1)[-1]:
        return "sft", f"it runs {module}"
    if module.rsplit(".", 1)[-1] != "main_ppo":
        return None, f"it runs {module}, which is none of verl's PPO/GRPO (main_ppo) or SFT (*sft_trainer*) entry points"
    args, _ = read_hydra_args(launch.args, run.line)
    estimator = next((s.value for s in reversed(args.settings) if s.key == _ESTIMATOR_KEY and s.op != "~"), None)
    if estimator is None or estimator == "gae":
        return "ppo", f"it runs {module}" + (f" with {_ESTIMATOR_KEY}=gae" if estimator else f" without {_ESTIMATOR_KEY} (verl's default: gae)")
    if estimator == "grpo":
        return "grpo", f"it runs {module} with {_ESTIMATOR_KEY}=grpo"
    return None, f"it runs {module} with {_ESTIMATOR_KEY}={estimator}, which is neither gae (ppo) nor grpo"


def convert_taskspec(old: Any, *, namespace: str, name: str | None = None, notes: list[Problem] | None = None) -> dict[str, Any]:
    """The ArgusTask manifest for a v3.x TaskSpec. Fields that Argus now sets itself are
    dropped, and fields made explicit are added, each with a line in ``notes``; fields it
    does not know, and a workload it cannot tell, raise ``ConversionError``. ``name``
    defaults to the TaskSpec's own ``name``."""
    notes = notes if notes is not None else []
    if not isinstance(old, Mapping):
        raise ConversionError([Problem("document", old, "must be a v3.x TaskSpec mapping")])
    spec: dict[str, Any] = {}
    problems = []
    name = name if name is not None else old.get("name") if isinstance(old.get("name"), str) else None
    if name is None:
        problems.append(Problem("name", old.get("name"), "is missing: give the task a name (argus convert --name NAME)"))
    for key, value in old.items():
        if key in ("name", "namespace", "user", "user_id"):
            continue  # identity now comes from the object's metadata and namespace label
        if key == "submission_id":
            notes.append(Problem(key, value, "dropped: Argus sets the Ray submission id itself "
                                 "(argus-<namespace>-<name>-<uid>, one job per task)"))
            continue
        new = _RENAMED.get(key) or (key if key in _SPEC_FIELDS else to_camel(key))
        if new not in _SPEC_FIELDS:
            problems.append(Problem(str(key), value, "is not a v3.x TaskSpec field that ArgusTask knows"))
            continue
        if isinstance(value, str) and uses_common(value):
            value = without_common(value)
            notes.append(Problem(new, "$COMMON", "rewritten as $HOME/common: v3.5 removed $COMMON"))
        spec[new] = value
    spec.setdefault("kind", "basic")
    if "workload" not in spec:
        command = spec.get("command")
        if spec["kind"] == "advanced" and isinstance(command, str):
            workload, why = workload_of(command)
            if workload is None:
                problems.append(Problem("workload", None, f"is missing and cannot be told from the command ({why}): "
                                        f"add workload: {WORKLOADS}"))
            else:
                spec["workload"] = workload
                notes.append(Problem("workload", workload, f"added: {why}"))
        else:
            problems.append(Problem("workload", None, f"is missing: add workload: {WORKLOADS}"))
    if problems:
        raise ConversionError(problems)
    first = {k: spec.pop(k) for k in ("kind", "workload")}  # read first, as the examples have them
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": namespace}, "spec": {**first, **spec}}
