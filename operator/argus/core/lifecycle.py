"""The task lifecycle: one pure function, ``step``, decides what an ArgusTask's status
becomes for each thing the operator observes, and which actions follow. The controller
gathers the observations (validation, the queue's decision, Ray's answers), calls ``step``
and carries out the actions; one writer patches the status and posts one Event per phase
change (but the quiet ones, ``vocabulary.QUIET_PHASE_CHANGES``). This is the file to read for "how does a task change phase?"; the moves it may
make at all are declared as a table in ``core.transitions``, which ``step`` is checked
against (and docs/lifecycle.md's tables are generated from).

    (new) --Validated--> Queued --Admitted/Submit--> Submitted --Ray RUNNING--> Running
      |                    |                            |                         |
      +--Refused--> Rejected                            +--Ray ends (SUCCEEDED, FAILED, STOPPED)--> Succeeded | Failed | Stopped
                           +--cancel--> Stopped         +--Ray forgot the job--> Failed (RayJobLost)
                                                        +--Ray unreachable past the grace--> Failed (RayUnreachable)

Ray refusing the operator's credentials (HTTP 401/403, reason ``RayAuthFailed``) is shown as
``RayReachable=False`` and never ends a task: Ray is up and the job runs on, so the grace
(which bets that a long outage lost the job) does not apply; once the token is fixed the
next read tells the job's real state. A deleted task still waits only the delete grace.

The finalizer ``argus.io/stop-ray-job`` is added just before a task's first submission, so
*a task without it never reached Ray*, and one with it may have (the operator can die
between Ray accepting a job and the status saying so; the submission id is deterministic,
so that job is found again). Whenever Argus closes or deletes a task that holds the
finalizer, it first asks Ray about the task's submission id and stops what exists ("job
unknown" is the normal answer). The observations that need Ray are named by
``needs_ray``; what a read returns comes back to ``step`` as ``JobObserved``,
``JobUnknown`` or ``RayUnreachable``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .gitops import DEFAULT_TRACKING_LABEL, tracked_by
from .plan import SubmissionPlan, submission_id_for
from .problems import cap_lines
from .spec import ArgusTaskStatus, AttemptRecord, Condition, ConditionStatus, Phase, RayJobStatus, RestartPolicy, TaskPath, TaskProgress, VerlConfigSource
from .times import format_time, from_epoch_ms, parse_time
from .transitions import Move, UndeclaredTransition, event, require
from .vocabulary import ACTIVE_PHASES, Reason

FINALIZER = "argus.io/stop-ray-job"
RAY_ACTIVE = ("PENDING", "RUNNING")
RAY_TO_PHASE = {
    "PENDING": Phase.Submitted,
    "RUNNING": Phase.Running,
    "SUCCEEDED": Phase.Succeeded,
    "FAILED": Phase.Failed,
    "STOPPED": Phase.Stopped,
}
MAX_CONDITION_MESSAGE = 32768


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

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.status.conditions or () if c.type == type_), None)


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


# --------------------------------------------------------------------------- observations

@dataclass(frozen=True)
class Validated:
    """The spec passed validation for ``user``; ``command`` is what will run."""

    user: str
    command: str
    warnings: tuple[str, ...] = ()
    verl: tuple[str, str] | None = None  # (version, source) of the verl config tree it was checked with


@dataclass(frozen=True)
class Refused:
    """The task cannot run: its spec is invalid, or its namespace has no valid user."""

    reason: str
    message: str
    user: str | None = None


@dataclass(frozen=True)
class Waiting:
    """The queue left the task waiting at ``position`` for ``reason``; ``ray_error`` when Ray
    could not be read (``ray_reason``: RayUnreachable, or RayAuthFailed when it refused the
    credentials), which then is the reason the task shows."""

    position: int
    reason: str
    message: str
    ray_error: str | None = None
    ray_reason: str = Reason.RayUnreachable


@dataclass(frozen=True)
class Admitted:
    """The queue admitted the task: submit ``plan``."""

    plan: SubmissionPlan


@dataclass(frozen=True)
class SubmitResult:
    """What Ray said to the submission: ``submitted`` (a new job), ``adopted`` (Ray already
    had this submission id: no second job), ``unreachable``, ``auth_failed`` (Ray refused the
    operator's credentials) or ``refused``."""

    outcome: Literal["submitted", "adopted", "unreachable", "auth_failed", "refused"]
    submission_id: str
    detail: str = ""
    job_dir: TaskPath | None = None   # where the job runs and writes its log
    log_file: TaskPath | None = None


@dataclass(frozen=True)
class JobObserved:
    """Ray knows the task's job. ``driver_on_worker`` is False when the driver runs on a node
    without the worker resource (None: not known)."""

    status: str
    message: str = ""
    driver_node_id: str | None = None
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    driver_on_worker: bool | None = None

    @property
    def active(self) -> bool:
        return self.status.upper() in RAY_ACTIVE


@dataclass(frozen=True)
class JobUnknown:
    """Ray answered, and has no job with the task's submission id."""


@dataclass(frozen=True)
class RayUnreachable:
    """Ray could not be asked: it did not answer (reason RayUnreachable), or it refused the
    operator's credentials (RayAuthFailed)."""

    error: str
    reason: str = Reason.RayUnreachable


@dataclass(frozen=True)
class Reconcile:
    """Nothing new from outside: re-evaluate the task as it is (cancel, deletion, time)."""


@dataclass(frozen=True)
class ProgressObserved:
    """verl's progress lines, read from the running job's log."""

    progress: TaskProgress


@dataclass(frozen=True)
class RayJobsRemoved:
    """The task's Ray jobs were removed from Ray's job history."""


Observation = (Validated | Refused | Waiting | Admitted | SubmitResult | JobObserved | JobUnknown | RayUnreachable | Reconcile
               | ProgressObserved | RayJobsRemoved)


# --------------------------------------------------------------------------- actions

@dataclass(frozen=True)
class Submit:
    """Add the finalizer (if missing), then submit ``plan`` to Ray; report a SubmitResult."""

    plan: SubmissionPlan


@dataclass(frozen=True)
class StopJob:
    """Ask Ray to stop the job (an unknown or already ended job is fine)."""

    submission_id: str


@dataclass(frozen=True)
class ReleaseFinalizer:
    """Remove the finalizer: the object may go."""


@dataclass(frozen=True)
class RemoveRayJobs:
    """Remove these jobs from Ray's job history (their logs stay in the job folder);
    report RayJobsRemoved."""

    submission_ids: tuple[str, ...]


@dataclass(frozen=True)
class DeleteTask:
    """Delete the ArgusTask (its time to live after it ended is over)."""


@dataclass(frozen=True)
class PostEvent:
    """An Event that is not a phase change (phase changes get theirs from the writer)."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = Submit | StopJob | ReleaseFinalizer | RemoveRayJobs | DeleteTask | PostEvent


@dataclass(frozen=True)
class Decision:
    status: ArgusTaskStatus
    actions: tuple[Action, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- conditions

def set_condition(conditions: list[Condition] | None, type_: str, status: bool, reason: str, message: str, *,
                  now: str, generation: int | None) -> list[Condition]:
    """Conditions with ``type_`` set; lastTransitionTime moves only when its status changes."""
    value = ConditionStatus.true if status else ConditionStatus.false
    message = message[:MAX_CONDITION_MESSAGE]
    out: list[Condition] = []
    found = False
    for c in conditions or []:
        if c.type == type_:
            found = True
            c = c.model_copy(update={
                "status": value, "reason": reason, "message": message,
                "last_transition_time": now if c.status != value else c.last_transition_time,
                "observed_generation": generation if generation is not None else c.observed_generation,
            })
        out.append(c)
    if not found:
        out.append(Condition(type=type_, status=value, reason=reason, message=message, last_transition_time=now,
                             observed_generation=generation))
    return out


def conditions_for_phase(conditions: list[Condition] | None, phase: Phase, reason: str, message: str, *,
                         now: str, generation: int | None) -> list[Condition]:
    """Admitted / Running / Complete / Failed / Finished as the phase implies. Finished is true
    at every end (Succeeded, Failed, Rejected, Stopped; as Kueue's Workload has it), so
    ``kubectl wait --for=condition=Finished`` waits for any end."""
    admitted = phase not in (Phase.Queued, Phase.Rejected)
    c = set_condition(conditions, "Admitted", admitted, Reason.Admitted if admitted else reason,
                      "admitted by the queue" if admitted else message, now=now, generation=generation)
    c = set_condition(c, "Running", phase is Phase.Running, reason, message, now=now, generation=generation)
    c = set_condition(c, "Complete", phase is Phase.Succeeded, reason, message, now=now, generation=generation)
    c = set_condition(c, "Failed", phase in (Phase.Failed, Phase.Rejected), reason, message, now=now, generation=generation)
    return set_condition(c, "Finished", phase.terminal, reason, message, now=now, generation=generation)


def ray_refused(error: str) -> str:
    """What a task says when Ray refuses the operator's credentials (never the token)."""
    return f"Ray refused the operator's credentials ({error[:200]}): check the Ray token the operator is given (--ray-token-file)"


def _ray_reachable(task: TaskState, status: ArgusTaskStatus, reachable: bool, detail: str, now: str,
                   since: str | None = None, reason: str = Reason.RayUnreachable) -> ArgusTaskStatus:
    if reason == Reason.RayAuthFailed:
        detail = ray_refused(detail)
    conditions = set_condition(status.conditions, "RayReachable", reachable,
                               Reason.RayReachable if reachable else reason,
                               "the Ray dashboard answers" if reachable else detail[:300],
                               now=since or now, generation=task.generation)
    return status.model_copy(update={"conditions": conditions, "ray_unreachable_since": None if reachable else since})


# --------------------------------------------------------------------------- transitions

def phase_for_ray(ray_status: str, *, cancelled: bool, deadline_exceeded: bool) -> tuple[Phase, str]:
    """The phase and reason for a Ray job status; a stop we asked for names its cause."""
    phase = RAY_TO_PHASE.get(ray_status.upper(), Phase.Submitted)
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


def _enter(task: TaskState, status: ArgusTaskStatus, phase: Phase, reason: str, message: str, now: str,
           **changes: object) -> ArgusTaskStatus:
    """``status`` moved to ``phase`` with its reason, message and conditions."""
    conditions = conditions_for_phase(status.conditions, phase, reason, message.splitlines()[0] if phase is Phase.Rejected and message else message,
                                      now=now, generation=task.generation)
    update = {"phase": phase.value, "reason": reason, "message": message, "conditions": conditions,
              "observed_generation": task.generation, **changes}
    if phase is not Phase.Queued:
        update["queue_position"] = None
    if phase.terminal:
        update.setdefault("finished_at", status.finished_at or now)
    return status.model_copy(update=update)


def needs_ray(task: TaskState) -> bool:
    """Whether the task's Ray job must be read (and what it says given to ``step``):
    active tasks; tasks that may have reached Ray and are being cancelled, deleted, or were
    closed while Ray could not be asked."""
    if task.deleting:
        return task.holds_finalizer
    phase = task.phase
    if phase in ACTIVE_PHASES:
        return True
    if phase is Phase.Queued:
        return task.holds_finalizer  # submitted before the status said so, perhaps
    if phase is Phase.Failed and task.status.reason == Reason.RayUnreachable and task.holds_finalizer:
        reachable = task.condition("RayReachable")
        return reachable is None or reachable.status != "True"  # its job may still run: stop it once Ray answers
    return False


def stopping(task: TaskState, now: dt.datetime) -> bool:
    """The task's job is to be stopped (cancel, deadline or delete): read it often."""
    return task.deleting or task.cancel or task.deadline_passed(now)


def step(task: TaskState, seen: Observation, now: dt.datetime, settings: LifecycleSettings, *,
         undeclared: Callable[[str], None] | None = None) -> Decision:
    """The new status of ``task`` and the actions that follow, given what was ``seen``.

    The branches below decide; the decision is then held to the declared transition table
    (``core.transitions.RULES``). The table does not choose the next phase; it bounds what
    the branches may. A decision the table does not declare raises ``UndeclaredTransition``
    (the tests' way, and the default); with ``undeclared`` it is reported there and returned
    (the operator's way: a task must not stall on a row missing from the table, so the
    operator logs it as an error and counts it, and the tests hold the table complete)."""
    decision = _decide(task, seen, now, settings)
    try:
        require(Move(source=task.phase, observation=type(seen).__name__, deleting=task.deleting,
                     target=Phase(decision.status.phase) if decision.status.phase else None,
                     reason_before=task.status.reason, reason_after=decision.status.reason,
                     actions=tuple(action_kind(a) for a in decision.actions)))
    except UndeclaredTransition as exc:
        if undeclared is None:
            raise
        undeclared(str(exc))
    return decision


def action_kind(action: Action) -> str:
    """How the transition table names an action: its class, and an Event's reason."""
    return event(action.reason) if isinstance(action, PostEvent) else type(action).__name__


def _decide(task: TaskState, seen: Observation, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    stamp = format_time(now)
    status = task.status
    phase = task.phase
    keep = Decision(status)

    if task.deleting:
        return _deleting(task, seen, now, settings)

    if isinstance(seen, Validated):
        if phase is not None:
            return keep
        status = status.model_copy(update={"user": seen.user, "command": seen.command, "warnings": list(seen.warnings) or None,
                                           "verl": VerlConfigSource(version=seen.verl[0], source=seen.verl[1]) if seen.verl else None})
        queued = Decision(_enter(task, status, Phase.Queued, Reason.Validated, "validated; waiting in the queue", stamp),
                          tuple(PostEvent("Warning", Reason.WeakCheck, w) for w in seen.warnings))
        if task.cancel:
            return _merge(queued, step(_with(task, queued.status), Reconcile(), now, settings))
        return queued

    if isinstance(seen, Refused):
        if phase not in (None, Phase.Queued):
            return keep
        message = "\n".join(cap_lines(seen.message.splitlines() or [seen.message]))
        closed = _enter(task, status.model_copy(update={"user": seen.user or status.user}), Phase.Rejected, seen.reason, message, stamp)
        # A task that may have been submitted (an earlier operator added the finalizer) is
        # rejected only with its job stopped.
        return Decision(closed, (StopJob(task.submission_id),) if task.holds_finalizer else ())

    if isinstance(seen, Reconcile):
        if phase is Phase.Queued and task.cancel and not task.holds_finalizer:
            return Decision(_enter(task, status, Phase.Stopped, Reason.Cancelled, "cancelled while queued; it never reached Ray", stamp))
        if phase is not None and phase.terminal:
            due = timer_due(task, settings)
            if due is not None and now >= due[0]:
                if due[1] == "ttl":
                    return _ttl_ran_out(task, settings)
                return Decision(status, (RemoveRayJobs(tuple(task.submission_ids())),))
        return keep

    if isinstance(seen, Waiting):
        if phase is not Phase.Queued or task.cancel:
            return keep
        reason, message = seen.reason, seen.message
        if seen.ray_error is not None:  # the queue could not read Ray's capacity: that is why it waits
            if seen.ray_reason == Reason.RayAuthFailed:
                reason, message = Reason.RayAuthFailed, f"waiting: {ray_refused(seen.ray_error)}"
            else:
                reason, message = Reason.RayUnreachable, f"waiting: cannot read the Ray cluster's capacity ({seen.ray_error[:200]})"
        status = status.model_copy(update={"queue_position": seen.position, "reason": reason, "message": message})
        reachable = task.condition("RayReachable")
        if seen.ray_error is not None or reachable is None or reachable.status != "True":
            status = _ray_reachable(task, status, seen.ray_error is None, seen.ray_error or "", stamp, since=None, reason=seen.ray_reason)
        return Decision(status)

    if isinstance(seen, Admitted):
        if phase is not Phase.Queued or task.cancel:
            return keep
        if seen.plan.submission_id != task.submission_id:  # each attempt has its own id: Ray never reuses one
            raise ValueError(f"plan for {seen.plan.submission_id} admitted for attempt {task.attempt} ({task.submission_id})")
        return Decision(status, (Submit(seen.plan),))

    if isinstance(seen, SubmitResult):
        if phase is not Phase.Queued:
            return keep
        if seen.outcome == "unreachable":
            return Decision(status.model_copy(update={"reason": Reason.RayUnreachable, "message": f"waiting: Ray is unreachable ({seen.detail[:200]})"}))
        if seen.outcome == "auth_failed":
            status = _ray_reachable(task, status, False, seen.detail, stamp, reason=Reason.RayAuthFailed)
            return Decision(status.model_copy(update={"reason": Reason.RayAuthFailed, "message": f"waiting: {ray_refused(seen.detail)}"}))
        if seen.outcome == "refused":
            return Decision(_enter(task, status, Phase.Failed, Reason.RaySubmitFailed, f"Ray refused the job: {seen.detail}", stamp))
        fresh = seen.outcome == "submitted"
        reason = Reason.Admitted if fresh else Reason.AdoptedExistingJob
        message = (f"submitted to Ray as {seen.submission_id}" if fresh else
                   f"Ray already had job {seen.submission_id} (submitted before a restart); adopted it, no second job")
        # A job Ray has just accepted is PENDING by Ray's definition; an adopted one's state
        # is learnt at the next read.
        ray_job = RayJobStatus(submission_id=seen.submission_id, status="PENDING" if fresh else None,
                               dashboard_url=settings.dashboard_url)
        status = _ray_reachable(task, status, True, "", stamp)  # Ray just answered
        status = status.model_copy(update={"attempt": task.attempt, "attempts": _attempts(task, status),
                                           "job_dir": seen.job_dir or status.job_dir, "log_file": seen.log_file or status.log_file})
        return Decision(_enter(task, status, Phase.Submitted, reason, message, stamp,
                               admitted_at=status.admitted_at or stamp, ray_job=ray_job))

    if isinstance(seen, JobObserved):
        return _job_observed(task, seen, now, settings)

    if isinstance(seen, JobUnknown):
        sid = task.submission_id
        if phase is Phase.Queued:
            if task.cancel:
                return Decision(_enter(task, status, Phase.Stopped, Reason.Cancelled,
                                       f"cancelled while queued; it never reached Ray (Ray has no job {sid})", stamp))
            return keep  # not submitted after all: the queue submits it in its turn
        status = _ray_reachable(task, status, True, "", stamp)
        if phase in ACTIVE_PHASES:
            what = f"Ray no longer knows job {sid}: the Ray head restarted (it keeps no job history) or the job was removed"
            return _attempt_ended(task, status, Reason.RayJobLost, what, stamp, retry=task.restart_policy != RestartPolicy.Never.value,
                                  final=f"{what}. Argus does not resubmit on its own (spec.restartPolicy: Never); "
                                        "create a new task to run it again")
        return Decision(status)  # a closed task: nothing of it is left in Ray

    if isinstance(seen, ProgressObserved):
        if phase is None or phase is Phase.Rejected:
            return keep
        # Also after the end: a job's last lines reach its log stream a moment after Ray
        # reports it ended.
        status = status.model_copy(update={"progress": seen.progress})
        if status.attempts and phase.terminal and seen.progress.step is not None:
            status = status.model_copy(update={"attempts": _attempts(task, status)})
        return Decision(status)

    if isinstance(seen, RayJobsRemoved):
        return Decision(status.model_copy(update={"ray_jobs_removed": True}))

    if isinstance(seen, RayUnreachable):
        if phase not in ACTIVE_PHASES:
            return keep
        if seen.reason == Reason.RayAuthFailed:  # Ray answered: no outage, no grace counted (see the docstring)
            return Decision(_ray_reachable(task, status, False, seen.error, stamp, reason=Reason.RayAuthFailed))
        since = status.ray_unreachable_since or stamp
        elapsed = (now - (parse_time(since) or now)).total_seconds()
        status = _ray_reachable(task, status, False, seen.error, stamp, since=since)
        if elapsed >= settings.ray_grace_seconds:
            message = f"Ray was unreachable for {int(elapsed)} s (grace {int(settings.ray_grace_seconds)} s): {seen.error[:200]}"
            return Decision(_enter(task, status, Phase.Failed, Reason.RayUnreachable, message, stamp, ray_unreachable_since=since))
        return Decision(status)

    raise TypeError(f"unknown observation {seen!r}")


def _job_observed(task: TaskState, job: JobObserved, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    stamp = format_time(now)
    status = _ray_reachable(task, task.status, True, "", stamp)
    phase = task.phase
    sid = task.submission_id
    if phase not in (Phase.Queued, *ACTIVE_PHASES):
        # A task closed while Ray could not be asked: Ray answers again, stop what runs.
        return Decision(status, (StopJob(sid),) if job.active else ())
    actions: list[Action] = []
    if phase is Phase.Queued:
        # The job reached Ray before the status said so (the operator died in between):
        # adopt it, never a second job.
        adopted = f"Ray already had job {sid} (submitted before a restart); adopted it, no second job"
        status = _enter(task, status, Phase.Submitted, Reason.AdoptedExistingJob, adopted, stamp, admitted_at=status.admitted_at or stamp)
        actions.append(PostEvent("Normal", Reason.AdoptedExistingJob, adopted))
    cancelled, late = task.cancel, task.deadline_passed(now)
    if (cancelled or late) and job.active:
        actions.append(StopJob(sid))  # the next read sees it stopped
    previous = task.status.ray_job
    ray_job = RayJobStatus(
        submission_id=sid, status=job.status, driver_node_id=job.driver_node_id,
        start_time=from_epoch_ms(job.start_time_ms), end_time=from_epoch_ms(job.end_time_ms),
        dashboard_url=(previous.dashboard_url if previous and previous.dashboard_url else settings.dashboard_url),
    )
    status = status.model_copy(update={"ray_job": ray_job, "ray_unreachable_since": None})
    if job.driver_on_worker is False and job.driver_node_id != (previous.driver_node_id if previous else None):
        actions.append(PostEvent("Warning", Reason.PlacementViolation,
                                 f"the driver runs on node {job.driver_node_id}, which lacks the '{settings.worker_resource}' resource (the head?)"))
    if (cancelled or late) and job.active:
        return Decision(status, tuple(actions))
    new_phase, reason = phase_for_ray(job.status, cancelled=cancelled, deadline_exceeded=late)
    message = job.message or reason
    if reason == Reason.DeadlineExceeded:
        message = f"stopped after activeDeadlineSeconds={task.active_deadline_seconds} from admission"
    elif reason == Reason.Cancelled:
        message = "stopped because spec.cancel was set"
    if new_phase is Phase.Submitted and Phase(status.phase) is Phase.Submitted:
        # Still pending: the submission's reason and message stay, and so does the recorded
        # job unless its state is new to us (Ray's start time comes with RUNNING: one write).
        if previous is not None and previous.status == job.status:
            status = status.model_copy(update={"ray_job": previous})
        return Decision(status, tuple(actions))
    if reason == Reason.RayJobFailed:
        what = f"job {sid} failed: {job.message or 'the command exited with an error'}"
        decided = _attempt_ended(task, status, Reason.RayJobFailed, what, stamp, retry=task.restart_policy == RestartPolicy.OnFailure.value,
                                 final=job.message or reason)
        return Decision(decided.status, tuple(actions) + decided.actions)
    status = status.model_copy(update={"attempts": _attempts(task, status, outcome=reason if new_phase.terminal else None)})
    return Decision(_enter(task, status, new_phase, reason, message, stamp), tuple(actions))


def _deleting(task: TaskState, seen: Observation, now: dt.datetime, settings: LifecycleSettings) -> Decision:
    """A deleted task: stop its job (if it may have one), then let the object go."""
    keep = Decision(task.status)
    if not task.holds_finalizer:
        return keep
    gone = (RemoveRayJobs(tuple(task.submission_ids())), ReleaseFinalizer())
    if isinstance(seen, JobObserved):
        return Decision(task.status, (StopJob(task.submission_id),) if seen.active else gone)
    if isinstance(seen, JobUnknown):
        return Decision(task.status, gone)
    if isinstance(seen, RayUnreachable):
        waited = (now - task.deleting_since).total_seconds() if task.deleting_since else 0.0
        if waited >= settings.delete_grace_seconds:
            what = "Ray refused the operator's credentials" if seen.reason == Reason.RayAuthFailed else "Ray unreachable"
            return Decision(task.status, (
                PostEvent("Warning", Reason.FinalizerReleased,
                          f"{what} for {int(waited)} s (delete grace {int(settings.delete_grace_seconds)} s); "
                          f"released without stopping {task.submission_id}: {seen.error[:200]}"),
                ReleaseFinalizer(),
            ))
    return keep


def _attempts(task: TaskState, status: ArgusTaskStatus, *, outcome: str | None = None) -> list[AttemptRecord]:
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
    }
    record = current.model_copy(update=fields) if current else AttemptRecord(attempt=task.attempt, **fields)
    return [r for r in records if r.attempt != task.attempt] + [record]


def _attempt_ended(task: TaskState, status: ArgusTaskStatus, outcome: str, what: str, stamp: str, *, retry: bool, final: str) -> Decision:
    """An attempt that ended without success: another one, if spec.restartPolicy asks for it
    and spec.backoffLimit allows; else the task ends Failed."""
    if outcome == Reason.RayJobLost:
        status = status.model_copy(update={"ray_job": (status.ray_job or RayJobStatus()).model_copy(update={"end_time": stamp})})
    attempts = _attempts(task, status, outcome=outcome)
    status = status.model_copy(update={"attempts": attempts})
    if not retry:
        return Decision(_enter(task, status, Phase.Failed, outcome, final, stamp))
    restarts = task.attempt - 1
    if restarts >= task.backoff_limit:
        message = f"attempt {task.attempt}: {what}; no restart left (spec.backoffLimit {task.backoff_limit})"
        return Decision(_enter(task, status, Phase.Failed, Reason.BackoffLimitExceeded, message, stamp))
    step_text = f" at step {status.progress.step}" if status.progress and status.progress.step is not None else ""
    message = (f"attempt {task.attempt}{step_text}: {what}; attempt {task.attempt + 1} waits in the queue "
               f"(restart {restarts + 1} of {task.backoff_limit}) and resumes from the newest checkpoint in the job folder")
    requeued = _enter(task, status, Phase.Queued, Reason.Retrying, message, stamp, attempt=task.attempt + 1, ray_job=None,
                      ray_unreachable_since=None)
    return Decision(requeued)


def needs_look(task: TaskState, now: dt.datetime, settings: LifecycleSettings) -> bool:
    """Whether ``step`` must see the task with ``Reconcile`` now, with nothing new from Ray:
    a queued task cancelled before it could reach Ray (no finalizer: nothing to ask Ray), or
    an ended one whose timer (``timer_due``) has run out."""
    if task.deleting:
        return False
    if task.phase is Phase.Queued and task.cancel and not task.holds_finalizer:
        return True
    timer = timer_due(task, settings)
    return timer is not None and timer[0] <= now


def timer_due(task: TaskState, settings: LifecycleSettings) -> tuple[dt.datetime, Literal["ttl", "retention"]] | None:
    """When an ended task next needs the operator without anything happening: its time to
    live runs out (delete it), or its Ray jobs' retention does (remove them from Ray). A task
    kept past its TTL for GitOps (``_ttl_ran_out``) has its Ray jobs removed then instead."""
    phase = task.phase
    finished = parse_time(task.status.finished_at)
    if phase is None or not phase.terminal or finished is None or task.deleting:
        return None
    due: list[tuple[dt.datetime, Literal["ttl", "retention"]]] = []
    retention = settings.ray_job_retention_seconds
    ttl = task.ttl_seconds_after_finished if task.ttl_seconds_after_finished is not None else settings.default_ttl_seconds
    if ttl is not None:
        if task.status.kept_by and _tracker(task, settings):
            retention = ttl if retention is None else min(ttl, retention)  # kept: its Ray jobs still go (again if that failed)
        else:
            due.append((finished + dt.timedelta(seconds=ttl), "ttl"))
    if retention is not None and not task.status.ray_jobs_removed and task.status.attempts:
        due.append((finished + dt.timedelta(seconds=retention), "retention"))
    return min(due, default=None, key=lambda d: d[0])


def _tracker(task: TaskState, settings: LifecycleSettings) -> str | None:
    return tracked_by(task.namespace, task.name, task.labels, task.annotations, settings.gitops_tracking_label)


def _ttl_ran_out(task: TaskState, settings: LifecycleSettings) -> Decision:
    """Delete the task, unless a GitOps tool tracks it: Argo CD would create it again from Git
    (a new UID, a new Ray job: the training run again, after every TTL). Such a task is kept,
    says so once (``status.keptBy`` and an Event), and its Ray jobs leave Ray's history."""
    keeper = _tracker(task, settings)
    if keeper is None:
        return Decision(task.status, (DeleteTask(),))
    actions: list[Action] = []
    if not task.status.ray_jobs_removed and task.status.attempts:
        actions.append(RemoveRayJobs(tuple(task.submission_ids())))
    actions.append(PostEvent("Normal", Reason.KeptForGitOps,
                             f"ttlSecondsAfterFinished ran out, but {keeper} tracks this task: deleting it would make Argo CD "
                             "create it again from Git and run the training again. Kept (its Ray jobs leave Ray's job history); "
                             "delete it through Git: remove its file, then let Argo CD prune it (docs/argocd.md)"))
    return Decision(task.status.model_copy(update={"kept_by": keeper}), tuple(actions))


def _with(task: TaskState, status: ArgusTaskStatus) -> TaskState:
    return TaskState(**{**task.__dict__, "status": status})


def _merge(first: Decision, second: Decision) -> Decision:
    return Decision(second.status, first.actions + second.actions)
