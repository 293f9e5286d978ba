"""From a user's ArgusTask to the one object the operator submits: validation and the
resolved ``SubmissionPlan`` (declared in ``core.submission``, with its submission id).

``validate_task`` is the single entry point shared by ``argus validate``, the operator's
on-create handler and the admission webhook, so all three give the same verdict in the
same words.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .command import CheckedCommand, check_command
from .command.checks import TORCHRUN_ONE_NODE, missing_counts_rule
from .config import PlatformConfig
from .expand import REMOVED_COMMON, expand, uses_common, without_common
from .inputs import InputPath, dedupe
from .jobenv import runtime_env_vars
from .jobscript import attempt_log_name, job_script
from .policy import Findings, PathPolicy, check_text
from .problems import Problem, pydantic_problems
from .rules import kind_problems
from .secretenv import check_secret_env, secret_env
from .spec import API_VERSION, KIND, ArgusTaskSpec
from .submission import SubmissionPlan, submission_id_for
from .template import DEFAULT_VERL_VERSION, basic_command
from .user import InvalidUserId, check_user_id
from .verlconfig import MAX_ADDED_KEYS, Composer, ComposeRequest
from .verlconfig.check import check_composed
from .verlconfig.startup import startup_problems
from .verlconfig.tree import declared
from .vocabulary import task_gpus

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# The job's metadata key that says how many GPUs its driver reserved (entrypoint_num_gpus):
# Ray's job details do not return that number, and the operator needs it back to keep the
# queue's claim on the driver's node (also after a restart, for a job it adopts).
DRIVER_GPUS_KEY = "argus.io/driver-gpus"


def driver_gpus(metadata: Mapping[str, Any] | None) -> float:
    """GPUs a job's driver reserved, as its plan recorded them in the job's metadata; 0 when
    none (a verl launch) or unreadable."""
    try:
        return max(0.0, float((metadata or {}).get(DRIVER_GPUS_KEY) or 0.0))
    except (TypeError, ValueError):
        return 0.0


@dataclass
class Verdict:
    """The outcome of validating one task."""

    name: str | None
    namespace: str | None
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    spec: ArgusTaskSpec | None = None
    plan: SubmissionPlan | None = None
    verl: dict[str, str] | None = None  # the verl config tree the command was composed with
    # The files and folders the task reads, as the job sees them (core.inputs; only when
    # composed with verl's config tree): what must exist in the shared tree before it starts.
    inputs: tuple[InputPath, ...] = ()
    # How its run checkpoints, as composed: trainer.save_freq and trainer.resume_mode (None:
    # not composed); what a preemption loses (core.preemption).
    save_freq: int | None = None
    resume_mode: str | None = None

    @property
    def valid(self) -> bool:
        return not self.errors

    @property
    def expanded_command(self) -> str | None:
        return self.plan.command if self.plan else None

    def error_lines(self) -> list[str]:
        return [str(p) for p in self.errors]

    def warning_lines(self) -> list[str]:
        return [str(p) for p in self.warnings]


def _check_kind_fields(spec: Mapping[str, Any], findings: Findings, nulls: list[str]) -> None:
    for p in kind_problems(spec):
        if p.value is None and p.field.removeprefix("spec.") in nulls:
            continue  # given as null: reported once, as null
        findings.error(p.field, p.value, p.rule)


def _check_basic(spec: ArgusTaskSpec, raw: Mapping[str, Any], user: str, policy: PathPolicy, findings: Findings) -> ArgusTaskSpec:
    """Expand and check the basic template's path fields; return the expanded spec."""
    config = policy.config
    expanded: dict[str, Any] = {}
    for key, attr in (("trainFile", "train_file"), ("valFile", "val_file"), ("modelId", "model_id"),
                      ("codePath", "code_path"), ("customRewardPath", "custom_reward_path")):
        value = getattr(spec, attr)
        if value is None:
            continue
        if not check_text(f"spec.{key}", value, findings):
            continue
        if uses_common(value):
            findings.error(f"spec.{key}", value, f"{REMOVED_COMMON}: $HOME/common/... replaces it: write {without_common(value)}")
            continue
        value = expand(value, user, config)
        expanded[attr] = value
        f = f"spec.{key}"
        if attr in ("train_file", "val_file"):
            policy.check_under(f, value, policy.data_roots, "a data file", findings)
        elif attr == "model_id":
            policy.check_model(f, value, findings)
        elif attr == "code_path":
            if ":" in value:
                # It becomes one PYTHONPATH entry: a ':' would add another, anywhere.
                findings.error(f, value, "must be one folder (no ':'): it becomes an entry of PYTHONPATH")
            else:
                policy.check_under(f, value, (policy.common_root,), "the code path", findings)
        else:
            policy.check_under(f, value, (policy.code_root,), "the reward function file", findings, suffix=".py")
        policy.check_string(f, value, findings)
    if spec.overrides:
        overrides: list[str] = []
        for i, word in enumerate(spec.overrides):
            if check_text(f"spec.overrides[{i}]", word, findings):
                overrides.append(expand(word, user, config))
        expanded["overrides"] = overrides
    if spec.workload == "sft":
        if spec.nnodes != 1:
            findings.error("spec.nnodes", spec.nnodes, f"a basic sft task runs torchrun --standalone; {TORCHRUN_ONE_NODE}")
        for key in ("rolloutN", "customRewardPath", "customRewardName", "maxPromptLength", "maxResponseLength"):
            if key in raw:
                findings.error(f"spec.{key}", raw[key], "does not apply to the sft workload")
    elif spec.workload == "ppo" and "rolloutN" in raw:
        findings.error("spec.rolloutN", raw["rolloutN"], "applies to the grpo workload only")
    if "customRewardName" in raw and "customRewardPath" not in raw:
        findings.error("spec.customRewardName", raw["customRewardName"], "needs spec.customRewardPath")
    return spec.model_copy(update=expanded)


def job_dir_for(config: PlatformConfig, user: str, namespace: str | None, name: str | None, uid: str | None) -> str:
    """The task's job folder, as the job sees it: $HOME/jobs/<namespace>-<name>-<uid8>."""
    job_name = "-".join(p for p in (namespace, name, (uid or "").replace("-", "")[:8]) if p) or "task"
    return posixpath.join(config.home(user), "jobs", job_name)


def _compose_and_check(field_: str, checked: CheckedCommand, composer: Composer, policy: PathPolicy, *,
                       nnodes: int | None, gpus: int | None, job_dir: str, argus_env: dict[str, str],
                       findings: Findings) -> CheckedCommand | None:
    """Compose the command's configuration with verl's config tree, check what verl will
    see, and return the command with Argus's additions (None when refused)."""
    added_keys = [s.text for s in checked.settings if s.op in ("+", "++")]
    if len(added_keys) > MAX_ADDED_KEYS:
        findings.error(field_, f"{len(added_keys)} overrides with + or ++", f"adds more than {MAX_ADDED_KEYS} keys verl's config "
                       "does not declare; Hydra's composition slows with each (seconds for a thousand, at verl's start too): "
                       "put such settings in a file under $HOME/code and pass its path")
        return None
    options = dict(checked.options)
    request = ComposeRequest(module=checked.launch.module, overrides=tuple(checked.overrides),
                             env=argus_env, job_dir=job_dir,
                             config_name=options.get("config_name"), config_path=options.get("config_path"),
                             config_dir=options.get("config_dir"), defaults=tuple(checked.count_defaults), home=policy.home)
    composed = composer.compose(request)
    tree = composer.tree
    if composed.unreadable is not None and not tree.cluster_own:
        # argus validate without the shared tree: the text checks ran; the composition needs
        # the user's config, which the operator reads (and checks) at admission.
        findings.warn(field_, composed.unreadable, "is a config folder of your own that cannot be read here (the shared tree is "
                      "not mounted): the configuration it composes (paths, instantiation keys, GPU pools, verl's start-up "
                      "checks) was not checked; the operator checks it when the task is created")
        counts = checked.count_defaults
        if counts:
            findings.warn(field_, " ".join(counts), missing_counts_rule(len(counts)))
        return checked.with_arguments(list(counts))
    if composed.unreadable is not None:
        findings.error(field_, composed.unreadable, "is a config folder of your own that cannot be read through the shared tree")
        return None
    errors_before = len(findings.errors)
    if composed.error is None:
        trainer = composed.config.get("trainer")
        save_freq, resume_mode = (trainer.get("save_freq"), trainer.get("resume_mode")) if isinstance(trainer, Mapping) else (None, None)
        findings.save_freq = save_freq if isinstance(save_freq, int) and not isinstance(save_freq, bool) else None
        findings.resume_mode = resume_mode if isinstance(resume_mode, str) else None
        counts = list(composed.defaults_applied)
        if counts:
            findings.warn(field_, " ".join(counts), missing_counts_rule(len(counts)))
        for key, shown, rule in checked.deferred:
            if declared(composed.config, key):
                findings.warn(field_, shown, rule)
    added = check_composed(field_, composed, tree=tree, module=checked.launch.module, policy=policy, nnodes=nnodes,
                           gpus=gpus, job_dir=job_dir, findings=findings, trainer_counts=checked.launch.kind != "torchrun")
    if composed.error is None:
        # torchrun's processes: the task's GPUs (the command check holds torchrun's options to them)
        world = nnodes * gpus if checked.launch.kind == "torchrun" and nnodes is not None and gpus is not None else None
        for p in startup_problems(composed.config, version=tree.version, entry=checked.launch.module,
                                  plugin_rollouts=policy.config.verl_plugin_rollouts, world_size=world):
            findings.error(f"{field_} ({p.key})", p.value, f"verl {tree.version} refuses it at start: {p.message}")
    if len(findings.errors) > errors_before:
        return None
    return checked.with_arguments([*composed.defaults_applied, *added])



def validate_spec(
    raw_spec: Any,
    user: str,
    config: PlatformConfig,
    *,
    namespace: str | None = None,
    name: str | None = None,
    uid: str | None = None,
    findings: Findings | None = None,
    attempt: int = 1,
    composer: Composer | None = None,
) -> Verdict:
    """Check one spec for ``user`` and, when valid, resolve its submission plan (for the
    given attempt: each has its own Ray job and log file). With a ``composer``, the
    command's configuration is also composed with verl's config tree and checked as verl
    will see it (argus.core.verlconfig); the operator, the webhook and the CLI pass one."""
    findings = findings or Findings()
    verdict = Verdict(name=name, namespace=namespace)
    try:
        check_user_id(user)
    except InvalidUserId as exc:
        findings.error("user", user, str(exc).split(" must ", 1)[-1].join(("must ", "")))
        verdict.errors, verdict.warnings = findings.errors, findings.warnings
        return verdict
    if not isinstance(raw_spec, Mapping):
        findings.error("spec", raw_spec, "must be a mapping of fields")
        verdict.errors = findings.errors
        return verdict

    raw_spec, spec = _read_fields(raw_spec, findings)
    if spec is not None and not spec.preemptible and not config.preemption_opt_out:
        findings.error("spec.preemptible", False, "this platform does not let a task opt out of preemption (the operator runs "
                       "with --no-preemption-opt-out): remove the field or set it to true")
    policy = PathPolicy(config, user)
    job_dir = job_dir_for(config, user, namespace, name, uid)
    spec, target = _command_of(raw_spec, spec, user, policy, findings, namespace=namespace, name=name, uid=uid, composer=composer,
                               job_dir=job_dir)
    checked = target.checked
    if composer is not None:
        tree = composer.tree
        verdict.verl = {"version": tree.version, "source": tree.source, "root": tree.root}
        if checked is not None:
            if not tree.cluster_own:
                findings.warn(target.field, tree.describe(), f"checked against this verl config tree, not the cluster's own verl "
                              f"snapshot ({config.verl_code()}, not readable here)")
            _check_code_version(spec, config, composer, findings)
            checked = _compose_and_check(target.field, checked, composer, policy, nnodes=target.nnodes, gpus=target.gpus, job_dir=job_dir,
                                         argus_env=runtime_env_vars(config, user, job_dir, attempt, target.code_path, checked),
                                         findings=findings)
    if spec is not None and spec.env:
        check_secret_env(spec, exported=[r.variable for r in secret_env(spec) if checked is not None and checked.exports(r.variable)],
                         argus_sets=runtime_env_vars(config, user, job_dir, attempt, target.code_path, checked), findings=findings)
    # What runs is the command generated from the checked program, not the text.
    command = checked.text if checked else None

    verdict.errors, verdict.warnings, verdict.spec = findings.errors, findings.warnings, spec
    verdict.inputs = dedupe(findings.inputs) if not findings.errors else ()
    verdict.save_freq, verdict.resume_mode = findings.save_freq, findings.resume_mode
    if spec is not None and command is not None and not findings.errors:
        verdict.plan = resolve_plan(spec, command, user, config, namespace=namespace, name=name, uid=uid, code_path=spec.code_path,
                                    attempt=attempt, checked=checked)
    return verdict


def _check_code_version(spec: ArgusTaskSpec | None, config: PlatformConfig, composer: Composer, findings: Findings) -> None:
    """A basic task's codePath is the verl that runs: it must be the release the command is
    composed and checked with (issue 34, one verl per task)."""
    if spec is None or spec.kind != "basic" or not spec.code_path or spec.code_path == config.verl_code():
        return
    tree = composer.tree
    version = composer.code_version(spec.code_path)
    if version is None and not tree.cluster_own:
        findings.warn("spec.codePath", spec.code_path, f"cannot be read here: which verl it holds was not checked (the task is "
                      f"composed with verl {tree.version}; the operator checks it when the task is created)")
    elif version is None:
        findings.error("spec.codePath", spec.code_path, "holds no verl release Argus can read (verl/version/version): the task "
                       f"would run code other than the verl {tree.version} it was checked with")
    elif version != tree.version:
        findings.error("spec.codePath", spec.code_path, f"holds verl {version}, but the task is composed and checked with verl "
                       f"{tree.version}: one verl per task; give a codePath holding verl {tree.version}, or leave it out")


def _read_fields(raw_spec: Mapping[str, Any], findings: Findings) -> tuple[dict[str, Any], ArgusTaskSpec | None]:
    """The spec's fields without the null ones, and the spec read as the API server's schema
    reads it (None when it does not read); every problem into ``findings``."""
    # A field given as null is neither absent nor a value: the API server's schema refuses
    # it, and so does this check (rather than reading it as "not set").
    nulls = [k for k, v in raw_spec.items() if v is None]
    for key in nulls:
        findings.error(f"spec.{key}", None, "must not be null: leave the field out, or give it a value")
    raw = {k: v for k, v in raw_spec.items() if v is not None}

    _check_kind_fields(raw, findings, nulls)
    spec: ArgusTaskSpec | None = None
    try:
        # Strict, as the API server's schema is: 'true' or "2" is not an integer, "yes" is not
        # a boolean (pydantic's lax mode would accept them, the CRD would not). JSON mode
        # so that enums still take their string values.
        spec = ArgusTaskSpec.model_validate_json(json.dumps(dict(raw), default=str), strict=True)
    except ValidationError as exc:
        for p in pydantic_problems(exc):
            findings.error(p.field, p.value, p.rule)
    return raw, spec


@dataclass
class _CommandOf:
    """The checked command of a spec (None: none to run), the field its problems are
    reported under, and the counts and code path it must agree with."""

    checked: CheckedCommand | None
    field: str
    nnodes: int | None
    gpus: int | None
    code_path: str | None


def _command_of(raw_spec: Mapping[str, Any], spec: ArgusTaskSpec | None, user: str, policy: PathPolicy, findings: Findings, *,
                namespace: str | None, name: str | None, uid: str | None,
                composer: Composer | None, job_dir: str | None = None) -> tuple[ArgusTaskSpec | None, _CommandOf]:
    """The command an advanced spec gives, or the one a basic spec's template makes (with
    the basic spec as its inputs were checked), read and checked as a program."""
    # Even when other fields are wrong, a command that is a string gets its checks, so the
    # user sees every problem at once.
    raw_command = raw_spec.get("command")
    # The counts the command must agree with, when the spec gives valid ones.
    nnodes = raw_spec.get("nnodes") if type(raw_spec.get("nnodes")) is int and raw_spec["nnodes"] >= 1 else None
    gpus = raw_spec.get("nGpusPerNode") if type(raw_spec.get("nGpusPerNode")) is int and raw_spec["nGpusPerNode"] >= 1 else None
    code_path = raw_spec.get("codePath") if isinstance(raw_spec.get("codePath"), str) else None
    checked: CheckedCommand | None = None
    field_ = "spec.command"
    if raw_spec.get("kind") == "advanced" and isinstance(raw_command, str):
        if check_text("spec.command", raw_command, findings):
            checked = check_command("spec.command", expand(raw_command, user, policy.config), policy=policy, nnodes=nnodes,
                                    gpus_per_node=gpus, findings=findings, resolved_later=composer is not None, job_dir=job_dir)
    elif spec is not None and spec.kind == "basic":
        # The template's inputs are checked even when the manifest has other problems, so
        # that every problem is reported at once; the command is built only from good ones.
        spec = _check_basic(spec, raw_spec, user, policy, findings)
        code_path = spec.code_path
        if not findings.errors:
            experiment = f"{namespace or 'default'}-{name or spec.workload}"
            field_ = "spec (generated command)"
            nnodes, gpus = spec.nnodes, spec.n_gpus_per_node
            # The template follows the verl release the command is composed with (its SFT
            # trainer, its reward keys).
            verl_version = composer.tree.version if composer is not None else DEFAULT_VERL_VERSION
            checked = check_command(field_, basic_command(spec, home=policy.home, experiment=experiment, uid=uid,
                                                          verl_version=verl_version),
                                    policy=policy, nnodes=spec.nnodes, gpus_per_node=spec.n_gpus_per_node, findings=findings,
                                    resolved_later=composer is not None, job_dir=job_dir)
    return spec, _CommandOf(checked, field_, nnodes, gpus, code_path)


def validate_task(manifest: Any, user: str, config: PlatformConfig, composer: Composer | None = None) -> Verdict:
    """Validate a whole ArgusTask manifest (apiVersion, kind, metadata and spec). Never
    raises: a check that fails on some input is a refusal that says so (``check_failed``)."""
    try:
        return _validate_task(manifest, user, config, composer)
    except Exception as exc:  # noqa: BLE001 - no input may crash the checker: a verdict, in one line
        metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
        name = metadata.get("name") if isinstance(metadata, Mapping) and isinstance(metadata.get("name"), str) else None
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) and isinstance(metadata.get("namespace"), str) else None
        return Verdict(name=name, namespace=namespace, errors=[check_failed(exc)])


def check_failed(exc: BaseException) -> Problem:
    """The refusal of a task whose checks raised: one line naming the failure."""
    text = " ".join(str(exc).split())[:300]
    return Problem("spec", f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
                   "the checks failed on this task (a bug in Argus: report it with the task); it is refused rather than run unchecked")


def _validate_task(manifest: Any, user: str, config: PlatformConfig, composer: Composer | None) -> Verdict:
    findings = Findings()
    if not isinstance(manifest, Mapping):
        findings.error("document", manifest, "must be an ArgusTask manifest (a mapping)")
        return Verdict(name=None, namespace=None, errors=findings.errors)
    raw_metadata = manifest.get("metadata")
    metadata: Mapping[str, Any] = raw_metadata if isinstance(raw_metadata, Mapping) else {}
    name, namespace, uid = metadata.get("name"), metadata.get("namespace"), metadata.get("uid")
    if manifest.get("apiVersion") != API_VERSION:
        findings.error("apiVersion", manifest.get("apiVersion"), f"must be {API_VERSION}")
    if manifest.get("kind") != KIND:
        findings.error("kind", manifest.get("kind"), f"must be {KIND}")
    if not isinstance(name, str) or not _DNS_SUBDOMAIN.fullmatch(name) or len(name) > 63:
        findings.error("metadata.name", name, "must be a lowercase DNS label of at most 63 characters (a-z, 0-9, '-')")
        name = name if isinstance(name, str) else None
    if "spec" not in manifest:
        findings.error("spec", None, "is required")
        return Verdict(name=name, namespace=namespace, errors=findings.errors)
    return validate_spec(manifest["spec"], user, config, namespace=namespace, name=name, uid=uid, findings=findings,
                         composer=composer)


def resolve_plan(
    spec: ArgusTaskSpec,
    command: str,
    user: str,
    config: PlatformConfig,
    *,
    namespace: str | None,
    name: str | None,
    uid: str | None,
    code_path: str | None = None,
    attempt: int = 1,
    checked: CheckedCommand | None = None,
) -> SubmissionPlan:
    """The plan for a checked ``command`` (``checked``: the program it came from, which says
    how it launches and what environment it sets itself)."""
    home = config.home(user)
    job_dir = job_dir_for(config, user, namespace, name, uid)
    log_file = posixpath.join(job_dir, attempt_log_name(attempt))
    script = job_script(command, job_dir, attempt)
    metadata = {"argus.io/user": user, "argus.io/workload": str(spec.workload), "argus.io/gpus": str(spec.nnodes * spec.n_gpus_per_node)}
    for key, value in (("namespace", namespace), ("name", name), ("uid", uid)):
        if value:
            metadata[f"argus.io/{key}"] = value
    env_vars = runtime_env_vars(config, user, job_dir, attempt, code_path, checked)
    # A torchrun launch runs its GPU processes in the driver: the driver reserves them.
    torchrun = checked is not None and checked.launch.kind == "torchrun"
    if torchrun:
        metadata[DRIVER_GPUS_KEY] = str(spec.n_gpus_per_node)
    return SubmissionPlan(
        submission_id=submission_id_for(namespace, name, uid, attempt) if namespace and name and uid else None,
        user=user,
        command=command,
        entrypoint=f"{config.entrypoint_shell} {shlex.quote(script)}",
        entrypoint_resources={config.worker_resource: 1},
        entrypoint_num_gpus=spec.n_gpus_per_node if torchrun else 0,
        runtime_env={"env_vars": env_vars},
        secret_env={ref.variable: ref.shown for ref in secret_env(spec)},
        metadata={**metadata, "argus.io/attempt": str(attempt)},
        job_dir=job_dir,
        gpus=task_gpus(spec.nnodes, spec.n_gpus_per_node),
        attempt=attempt,
        log_file=log_file,
        home=home,
    )
