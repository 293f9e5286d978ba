"""A task as the lifecycle knows it, the operator's settings for it, and how a decision
rewrites its status: for ``core.lifecycle``, entering a phase (with its conditions), Ray's
reachability, the record of its attempts and what follows an attempt that failed.

    lifecycle.step(**TaskState**, observation, now, **LifecycleSettings**) -> decides with **enter**, **ray_reachable**, **attempt_ended** -> Decision
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .conditions import Condition, ConditionType, find_condition, set_condition
from .gitops import DEFAULT_TRACKING_LABEL
from .observations import Decision
from .rayjobs import RayJobState
from .spec import ArgusTaskStatus, AttemptRecord, Phase, RayJobStatus, RestartPolicy
from .submission import submission_id_for
from .times import parse_time
from .vocabulary import Reason

RAY_TO_PHASE = {
    RayJobState.PENDING: Phase.Submitted,
    RayJobState.RUNNING: Phase.Running,
    RayJobState.SUCCEEDED: Phase.Succeeded,
    RayJobState.FAILED: Phase.Failed,
    RayJobState.STOPPED: Phase.Stopped,
}
# Attempts that end so are no restarts: they do not count against spec.backoffLimit.
NOT_RESTARTS = (Reason.Suspended, Reason.Preempted)


# --------------------------------------------------------------------------- the task

@dataclass(frozen=True)
class TaskState:
    """What the lifecycle knows of one ArgusTask: who it is, the spec fields that steer its
    life, whether it holds the finalizer or is being deleted, and its status."""

    namespace: str
    name: str
    uid: str
    status: ArgusTaskStatus
    generation: int | None = None
    cancel: bool = False
    suspend: bool = False  # spec.suspend: its job stopped, its GPUs back to the queue (core.suspension)
    active_deadline_seconds: int | None = None
    deleting_since: dt.datetime | None = None
    holds_finalizer: bool = False
    restart_policy: str = RestartPolicy.Never.value
    backoff_limit: int = 3
    ttl_seconds_after_finished: int | None = None  # the spec's (None: the operator's default)
    labels: Mapping[str, str] = field(default_factory=dict)       # metadata's: what a GitOps tool marks
    annotations: Mapping[str, str] = field(default_factory=dict)  # (core.gitops reads them)

    @property
    def phase(self) -> Phase | None:
        return Phase(self.status.phase) if self.status.phase else None

    @property
    def deleting(self) -> bool:
        return self.deleting_since is not None

    @property
    def preempting(self) -> bool:
        """Its job is being stopped for a preemption (``core.preempted``)."""
        return self.status.preempted_by is not None

    @property
    def attempt(self) -> int:
        return self.status.attempt or 1

    @property
    def submission_id(self) -> str:
        """The current attempt's Ray job (derived, so it is known before any status says it)."""
        return submission_id_for(self.namespace, self.name, self.uid, self.attempt)

    def submission_ids(self) -> list[str]:
        """Every attempt's Ray job, oldest first."""
        return [submission_id_for(self.namespace, self.name, self.uid, n) for n in range(1, self.attempt + 1)]

    def deadline_passed(self, now: dt.datetime) -> bool:
        admitted = parse_time(self.status.admitted_at)
        return bool(self.active_deadline_seconds and admitted and (now - admitted).total_seconds() >= self.active_deadline_seconds)

    def condition(self, type_: ConditionType) -> Condition | None:
        return find_condition(self.status.conditions, type_)


@dataclass(frozen=True)
class LifecycleSettings:
    ray_grace_seconds: float = 300.0     # Ray unreachable this long -> an active task fails
    delete_grace_seconds: float = 300.0  # ... -> a deleted task's finalizer is released
    dashboard_url: str | None = None     # recorded in status.rayJob.dashboardUrl
    worker_resource: str = "worker_node"
    # An ended task's Ray jobs leave Ray's job history this long after it ended (None: only
    # when the task is deleted). Ray's dashboard slows down as its job history grows.
    ray_job_retention_seconds: float | None = None
    # Ended tasks without spec.ttlSecondsAfterFinished are deleted this long after (None: kept).
    default_ttl_seconds: int | None = None
    # The label Argo CD's label tracking sets (argocd-cm application.instanceLabelKey; "": off).
    gitops_tracking_label: str = DEFAULT_TRACKING_LABEL


# --------------------------------------------------------------------------- conditions

def conditions_for_phase(conditions: list[Condition] | None, phase: Phase, reason: str, message: str, *,
                         now: str, generation: int | None) -> list[Condition]:
    """Admitted / Running / Complete / Failed / Finished as the phase implies (and Suspended,
    once a task was ever suspended: true while it is). Finished is true
    at every end (Succeeded, Failed, Rejected, Stopped; as Kueue's Workload has it), so
    ``kubectl wait --for=condition=Finished`` waits for any end. Admitted stays as it was at
    a Failed or Stopped end: a task cancelled (or failed) in the queue was never admitted."""
    before = find_condition(conditions, ConditionType.Admitted)
    was_admitted = before is not None and before.true
    admitted = phase.active or phase is Phase.Succeeded or (phase in (Phase.Failed, Phase.Stopped) and was_admitted)
    if phase is Phase.Suspended or find_condition(conditions, ConditionType.Suspended):  # only once it was ever suspended
        conditions = set_condition(conditions, ConditionType.Suspended, phase is Phase.Suspended, reason, message, now=now, generation=generation)
    c = set_condition(conditions, ConditionType.Admitted, admitted, Reason.Admitted if admitted else reason,
                      "admitted by the queue" if admitted else message, now=now, generation=generation)
    c = set_condition(c, ConditionType.Running, phase is Phase.Running, reason, message, now=now, generation=generation)
    c = set_condition(c, ConditionType.Complete, phase is Phase.Succeeded, reason, message, now=now, generation=generation)
    c = set_condition(c, ConditionType.Failed, phase in (Phase.Failed, Phase.Rejected), reason, message, now=now, generation=generation)
    return set_condition(c, ConditionType.Finished, phase.terminal, reason, message, now=now, generation=generation)


def ray_refused(error: str) -> str:
    """What a task says when Ray refuses the operator's credentials (never the token)."""
    return f"Ray refused the operator's credentials ({error[:200]}): check the Ray token the operator is given (--ray-token-file)"


def ray_reachable(task: TaskState, status: ArgusTaskStatus, reachable: bool, detail: str, now: str,
                   since: str | None = None, reason: str = Reason.RayUnreachable) -> ArgusTaskStatus:
    if reason == Reason.RayAuthFailed:
        detail = ray_refused(detail)
    conditions = set_condition(status.conditions, ConditionType.RayReachable, reachable,
                               Reason.RayReachable if reachable else reason,
                               "the Ray dashboard answers" if reachable else detail[:300],
                               now=since or now, generation=task.generation)
    return status.model_copy(update={"conditions": conditions, "ray_unreachable_since": None if reachable else since})


# --------------------------------------------------------------------------- entering a phase

def phase_for_ray(ray_status: RayJobState | None, *, cancelled: bool, deadline_exceeded: bool) -> tuple[Phase, str]:
    """The phase and reason for a Ray job's state (None, a state this Argus does not know:
    still Submitted); a stop we asked for names its cause."""
    phase = RAY_TO_PHASE.get(ray_status, Phase.Submitted) if ray_status is not None else Phase.Submitted
    if phase is Phase.Stopped or (phase is Phase.Failed and (cancelled or deadline_exceeded)):
        if deadline_exceeded:
            return Phase.Failed, Reason.DeadlineExceeded
        if cancelled:
            return Phase.Stopped, Reason.Cancelled
        return Phase.Stopped, Reason.RayJobStopped
    return phase, {
        Phase.Submitted: Reason.RayJobPending,
        Phase.Running: Reason.RayJobRunning,
        Phase.Succeeded: Reason.RayJobSucceeded,
        Phase.Failed: Reason.RayJobFailed,
    }[phase]


def enter(task: TaskState, status: ArgusTaskStatus, phase: Phase, reason: str, message: str, now: str,
           **changes: object) -> ArgusTaskStatus:
    """``status`` moved to ``phase`` with its reason, message and conditions."""
    conditions = conditions_for_phase(status.conditions, phase, reason, message.splitlines()[0] if phase is Phase.Rejected and message else message,
                                      now=now, generation=task.generation)
    update = {"phase": phase.value, "reason": reason, "message": message, "conditions": conditions,
              "observed_generation": task.generation, **changes}
    if phase.terminal:
        update.setdefault("finished_at", status.finished_at or now)
    if phase is not Phase.Queued:  # the tasks stopped for it matter only while it waits for their GPUs
        update.setdefault("preempts", None)
    return status.model_copy(update=update)


# --------------------------------------------------------------------------- attempts

def current_attempts(task: TaskState, status: ArgusTaskStatus, *, outcome: str | None = None) -> list[AttemptRecord]:
    """The attempts with the current one's record made or brought up to date (its job's
    times as Ray reports them, its last step, and its outcome once it has ended)."""
    records = list(status.attempts or [])
    current = next((r for r in records if r.attempt == task.attempt), None)
    job = status.ray_job
    fields: dict[str, Any] = {
        "submission_id": task.submission_id,
        "start_time": (job.start_time if job else None) or (current.start_time if current else None),
        "end_time": (job.end_time if job else None) or (current.end_time if current else None),
        "outcome": outcome or (current.outcome if current else None),
        "last_step": status.progress.step if status.progress and status.progress.step is not None else (current.last_step if current else None),
        "cluster": status.cluster if status.cluster else (current.cluster if current else None),
    }
    record = current.model_copy(update=fields) if current else AttemptRecord(attempt=task.attempt, **fields)
    return [r for r in records if r.attempt != task.attempt] + [record]


def attempt_ended(task: TaskState, status: ArgusTaskStatus, outcome: str, what: str, stamp: str, *, retry: bool, final: str) -> Decision:
    """An attempt that ended without success: another one, if spec.restartPolicy asks for it
    and spec.backoffLimit allows; else the task ends Failed."""
    if outcome == Reason.RayJobLost:
        status = status.model_copy(update={"ray_job": (status.ray_job or RayJobStatus()).model_copy(update={"end_time": stamp})})
    attempts = current_attempts(task, status, outcome=outcome)
    status = status.model_copy(update={"attempts": attempts})
    if not retry:
        return Decision(enter(task, status, Phase.Failed, outcome, final, stamp))
    # Attempts ended by spec.suspend or a preemption are no restarts: the task keeps its whole backoffLimit.
    restarts = task.attempt - 1 - sum(1 for r in status.attempts or () if r.attempt < task.attempt and r.outcome in NOT_RESTARTS)
    if restarts >= task.backoff_limit:
        message = f"attempt {task.attempt}: {what}; no restart left (spec.backoffLimit {task.backoff_limit})"
        return Decision(enter(task, status, Phase.Failed, Reason.BackoffLimitExceeded, message, stamp))
    step_text = f" at step {status.progress.step}" if status.progress and status.progress.step is not None else ""
    message = (f"attempt {task.attempt}{step_text}: {what}; attempt {task.attempt + 1} waits in the queue "
               f"(restart {restarts + 1} of {task.backoff_limit}) and resumes from the newest checkpoint in the job folder")
    requeued = enter(task, status, Phase.Queued, Reason.Retrying, message, stamp, attempt=task.attempt + 1, ray_job=None,
                      ray_unreachable_since=None)
    return Decision(requeued)
