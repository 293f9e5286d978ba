"""What the lifecycle's ``step`` (``core.lifecycle``) is told and what it answers: the
observations the controller gathers (validation, the queue's decision, Ray's answers), the
actions it carries out, and the ``Decision`` (a task's new status and its actions). The
observation classes key the transition table (``core.transitions``); the actions' class
names are the kinds it names.

    controller observes -> **Observation** -> lifecycle.step -> **Decision** (status, **Actions**) -> controller carries out
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .rayjobs import RayJobState
from .spec import ArgusTaskStatus, TaskPath, TaskProgress
from .submission import SubmissionPlan
from .vocabulary import Reason

# --------------------------------------------------------------------------- observations

@dataclass(frozen=True)
class Validated:
    """The spec passed validation for ``user``; ``command`` is what will run. A queued task
    Validated again was composed again for the verl release its clusters run (``why``)."""

    user: str
    command: str
    warnings: tuple[str, ...] = ()
    verl: tuple[str, str] | None = None  # (version, source) of the verl config tree it was checked with
    why: str = ""  # why it was composed for that release (core.verlchoice), said in its status


@dataclass(frozen=True)
class Refused:
    """The task cannot run: its spec is invalid, or its namespace has no valid user."""

    reason: str
    message: str
    user: str | None = None


@dataclass(frozen=True)
class Waiting:
    """The queue left the task waiting for ``reason``; ``ray_error`` when Ray could not be
    read (``ray_reason``: RayUnreachable, or RayAuthFailed when it refused the credentials),
    which then is the reason the task shows. Its place is not part of it: places are served
    on demand (servers/logapi/queueview.py), never kept in the status."""

    reason: str
    message: str
    ray_error: str | None = None
    ray_reason: str = Reason.RayUnreachable
    preempts: tuple[str, ...] = ()  # the running tasks (namespace/name) stopped for it (controller.preemptor)


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
    cluster: str = ""                 # the ArgusCluster it went to ("": the implicit cluster)
    dashboard_url: str | None = None  # that cluster's dashboard


@dataclass(frozen=True)
class JobObserved:
    """Ray knows the task's job, in ``status`` (None: a state this Argus does not know, Ray's
    word for it in ``unknown_status``). ``driver_on_worker`` is False when the driver runs on
    a node without the worker resource (None: not known)."""

    status: RayJobState | None
    message: str = ""
    driver_node_id: str | None = None
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    driver_on_worker: bool | None = None
    cluster: str = ""                 # the ArgusCluster it was read from ("": the implicit cluster)
    dashboard_url: str | None = None  # that cluster's dashboard
    unknown_status: str = ""

    @property
    def active(self) -> bool:
        return self.status is not None and self.status.active

    @property
    def reported(self) -> str:
        """The job's state as Ray reported it (recorded in ``status.rayJob.status``)."""
        return self.status.value if self.status is not None else self.unknown_status


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


@dataclass(frozen=True)
class Preempt:
    """The scheduler chose the task as a victim (``core.preemption``): ``by`` (namespace/name)
    takes its GPUs; ``message`` says what it loses."""

    by: str
    message: str


Observation = (Validated | Refused | Waiting | Admitted | SubmitResult | JobObserved | JobUnknown | RayUnreachable | Reconcile
               | ProgressObserved | RayJobsRemoved | Preempt)


# --------------------------------------------------------------------------- actions
# (One small frozen dataclass each, as the observations above: alike in shape by design;
# duplicates pairs them.)

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
