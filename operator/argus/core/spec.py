"""The ArgusTask API (argus.io/v1alpha1): the spec a user writes and the status the operator
writes. These pydantic models are the one source of truth: the CRD's OpenAPI schema is
generated from them (``argus.core.crd``), and validation parses specs with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .conditions import Condition
from .rayjobs import RayJobState
from .vocabulary import END_PHASES, STATUS_REASONS
from .vocabulary import Phase as Phase  # noqa: PLC0414 - re-exported: the API's readers take Phase from spec

GROUP = "argus.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ArgusTask"
PLURAL = "argustasks"
SINGULAR = "argustask"
SHORT_NAMES = ["atask"]
CATEGORIES = ["argus"]
MAX_COMMAND_BYTES = 64 * 1024
MAX_PATH_CHARS = 4096


class TaskKind(str, Enum):
    basic = "basic"
    advanced = "advanced"


class Workload(str, Enum):
    ppo = "ppo"
    grpo = "grpo"
    sft = "sft"


class RestartPolicy(str, Enum):
    Never = "Never"
    OnRayJobLost = "OnRayJobLost"
    OnFailure = "OnFailure"


def _or(words: Iterable[str]) -> str:
    """'A, B or C', for the CRD's descriptions (generated from the vocabulary, never stale)."""
    *rest, last = [w.value if isinstance(w, Enum) else w for w in words]
    return f"{', '.join(rest)} or {last}" if rest else last


class _CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", use_enum_values=True)


class _StatusModel(BaseModel):
    """The status is the operator's own record: read back leniently (a field a newer or
    older operator wrote is ignored, not an error), written with camelCase names."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", use_enum_values=True)


PathField = Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS)]

# Fields only a basic spec may carry (the template's inputs).
BASIC_FIELDS = (
    "modelId", "trainFile", "valFile", "codePath", "totalEpochs", "saveFreq", "testFreq",
    "trainBatchSize", "maxPromptLength", "maxResponseLength", "learningRate", "rolloutN",
    "customRewardPath", "customRewardName", "projectName", "experimentName", "overrides",
)
MAX_OVERRIDES = 256
REQUIRED_BASIC_FIELDS = ("modelId", "trainFile", "valFile")


MAX_ENV = 64
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class SecretKeySelector(_CamelModel):
    """A key of a Secret in the task's namespace (a Pod's secretKeyRef)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)] = Field(
        description="The Secret's name, in the task's namespace.")
    key: Annotated[str, Field(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253)] = Field(description="The key in the Secret's data.")
    optional: bool = Field(False, description="true: a missing Secret or key leaves the variable unset; "
                           "false (default): the task waits in the queue until it exists.")


class EnvVarSource(_CamelModel):
    secret_key_ref: SecretKeySelector = Field(description="A key of a Secret in the task's namespace.")


class EnvVar(_CamelModel):
    """One environment variable of the job whose value comes from a Secret (a Pod's env shape)."""

    name: Annotated[str, Field(pattern=ENV_NAME, max_length=253)] = Field(
        description="The variable: a setting or credential the command's environment rules allow (WANDB_API_KEY, "
        "MLFLOW_TRACKING_TOKEN, HF_TOKEN ...; docs/security.md).")
    value_from: EnvVarSource = Field(description="Where its value comes from: valueFrom.secretKeyRef.")


class ArgusTaskSpec(_CamelModel):
    """What to train. Immutable after creation except ``cancel`` (false -> true), ``suspend``
    and ``ttlSecondsAfterFinished``."""

    kind: TaskKind = Field(
        TaskKind.basic,
        description="basic: Argus builds the verl command from the template fields; "
        "advanced: you give the verl command line in 'command'. Default basic.",
    )
    workload: Workload = Field(description="Training workload: ppo, grpo or sft. Used for naming and by the basic template.")
    nnodes: int = Field(ge=1, le=1024, description="Number of nodes the training uses (trainer.nnodes). At least 1.")
    n_gpus_per_node: int = Field(ge=1, le=64, description="GPUs per node (trainer.n_gpus_per_node). At least 1. The queue admits the task when nnodes*nGpusPerNode GPUs are free.")
    command: str | None = Field(
        None, max_length=MAX_COMMAND_BYTES,
        description="advanced only: the shell command that runs verl, e.g. 'python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/x.parquet ...'. "
        "Multi-line allowed, at most 64 KiB. $HOME expands to your home, $HOME/common/datasets and $HOME/common/hf to the shared read-only data. "
        "Written in Argus's command language (set, NAME=value, export, one entrypoint, | tee); the command that runs is generated from it.",
    )
    model_id: PathField | None = Field(None, description="basic only: Hugging Face model id (e.g. Qwen/Qwen2.5-0.5B-Instruct), or a path in your home ($HOME/...), under $HOME/common/hf (also /private/common/hf) or /private/common/models.")
    train_file: PathField | None = Field(None, description="basic only: training data file (parquet), under $HOME/datasets or $HOME/common/datasets.")
    val_file: PathField | None = Field(None, description="basic only: validation data file (parquet), under $HOME/datasets or $HOME/common/datasets.")
    code_path: PathField | None = Field(None, description="basic only: verl code snapshot to run, one folder under /private/common/ (no ':'; default: the platform's snapshot).")
    total_epochs: int | None = Field(None, ge=1, le=100000, description="basic only: trainer.total_epochs (default 1).")
    save_freq: int | None = Field(None, ge=-1, le=1000000, description="basic only: trainer.save_freq, checkpoint every N steps (-1: never).")
    test_freq: int | None = Field(None, ge=-1, le=1000000, description="basic only: trainer.test_freq, validate every N steps (-1: never).")
    train_batch_size: int | None = Field(None, ge=1, le=1000000, description="basic only: data.train_batch_size.")
    max_prompt_length: int | None = Field(None, ge=1, le=10000000, description="basic only: data.max_prompt_length (ppo/grpo).")
    max_response_length: int | None = Field(None, ge=1, le=10000000, description="basic only: data.max_response_length (ppo/grpo).")
    learning_rate: float | None = Field(None, gt=0, le=1, description="basic only: actor learning rate (actor_rollout_ref.actor.optim.lr, or optim.lr for sft).")
    rollout_n: int | None = Field(None, ge=2, le=1024, description="basic only, grpo: responses per prompt (actor_rollout_ref.rollout.n, default 5).")
    custom_reward_path: PathField | None = Field(None, description="basic only, ppo/grpo: a .py file under $HOME/code holding the reward function.")
    custom_reward_name: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=253)] | None = Field(None, description="basic only: the reward function's name in customRewardPath (default compute_score).")
    project_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,128}$")] | None = Field(None, description="basic only: trainer.project_name (default argus).")
    experiment_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,128}$")] | None = Field(None, description="basic only: trainer.experiment_name (default <namespace>-<name>).")
    overrides: list[Annotated[str, Field(min_length=1, max_length=MAX_PATH_CHARS)]] | None = Field(
        None, max_length=MAX_OVERRIDES,
        description="basic only: more Hydra overrides for verl (key=value, +key=value), appended to the generated command "
        "after the template's own (the last value of a key wins), e.g. ['actor_rollout_ref.actor.ppo_epochs=2']. "
        "$HOME expands as in paths; they are checked like the words of an advanced command.",
    )
    env: list[EnvVar] | None = Field(
        None, max_length=MAX_ENV,
        description="Environment variables of the job whose values come from Secrets in the task's namespace "
        "(valueFrom.secretKeyRef), e.g. WANDB_API_KEY: read by the operator when the task starts and given to the Ray job; "
        "never written into the task, its status, Events or logs. Ray shows the job's environment to whoever can reach "
        "its dashboard (docs/security.md).",
    )
    cancel: bool = Field(False, description="Set to true to stop the task for good (it may change after creation only from false to true).")
    suspend: bool = Field(
        False, description="Set to true to pause the task: its Ray job is stopped, its GPUs go back to the queue and it shows "
        "Suspended (a queued task just leaves the queue). Set back to false to resume: it is queued again and a new attempt "
        "resumes from the newest checkpoint in its job folder (verl's trainer.resume_mode=auto). May change both ways. Default false.",
    )
    preemptible: bool = Field(
        True, description="Whether a waiting task of higher priority may stop this one to take its GPUs, when the operator "
        "preempts (--preemption): it goes back to the queue, and its next attempt resumes from the newest checkpoint in its "
        "job folder. false opts out where the platform allows it (the operator's --preemption-opt-out). Default true.",
    )
    active_deadline_seconds: int | None = Field(None, ge=1, le=31536000, description="Stop the task and mark it Failed (DeadlineExceeded) this many seconds after it was admitted.")
    priority: int = Field(0, ge=-1000000, le=1000000, description="Queue priority: higher runs first; ties go by creation time. Default 0.")
    restart_policy: RestartPolicy = Field(
        RestartPolicy.Never,
        description="What happens when an attempt ends without success. Never (default): the task ends. OnRayJobLost: when the "
        "stateless Ray head restarted and forgot the job, run a new attempt. OnFailure: also when the job failed. A new attempt "
        "runs in the same job folder, so verl's trainer.resume_mode=auto resumes from the newest checkpoint.",
    )
    backoff_limit: int = Field(3, ge=0, le=100, description="How many new attempts restartPolicy may start before the task is Failed (BackoffLimitExceeded). Default 3.")
    cluster: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)] | None = Field(
        None, description="The ArgusCluster to run on (its name). Unset: any cluster the task's namespace may use, the most "
        "preferred one that can hold it when it is admitted.",
    )
    move_on_retry: bool = Field(
        False, description="Whether a new attempt (restartPolicy) may be placed on another cluster than the last attempt's. "
        "Default false: it stays, because the checkpoints it resumes from are in that cluster's shared tree.",
    )
    ttl_seconds_after_finished: int | None = Field(
        None, ge=0, le=31536000,
        description=f"Delete the task this many seconds after it ended ({_or(END_PHASES)}); its Ray jobs leave "
        "Ray's job history with it. Unset: the operator's default (none unless set); 0: right away.",
    )


class RayJobStatus(_StatusModel):
    submission_id: str | None = Field(None, description="The Ray job's submission id, derived from the object's UID.")
    status: str | None = Field(None, description=f"The Ray job status as Ray reports it ({', '.join(RayJobState)}).")
    driver_node_id: str | None = Field(None, description="The Ray node that runs the job's driver (always a worker node, never the head).")
    start_time: str | None = Field(None, description="When Ray started the job (RFC 3339).")
    end_time: str | None = Field(None, description="When the job ended in Ray (RFC 3339).")
    dashboard_url: str | None = Field(None, description="The Ray dashboard the job was submitted to.")


class TaskPath(_StatusModel):
    """A file or folder of the task, as the user sees it in the file browser and as the job sees it."""

    user_path: str = Field(description="As you see it ($HOME/jobs/...).")
    job_path: str = Field(description="As the job on the Ray workers sees it (<root>/users/<you>/jobs/...).")


class TaskProgress(_StatusModel):
    """Training progress, read from verl's own lines in the job's log (Total training steps: N; step:N - key:value ...)."""

    step: int | None = Field(None, ge=0, description="The last training step verl reported.")
    total_steps: int | None = Field(None, ge=0, description="Total training steps, as verl announced them.")
    percent: float | None = Field(None, ge=0, le=100, description="step / totalSteps, in percent.")
    summary: str | None = Field(None, description="step/totalSteps, as the Progress column shows it.")
    last_step_time: str | None = Field(None, json_schema_extra={"format": "date-time"}, description="When the last step was reported.")
    eta: str | None = Field(None, json_schema_extra={"format": "date-time"}, description="When the run should end, from the recent step times.")
    resumed_from_step: int | None = Field(None, ge=0, description="The checkpointed step this attempt resumed from (verl's 'Resuming from ...').")
    metrics: dict[str, float] | None = Field(None, description="The latest values of the metrics the operator follows (for example critic/score/mean).")
    run_url: str | None = Field(None, description="The run's page on its tracker, as W&B (\"wandb: View run at URL\") or MLflow "
                                "(\"View run NAME at: URL\") printed it in the job's log.")


class AttemptRecord(_StatusModel):
    """One run of the task on Ray."""

    attempt: int = Field(ge=1, description="1 for the first run; each restart adds one.")
    submission_id: str = Field(description="The Ray job of this attempt.")
    start_time: str | None = Field(None, json_schema_extra={"format": "date-time"}, description="When Ray started it.")
    end_time: str | None = Field(None, json_schema_extra={"format": "date-time"}, description="When it ended (or was found lost).")
    outcome: str | None = Field(None, description="How it ended: RayJobLost, RayJobFailed, ... (empty while it runs).")
    last_step: int | None = Field(None, ge=0, description="The last training step it reported.")
    cluster: str | None = Field(None, description="The ArgusCluster it ran on (empty: the operator's own --ray-address).")
    preempted_by: str | None = Field(None, description="For a Preempted attempt: the task (namespace/name) that took its GPUs.")


class VerlConfigSource(_StatusModel):
    """The verl config tree the task's configuration was composed and checked with."""

    version: str = Field(description="verl's version (verl/version/version of the tree).")
    source: str = Field(description="cluster (the verl snapshot the cluster runs), release (a pinned release Argus carries) or folder (given with --verl-config).")


class ArgusTaskStatus(_StatusModel):
    """Written by the operator only (users cannot write the status subresource)."""

    phase: Phase | None = Field(None, description=f"{_or(Phase)}.")
    reason: str | None = Field(None, description=f"Why the task is in its phase, one CamelCase word: {_or(STATUS_REASONS)}.")
    message: str | None = Field(None, description="Human-readable detail; for a Rejected task every problem, one per line.")
    user: str | None = Field(None, description="The user the task runs as, from its namespace's argus.io/user label.")
    cluster: str | None = Field(None, description="The ArgusCluster the current attempt was submitted to (empty: the operator's own --ray-address).")
    warnings: list[str] | None = Field(None, description="Weak-check warnings: the task runs, but these are likely mistakes.")
    command: str | None = Field(None, description="The expanded command that runs.")
    verl: VerlConfigSource | None = Field(None, description="The verl config tree the configuration was composed and checked with; a warning says so when it is not the cluster's own.")
    admitted_at: str | None = Field(None, description="When the queue admitted the task (RFC 3339); the active deadline counts from here.")
    ray_job: RayJobStatus | None = Field(None, description="The Ray job that runs the task.")
    conditions: list[Condition] | None = Field(None, description="Admitted, Running, Complete, Failed, Finished (true at every end), Suspended (once suspended) and RayReachable conditions.")
    observed_generation: int | None = Field(None, description="The .metadata.generation the operator last acted on.")
    ray_unreachable_since: str | None = Field(None, description="When the operator first failed to reach Ray for this task (grace period start); empty when reachable.")
    attempt: int | None = Field(None, ge=1, description="The current (or last) attempt: 1, or more after restarts (spec.restartPolicy).")
    attempts: list[AttemptRecord] | None = Field(None, description="Every attempt that ran, oldest first.")
    progress: TaskProgress | None = Field(None, description="Training progress of the current attempt, from verl's log lines.")
    job_dir: TaskPath | None = Field(None, description="The task's job folder: the driver's working directory, the log files, verl's default checkpoints.")
    log_file: TaskPath | None = Field(None, description="The current attempt's log: everything the driver printed (stdout and stderr, in order).")
    finished_at: str | None = Field(None, json_schema_extra={"format": "date-time"}, description="When the task ended (ttlSecondsAfterFinished counts from here).")
    ray_jobs_removed: bool | None = Field(None, description="True once the task's Ray jobs were removed from Ray's job history (their logs stay in the log files).")
    preempted_by: str | None = Field(None, description="While its job is stopped for a preemption: the task (namespace/name) that "
                                     "takes its GPUs. Empty otherwise; the attempt's record says Preempted afterwards.")
    preempts: list[str] | None = Field(None, description="While it waits in the queue for GPUs a preemption frees: the running "
                                       "tasks (namespace/name) stopped for it, whose status.preemptedBy names this task. Empty otherwise.")
    kept_by: str | None = Field(None, description="Set when the time to live ran out but the task was kept because a GitOps tool tracks it: what tracks it (Argo CD would create a deleted task again from Git and run the training again). Delete it through Git (docs/argocd.md).")
